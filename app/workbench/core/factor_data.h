// The factor view's data, without widgets: the axes of a parallel-coordinates plot over an
// experiments::FactorTable (one categorical axis per factor, its levels evenly spaced; one
// numeric axis per chosen metric, from its minimum to its maximum), each run's position on
// every axis in [0, 1], the runs a set of brushed axis ranges keeps, and the colour of a run by
// a chosen metric (viridis over the metric's range, lower-is-better metrics reversed so that
// yellow is always the better end).
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>
#include <vector>

#include "experiments/factors.h"

namespace app {

/// One vertical axis.
struct ParallelAxis {
    QString key;    ///< the factor's config key or the metric's key
    QString title;  ///< shown under the axis
    bool categorical = false;
    QStringList levels;            ///< categorical: the levels, bottom to top
    double lo = 0, hi = 1;         ///< numeric: the range drawn
    std::vector<double> position;  ///< per run of the table, in [0, 1]; NaN: no value
    /// The axis' text at position t in [0, 1]: a level or a number.
    QString label(double t) const;
};

/// The factors' axes, then one per metric in `metrics` (keys of table.metrics; unknown keys are
/// skipped).
std::vector<ParallelAxis> parallelAxes(const experiments::FactorTable& table,
                                       const QStringList& metrics);

/// A brushed range on one axis, in axis positions [0, 1].
struct AxisBrush {
    int axis = 0;
    double lo = 0, hi = 1;
};

/// Per run: whether it lies inside every brush (a run without a value on a brushed axis does
/// not).
std::vector<bool> brushedRuns(const std::vector<ParallelAxis>& axes,
                              const std::vector<AxisBrush>& brushes);

/// The colour of each run by `metric`: viridis from the worse end (0) to the better end (1);
/// grey for a run without a value.
std::vector<QColor> runColours(const experiments::FactorTable& table, const QString& metric);

}  // namespace app
