// Plot helpers shared by the views (see plot_util.h).
#include "views/plot_util.h"

#include <QFileInfo>
#include <QSvgGenerator>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "analysis/text_format.h"
#include "plotting/qcp_heatmap.h"

namespace app {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

/// labels[i] when there is one, else the index.
QString labelAt(const std::vector<std::string>& labels, int i) {
    return i >= 0 && size_t(i) < labels.size() ? qs(labels[size_t(i)]) : QString::number(i);
}

}  // namespace

std::vector<std::string> toStdStrings(const QStringList& labels) {
    std::vector<std::string> out;
    out.reserve(size_t(labels.size()));
    for (const QString& l : labels) out.push_back(l.toStdString());
    return out;
}

QCustomPlot* makePlot(QWidget* parent) {
    auto* plot = new QCustomPlot(parent);
    plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom | QCP::iSelectLegend);
    plot->setNoAntialiasingOnDrag(true);
    plot->setMinimumSize(300, 220);
    return plot;
}

ReplotThrottle::ReplotThrottle(QCustomPlot* plot) : QObject(plot), plot_(plot) {
    timer_.setSingleShot(true);
    timer_.setInterval(100);
    connect(&timer_, &QTimer::timeout, this, [this] {
        if (plot_) plot_->replot(QCustomPlot::rpQueuedReplot);
    });
}

void ReplotThrottle::request() {
    if (!timer_.isActive()) timer_.start();
}

HeatmapPlot::HeatmapPlot(QWidget* parent, bool withScale)
    : QCustomPlot(parent), withScale_(withScale) {
    setMouseTracking(true);
    setMinimumSize(200, 180);
    plotLayout()->insertRow(0);
    title_ = new QCPTextElement(this, "", QFont(font().family(), 10, QFont::Bold));
    plotLayout()->addElement(0, 0, title_);
    map_ = new QCPColorMap(xAxis, yAxis);
    map_->setInterpolate(false);
    if (withScale_) {
        scale_ = new QCPColorScale(this);
        plotLayout()->addElement(1, 1, scale_);
        scale_->setType(QCPAxis::atRight);
        map_->setColorScale(scale_);
        auto* group = new QCPMarginGroup(this);
        axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, group);
        scale_->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    }
    message_ = new QCPItemText(this);
    message_->position->setType(QCPItemPosition::ptAxisRectRatio);
    message_->position->setCoords(0.5, 0.5);
    message_->setPositionAlignment(Qt::AlignCenter);
    message_->setColor(QColor(120, 120, 120));
    message_->setText("");
    yAxis->setRangeReversed(true);  // row 0 at the top
}

void HeatmapPlot::clearWithMessage(const QString& message) {
    data_ = plotting::Heatmap{};
    map_->data()->setSize(0, 0);
    map_->setVisible(false);
    if (scale_) scale_->setVisible(false);
    message_->setText(message);
    title_->setText("");
    xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    xAxis->setLabel("");
    yAxis->setLabel("");
    xAxis->setRange(0, 1);
    yAxis->setRange(0, 1);
    replot(rpQueuedReplot);
}

void HeatmapPlot::setData(const plotting::Heatmap& d) {
    if (d.rows <= 0 || d.cols <= 0 || d.values.size() != size_t(d.rows) * size_t(d.cols)) {
        clearWithMessage(QString("cannot draw '%1': %2 values for %3 x %4 cells")
                             .arg(qs(d.title))
                             .arg(d.values.size())
                             .arg(d.rows)
                             .arg(d.cols));
        return;
    }
    data_ = d;
    message_->setText("");
    map_->setVisible(true);
    if (scale_) scale_->setVisible(true);
    title_->setText(qs(d.title));
    map_->data()->setSize(d.cols, d.rows);
    map_->data()->setRange(plotting::qcp_cell_range(d.cols), plotting::qcp_cell_range(d.rows));
    for (int r = 0; r < d.rows; ++r)
        for (int c = 0; c < d.cols; ++c)
            map_->data()->setCell(c, r, d.values[size_t(r) * size_t(d.cols) + size_t(c)]);
    // The offscreen PNGs' colours and range (plotting.cpp draws the same struct).
    const plotting::ColorRange range = plotting::heatmap_color_range(d);
    map_->setGradient(plotting::heatmap_gradient(d.symmetric));
    map_->setDataRange(QCPRange(range.lo, range.hi));
    if (scale_) scale_->axis()->setLabel(qs(d.value_label));
    auto labelTicker = [](const std::vector<std::string>& labels, int n) {
        QSharedPointer<QCPAxisTickerText> t(new QCPAxisTickerText);
        const int step = std::max(1, int(std::ceil(n / 24.0)));
        for (int i = 0; i < n; i += step) t->addTick(i, labelAt(labels, i));
        return t;
    };
    xAxis->setTicker(labelTicker(d.col_labels, d.cols));
    yAxis->setTicker(labelTicker(d.row_labels, d.rows));
    xAxis->setTickLabelRotation(d.col_labels.empty() ? 0 : 60);
    xAxis->setLabel(qs(d.x_label));
    yAxis->setLabel(qs(d.y_label));
    xAxis->setRange(-0.5, d.cols - 0.5);
    yAxis->setRange(-0.5, d.rows - 0.5);
    replot(rpQueuedReplot);
}

bool HeatmapPlot::cellAt(const QPointF& pos, int* row, int* col) const {
    if (data_.rows == 0) return false;
    const int c = int(std::lround(xAxis->pixelToCoord(pos.x())));
    const int r = int(std::lround(yAxis->pixelToCoord(pos.y())));
    if (r < 0 || c < 0 || r >= data_.rows || c >= data_.cols ||
        !axisRect()->rect().contains(pos.toPoint()))
        return false;
    *row = r, *col = c;
    return true;
}

void HeatmapPlot::mousePressEvent(QMouseEvent* event) {
    QCustomPlot::mousePressEvent(event);
    int r = 0, c = 0;
    if (event->button() == Qt::LeftButton && cellAt(event->position(), &r, &c))
        emit cellClicked(r, c);
}

void HeatmapPlot::mouseMoveEvent(QMouseEvent* event) {
    QCustomPlot::mouseMoveEvent(event);
    const QPointF pos = event->position();
    int r = 0, c = 0;
    if (!cellAt(pos, &r, &c)) {
        QToolTip::hideText();
        return;
    }
    const QString rl = labelAt(data_.row_labels, r);
    const QString cl = labelAt(data_.col_labels, c);
    const double v = data_.values[size_t(r) * size_t(data_.cols) + size_t(c)];
    QToolTip::showText(event->globalPosition().toPoint(),
                       QString("%1 %2 \u2192 %3 %4: %5")
                           .arg(data_.y_label.empty() ? QString("row") : qs(data_.y_label), rl,
                                data_.x_label.empty() ? QString("column") : qs(data_.x_label), cl)
                           .arg(v, 0, 'g', 4),
                       this);
}

bool saveSvg(QCustomPlot* plot, const QString& path) {
    if (!plot) return false;
    const int width = plot->viewport().width(), height = plot->viewport().height();
    if (width <= 0 || height <= 0) return false;
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(QSize(width, height));
    svg.setViewBox(QRect(0, 0, width, height));
    svg.setTitle(QFileInfo(path).completeBaseName());
    // QCustomPlot's recipe for vector output (its savePdf): no cosmetic pens, no caching.
    QCPPainter painter;
    if (!painter.begin(&svg)) return false;
    painter.setMode(QCPPainter::pmVectorized);
    painter.setMode(QCPPainter::pmNonCosmetic);
    plot->toPainter(&painter, width, height);
    return painter.end() && QFileInfo(path).size() > 0;
}

QString exportPlot(QCustomPlot* plot, const QString& basePath) {
    if (!plot) return "this view has no plot to export";
    QString base = basePath;
    base.remove(QRegularExpression("\\.(png|pdf|svg)$", QRegularExpression::CaseInsensitiveOption));
    if (!plot->savePng(base + ".png", 0, 0, 2.0)) return "cannot write " + base + ".png";
    if (!plot->savePdf(base + ".pdf")) return "cannot write " + base + ".pdf";
    if (!saveSvg(plot, base + ".svg")) return "cannot write " + base + ".svg";
    return {};
}

QString exportPlots(const QList<QCustomPlot*>& plots, const QString& basePath,
                    QStringList* written) {
    if (plots.isEmpty()) return "this view has no plot to export";
    QString base = basePath;
    base.remove(QRegularExpression("\\.(png|pdf|svg)$", QRegularExpression::CaseInsensitiveOption));
    for (int i = 0; i < plots.size(); ++i) {
        const QString suffix = plots.size() == 1   ? QString()
                               : plots.size() == 2 ? (i == 0 ? "-left" : "-right")
                                                   : "-" + QString::number(i + 1);
        const QString error = exportPlot(plots[i], base + suffix);
        if (!error.isEmpty()) return error;
        if (written) written->push_back(base + suffix + ".png");
    }
    return {};
}

QString csvField(QString s) { return QString::fromStdString(analysis::csv_field(s.toStdString())); }

QString plotCsv(QCustomPlot* plot) {
    if (!plot) return {};
    if (auto* heat = qobject_cast<HeatmapPlot*>(plot)) {
        const plotting::Heatmap& d = heat->data();
        QString out = "row";
        for (int c = 0; c < d.cols; ++c) out += "," + csvField(labelAt(d.col_labels, c));
        out += "\n";
        for (int r = 0; r < d.rows; ++r) {
            out += csvField(labelAt(d.row_labels, r));
            for (int c = 0; c < d.cols; ++c)
                out +=
                    "," + QString::number(d.values[size_t(r) * size_t(d.cols) + size_t(c)], 'g', 8);
            out += "\n";
        }
        return out;
    }
    QString out = "series,x,y\n";
    for (int g = 0; g < plot->graphCount(); ++g) {
        QCPGraph* graph = plot->graph(g);
        const QString name = csvField(graph->name());
        for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
            out += QString("%1,%2,%3\n")
                       .arg(name, QString::number(it->key, 'g', 10),
                            QString::number(it->value, 'g', 10));
    }
    return out;
}

}  // namespace app
