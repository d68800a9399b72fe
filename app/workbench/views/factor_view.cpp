// The factor view (see factor_view.h).
#include "views/factor_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>

#include "analysis/text_format.h"
#include "core/factor_data.h"
#include "views/parallel_coordinates.h"

namespace app {

namespace {

QString factorText(const std::string& s) { return QString::fromStdString(s); }

QString numberText(double v, int digits) {
    return std::isfinite(v) ? QString::number(v, 'f', digits) : QString("\u2013");
}

int digitsFor(const experiments::FactorMetric* m) {
    return m && m->title.find("(%)") != std::string::npos ? 2 : 4;
}

// The colours of split-by levels in the main-effects panels.
QColor levelColour(int i) {
    static const QColor colours[] = {QColor(31, 119, 180),  QColor(255, 127, 14),
                                     QColor(44, 160, 44),   QColor(214, 39, 40),
                                     QColor(148, 103, 189), QColor(140, 86, 75)};
    return colours[i % 6];
}

const int kSortRole = Qt::UserRole + 1;

}  // namespace

void RunFilterModel::setAccepted(const std::set<qint64>& ids) {
    accepted_ = ids;
    invalidateFilter();
}

bool RunFilterModel::filterAcceptsRow(int row, const QModelIndex& parent) const {
    const QModelIndex index = sourceModel()->index(row, 0, parent);
    return accepted_.count(sourceModel()->data(index, Qt::UserRole).toLongLong()) > 0;
}

FactorView::FactorView(QWidget* parent)
    : WorkbenchView(parent),
      experiment_(new QComboBox),
      metric_(new QComboBox),
      within_(new QComboBox),
      interA_(new QComboBox),
      interB_(new QComboBox),
      clear_(new QPushButton("Clear brushes")),
      summary_(new QLabel),
      parallel_(new ParallelCoordinatesPlot),
      effectsPlot_(new QCustomPlot),
      interaction_(new HeatmapPlot),
      model_(new QStandardItemModel(this)),
      proxy_(new RunFilterModel(this)),
      tableView_(new QTableView) {
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    effectsPlot_->setMinimumSize(300, 200);
    proxy_->setSourceModel(model_);
    proxy_->setSortRole(kSortRole);
    tableView_->setModel(proxy_);
    tableView_->setSortingEnabled(true);
    tableView_->setSelectionBehavior(QAbstractItemView::SelectRows);
    tableView_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    tableView_->verticalHeader()->setVisible(false);
    auto* middle = new QSplitter(Qt::Horizontal);
    middle->addWidget(effectsPlot_);
    middle->addWidget(interaction_);
    middle->setStretchFactor(0, 3);
    middle->setStretchFactor(1, 2);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(parallel_);
    split->addWidget(middle);
    split->addWidget(tableView_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 2);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(buildControls());
    layout->addWidget(summary_);
    layout->addWidget(split, 1);
    connect(parallel_, &ParallelCoordinatesPlot::brushesChanged, this, &FactorView::applyFilter);
    connect(parallel_, &ParallelCoordinatesPlot::runClicked, this,
            [this](qint64 id) { emit runsChosen({id}); });
    connect(tableView_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
        const QModelIndex first = proxy_->index(index.row(), 0);
        emit runsChosen({proxy_->data(first, Qt::UserRole).toLongLong()});
    });
}

QWidget* FactorView::buildControls() {
    auto* bar = new QWidget;
    auto* h = new QHBoxLayout(bar);
    h->setContentsMargins(0, 0, 0, 0);
    experiment_->setObjectName("experiment");
    metric_->setObjectName("metric");
    within_->setObjectName("within");
    metric_->setToolTip("The metric the lines are coloured by and the effects are measured on");
    within_->setToolTip("Pooled over the other factors, or split by the levels of one");
    for (auto [label, box] :
         std::initializer_list<std::pair<const char*, QComboBox*>>{{"experiment", experiment_},
                                                                   {"metric", metric_},
                                                                   {"effects", within_},
                                                                   {"interaction", interA_},
                                                                   {"x", interB_}}) {
        h->addWidget(new QLabel(label));
        h->addWidget(box);
    }
    h->addWidget(clear_);
    h->addStretch(1);
    connect(experiment_, qOverload<int>(&QComboBox::currentIndexChanged), this,
            &FactorView::loadExperiment);
    for (QComboBox* box : {metric_, within_, interA_, interB_})
        connect(box, qOverload<int>(&QComboBox::currentIndexChanged), this,
                &FactorView::showMetric);
    connect(clear_, &QPushButton::clicked, parallel_, &ParallelCoordinatesPlot::clearBrushes);
    return bar;
}

void FactorView::setStore(experiments::ResultStore* store, const QString&) {
    store_ = store;
    const QString current = fillExperimentPicker(experiment_, store);
    if (const int i = experiment_->findText(current); i >= 0) {
        const QSignalBlocker block(experiment_);
        experiment_->setCurrentIndex(i);
    }
    loadExperiment();
}

bool FactorView::showExperiment(const QString& name) {
    const int i = experiment_->findText(name);
    if (i < 0) return false;
    if (i == experiment_->currentIndex())
        loadExperiment();
    else
        experiment_->setCurrentIndex(i);
    return table_.has_value();
}

void FactorView::loadExperiment() {
    table_.reset();
    if (store_ && experiment_->count() > 0) {
        try {
            table_ =
                experiments::load_factor_table(*store_, experiment_->currentText().toStdString());
        } catch (const std::exception& e) {
            summary_->setText(QString::fromUtf8(e.what()));
        }
    }
    fillPickers();
    showMetric();
}

void FactorView::fillPickers() {
    const QString metric = metric_->currentData().toString();
    const QSignalBlocker b1(metric_), b2(within_), b3(interA_), b4(interB_);
    metric_->clear(), within_->clear(), interA_->clear(), interB_->clear();
    if (!table_) return;
    for (const auto& m : table_->metrics) metric_->addItem(factorText(m.title), factorText(m.key));
    const int keep = metric_->findData(metric);
    metric_->setCurrentIndex(keep >= 0 ? keep : std::max(0, metric_->findData("val_loss")));
    within_->addItem("pooled over the other factors", QString());
    for (const auto& f : table_->factors) {
        within_->addItem("within each level of " + factorText(f.key), factorText(f.key));
        interA_->addItem(factorText(f.key));
        interB_->addItem(factorText(f.key));
    }
    if (interB_->count() > 1) interB_->setCurrentIndex(1);
}

void FactorView::showMetric() {
    if (!table_) {
        parallel_->setData({}, {}, {}, {});
        effectsPlot_->clearPlottables();
        effectsPlot_->replot();
        interaction_->clearWithMessage("no experiment");
        model_->clear();
        return;
    }
    const QString metric = metric_->currentData().toString();
    try {
        effects_ = experiments::main_effects(*table_, metric.toStdString(),
                                             within_->currentData().toString().toStdString());
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
        return;
    }
    QStringList axisMetrics;
    for (const QString& key : {QString("val_loss"), QString("task_avg"),
                               QString("positional_share"), QString("ablation_delta"), metric})
        if (!axisMetrics.contains(key) && table_->find_metric(key.toStdString()))
            axisMetrics << key;
    QList<qint64> ids;
    QStringList names;
    for (const auto& r : table_->runs) ids << r.run_id, names << factorText(r.name);
    parallel_->setData(parallelAxes(*table_, axisMetrics), ids, names, runColours(*table_, metric));
    drawEffects();
    drawInteraction();
    fillTable();
    applyFilter();
}

void FactorView::drawEffects() {
    QCustomPlot* p = effectsPlot_;
    p->clearPlottables();
    p->plotLayout()->clear();
    const auto* m = table_->find_metric(effects_.metric);
    const int digits = digitsFor(m);
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& e : effects_.effects)
        for (const auto& l : e.levels)
            for (double v : {l.mean, l.lo, l.hi})
                if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(lo < hi)) lo -= 0.5, hi += 0.5;
    const double pad = 0.08 * (hi - lo);
    QCPLegend* legend = nullptr;
    int column = 0;
    for (size_t f = 0; f < table_->factors.size(); ++f) {
        const QString key = factorText(table_->factors[f].key);
        std::vector<const experiments::MainEffect*> mine;
        for (const auto& e : effects_.effects)
            if (factorText(e.factor) == key) mine.push_back(&e);
        if (mine.empty()) continue;
        auto* rect = new QCPAxisRect(p);
        p->plotLayout()->addElement(0, column++, rect);
        QCPAxis* x = rect->axis(QCPAxis::atBottom);
        QCPAxis* y = rect->axis(QCPAxis::atLeft);
        auto ticker = QSharedPointer<QCPAxisTickerText>::create();
        const auto& levels = table_->factors[f].levels;
        for (size_t i = 0; i < levels.size(); ++i)
            ticker->addTick(double(i), factorText(levels[i]));
        x->setTicker(ticker);
        x->setRange(-0.5, levels.size() - 0.5);
        y->setRange(lo - pad, hi + pad);
        QString label = key.section('.', -1);
        if (mine.size() == 1 && mine[0]->contrast.valid)
            label += QString("\n\u0394 %1 [%2, %3]")
                         .arg(numberText(mine[0]->contrast.estimate, digits),
                              numberText(mine[0]->contrast.lo, digits),
                              numberText(mine[0]->contrast.hi, digits));
        x->setLabel(label);
        if (column == 1) y->setLabel(m ? factorText(m->title) : QString());
        for (size_t k = 0; k < mine.size(); ++k) {
            const double offset =
                mine.size() > 1 ? (double(k) - (mine.size() - 1) / 2.0) * 0.12 : 0;
            QVector<double> xs, ys, minus, plus;
            for (size_t i = 0; i < mine[k]->levels.size(); ++i) {
                const auto& l = mine[k]->levels[i];
                if (!std::isfinite(l.mean)) continue;
                xs << double(i) + offset, ys << l.mean;
                minus << (std::isfinite(l.lo) ? l.mean - l.lo : 0);
                plus << (std::isfinite(l.hi) ? l.hi - l.mean : 0);
            }
            const QColor colour = levelColour(int(k));
            QCPGraph* g = p->addGraph(x, y);
            g->setData(xs, ys);
            g->setPen(QPen(colour, 2));
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, colour, colour, 7));
            g->setName(mine[k]->within_factor.empty()
                           ? QString("pooled")
                           : factorText(mine[k]->within_factor).section('.', -1) + "=" +
                                 factorText(mine[k]->within_level));
            auto* bars = new QCPErrorBars(x, y);
            bars->setDataPlottable(g);
            bars->setData(minus, plus);
            bars->setPen(QPen(colour, 1.5));
            if (mine.size() > 1 && column == 1) {
                if (!legend) {
                    legend = new QCPLegend;
                    p->plotLayout()->addElement(1, 0, legend);
                    legend->setFont(QFont(font().family(), 8));
                    p->plotLayout()->setRowStretchFactor(1, 0.001);
                }
                g->addToLegend(legend);
            }
        }
    }
    p->replot();
}

}  // namespace app
