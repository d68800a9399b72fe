// Shared pieces of the views' QCustomPlot figures: a styled plot, a heatmap widget drawing a
// plotting::Heatmap (colour scale from plotting/palette.h, symmetric diverging range for signed
// maps, token tick labels, hover value), a queued replot at most ~10 times per second, and
// export of a plot to PNG + PDF + SVG and of its graphs to CSV (RFC 4180 quoting).
#pragma once

#include <QPointer>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <QWidget>
#include <string>
#include <vector>

#include "plotting/plotting.h"
#include "qcustomplot.h"

namespace app {

/// A plot with the app's fonts and interactions (drag/zoom on both axes).
QCustomPlot* makePlot(QWidget* parent);

/// Replots `plot` at most every 100 ms however often request() is called.
class ReplotThrottle : public QObject {
    Q_OBJECT
  public:
    explicit ReplotThrottle(QCustomPlot* plot);
    void request();

  private:
    QPointer<QCustomPlot> plot_;
    QTimer timer_;
};

/// Labels for plotting::Heatmap (row_labels, col_labels) from Qt strings, UTF-8.
std::vector<std::string> toStdStrings(const QStringList& labels);

/// A QCustomPlot showing one plotting::Heatmap (the struct the offscreen PNGs draw, with the
/// same colour scale and range: plotting/palette.h, plotting::heatmap_color_range); hovering
/// shows "row label -> column label: value".
class HeatmapPlot : public QCustomPlot {
    Q_OBJECT
  public:
    explicit HeatmapPlot(QWidget* parent = nullptr, bool withScale = true);
    /// Shows `data`; values that do not fill rows x cols show a message instead.
    void setData(const plotting::Heatmap& data);
    void clearWithMessage(const QString& message);
    const plotting::Heatmap& data() const { return data_; }

    /// The cell (row, col) under a widget position; false outside the data.
    bool cellAt(const QPointF& pos, int* row, int* col) const;

  signals:
    /// A click on cell (row, col) of the data.
    void cellClicked(int row, int col);

  protected:
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;

  private:
    plotting::Heatmap data_;
    QCPColorMap* map_ = nullptr;
    QCPColorScale* scale_ = nullptr;
    QCPTextElement* title_ = nullptr;
    QCPItemText* message_ = nullptr;
    bool withScale_;
};

/// Writes `plot` at its current size to an SVG file (QSvgGenerator; text and lines stay
/// vectors, a colour map is an embedded image); false when it cannot be written.
bool saveSvg(QCustomPlot* plot, const QString& path);
/// Saves `plot` as base.png, base.pdf and base.svg (a .png, .pdf or .svg ending on basePath is
/// dropped first); returns the error, empty on success.
QString exportPlot(QCustomPlot* plot, const QString& basePath);
/// Several plots: one alone as exportPlot; two as BASE-left and BASE-right, more as BASE-1 ...
/// Returns the first error (empty on success); `written` gets the PNG paths.
QString exportPlots(const QList<QCustomPlot*>& plots, const QString& basePath,
                    QStringList* written = nullptr);
/// The plot's graphs as CSV ("series,x,y" rows) or, for a heatmap, its matrix under a "row"
/// header of column labels. Fields with a comma, a quote, CR or LF are quoted (RFC 4180).
QString plotCsv(QCustomPlot* plot);
/// One CSV field (RFC 4180): quoted, inner quotes doubled, when it holds a comma, a quote, CR
/// or LF.
QString csvField(QString s);

}  // namespace app
