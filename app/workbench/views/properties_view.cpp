// The Properties tab (see properties_view.h).
#include "views/properties_view.h"

#include <QEvent>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QSplitter>
#include <QThread>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "core/microscope_data.h"

namespace app {

namespace {

/// A title row above a QCustomPlot's axis rect.
QCPTextElement* addTitle(QCustomPlot* plot) {
    plot->plotLayout()->insertRow(0);
    auto* title = new QCPTextElement(plot, "", QFont(plot->font().family(), 10, QFont::Bold));
    plot->plotLayout()->addElement(0, 0, title);
    return title;
}

/// A label above a widget, in one column.
QWidget* withHeader(QLayout* header, QWidget* body) {
    auto* w = new QWidget;
    auto* v = new QVBoxLayout(w);
    v->setContentsMargins(0, 0, 0, 0);
    if (header) v->addLayout(header);
    v->addWidget(body, 1);
    return w;
}

const QColor kBlue(31, 119, 180), kGreen(44, 160, 44), kRed(214, 39, 40);

}  // namespace

PropertiesView::PropertiesView(QWidget* parent)
    : WorkbenchView(parent),
      experiment_(new QComboBox),
      layer_(new QComboBox),
      head_(new QComboBox),
      mapKind_(new QComboBox),
      scatterProperty_(new QComboBox),
      scatterScore_(new QComboBox),
      status_(new QLabel),
      tableView_(new QTableView),
      model_(new PropertyTableModel(this)),
      map_(new HeatmapPlot),
      spectrum_(makePlot(nullptr)),
      scatter_(makePlot(nullptr)),
      headProperty_(new QComboBox),
      headScatter_(makePlot(nullptr)),
      extrapolation_(new QLabel) {
    mapKind_->addItem("\u0394pos (true positions minus all positions equal)", "delta_pos");
    mapKind_->addItem("static positional logit (TUPE, T5, ALiBi, BERT-Ad, tables)", "static_pos");
    status_->setWordWrap(true);
    auto* bar = new QHBoxLayout;
    for (QComboBox* c : {layer_, head_}) c->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    bar->addWidget(new QLabel("Experiment"));
    bar->addWidget(experiment_, 1);
    bar->addWidget(new QLabel("Layer"));
    bar->addWidget(layer_);
    bar->addWidget(new QLabel("Head"));
    bar->addWidget(head_);
    bar->addWidget(status_, 3);

    tableView_->setModel(model_);
    tableView_->setSelectionMode(QAbstractItemView::SingleSelection);
    tableView_->setSelectionBehavior(QAbstractItemView::SelectItems);
    tableView_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    tableView_->horizontalHeader()->setDefaultAlignment(Qt::AlignRight | Qt::AlignVCenter);
    tableView_->setToolTip(
        "Click a cell: its \u0394pos map, the layer's spectrum and the run's extrapolation. "
        "Each column has its own colour scale (diverging, 0 white, when it has both signs).");

    auto* mapBar = new QHBoxLayout;
    mapBar->addWidget(new QLabel("Map"));
    mapBar->addWidget(mapKind_, 1);
    map_->clearWithMessage("click a cell of the table");

    spectrumTitle_ = addTitle(spectrum_);
    spectrum_->yAxis->setScaleType(QCPAxis::stLogarithmic);
    spectrum_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    spectrum_->yAxis->setNumberFormat("eb");
    spectrum_->yAxis->setNumberPrecision(0);
    QSharedPointer<QCPAxisTickerFixed> integers(new QCPAxisTickerFixed);
    integers->setTickStep(1.0);
    integers->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    spectrum_->xAxis->setTicker(integers);
    spectrum_->xAxis->setLabel("singular value index");
    spectrum_->yAxis->setLabel("singular value");
    spectrum_->legend->setVisible(true);
    spectrum_->legend->setFont(QFont(font().family(), 8));

    scatterTitle_ = addTitle(scatter_);
    auto* scatterBar = new QHBoxLayout;
    scatterBar->addWidget(new QLabel("Property"));
    scatterBar->addWidget(scatterProperty_, 1);
    scatterBar->addWidget(new QLabel("against"));
    scatterBar->addWidget(scatterScore_, 1);

    headScatterTitle_ = addTitle(headScatter_);
    headProperty_->addItem(kAblationShare);
    headProperty_->addItems(propertyNames());
    headProperty_->setToolTip(
        "per head of the selected run: this property (x) against the change in masked-token "
        "loss when the head's positional term is removed (y, tupe ablate)");
    auto* headBar = new QHBoxLayout;
    headBar->addWidget(new QLabel("Per head"));
    headBar->addWidget(headProperty_, 1);
    headBar->addWidget(new QLabel("against Δ loss"));

    extrapolation_->setAlignment(Qt::AlignCenter);
    extrapolation_->setWordWrap(true);
    extrapolation_->setMinimumSize(220, 160);
    // Ignored: the pixmap's size must not grow the splitter (it is scaled to the label).
    extrapolation_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
    extrapolation_->installEventFilter(this);
    auto* extrapolationBar = new QHBoxLayout;
    extrapolationBar->addWidget(new QLabel("Extrapolation (tupe extrapolate)"));

    auto* top = new QSplitter(Qt::Horizontal);
    top->addWidget(tableView_);
    top->addWidget(withHeader(mapBar, map_));
    top->setStretchFactor(0, 3);
    top->setStretchFactor(1, 2);
    auto* bottom = new QSplitter(Qt::Horizontal);
    bottom->addWidget(spectrum_);
    bottom->addWidget(withHeader(scatterBar, scatter_));
    bottom->addWidget(withHeader(headBar, headScatter_));
    bottom->addWidget(withHeader(extrapolationBar, extrapolation_));
    bottom->setSizes({340, 420, 420, 320});
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(top);
    split->addWidget(bottom);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    connect(experiment_, &QComboBox::currentIndexChanged, this, &PropertiesView::reload);
    connect(layer_, &QComboBox::currentIndexChanged, this, &PropertiesView::rebuildTable);
    connect(head_, &QComboBox::currentIndexChanged, this, &PropertiesView::rebuildTable);
    connect(mapKind_, &QComboBox::currentIndexChanged, this, &PropertiesView::drawMap);
    connect(scatterScore_, &QComboBox::currentIndexChanged, this, &PropertiesView::drawScatter);
    connect(headProperty_, &QComboBox::currentIndexChanged, this, &PropertiesView::drawHeadScatter);
    connect(scatterProperty_, &QComboBox::currentIndexChanged, this, [this](int col) {
        const int row = selectedRow();
        if (row >= 0 && col >= 0) tableView_->setCurrentIndex(model_->index(row, col));
        drawScatter();
    });
    connect(tableView_->selectionModel(), &QItemSelectionModel::currentChanged, this,
            [this](const QModelIndex& current) {
                if (current.isValid()) {
                    selectedRunId_ = table().runIds[size_t(current.row())];
                    QSignalBlocker block(scatterProperty_);
                    scatterProperty_->setCurrentIndex(current.column());
                }
                showSelection();
            });
    rebuildTable();
}

PropertiesView::~PropertiesView() {
    // The worker touches no widget, but its result lambda needs this view: wait for it.
    if (worker_) worker_->wait();
}

void PropertiesView::setStore(experiments::ResultStore* store, const QString& dbPath) {
    dbPath_ = dbPath;
    haveStore_ = store != nullptr;
    const QString current = fillExperimentPicker(experiment_, store);
    {
        QSignalBlocker block(experiment_);
        experiment_->insertItem(0, "all experiments", QVariant::fromValue<qlonglong>(-1));
        const int i = experiment_->findText(current);
        experiment_->setCurrentIndex(std::max(0, i));
    }
    reload();
}

void PropertiesView::reload() {
    if (!haveStore_) {
        collectionArrived({});
        status_->setText("No database open.");
        return;
    }
    if (worker_) {  // one read at a time; the latest choice wins
        reloadAgain_ = true;
        return;
    }
    status_->setText("reading the runs' analyses...");
    const QString db = dbPath_;
    const QString experiment = experiment_->currentIndex() > 0 ? experiment_->currentText() : "";
    auto result = std::make_shared<PropertyCollection>();
    // Its own read-only connection: a ResultStore is one SQLite connection, one thread.
    worker_ =
        QThread::create([result, db, experiment] { *result = collectProperties(db, experiment); });
    worker_->setParent(this);
    connect(worker_, &QThread::finished, this, [this, result] {
        worker_->deleteLater();
        worker_ = nullptr;
        if (reloadAgain_) {
            reloadAgain_ = false;
            reload();
            return;
        }
        collectionArrived(std::move(*result));
    });
    worker_->start();
}

void PropertiesView::collectionArrived(PropertyCollection collection) {
    data_ = std::move(collection);
    if (!data_.errors.isEmpty())
        emit errorRaised(
            data_.errors.front() +
            (data_.errors.size() > 1
                 ? QString(" (and %1 more analysis errors)").arg(data_.errors.size() - 1)
                 : QString()));
    fillPickers();
    rebuildTable();
    if (data_.runs.empty())
        status_->setText(
            "No run here has positional properties: they come from `tupe analyze` (the analysis "
            "block of an experiment, or `tupe analyze CKPT --db ...`) recorded in the store.");
    else
        status_->setText(QString("%1 runs with properties, %2 layers x %3 heads; %4 task scores")
                             .arg(data_.runs.size())
                             .arg(data_.layers())
                             .arg(data_.heads())
                             .arg(data_.scores.columns.isEmpty()
                                      ? QString("no")
                                      : QString::number(data_.scores.columns.size())));
    emit loaded();
}

void PropertiesView::fillPickers() {
    QSignalBlocker b1(layer_), b2(head_), b3(scatterScore_);
    const int layer = layer_->currentData().isValid() ? layer_->currentData().toInt() : 0;
    const int head = head_->currentData().isValid() ? head_->currentData().toInt() : -1;
    const QString score = scatterScore_->currentText();
    layer_->clear();
    for (int l = 0; l < std::max(1, data_.layers()); ++l)
        layer_->addItem(QString("layer %1").arg(l), l);
    layer_->setCurrentIndex(std::max(0, layer_->findData(layer)));
    head_->clear();
    head_->addItem("mean of heads", -1);
    for (int h = 0; h < data_.heads(); ++h) head_->addItem(QString("head %1").arg(h), h);
    head_->setCurrentIndex(std::max(0, head_->findData(head)));
    scatterScore_->clear();
    scatterScore_->addItems(data_.scores.columns);
    int s = scatterScore_->findText(score);
    if (s < 0) s = scatterScore_->findText("Avg");
    scatterScore_->setCurrentIndex(std::max(0, s));
}

void PropertiesView::rebuildTable() {
    const int layer = layer_->currentData().isValid() ? layer_->currentData().toInt() : 0;
    const int head = head_->currentData().isValid() ? head_->currentData().toInt() : -1;
    model_->setTable(buildPropertyTable(data_.runs, layer, head));
    tableView_->resizeColumnsToContents();
    const PropertyTable& t = table();
    {
        QSignalBlocker block(scatterProperty_);
        const QString keep = scatterProperty_->currentText();
        scatterProperty_->clear();
        scatterProperty_->addItems(t.columns);
        const int i = scatterProperty_->findText(keep.isEmpty() ? "positional_share" : keep);
        scatterProperty_->setCurrentIndex(std::max(0, i));
    }
    if (t.rows() == 0) {
        showSelection();
        return;
    }
    int row = 0;
    for (int r = 0; r < t.rows(); ++r)
        if (t.runIds[size_t(r)] == selectedRunId_) row = r;
    if (preferAblation_)
        for (int r = t.rows() - 1; r >= 0; --r) {
            const auto& ablation = data_.runs[size_t(t.runIndex[size_t(r)])].ablation;
            if (ablation && !ablation->heads.empty()) row = r;
        }
    // The model was reset, so this moves the current cell and showSelection() follows.
    tableView_->setCurrentIndex(model_->index(row, std::max(0, scatterProperty_->currentIndex())));
}

int PropertiesView::selectedRow() const {
    const QModelIndex i = tableView_->currentIndex();
    return i.isValid() && i.row() < table().rows() ? i.row() : -1;
}

const PropertyRun* PropertiesView::selectedRun() const {
    const int row = selectedRow();
    if (row < 0) return nullptr;
    const int index = table().runIndex[size_t(row)];
    return index >= 0 && size_t(index) < data_.runs.size() ? &data_.runs[size_t(index)] : nullptr;
}

QString PropertiesView::headName() const {
    return table().head < 0 ? QString("mean of heads") : QString("head %1").arg(table().head);
}

void PropertiesView::showSelection() {
    drawMap();
    drawSpectrum();
    showExtrapolation();
    drawScatter();
    drawHeadScatter();
}

void PropertiesView::drawHeadScatter() {
    headScatter_->clearGraphs();
    headScatter_->clearItems();
    const PropertyRun* run = selectedRun();
    if (!run || !run->ablation) {
        headScatterTitle_->setText(run ? run->name + ": no ablation stored (analysis.ablation)"
                                       : QString("per head against Δ loss: click a row"));
        headScatter_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    if (run->ablation->heads.empty()) {
        headScatterTitle_->setText(QString("%1: the ablation has no per-head rows (%2)")
                                       .arg(run->name, run->ablation->scope.isEmpty()
                                                           ? QString("whole model only")
                                                           : run->ablation->scope));
        headScatter_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const QString property = headProperty_->currentText();
    const HeadScatter hs = headScatter(*run->ablation, run->analysis.get(), property);
    QCPGraph* heads = headScatter_->addGraph();
    heads->setLineStyle(QCPGraph::lsNone);
    heads->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, kBlue, 7));
    QCPGraph* selected = headScatter_->addGraph();
    selected->setLineStyle(QCPGraph::lsNone);
    selected->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(kRed, 2), Qt::NoBrush, 13));
    const PropertyTable& t = table();
    const QString current = t.head >= 0 ? QString("L%1.H%2").arg(t.layer).arg(t.head) : QString();
    for (size_t i = 0; i < hs.x.size(); ++i) {
        if (!std::isfinite(hs.x[i]) || !std::isfinite(hs.y[i])) continue;
        heads->addData(hs.x[i], hs.y[i]);
        if (hs.names[int(i)] == current) selected->addData(hs.x[i], hs.y[i]);
        auto* label = new QCPItemText(headScatter_);
        label->position->setCoords(hs.x[i], hs.y[i]);
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
        label->setPadding(QMargins(5, 0, 0, 1));
        label->setFont(QFont(font().family(), 7));
        label->setText(hs.names[int(i)]);
    }
    const RankCorrelation& rc = hs.rho;
    headScatterTitle_->setText(
        QString("%1: per head, Spearman ρ = %2, n = %3")
            .arg(run->name, std::isfinite(rc.rho) ? QString::number(rc.rho, 'f', 2) : "n/a")
            .arg(rc.n));
    headScatter_->xAxis->setLabel(property == kAblationShare
                                      ? QString("positional share (ablation's windows)")
                                      : QString("%1 (step %2)").arg(property).arg(run->step));
    headScatter_->yAxis->setLabel(
        QString("Δ loss, positions removed (%1)").arg(run->ablation->mode));
    headScatter_->rescaleAxes();
    for (QCPAxis* axis : {headScatter_->xAxis, headScatter_->yAxis}) {
        const QCPRange r = axis->range();
        const double pad = r.size() > 0 ? r.size() * 0.12 : 0.5;
        axis->setRange(r.lower - pad, r.upper + pad * (axis == headScatter_->xAxis ? 2.5 : 1.5));
    }
    headScatter_->replot(QCustomPlot::rpQueuedReplot);
}

void PropertiesView::drawMap() {
    const PropertyRun* run = selectedRun();
    if (!run)
        return map_->clearWithMessage(data_.runs.empty() ? "no run with properties"
                                                         : "click a cell of the table");
    const PropertyTable& t = table();
    const QString kind = mapKind_->currentData().toString();
    const int row = selectedRow();
    QString title = QString("%1: %2, layer %3, %4")
                        .arg(t.rowNames[row], kind == "delta_pos" ? "\u0394pos" : "static logit")
                        .arg(t.layer)
                        .arg(headName());
    if (!t.labels[row].isEmpty()) title += " (" + t.labels[row] + ")";
    const int col = tableView_->currentIndex().column();
    if (col >= 0 && col < t.columns.size())
        title += "; " + t.columns[col] + " " + model_->index(row, col).data().toString();
    try {
        const plotting::Heatmap h = propertyMap(*run->analysis, kind, t.layer, t.head, title);
        if (h.rows > 0) return map_->setData(h);
        map_->clearWithMessage(
            kind == "delta_pos"
                ? QString("no \u0394pos map of layer %1 in %2").arg(t.layer).arg(run->analysis->dir)
                : QString("%1 (%2) has no static positional logit: its scheme has no "
                          "input-independent positional term")
                      .arg(run->name, run->variant));
    } catch (const std::exception& e) {
        map_->clearWithMessage("cannot read the map (see the banner)");
        emit errorRaised(QString::fromUtf8(e.what()));
    }
}

void PropertiesView::drawSpectrum() {
    spectrum_->clearGraphs();
    const PropertyRun* run = selectedRun();
    Spectrum s;
    QString message = run ? QString("%1: no spectrum of layer %2").arg(run->name).arg(table().layer)
                          : QString("spectrum: click a cell");
    try {
        if (run) s = readSpectrum(*run->analysis, table().layer, table().head);
    } catch (const std::exception& e) {
        message = "cannot read the spectrum (see the banner)";
        emit errorRaised(QString::fromUtf8(e.what()));
    }
    if (s.empty()) {
        spectrumTitle_->setText(message);
        spectrum_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const struct {
        const std::vector<double>* values;
        const char* name;
        QColor colour;
        Qt::PenStyle style;
    } lines[] = {{&s.map, "\u0394pos map", kBlue, Qt::SolidLine},
                 {&s.toeplitz, "best Toeplitz fit", kGreen, Qt::DashLine},
                 {&s.residual, "residual (map \u2212 fit)", kRed, Qt::SolidLine}};
    double lo = INFINITY, hi = 0;
    for (const auto& line : lines) {
        QCPGraph* g = spectrum_->addGraph();
        g->setName(line.name);
        g->setPen(QPen(line.colour, 1.8, line.style));
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
        // A log axis cannot draw 0: a zero singular value (exactly Toeplitz) is left out.
        for (size_t k = 0; k < line.values->size(); ++k) {
            const double v = (*line.values)[k];
            if (!std::isfinite(v) || v <= 0) continue;
            g->addData(double(k + 1), v);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    spectrum_->xAxis->setRange(0.5, double(s.map.size()) + 0.5);
    // Whole decades, so the log ticker labels powers of ten.
    if (std::isfinite(lo))
        spectrum_->yAxis->setRange(std::pow(10.0, std::floor(std::log10(lo))),
                                   std::pow(10.0, std::ceil(std::log10(hi * 1.0001))));
    spectrumTitle_->setText(
        QString("%1: spectrum, layer %2, %3").arg(run->name).arg(table().layer).arg(headName()));
    spectrum_->replot(QCustomPlot::rpQueuedReplot);
}

void PropertiesView::drawScatter() {
    scatter_->clearGraphs();
    scatter_->clearItems();
    const PropertyTable& t = table();
    const int col = scatterProperty_->currentIndex();
    const QString score = scatterScore_->currentText();
    if (t.rows() == 0 || col < 0 || col >= t.columns.size() || score.isEmpty()) {
        scatterTitle_->setText(t.rows() == 0 ? "property against task score: no runs"
                                             : "no fine-tuning scores for these runs");
        scatter_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    QCPGraph* runs = scatter_->addGraph();
    runs->setLineStyle(QCPGraph::lsNone);
    runs->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, kBlue, 8));
    QCPGraph* selected = scatter_->addGraph();
    selected->setLineStyle(QCPGraph::lsNone);
    selected->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(kRed, 2), Qt::NoBrush, 14));
    std::vector<double> xs, ys;
    const int current = selectedRow();
    for (int r = 0; r < t.rows(); ++r) {
        const double x = t.value(r, col), y = data_.scores.score(t.runIds[size_t(r)], score);
        xs.push_back(x);
        ys.push_back(y);
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        runs->addData(x, y);
        if (r == current) selected->addData(x, y);
        auto* label = new QCPItemText(scatter_);
        label->position->setCoords(x, y);
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
        label->setPadding(QMargins(6, 0, 0, 2));
        label->setFont(QFont(font().family(), 8));
        label->setText(t.rowNames[r]);
    }
    const RankCorrelation rc = spearman(xs, ys);
    scatterTitle_->setText(
        QString("%1 vs %2: Spearman \u03c1 = %3, n = %4")
            .arg(t.columns[col], score,
                 std::isfinite(rc.rho) ? QString::number(rc.rho, 'f', 2) : QString("n/a"))
            .arg(rc.n) +
        (rc.n < 3                 ? QString(", fewer than 3 runs")
         : !std::isfinite(rc.rho) ? QString(", one side constant")
                                  : QString()));
    scatter_->xAxis->setLabel(
        QString("%1 (layer %2, %3)").arg(t.columns[col]).arg(t.layer).arg(headName()));
    scatter_->yAxis->setLabel(score + " (dev, %)");
    scatter_->rescaleAxes();
    for (QCPAxis* axis : {scatter_->xAxis, scatter_->yAxis}) {
        const QCPRange r = axis->range();
        const double pad = r.size() > 0 ? r.size() * 0.12 : 0.5;
        axis->setRange(r.lower - pad, r.upper + pad * (axis == scatter_->xAxis ? 2.5 : 1.5));
    }
    scatter_->replot(QCustomPlot::rpQueuedReplot);
}

void PropertiesView::showExtrapolation() {
    extrapolationPixmap_ = QPixmap();
    extrapolation_->setPixmap(QPixmap());
    extrapolation_->setToolTip("");
    const PropertyRun* run = selectedRun();
    if (!run) return extrapolation_->setText("");
    const QString path = run->extrapolationPng;
    if (path.isEmpty())
        return extrapolation_->setText(run->name +
                                       ": no `tupe extrapolate` figure recorded for this run");
    if (!QFileInfo::exists(path) || !extrapolationPixmap_.load(path))
        return extrapolation_->setText("cannot read " + path);
    extrapolation_->setToolTip(path);
    scaleExtrapolation();
}

void PropertiesView::scaleExtrapolation() {
    if (extrapolationPixmap_.isNull()) return;
    extrapolation_->setPixmap(extrapolationPixmap_.scaled(
        extrapolation_->size(), Qt::KeepAspectRatio, Qt::SmoothTransformation));
}

bool PropertiesView::eventFilter(QObject* watched, QEvent* event) {
    // The figure follows its label's size (splitter drags included).
    if (watched == extrapolation_ && event->type() == QEvent::Resize) scaleExtrapolation();
    return WorkbenchView::eventFilter(watched, event);
}

QString PropertiesView::dataCsv() {
    if (table().rows() == 0) return {};
    return propertyTableCsv(table());
}

QString PropertiesView::tableText(const QString& format) {
    return propertyTableText(table(), format);
}

void PropertiesView::prepareScreenshot() {
    // The first run, the mean of heads, positional share: the table's defaults.
    const int h = head_->findData(-1);
    if (h >= 0) head_->setCurrentIndex(h);
    // The first run whose ablation has per-head rows, so the per-head scatter has points (the
    // table may still be loading: rebuildTable applies it).
    preferAblation_ = true;
    rebuildTable();
}

}  // namespace app
