// The training-curves view (see curves_view.h).
#include "views/curves_view.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QSplitter>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <set>

#include "core/curve_math.h"
#include "experiments/result_store.h"

namespace app {

namespace {

constexpr std::size_t kDecimateAbove = 4000, kBuckets = 1000;

QColor curveColour(int i) {
    static const QColor colours[] = {
        QColor(31, 119, 180),  QColor(214, 39, 40), QColor(44, 160, 44),   QColor(255, 127, 14),
        QColor(148, 103, 189), QColor(140, 86, 75), QColor(227, 119, 194), QColor(127, 127, 127),
        QColor(188, 189, 34),  QColor(23, 190, 207)};
    return colours[i % 10];
}

/// Linear interpolation of (xs, ys) at x; clamps at the ends.
double interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
    if (xs.empty()) return NAN;
    auto it = std::lower_bound(xs.begin(), xs.end(), x);
    if (it == xs.begin()) return ys.front() * (xs.front() > 0 ? x / xs.front() : 1.0);
    if (it == xs.end()) return ys.back();
    const size_t i = size_t(it - xs.begin());
    const double t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
    return ys[i - 1] + t * (ys[i] - ys[i - 1]);
}

QCPGraph* addGraph(QCustomPlot* plot, const std::vector<double>& x, const std::vector<double>& y,
                   const QPen& pen, const QString& name) {
    QCPGraph* g = plot->addGraph();
    g->setPen(pen);
    g->setName(name);
    QVector<double> xs, ys;
    const bool decimate = y.size() > kDecimateAbove;
    const auto keep = decimate ? decimateMinMax(y, kBuckets) : std::vector<std::size_t>{};
    const size_t n = decimate ? keep.size() : y.size();
    xs.reserve(int(n));
    ys.reserve(int(n));
    for (size_t k = 0; k < n; ++k) {
        const size_t i = decimate ? keep[k] : k;
        xs << x[i];
        ys << y[i];
    }
    g->setData(xs, ys, true);
    return g;
}

}  // namespace

CurvesView::CurvesView(QWidget* parent)
    : WorkbenchView(parent),
      runs_(new QListWidget),
      metric_(new QComboBox),
      xAxis_(new QComboBox),
      smooth_(new QSlider(Qt::Horizontal)),
      smoothLabel_(new QLabel),
      logY_(new QCheckBox("log y")),
      groupSeeds_(new QCheckBox("group seeds (mean \u00b1 std)")),
      markers_(new QCheckBox("min / last markers")),
      baseline_(new QComboBox),
      floor_(new QCheckBox("unigram floor (under a loss)")),
      bigram_(new QCheckBox("bigram reference")),
      plot_(makePlot(nullptr)),
      readout_(new QLabel),
      warnings_(new QLabel),
      throttle_(new ReplotThrottle(plot_)) {
    xAxis_->addItems({"step", "tokens", "wall time (min)"});
    smooth_->setRange(0, 99);
    smooth_->setValue(60);
    markers_->setChecked(true);
    groupSeeds_->setChecked(true);
    readout_->setWordWrap(true);
    readout_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    readout_->setMinimumHeight(40);
    warnings_->setWordWrap(true);
    warnings_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    warnings_->setStyleSheet("QLabel { color: #9a5b00; }");
    warnings_->hide();
    floor_->setChecked(true);
    floor_->setToolTip(
        "Dashed: the validation MLM loss of a model that learned only word frequencies "
        "(the unigram entropy of the masked tokens). Dash-dot: the context-free floor, "
        "frequencies plus copying the scored token, which the validation loss shows for the "
        "10% of masked tokens left unchanged: a curve that does not go clearly below it has "
        "learned nothing about context or positions.");
    bigram_->setToolTip(
        "A left-context bigram model's loss on the same tokens: a reference for "
        "how much one neighbouring word explains.");
    runs_->setMinimumWidth(240);

    auto* form = new QFormLayout;
    form->addRow("Metric", metric_);
    form->addRow("x axis", xAxis_);
    auto* smoothRow = new QHBoxLayout;
    smoothRow->addWidget(smooth_, 1);
    smoothRow->addWidget(smoothLabel_);
    form->addRow("Smoothing", smoothRow);
    form->addRow(logY_);
    form->addRow(groupSeeds_);
    form->addRow(markers_);
    form->addRow(floor_);
    form->addRow(bigram_);
    baseline_->setObjectName("baseline");
    form->addRow("Baseline", baseline_);
    auto* left = new QWidget;
    auto* ll = new QVBoxLayout(left);
    ll->setContentsMargins(0, 0, 0, 0);
    ll->addLayout(form);
    ll->addWidget(new QLabel("Runs (check to plot)"));
    ll->addWidget(runs_, 1);
    auto* right = new QWidget;
    auto* rl = new QVBoxLayout(right);
    rl->setContentsMargins(0, 0, 0, 0);
    rl->addWidget(plot_, 1);
    rl->addWidget(readout_);
    rl->addWidget(warnings_);
    auto* split = new QSplitter;
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(1, 1);
    split->setSizes({340, 1100});
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(split);

    plot_->legend->setVisible(true);
    plot_->legend->setFont(QFont(font().family(), 8));
    plot_->legend->setSelectableParts(QCPLegend::spItems);
    plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    plot_->setMouseTracking(true);

    auto changed = [this] { rebuild(); };
    connect(metric_, &QComboBox::currentTextChanged, this, [this] { loadCurves(false); });
    connect(xAxis_, &QComboBox::currentIndexChanged, this, changed);
    connect(smooth_, &QSlider::valueChanged, this, [this] {
        rebuild();
        emit smoothingChanged(smoothing());
    });
    connect(logY_, &QCheckBox::toggled, this, changed);
    connect(groupSeeds_, &QCheckBox::toggled, this, changed);
    connect(markers_, &QCheckBox::toggled, this, changed);
    connect(floor_, &QCheckBox::toggled, this, changed);
    connect(bigram_, &QCheckBox::toggled, this, changed);
    connect(baseline_, &QComboBox::currentIndexChanged, this, changed);
    connect(runs_, &QListWidget::itemChanged, this, [this] { loadCurves(false); });
    connect(plot_, &QCustomPlot::legendClick, this,
            [this](QCPLegend*, QCPAbstractLegendItem* item, QMouseEvent*) {
                // Legend toggles: a click hides or shows the curve (and its faint raw twin).
                auto* pli = qobject_cast<QCPPlottableLegendItem*>(item);
                if (!pli) return;
                QCPAbstractPlottable* p = pli->plottable();
                const bool visible = !p->visible();
                for (int i = 0; i < plot_->plottableCount(); ++i)
                    if (plot_->plottable(i)->property("owner").toString() == p->name())
                        plot_->plottable(i)->setVisible(visible);
                p->setVisible(visible);
                pli->setTextColor(visible ? Qt::black : QColor(170, 170, 170));
                throttle_->request();
            });
    connect(plot_, &QCustomPlot::mouseMove, this, &CurvesView::onMouseMove);
    poll_.setInterval(1000);
    connect(&poll_, &QTimer::timeout, this, [this] { loadCurves(true); });
    setSmoothing(0.6);
}

double CurvesView::smoothing() const { return smooth_->value() / 100.0; }

void CurvesView::setSmoothing(double weight) {
    smooth_->setValue(int(std::lround(std::clamp(weight, 0.0, 0.99) * 100)));
    smoothLabel_->setText(QString::number(smoothing(), 'f', 2));
}

void CurvesView::setStore(experiments::ResultStore* store, const QString&) {
    store_ = store;
    curves_.clear();
    fillRunList();
    fillMetrics();
    loadCurves(false);
    poll_.start();
}

void CurvesView::fillRunList() {
    QSignalBlocker block(runs_);
    runs_->clear();
    if (!store_) return;
    try {
        for (const auto& e : store_->list_experiments())
            for (const auto& r : store_->list_runs(e.id)) {
                auto* item = new QListWidgetItem(QString::fromStdString(r.name));
                item->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(r.id));
                item->setToolTip(QString::fromStdString(e.name + ": " + r.kind + ", " + r.status));
                item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
                item->setCheckState(r.kind == "pretrain" ? Qt::Checked : Qt::Unchecked);
                runs_->addItem(item);
            }
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
}

void CurvesView::fillMetrics() {
    QSignalBlocker block(metric_);
    const QString current = metric_->currentText();
    metric_->clear();
    if (!store_) return;
    std::set<std::string> keys;
    try {
        for (int i = 0; i < runs_->count(); ++i)
            if (runs_->item(i)->checkState() == Qt::Checked)
                for (const auto& k :
                     store_->metric_keys(runs_->item(i)->data(Qt::UserRole).toLongLong()))
                    keys.insert(k);
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
    for (const auto& k : keys) metric_->addItem(QString::fromStdString(k));
    int i = metric_->findText(current.isEmpty() ? "train/loss" : current);
    metric_->setCurrentIndex(std::max(0, i));
}

void CurvesView::showRuns(const QList<qint64>& ids) {
    {
        QSignalBlocker block(runs_);
        for (int i = 0; i < runs_->count(); ++i)
            runs_->item(i)->setCheckState(
                ids.contains(runs_->item(i)->data(Qt::UserRole).toLongLong()) ? Qt::Checked
                                                                              : Qt::Unchecked);
    }
    fillMetrics();
    loadCurves(false);
}

bool CurvesView::showMetric(const QString& key) {
    const int i = metric_->findText(key);
    if (i < 0) return false;
    metric_->setCurrentIndex(i);  // loads the curves when it changes
    return true;
}

QString CurvesView::rawDataCsv() {
    if (curves_.empty()) return {};
    const QString key = csvField(metric_->currentText());
    QString out = "run,metric,step,value,wall_time\n";
    for (const auto& [id, c] : curves_) {
        const QString run = csvField(c.name);
        for (size_t i = 0; i < c.step.size(); ++i)
            out +=
                QString("%1,%2,%3,%4,%5\n")
                    .arg(run, key, QString::number(std::int64_t(c.step[i])),
                         QString::number(c.value[i], 'g', 17), QString::number(c.wall[i], 'f', 3));
    }
    return out;
}

void CurvesView::loadCurves(bool onlyNew) {
    if (!store_) return;
    const std::string key = metric_->currentText().toStdString();
    bool changed = false;
    try {
        std::set<qint64> checked;
        for (int i = 0; i < runs_->count(); ++i)
            if (runs_->item(i)->checkState() == Qt::Checked)
                checked.insert(runs_->item(i)->data(Qt::UserRole).toLongLong());
        if (!onlyNew) {
            curves_.clear();
            changed = true;
        }
        for (qint64 id : checked) {
            auto [it, inserted] = curves_.try_emplace(id);
            RunCurve& c = it->second;
            if (inserted) {
                const auto run = store_->get_run(id);
                if (!run) continue;
                c.id = id;
                c.name = QString::fromStdString(run->name);
                c.status = QString::fromStdString(run->status);
            } else if (c.status != "running" && c.status != "pending") {
                continue;  // a finished run's curve does not grow
            } else if (const auto run = store_->get_run(id)) {
                c.status = QString::fromStdString(run->status);
            }
            // The floor params arrive with the first evaluation; the final loss grows.
            c.floor = readLossFloor(*store_, id);
            const auto points = store_->metrics(id, key, c.lastStep);
            for (const auto& p : points) {
                c.step.push_back(double(p.step));
                c.value.push_back(p.value);
                c.wall.push_back(p.wall_time);
                c.lastStep = p.step;
            }
            const auto tokens =
                store_->metrics(id, "train/tokens",
                                c.tokenStep.empty() ? std::numeric_limits<std::int64_t>::min()
                                                    : std::int64_t(c.tokenStep.back()));
            for (const auto& p : tokens) {
                c.tokenStep.push_back(double(p.step));
                c.tokens.push_back(p.value);
            }
            changed = changed || inserted || !points.empty();
        }
        for (auto it = curves_.begin(); it != curves_.end();)
            it = checked.count(it->first) ? std::next(it) : (changed = true, curves_.erase(it));
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
    if (!changed) return;
    // Baseline choices follow the plotted runs; keep the choice when it is still there.
    const QString base = baseline_->currentText();
    {
        QSignalBlocker block(baseline_);
        baseline_->clear();
        baseline_->addItem("(none)");
        for (const auto& [id, c] : curves_)
            baseline_->addItem(c.name, QVariant::fromValue<qlonglong>(id));
        const int i = baseline_->findText(base);
        baseline_->setCurrentIndex(i >= 0 ? i : (baseline_->count() > 1 ? 1 : 0));
    }
    rebuild();
}

std::vector<double> CurvesView::xOf(const RunCurve& c) const {
    std::vector<double> x(c.step.size());
    for (size_t i = 0; i < x.size(); ++i) {
        switch (xAxis_->currentIndex()) {
            case 1: x[i] = interpolate(c.tokenStep, c.tokens, c.step[i]); break;
            case 2: x[i] = (c.wall[i] - c.wall.front()) / 60.0; break;
            default: x[i] = c.step[i];
        }
    }
    return x;
}

void CurvesView::rebuild() {
    smoothLabel_->setText(QString::number(smoothing(), 'f', 2));
    plot_->clearGraphs();
    plot_->clearItems();
    const QString key = metric_->currentText();
    const bool lower = lowerIsBetter(key.toStdString());
    const double w = smoothing();
    plot_->xAxis->setLabel(xAxis_->currentText());
    plot_->yAxis->setLabel(key + (w > 0 ? QString(" (EMA %1)").arg(w, 0, 'f', 2) : QString()));
    const bool log = logY_->isChecked();
    plot_->yAxis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    plot_->yAxis->setTicker(log ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                                : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));

    // Group runs that differ only by seed; a group of one is drawn as its run.
    std::vector<Curve> all;
    std::map<std::string, int> groupSize;
    for (const auto& [id, c] : curves_) {
        Curve cv{c.name.toStdString(), seedGroupKey(c.name.toStdString()), xOf(c), c.value};
        ++groupSize[cv.groupKey];
        all.push_back(std::move(cv));
    }
    int colour = 0;
    auto markersFor = [&](const std::vector<double>& x, const std::vector<double>& y, QColor col,
                          const QString& owner) {
        if (!markers_->isChecked() || y.empty()) return;
        size_t imin = 0;
        for (size_t i = 0; i < y.size(); ++i)
            if (std::isfinite(y[i]) && (!std::isfinite(y[imin]) || y[i] < y[imin])) imin = i;
        for (const auto& [i, shape] : {std::pair{imin, QCPScatterStyle::ssTriangleInverted},
                                       std::pair{y.size() - 1, QCPScatterStyle::ssDisc}}) {
            QCPGraph* m = plot_->addGraph();
            m->setLineStyle(QCPGraph::lsNone);
            m->setScatterStyle(QCPScatterStyle(shape, col, col, 8));
            m->setData(QVector<double>{x[i]}, QVector<double>{y[i]});
            m->removeFromLegend();
            m->setProperty("owner", owner);
            m->setProperty("marker", true);
        }
    };
    std::map<QString, std::pair<std::vector<double>, std::vector<double>>>
        smoothedBy;                          // for the readout
    std::map<QString, QString> seriesOfRun;  // run name -> the series that draws it (its group)
    if (groupSeeds_->isChecked()) {
        std::vector<Curve> grouped;
        for (const Curve& c : all)
            if (groupSize[c.groupKey] > 1) grouped.push_back(c);
        for (const SeedGroup& g : groupBySeed(grouped)) {
            const QColor col = curveColour(colour++);
            const QString name = QString::fromStdString(g.key) +
                                 QString(" (n=%1)").arg(*std::max_element(g.n.begin(), g.n.end()));
            for (const Curve& c : grouped)
                if (c.groupKey == g.key) seriesOfRun[QString::fromStdString(c.label)] = name;
            const auto mean = emaDebiased(g.mean, w);
            std::vector<double> hi(g.x.size()), lo(g.x.size());
            for (size_t i = 0; i < g.x.size(); ++i)
                hi[i] = mean[i] + g.stddev[i], lo[i] = mean[i] - g.stddev[i];
            QColor band = col;
            band.setAlpha(50);
            QCPGraph* lower = addGraph(plot_, g.x, lo, QPen(band), name + " -std");
            QCPGraph* upper = addGraph(plot_, g.x, hi, QPen(band), name + " +std");
            upper->setBrush(band);
            upper->setChannelFillGraph(lower);
            lower->removeFromLegend();
            upper->removeFromLegend();
            lower->setProperty("owner", name);
            upper->setProperty("owner", name);
            addGraph(plot_, g.x, mean, QPen(col, 2), name)->setProperty("main", true);
            markersFor(g.x, mean, col, name);
            smoothedBy[name] = {g.x, mean};
        }
    }
    for (const Curve& c : all) {
        if (groupSeeds_->isChecked() && groupSize[c.groupKey] > 1) continue;
        const QColor col = curveColour(colour++);
        const QString name = QString::fromStdString(c.label);
        const auto smooth = emaDebiased(c.y, w);
        if (w > 0) {
            QColor faint = col;
            faint.setAlpha(70);
            QCPGraph* raw = addGraph(plot_, c.x, c.y, QPen(faint, 1), name + " (raw)");
            raw->removeFromLegend();
            raw->setProperty("owner", name);
        }
        addGraph(plot_, c.x, smooth, QPen(col, 2), name)->setProperty("main", true);
        markersFor(c.x, smooth, col, name);
        // The readout works in steps whatever the x axis shows.
        std::vector<double> steps;
        for (const auto& [id, rc] : curves_)
            if (rc.name == name) steps = rc.step;
        smoothedBy[name] = {steps, smooth};
    }
    readout_->setText(readoutText(key, lower, smoothedBy, seriesOfRun));
    QStringList warnings;
    for (const auto& [id, c] : curves_)
        if (const QString w = floorWarning(c.name, c.floor); !w.isEmpty()) warnings << w;
    warnings_->setText(warnings.join("\n"));
    warnings_->setVisible(!warnings.isEmpty());
    addFloorLines(key);
    plot_->rescaleAxes();
    // A little room so the min/last markers at the edges are not cut in half.
    plot_->xAxis->scaleRange(1.03, plot_->xAxis->range().center());
    if (!log) plot_->yAxis->scaleRange(1.05, plot_->yAxis->range().center());
    if (log && plot_->yAxis->range().lower <= 0) plot_->yAxis->setRangeLower(1e-6);
    throttle_->request();
}

QString CurvesView::readoutText(
    const QString& key, bool lower,
    const std::map<QString, std::pair<std::vector<double>, std::vector<double>>>& smoothedBy,
    const std::map<QString, QString>& seriesOfRun) const {
    // The baseline is a run; when it is drawn as part of a seed group, the group is the baseline.
    const QString base = seriesOfRun.count(baseline_->currentText())
                             ? seriesOfRun.at(baseline_->currentText())
                             : baseline_->currentText();
    const auto it = smoothedBy.find(base);
    if (it == smoothedBy.end() || it->second.second.empty())
        return curves_.empty() ? "Check runs on the left to plot them."
                               : "Choose a baseline to see how many steps the others need to "
                                 "reach its final value.";
    // A loss curve of a run that learned nothing (its final validation loss not 0.1 nats below
    // its unigram floor) makes "steps to reach" a race between two plateaus: withheld.
    auto seriesOf = [&](const QString& run) {
        return seriesOfRun.count(run) ? seriesOfRun.at(run) : run;
    };
    std::map<QString, QStringList> flat;  // series -> runs on their floor
    if (key.contains("loss"))
        for (const auto& [id, c] : curves_)
            if (!floorWarning(c.name, c.floor).isEmpty()) flat[seriesOf(c.name)] << c.name;
    const double target = it->second.second.back(), baseSteps = it->second.first.back();
    QString text = QString("Steps to reach %1's final %2 (%3 at step %4, smoothed):")
                       .arg(base, key)
                       .arg(target, 0, 'g', 4)
                       .arg(baseSteps);
    if (flat.count(base))
        return text + QString(
                          "  withheld: the baseline %1 learned nothing (%2 ends within 0.1 "
                          "nats of its unigram floor, see below), so reaching its final value "
                          "measures no speed.")
                          .arg(base, flat.at(base).join(", "));
    for (const auto& [name, xy] : smoothedBy) {
        if (name == base) continue;
        const Reach r = reachOf(xy.first, xy.second, target, lower);
        if (flat.count(name))
            text += QString(
                        "  %1: withheld, it learned nothing (ends within 0.1 nats of its "
                        "unigram floor).")
                        .arg(name);
        else if (!r.reached())
            text += QString("  %1: not reached.").arg(name);
        else if (!r.kept())
            text += QString(
                        "  %1: withheld, it reaches the value at step %2 but is back past it "
                        "at step %3: a crossing the curve does not keep.")
                        .arg(name)
                        .arg(r.first)
                        .arg(r.leftAgain);
        else
            text += QString("  %1: step %2 (%3% of the baseline's steps).")
                        .arg(name)
                        .arg(r.first)
                        .arg(100.0 * r.first / baseSteps, 0, 'f', 0);
    }
    return text;
}

void CurvesView::addFloorLines(const QString& key) {
    if (key != "validation/loss" && key != "train/loss") return;
    // The x extent of the plotted curves, for lines that span them.
    double x0 = INFINITY, x1 = -INFINITY;
    for (int i = 0; i < plot_->graphCount(); ++i) {
        bool found = false;
        const QCPRange r = plot_->graph(i)->getKeyRange(found);
        if (found) x0 = std::min(x0, r.lower), x1 = std::max(x1, r.upper);
    }
    if (!std::isfinite(x0)) return;
    std::vector<std::pair<QString, double>> unigram, bigram, contextFree;
    for (const auto& [id, c] : curves_) {
        if (c.floor.hasUnigram) unigram.emplace_back(c.name, c.floor.unigram);
        if (c.floor.hasContextFree) contextFree.emplace_back(c.name, c.floor.contextFree);
        if (c.floor.hasBigram) bigram.emplace_back(c.name, c.floor.bigram);
    }
    auto draw = [&](const std::vector<FloorLine>& lines, const QString& what, Qt::PenStyle style) {
        for (const FloorLine& l : lines) {
            QString name = QString("%1 %2").arg(what).arg(l.value, 0, 'f', 3);
            if (lines.size() > 1) name += " (" + l.runs.join(", ") + ")";
            QCPGraph* g = plot_->addGraph();
            g->setPen(QPen(QColor(90, 90, 90), 1.5, style));
            g->setName(name);
            g->setData(QVector<double>{x0, x1}, QVector<double>{l.value, l.value});
            g->setProperty("floor", true);
        }
    };
    if (floor_->isChecked()) {
        draw(mergeFloorLines(unigram), "unigram floor", Qt::DashLine);
        draw(mergeFloorLines(contextFree), "context-free floor", Qt::DashDotLine);
    }
    if (bigram_->isChecked()) draw(mergeFloorLines(bigram), "bigram ref.", Qt::DotLine);
}

void CurvesView::onMouseMove(QMouseEvent* event) {
    const double x = plot_->xAxis->pixelToCoord(event->position().x());
    QStringList lines;
    for (int i = 0; i < plot_->graphCount(); ++i) {
        QCPGraph* g = plot_->graph(i);
        if (!g->property("main").toBool() || !g->visible() || g->data()->isEmpty()) continue;
        auto it = g->data()->findBegin(x, true);
        if (it == g->data()->constEnd()) continue;
        // findBegin gives the point at or before x; take the nearer of it and the next one.
        auto next = it + 1;
        if (next != g->data()->constEnd() && std::abs(next->key - x) < std::abs(it->key - x))
            it = next;
        lines << QString("%1: %2 @ %3")
                     .arg(g->name())
                     .arg(it->value, 0, 'g', 5)
                     .arg(it->key, 0, 'g', 6);
    }
    if (lines.isEmpty() || !plot_->axisRect()->rect().contains(event->pos()))
        QToolTip::hideText();
    else
        QToolTip::showText(event->globalPosition().toPoint(), lines.join("\n"), plot_);
}

void CurvesView::prepareScreenshot() {
    const int i = metric_->findText("train/loss");
    if (i >= 0) metric_->setCurrentIndex(i);
    // bert-a, or its first seed ("bert-a@seed1") when pretraining has several.
    int b = baseline_->findText("bert-a");
    if (b < 0) b = baseline_->findText("bert-a@", Qt::MatchStartsWith);
    if (b >= 0) baseline_->setCurrentIndex(b);
    bigram_->setChecked(true);
    rebuild();
    plot_->replot();
}

}  // namespace app
