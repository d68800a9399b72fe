// The parallel-coordinates plot (see parallel_coordinates.h).
#include "views/parallel_coordinates.h"

#include <QToolTip>
#include <cmath>

namespace app {

namespace {

constexpr double kAxisGrab = 0.08;  // axis units either side of an axis that start a brush
constexpr double kClickPixels = 4;  // a press and release this close are a click
constexpr double kLinePixels = 6;   // a click this close to a run's line picks the run

}  // namespace

ParallelCoordinatesPlot::ParallelCoordinatesPlot(QWidget* parent) : QCustomPlot(parent) {
    setMinimumSize(400, 220);
    setMouseTracking(true);
    yAxis->setVisible(false);
    yAxis->setRange(-0.08, 1.08);
    xAxis->grid()->setVisible(false);
    xAxis->setBasePen(Qt::NoPen);
    xAxis->setTickPen(Qt::NoPen);
    xAxis->setSubTicks(false);
}

void ParallelCoordinatesPlot::setData(const std::vector<ParallelAxis>& axes,
                                      const QList<qint64>& runIds, const QStringList& runNames,
                                      const std::vector<QColor>& colours) {
    std::vector<AxisBrush> kept;
    for (const AxisBrush& b : brushes_)
        for (size_t i = 0; i < axes.size(); ++i)
            if (b.axis < int(axes_.size()) && axes[i].key == axes_[size_t(b.axis)].key)
                kept.push_back({int(i), b.lo, b.hi});
    axes_ = axes;
    ids_ = runIds;
    names_ = runNames;
    colours_ = colours;
    brushes_ = kept;
    kept_ = brushedRuns(axes_, brushes_);
    redraw();
}

void ParallelCoordinatesPlot::clearBrushes() {
    brushes_.clear();
    kept_ = brushedRuns(axes_, brushes_);
    redraw();
    emit brushesChanged();
}

void ParallelCoordinatesPlot::redraw() {
    clearPlottables();
    clearItems();
    curves_.clear();
    dragRect_ = nullptr;
    const int n = int(axes_.size());
    xAxis->setRange(-0.5, std::max(0.5, n - 0.5));
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (int i = 0; i < n; ++i) ticker->addTick(i, axes_[size_t(i)].title);
    xAxis->setTicker(ticker);
    // Filtered-out runs first, faint, so the kept ones draw on top.
    for (int pass = 0; pass < 2; ++pass)
        for (int r = 0; r < int(ids_.size()); ++r) {
            const bool keep = size_t(r) < kept_.size() && kept_[size_t(r)];
            if (keep != (pass == 1)) continue;
            auto* curve = new QCPCurve(xAxis, yAxis);
            for (int i = 0; i < n; ++i) curve->addData(i, axes_[size_t(i)].position[size_t(r)]);
            QColor c =
                keep && size_t(r) < colours_.size() ? colours_[size_t(r)] : QColor(150, 150, 150);
            c.setAlpha(keep ? 220 : 45);
            curve->setPen(QPen(c, keep ? 2 : 1));
            curve->setProperty("run", r);
            curves_.push_back(curve);
        }
    for (int i = 0; i < n; ++i) {
        const ParallelAxis& a = axes_[size_t(i)];
        auto* line = new QCPItemLine(this);
        line->start->setCoords(i, 0);
        line->end->setCoords(i, 1);
        line->setPen(QPen(Qt::black, 1));
        QList<double> ticks;
        if (a.categorical)
            for (int k = 0; k < a.levels.size(); ++k)
                ticks << (a.levels.size() == 1 ? 0.5 : double(k) / (a.levels.size() - 1));
        else
            ticks = {0.0, 0.5, 1.0};
        for (double t : ticks) {
            auto* text = new QCPItemText(this);
            text->position->setCoords(i, t);
            text->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
            text->setPadding(QMargins(4, 0, 0, 0));
            text->setText(a.label(t));
            text->setFont(QFont(font().family(), 8));
        }
    }
    for (const AxisBrush& b : brushes_) {
        auto* rect = new QCPItemRect(this);
        rect->topLeft->setCoords(b.axis - 0.06, std::max(b.lo, b.hi));
        rect->bottomRight->setCoords(b.axis + 0.06, std::min(b.lo, b.hi));
        rect->setPen(QPen(QColor(30, 90, 180)));
        rect->setBrush(QColor(30, 90, 180, 60));
    }
    replot();
}

QPoint ParallelCoordinatesPlot::pixelAt(int axis, double t) const {
    return QPoint(int(std::lround(xAxis->coordToPixel(axis))),
                  int(std::lround(yAxis->coordToPixel(t))));
}

int ParallelCoordinatesPlot::axisAt(double x) const {
    const double c = xAxis->pixelToCoord(x);
    const int i = int(std::lround(c));
    return i >= 0 && i < int(axes_.size()) && std::fabs(c - i) <= kAxisGrab ? i : -1;
}

double ParallelCoordinatesPlot::positionAt(double y) const {
    return std::clamp(yAxis->pixelToCoord(y), 0.0, 1.0);
}

void ParallelCoordinatesPlot::mousePressEvent(QMouseEvent* event) {
    pressAt_ = event->pos();
    dragAxis_ = event->button() == Qt::LeftButton ? axisAt(event->pos().x()) : -1;
    if (dragAxis_ >= 0) {
        dragFrom_ = dragTo_ = positionAt(event->pos().y());
        dragRect_ = new QCPItemRect(this);
        dragRect_->setPen(QPen(QColor(30, 90, 180), 1, Qt::DashLine));
        dragRect_->setBrush(QColor(30, 90, 180, 40));
    }
    event->accept();
}

void ParallelCoordinatesPlot::mouseMoveEvent(QMouseEvent* event) {
    if (dragAxis_ >= 0 && dragRect_) {
        dragTo_ = positionAt(event->pos().y());
        dragRect_->topLeft->setCoords(dragAxis_ - 0.06, std::max(dragFrom_, dragTo_));
        dragRect_->bottomRight->setCoords(dragAxis_ + 0.06, std::min(dragFrom_, dragTo_));
        replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    // Hover: the run under the pointer.
    for (QCPCurve* c : curves_)
        if (const double d = c->selectTest(event->pos(), false); d >= 0 && d < kLinePixels) {
            const int r = c->property("run").toInt();
            QToolTip::showText(event->globalPosition().toPoint(), names_.value(r), this);
            return;
        }
    QToolTip::hideText();
}

void ParallelCoordinatesPlot::mouseReleaseEvent(QMouseEvent* event) {
    const bool click = (event->pos() - pressAt_).manhattanLength() <= kClickPixels;
    if (dragAxis_ >= 0) {
        const int axis = dragAxis_;
        dragAxis_ = -1;
        brushes_.erase(std::remove_if(brushes_.begin(), brushes_.end(),
                                      [&](const AxisBrush& b) { return b.axis == axis; }),
                       brushes_.end());
        if (!click)
            brushes_.push_back({axis, std::min(dragFrom_, dragTo_), std::max(dragFrom_, dragTo_)});
        kept_ = brushedRuns(axes_, brushes_);
        redraw();
        emit brushesChanged();
        return;
    }
    if (!click || event->button() != Qt::LeftButton) return;
    // The nearest line within a few pixels; a kept run wins over a faded one at equal distance.
    double best = kLinePixels;
    int run = -1;
    for (QCPCurve* c : curves_)
        if (const double d = c->selectTest(event->pos(), false); d >= 0 && d <= best)
            best = d, run = c->property("run").toInt();
    if (run >= 0 && run < ids_.size()) emit runClicked(ids_[run]);
}

}  // namespace app
