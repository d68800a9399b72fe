// The Properties view's data (issue 15, sec. 5): the positional properties `tupe analyze` writes
// per layer and head (analysis/properties.h; index.json entries "property", "delta_pos",
// "spectrum" and "static_pos" under properties/), gathered over the store's pretraining runs that
// have such an analysis, their task scores by the TUPE reporting rule (experiments/report.h), and
// the Spearman rank correlation of a property with a score across runs. No widgets.
// Shapes: maps (T', T') with T' = T - 1 ([CLS] removed by the analysis), spectra (H, 3, K).
#pragma once

#include <QAbstractTableModel>
#include <QColor>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "core/analysis_data.h"
#include "plotting/palette.h"
#include "plotting/plotting.h"

namespace experiments {
class ResultStore;
struct ArtifactRecord;
}  // namespace experiments

namespace app {

struct AblationResult;

/// The statistics keys of a "property" entry in the analysis layer's order
/// (analysis::property_names() of analysis/property_names.h): positional_share ... entropy.
const QStringList& propertyNames();

/// One line on what property `name` measures (the header tooltip); empty for an unknown name.
QString propertyDescription(const QString& name);

/// The analysis has at least one "property" entry.
bool hasProperties(const AnalysisData& data);

/// The "property" entry of (layer, head); head -1 is the mean over the layer's heads.
/// nullptr when there is none.
const AnalysisEntry* propertyEntry(const AnalysisData& data, int layer, int head);

/// An analysis directory named by a run's artifacts: the folder of a recorded index.json.
struct AnalysisDirRef {
    std::int64_t step = -1;  ///< from a ".../stepN/index.json" path; -1 when the path has none
    QString dir;             ///< resolved with resolveStorePath
};

/// The analysis directories of a run's artifacts (paths ending in "/index.json", except the
/// "compare/" folder of a --compare analysis), by ascending step; unknown steps first, in
/// recording order.
std::vector<AnalysisDirRef> analysisDirsOf(
    const std::vector<experiments::ArtifactRecord>& artifacts, const QString& dbPath);

/// The run's `tupe extrapolate` figure (an artifact ending in "extrapolation/extrapolation.png"),
/// resolved; the last one recorded; empty when there is none.
QString extrapolationPngOf(const std::vector<experiments::ArtifactRecord>& artifacts,
                           const QString& dbPath);

/// A pretraining run with a property analysis: its latest analysed step.
struct PropertyRun {
    qint64 runId = 0;
    QString experiment, name, variant;
    std::int64_t step = -1;    ///< the analysed step; -1 unknown
    QString extrapolationPng;  ///< resolved; empty when the run has none
    std::shared_ptr<const AnalysisData> analysis;
    /// Its stored `tupe ablate` (ablation/ablation.json, core/microscope_data.h); null when none.
    std::shared_ptr<const AblationResult> ablation;
};

/// Task scores of pretraining runs: the report's selection metric of each task (in percent)
/// at the run's last fine-tuned checkpoint, median over fine-tuning seeds at the best lr (the
/// TUPE reporting rule of experiments::build_report, applied to one pretraining run at a time).
struct TaskScores {
    QStringList columns;  ///< titles in report order ("SYN-CoLA", ...), then "Avg"
    std::map<qint64, std::map<QString, double>> byRun;
    /// The score of run `runId` in `column`; NaN when it has none.
    double score(qint64 runId, const QString& column) const;
};

/// The scores of every pretraining run of experiment `experiment` (by name) from its
/// fine-tuning results. Throws experiments::StoreError like the store.
TaskScores readTaskScores(experiments::ResultStore& store, const QString& experiment);

/// What the Properties view shows: the runs with properties, their scores, and what failed.
struct PropertyCollection {
    std::vector<PropertyRun> runs;  ///< in store order (experiment, then run)
    TaskScores scores;
    QStringList errors;  ///< one line each: a store error, an unreadable index.json
    int layers() const;  ///< the most layers of any run's analysis
    int heads() const;   ///< the most heads of any run's analysis
};

/// The pretraining runs of `experiment` (empty: of every experiment) whose latest analysis
/// directory has property entries, with the task scores of their experiments. Never throws:
/// a store error ends the walk and goes to `errors`, an unreadable analysis is skipped there.
PropertyCollection collectProperties(experiments::ResultStore& store, const QString& dbPath,
                                     const QString& experiment = {});

/// The same on a read-only connection of its own (for a worker thread: one connection per
/// thread). Never throws; an unopenable store is the one error.
PropertyCollection collectProperties(const QString& dbPath, const QString& experiment = {});

/// Runs x properties at one layer and head (head -1: the mean over heads). NaN where a run has
/// no entry there or the property is not defined for its scheme.
struct PropertyTable {
    int layer = 0, head = -1;
    QStringList columns;         ///< propertyNames(), then any other keys found, sorted
    QStringList rowNames;        ///< run names ("experiment: run" across experiments)
    QStringList labels;          ///< per row: the head's taxonomy pattern (empty for -1)
    std::vector<int> runIndex;   ///< per row: its index in the runs given
    std::vector<qint64> runIds;  ///< per row
    std::vector<std::vector<double>> values;  ///< rows x columns
    int rows() const { return int(values.size()); }
    double value(int row, int col) const;  ///< NaN outside the table
    /// The column of `name`, -1 when absent.
    int column(const QString& name) const { return int(columns.indexOf(name)); }
};

PropertyTable buildPropertyTable(const std::vector<PropertyRun>& runs, int layer, int head);

/// The table as CSV ("run,label,positional_share,..."; NaN as an empty cell).
QString propertyTableCsv(const PropertyTable& table);
/// The table as "markdown" or "latex" (NaN as "--"), three decimals.
QString propertyTableText(const PropertyTable& table, const QString& format);

/// A column's colour scale: diverging around 0 (plotting::kDivergingPalette, [-m, m]) when its
/// finite values have both signs, else sequential (kSequentialPalette) over [min, max].
struct ColumnScale {
    double lo = 0, hi = 0;
    bool diverging = false;
    bool empty = true;  ///< no finite value
};
ColumnScale columnScale(const PropertyTable& table, int col);
/// The palette's colour at t in [0, 1] (clamped), stops interpolated in RGB.
QColor paletteColor(const plotting::Palette& palette, double t);
/// The colour of `value` on `scale`; plotting::kNanColor for NaN or an empty scale.
QColor scaleColor(const ColumnScale& scale, double value);

/// The table for a QTableView: the text (3 decimals, rank90 as an integer, "–" for NaN), a
/// colour scale per column (background, with black or white text), tooltips (run, layer, head,
/// pattern, property, value) and the value itself under Qt::UserRole.
class PropertyTableModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    using QAbstractTableModel::QAbstractTableModel;
    void setTable(PropertyTable table);
    const PropertyTable& table() const { return table_; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    PropertyTable table_;
    std::vector<ColumnScale> scales_;
};

/// "delta_pos" (Delta_pos: the logit at the true positions minus the logit with every position
/// equal) or "static_pos" (the input-independent positional logit) of (layer, head) as a
/// heatmap; head -1: the mean of the layer's heads' maps. rows 0 when the analysis has no such
/// map. Entries shared by all layers (layer -1) serve every layer, and one of no head (a position
/// table's row similarity, properties/table_similarity) every head. Throws std::runtime_error
/// naming the file for an unreadable or non-square array.
plotting::Heatmap propertyMap(const AnalysisData& data, const QString& kind, int layer, int head,
                              const QString& title);

/// Singular values (descending) of a head's Delta_pos map, of its best Toeplitz fit and of the
/// residual (TUPE's Proposition 1: an absolute term has rank <= d, a relative one can be full).
struct Spectrum {
    std::vector<double> map, toeplitz, residual;
    bool empty() const { return map.empty(); }
};

/// Head `head` of spectrum_l{layer} ((H, 3, K)), or the mean over heads for head -1. Empty when
/// the analysis has no spectrum of that layer. Throws std::runtime_error naming the file for an
/// unreadable array or one that is not (H, 3, K).
Spectrum readSpectrum(const AnalysisData& data, int layer, int head);

/// Spearman's rank correlation and the number of pairs behind it.
struct RankCorrelation {
    double rho = std::numeric_limits<double>::quiet_NaN();
    int n = 0;
};

/// Ranks 1..n of `values`, ties given the mean of the ranks they span ("average" ranks).
std::vector<double> averageRanks(const std::vector<double>& values);

/// Spearman's rho of paired x and y: Pearson's correlation of their average ranks, over the
/// pairs where both are finite (n). NaN when n < 3 or either side is constant.
RankCorrelation spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace app
