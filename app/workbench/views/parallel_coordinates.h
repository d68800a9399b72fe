// A parallel-coordinates plot (Inselberg 1985; TensorBoard's HParams and W&B's panel draw the
// same): one vertical axis per factor and metric, one line per run through its positions
// (core/factor_data.h), coloured by a metric. Dragging along an axis brushes a range and keeps
// only the runs inside every brush; a click on an axis clears its brush; a click on a line
// names its run. Renders and forwards intent: the positions and colours come computed.
#pragma once

#include <QList>
#include <vector>

#include "core/factor_data.h"
#include "qcustomplot.h"

namespace app {

class ParallelCoordinatesPlot : public QCustomPlot {
    Q_OBJECT
  public:
    explicit ParallelCoordinatesPlot(QWidget* parent = nullptr);
    /// Shows `axes` (each with one position per run), the runs' ids, names and colours.
    /// Brushes on axes that keep their key survive.
    void setData(const std::vector<ParallelAxis>& axes, const QList<qint64>& runIds,
                 const QStringList& runNames, const std::vector<QColor>& colours);
    const std::vector<AxisBrush>& brushes() const { return brushes_; }
    void clearBrushes();
    /// Per run: inside every brush.
    const std::vector<bool>& kept() const { return kept_; }
    /// The widget pixel of position t in [0, 1] on axis `axis` (for tests and hit tests).
    QPoint pixelAt(int axis, double t) const;
    const std::vector<ParallelAxis>& axes() const { return axes_; }

  signals:
    void brushesChanged();
    void runClicked(qint64 runId);

  protected:
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;

  private:
    void redraw();
    /// The axis under widget x (within a small distance), or -1.
    int axisAt(double x) const;
    double positionAt(double y) const;

    std::vector<ParallelAxis> axes_;
    QList<qint64> ids_;
    QStringList names_;
    std::vector<QColor> colours_;
    std::vector<AxisBrush> brushes_;
    std::vector<bool> kept_;
    std::vector<QCPCurve*> curves_;
    int dragAxis_ = -1;
    double dragFrom_ = 0, dragTo_ = 0;
    QPoint pressAt_;
    QCPItemRect* dragRect_ = nullptr;
};

}  // namespace app
