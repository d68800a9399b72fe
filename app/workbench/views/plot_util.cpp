// Plot helpers shared by the views (see plot_util.h).
#include "views/plot_util.h"

#include <QFileInfo>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace app {

namespace {

QCPColorGradient fiveStops(const std::array<QColor, 5>& stops) {
    QCPColorGradient g;
    g.clearColorStops();
    for (size_t i = 0; i < stops.size(); ++i) g.setColorStopAt(0.25 * double(i), stops[i]);
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setNanHandling(QCPColorGradient::nhNanColor);
    g.setNanColor(QColor(190, 190, 190));
    return g;
}

}  // namespace

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
    data_ = HeatmapData{};
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

void HeatmapPlot::setData(const HeatmapData& d) {
    data_ = d;
    message_->setText("");
    map_->setVisible(true);
    if (scale_) scale_->setVisible(true);
    title_->setText(d.title);
    map_->data()->setSize(d.cols, d.rows);
    map_->data()->setRange(QCPRange(0, std::max(0, d.cols - 1)), QCPRange(0, std::max(0, d.rows - 1)));
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < d.rows; ++r)
        for (int c = 0; c < d.cols; ++c) {
            const double v = d.values[size_t(r) * size_t(d.cols) + size_t(c)];
            map_->data()->setCell(c, r, v);
            if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        }
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (d.symmetric) {
        const double m = std::max({std::abs(lo), std::abs(hi), 1e-12});
        lo = -m, hi = m;
    }
    if (std::isfinite(d.rangeMin)) lo = d.rangeMin;
    if (std::isfinite(d.rangeMax)) hi = d.rangeMax;
    if (hi <= lo) hi = lo + 1e-12;
    map_->setGradient(d.symmetric ? fiveStops({QColor(33, 102, 172), QColor(103, 169, 207),
                                               QColor(247, 247, 247), QColor(239, 138, 98),
                                               QColor(178, 24, 43)})
                                  : fiveStops({QColor(68, 1, 84), QColor(59, 82, 139),
                                               QColor(33, 145, 140), QColor(94, 201, 98),
                                               QColor(253, 231, 37)}));
    map_->setDataRange(QCPRange(lo, hi));
    if (scale_) scale_->axis()->setLabel(d.valueLabel);
    auto labelTicker = [](const QStringList& labels, int n) {
        QSharedPointer<QCPAxisTickerText> t(new QCPAxisTickerText);
        const int step = std::max(1, int(std::ceil(n / 24.0)));
        for (int i = 0; i < n; i += step)
            t->addTick(i, i < labels.size() ? labels[i] : QString::number(i));
        return t;
    };
    xAxis->setTicker(labelTicker(d.colLabels, d.cols));
    yAxis->setTicker(labelTicker(d.rowLabels, d.rows));
    xAxis->setTickLabelRotation(d.colLabels.isEmpty() ? 0 : 60);
    xAxis->setLabel(d.xLabel);
    yAxis->setLabel(d.yLabel);
    xAxis->setRange(-0.5, d.cols - 0.5);
    yAxis->setRange(-0.5, d.rows - 0.5);
    replot(rpQueuedReplot);
}

void HeatmapPlot::mouseMoveEvent(QMouseEvent* event) {
    QCustomPlot::mouseMoveEvent(event);
    if (data_.rows == 0) return;
    const QPointF pos = event->position();
    const int c = int(std::lround(xAxis->pixelToCoord(pos.x())));
    const int r = int(std::lround(yAxis->pixelToCoord(pos.y())));
    if (r < 0 || c < 0 || r >= data_.rows || c >= data_.cols ||
        !axisRect()->rect().contains(pos.toPoint())) {
        QToolTip::hideText();
        return;
    }
    const QString rl = r < data_.rowLabels.size() ? data_.rowLabels[r] : QString::number(r);
    const QString cl = c < data_.colLabels.size() ? data_.colLabels[c] : QString::number(c);
    const double v = data_.values[size_t(r) * size_t(data_.cols) + size_t(c)];
    QToolTip::showText(event->globalPosition().toPoint(),
                       QString("%1 %2 \u2192 %3 %4: %5")
                           .arg(data_.yLabel.isEmpty() ? "row" : data_.yLabel, rl,
                                data_.xLabel.isEmpty() ? "column" : data_.xLabel, cl)
                           .arg(v, 0, 'g', 4),
                       this);
}

QString exportPlot(QCustomPlot* plot, const QString& basePath) {
    if (!plot) return "this view has no plot to export";
    QString base = basePath;
    base.remove(QRegularExpression("\\.(png|pdf)$"));
    if (!plot->savePng(base + ".png", 0, 0, 2.0)) return "cannot write " + base + ".png";
    if (!plot->savePdf(base + ".pdf")) return "cannot write " + base + ".pdf";
    return {};
}

QString exportPlots(const QList<QCustomPlot*>& plots, const QString& basePath, QStringList* written) {
    if (plots.isEmpty()) return "this view has no plot to export";
    QString base = basePath;
    base.remove(QRegularExpression("\\.(png|pdf)$"));
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

QString plotCsv(QCustomPlot* plot) {
    if (!plot) return {};
    if (auto* heat = qobject_cast<HeatmapPlot*>(plot)) {
        const HeatmapData& d = heat->data();
        QString out = "row";
        for (int c = 0; c < d.cols; ++c)
            out += "," + (c < d.colLabels.size() ? d.colLabels[c] : QString::number(c));
        out += "\n";
        for (int r = 0; r < d.rows; ++r) {
            out += r < d.rowLabels.size() ? d.rowLabels[r] : QString::number(r);
            for (int c = 0; c < d.cols; ++c)
                out += "," + QString::number(d.values[size_t(r) * size_t(d.cols) + size_t(c)], 'g', 8);
            out += "\n";
        }
        return out;
    }
    QString out = "series,x,y\n";
    for (int g = 0; g < plot->graphCount(); ++g) {
        QCPGraph* graph = plot->graph(g);
        QString name = graph->name();
        name.replace('"', "'");
        for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
            out += QString("\"%1\",%2,%3\n").arg(name).arg(it->key, 0, 'g', 10).arg(it->value, 0, 'g', 10);
    }
    return out;
}

}  // namespace app
