// The attention views (see analysis_views.h).
#include "views/analysis_views.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/analysis_service.h"
#include "core/fill_mask_service.h"
#include "core/store_access.h"
#include "experiments/result_store.h"
#include "views/fill_mask_panel.h"
#include "views/microscope_panels.h"

namespace app {

namespace {

constexpr const char* kPositional = "positional (pos_pos | tupe_total)";

/// The entry kind shown for `term` in `data`: "positional" is BERT's position-position term
/// or TUPE's positional correlation, whichever the model has.
QString kindFor(const QString& term, const AnalysisData& data) {
    if (term != kPositional) return term;
    return data.layersOf("tupe_total").empty() ? "pos_pos" : "tupe_total";
}

QString layerName(int layer) {
    return layer < 0 ? QString("all layers (shared)") : QString("layer %1").arg(layer);
}

plotting::Heatmap squareMap(const AnalysisData& d, const AnalysisEntry& e, const QString& title) {
    const NpyArray a = d.matrix(e);
    if (a.shape.size() != 2)
        throw std::runtime_error((d.dir + "/" + e.file).toStdString() + ": " +
                                 std::to_string(a.shape.size()) + "-d array, expected a matrix");
    plotting::Heatmap h;
    h.title = title.toStdString();
    h.rows = int(a.shape[0]);
    h.cols = int(a.shape[1]);
    h.values = a.values;
    if (d.tokens.size() == h.rows) h.row_labels = toStdStrings(d.tokens);
    if (d.tokens.size() == h.cols) h.col_labels = toStdStrings(d.tokens);
    h.symmetric = !e.what.endsWith("probs");
    h.x_label = "key";
    h.y_label = "query";
    h.value_label = e.what.endsWith("probs") ? "probability" : "logit";
    return h;
}

QHBoxLayout* sentenceBar(QLineEdit* sentence, QPushButton* go, QLabel* status) {
    sentence->setText(defaultSentence());
    sentence->setPlaceholderText("type a sentence, then Recompute");
    status->setWordWrap(true);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("Sentence"));
    bar->addWidget(sentence, 3);
    bar->addWidget(go);
    bar->addWidget(status, 2);
    return bar;
}

}  // namespace

QString defaultSentence() {
    return "the old man saw the river from the small house near the church .";
}

CheckpointPicker::CheckpointPicker(const QString& title, QWidget* parent)
    : QWidget(parent), run_(new QComboBox), checkpoint_(new QComboBox) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(new QLabel(title));
    layout->addWidget(run_, 2);
    layout->addWidget(new QLabel("checkpoint"));
    layout->addWidget(checkpoint_, 1);
    connect(run_, &QComboBox::currentIndexChanged, this, [this] {
        fillCheckpoints();
        emit changed();
    });
    connect(checkpoint_, &QComboBox::currentIndexChanged, this, &CheckpointPicker::changed);
}

void CheckpointPicker::setStore(experiments::ResultStore* store, const QString& dbPath) {
    QSignalBlocker block(run_);
    const QString current = run_->currentText();
    run_->clear();
    runs_.clear();
    if (store) {
        CheckpointRuns found = listCheckpointRuns(*store, dbPath);
        runs_ = std::move(found.runs);
        if (!found.error.isEmpty()) emit errorRaised(found.error);
    }
    runs_.insert(runs_.end(), folders_.begin(), folders_.end());
    for (const CheckpointRun& r : runs_) run_->addItem(r.name);
    const int i = run_->findText(current);
    run_->setCurrentIndex(std::max(0, i));
    fillCheckpoints();
}

void CheckpointPicker::fillCheckpoints() {
    QSignalBlocker block(checkpoint_);
    checkpoint_->clear();
    const int i = run_->currentIndex();
    if (i < 0 || size_t(i) >= runs_.size()) return;
    for (const CheckpointRef& c : runs_[size_t(i)].checkpoints)
        checkpoint_->addItem(c.step < 0 ? QString("HF folder") : QString("step %1").arg(c.step),
                             c.path);
    checkpoint_->setCurrentIndex(checkpoint_->count() - 1);
}

QString CheckpointPicker::checkpointPath() const { return checkpoint_->currentData().toString(); }

qint64 CheckpointPicker::runId() const {
    const int i = run_->currentIndex();
    return i >= 0 && size_t(i) < runs_.size() ? runs_[size_t(i)].runId : 0;
}

QString CheckpointPicker::runName() const { return run_->currentText(); }

QString CheckpointPicker::label() const {
    if (!checkpoint_->currentText().startsWith("step ")) return run_->currentText();
    return run_->currentText() + " @ " + checkpoint_->currentText().mid(5);
}

QString CheckpointPicker::addModelFolder(const QString& dir) {
    CheckpointRun folder;
    folder.name = "folder: " + QFileInfo(dir).fileName();
    folder.checkpoints.push_back({-1, QFileInfo(dir).absoluteFilePath()});
    for (const CheckpointRun& r : folders_)
        if (r.checkpoints.front().path == folder.checkpoints.front().path) return r.name;
    folders_.push_back(folder);
    runs_.push_back(folder);
    QSignalBlocker block(run_);
    run_->addItem(folder.name);
    return folder.name;
}

bool CheckpointPicker::select(const QString& runName) {
    int i = run_->findText(runName);
    if (i < 0) i = run_->findText(runName + "@", Qt::MatchStartsWith);
    if (i < 0) return false;
    run_->setCurrentIndex(i);
    return true;
}

// ---- two checkpoints side by side ----------------------------------------------------------

SideBySideView::SideBySideView(AnalysisService* service, QWidget* parent)
    : WorkbenchView(parent),
      service_(service),
      pickers_{new CheckpointPicker("Left"), new CheckpointPicker("Right")},
      sentence_(new QLineEdit),
      go_(new QPushButton("Recompute")),
      status_(new QLabel) {
    for (auto* p : pickers_)
        connect(p, &CheckpointPicker::errorRaised, this, &WorkbenchView::errorRaised);
    connect(go_, &QPushButton::clicked, this, &SideBySideView::recompute);
    connect(sentence_, &QLineEdit::returnPressed, this, &SideBySideView::recompute);
    connect(service_, &AnalysisService::ready, this,
            [this](const QString& ckpt, const QString& sentence,
                   std::shared_ptr<const AnalysisData> d) {
                if (sentence != sentence_->text()) return;
                bool mine = false;
                for (int s = 0; s < 2; ++s)
                    if (pickers_[s]->checkpointPath() == ckpt) data_[s] = d, mine = true;
                if (!mine) return;
                status_->setText(service_->busy() ? "computing..." : "");
                dataArrived();
            });
    connect(service_, &AnalysisService::failed, this,
            [this](const QString& ckpt, const QString&, const QString& message) {
                for (int s = 0; s < 2; ++s)
                    if (pickers_[s]->checkpointPath() == ckpt) {
                        mainPlot(s)->clearWithMessage("analysis failed (see the banner)");
                        status_->setText("");
                        emit errorRaised(message);
                    }
            });
}

void SideBySideView::addHeader(QVBoxLayout* layout) {
    auto* pick = new QHBoxLayout;
    pick->addWidget(pickers_[0], 1);
    pick->addSpacing(20);
    pick->addWidget(pickers_[1], 1);
    layout->addLayout(pick);
    layout->addLayout(sentenceBar(sentence_, go_, status_));
}

QList<QCustomPlot*> SideBySideView::exportablePlots() { return {mainPlot(0), mainPlot(1)}; }

void SideBySideView::setStore(experiments::ResultStore* store, const QString& dbPath) {
    for (auto* p : pickers_) p->setStore(store, dbPath);
    pickers_[1]->select("tupe-a");
}

void SideBySideView::recompute() {
    for (int s = 0; s < 2; ++s) {
        data_[s].reset();
        const QString ckpt = pickers_[s]->checkpointPath();
        if (ckpt.isEmpty()) {
            mainPlot(s)->clearWithMessage("no checkpoint for this run in the store");
            continue;
        }
        mainPlot(s)->clearWithMessage("computing " + pickers_[s]->label() + " ...");
        service_->request(ckpt, sentence_->text());
    }
    if (service_->busy()) status_->setText("computing (tupe analyze)...");
}

int SideBySideView::showPair(const QStringList& runs) {
    int found = 0;
    for (int s = 0; s < 2 && s < runs.size(); ++s) found += pickers_[s]->select(runs[s]) ? 1 : 0;
    recompute();
    return found;
}

void SideBySideView::showDefaultPair() {
    pickers_[0]->select("bert-a");
    pickers_[1]->select("tupe-a");
    recompute();
}

// ---- correlation maps ---------------------------------------------------------------------

CorrelationMapsView::CorrelationMapsView(AnalysisService* service, QWidget* parent)
    : SideBySideView(service, parent),
      plots_{new HeatmapPlot, new HeatmapPlot},
      ablation_{new AblationPanel, new AblationPanel},
      fillMask_(new FillMaskPanel),
      term_(new QComboBox),
      layer_(new QComboBox),
      head_(new QComboBox) {
    auto* choose = new QHBoxLayout;
    choose->addWidget(new QLabel("Term"));
    choose->addWidget(term_, 2);
    choose->addWidget(new QLabel("Layer"));
    choose->addWidget(layer_, 1);
    choose->addWidget(new QLabel("Head"));
    choose->addWidget(head_, 1);
    choose->addStretch(1);
    auto* plots = new QSplitter(Qt::Horizontal);
    plots->addWidget(plots_[0]);
    plots->addWidget(plots_[1]);
    auto* ablations = new QSplitter(Qt::Horizontal);
    ablations->addWidget(ablation_[0]);
    ablations->addWidget(ablation_[1]);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(plots);
    split->addWidget(ablations);
    split->addWidget(fillMask_);
    split->setStretchFactor(0, 5);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 2);
    auto* layout = new QVBoxLayout(this);
    addHeader(layout);
    layout->addLayout(choose);
    layout->addWidget(split, 1);
    for (auto* p : plots_) p->clearWithMessage("Recompute to analyse the checkpoint.");
    for (int s = 0; s < 2; ++s) {
        connect(pickers_[s], &CheckpointPicker::changed, this, [this, s] {
            loadAblation(s);
            fillMask_->setModel(s, pickers_[s]->label(), pickers_[s]->checkpointPath());
        });
        connect(ablation_[s], &AblationPanel::headClicked, this, &CorrelationMapsView::selectHead);
    }
    for (auto* c : {term_, layer_, head_})
        connect(c, &QComboBox::currentIndexChanged, this, &CorrelationMapsView::redraw);
}

void CorrelationMapsView::setStore(experiments::ResultStore* store, const QString& dbPath) {
    store_ = store;
    dbPath_ = dbPath;
    SideBySideView::setStore(store, dbPath);
    for (int s = 0; s < 2; ++s) {
        loadAblation(s);
        fillMask_->setModel(s, pickers_[s]->label(), pickers_[s]->checkpointPath());
    }
}

QString CorrelationMapsView::openModelFolder(const QString& dir) {
    if (QString problem = modelFolderProblem(dir); !problem.isEmpty()) return problem;
    const QString name = pickers_[0]->addModelFolder(dir);
    pickers_[1]->addModelFolder(dir);
    pickers_[0]->select(name);  // emits changed(): the ablation line and the fill-mask side
    recompute();
    return {};
}

void CorrelationMapsView::loadAblation(int side) {
    microscope_[side] = RunMicroscope{};
    const qint64 run = pickers_[side]->runId();
    const QString name = pickers_[side]->runName();
    if (name.startsWith("folder: "))
        return ablation_[side]->setAblation(
            nullptr, name,
            name +
                " is an HF folder, not a run of the store: this panel shows a run's stored "
                "tupe ablate output.");
    if (!store_ || run == 0) return ablation_[side]->setAblation(nullptr, name, "");
    try {
        microscope_[side] = readRunMicroscope(store_->artifacts(run), dbPath_);
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
    for (const QString& error : microscope_[side].errors) emit errorRaised(error);
    if (microscope_[side].hasAblation)
        return ablation_[side]->setAblation(&microscope_[side].ablation, name);
    ablation_[side]->setAblation(nullptr, name,
                                 "No ablation stored for " + name +
                                     ": add analysis.ablation (zero, mean or shuffle) to its "
                                     "study and run it again, or run tupe ablate on its "
                                     "checkpoint.");
}

void CorrelationMapsView::selectHead(int layer, int head) {
    const int l = layer_->findData(layer);
    if (l >= 0) layer_->setCurrentIndex(l);
    if (head >= 0 && head < head_->count()) head_->setCurrentIndex(head);
    for (auto* panel : ablation_) panel->markHead(layer, head);
}

void CorrelationMapsView::dataArrived() {
    fillChoices();
    redraw();
}

void CorrelationMapsView::fillChoices() {
    QStringList terms{kPositional};
    int heads = 0;
    std::set<int> layers;
    for (const auto& d : data_) {
        if (!d) continue;
        heads = std::max(heads, d->heads);
        for (const QString& k : d->perHeadKinds())
            if (!k.endsWith("_cls") && !terms.contains(k)) terms << k;
    }
    const QString term = term_->currentText(), layer = layer_->currentText();
    const int head = head_->currentIndex();
    QSignalBlocker b1(term_), b2(layer_), b3(head_);
    term_->clear();
    term_->addItems(terms);
    term_->setCurrentIndex(std::max(0, term_->findText(term)));
    for (const auto& d : data_)
        if (d)
            for (int l : d->layersOf(kindFor(term_->currentText(), *d))) layers.insert(l);
    layer_->clear();
    for (int l : layers) layer_->addItem(layerName(l), l);
    layer_->setCurrentIndex(std::max(0, layer_->findText(layer)));
    head_->clear();
    for (int h = 0; h < heads; ++h) head_->addItem(QString("head %1").arg(h));
    head_->setCurrentIndex(std::clamp(head, 0, std::max(0, heads - 1)));
}

void CorrelationMapsView::redraw() {
    for (int s = 0; s < 2; ++s) {
        if (!data_[s]) continue;
        const AnalysisData& d = *data_[s];
        const QString kind = kindFor(term_->currentText(), d);
        const auto layers = d.layersOf(kind);
        if (layers.empty()) {
            plots_[s]->clearWithMessage(
                QString("%1 (%2) has no %3 map").arg(pickers_[s]->label(), d.variant, kind));
            continue;
        }
        int layer =
            layer_->currentData().isValid() ? layer_->currentData().toInt() : layers.front();
        if (std::find(layers.begin(), layers.end(), layer) == layers.end()) layer = layers.front();
        const AnalysisEntry* e = d.find(kind, layer, head_->currentIndex());
        if (!e) {
            plots_[s]->clearWithMessage("no " + kind + " map for this head");
            continue;
        }
        try {
            QString title = QString("%1 (%2): %3, %4, head %5")
                                .arg(pickers_[s]->label(), d.variant, kind, layerName(layer))
                                .arg(e->head);
            if (!e->label.isEmpty()) title += " \u2014 " + e->label;
            plots_[s]->setData(squareMap(d, *e, title));
        } catch (const std::exception& ex) {
            plots_[s]->clearWithMessage("cannot read the map");
            emit errorRaised(QString::fromUtf8(ex.what()));
        }
    }
}

QString CorrelationMapsView::dataCsv() { return plotCsv(plots_[0]) + "\n" + plotCsv(plots_[1]); }

void CorrelationMapsView::prepareScreenshot() { showDefaultPair(); }

// ---- [CLS] attention ----------------------------------------------------------------------

ClsAttentionView::ClsAttentionView(AnalysisService* service, QWidget* parent)
    : SideBySideView(service, parent),
      maps_{new HeatmapPlot, new HeatmapPlot},
      lines_{makePlot(nullptr), makePlot(nullptr)},
      theta_{new QLabel, new QLabel},
      direction_(new QComboBox),
      layer_(new QComboBox) {
    direction_->addItems({"attention from [CLS]", "attention to [CLS]"});
    auto* choose = new QHBoxLayout;
    choose->addWidget(direction_);
    choose->addWidget(new QLabel("Per-head lines of"));
    choose->addWidget(layer_);
    choose->addStretch(1);
    auto* grid = new QGridLayout;
    for (int s = 0; s < 2; ++s) {
        theta_[s]->setWordWrap(true);
        theta_[s]->setTextInteractionFlags(Qt::TextSelectableByMouse);
        grid->addWidget(maps_[s], 0, s);
        grid->addWidget(lines_[s], 1, s);
        grid->addWidget(theta_[s], 2, s);
        maps_[s]->clearWithMessage("Recompute to analyse the checkpoint.");
        lines_[s]->legend->setVisible(true);
        lines_[s]->legend->setFont(QFont(font().family(), 8));
    }
    grid->setRowStretch(0, 3);
    grid->setRowStretch(1, 2);
    auto* layout = new QVBoxLayout(this);
    addHeader(layout);
    layout->addLayout(choose);
    layout->addLayout(grid, 1);
    connect(direction_, &QComboBox::currentIndexChanged, this, &ClsAttentionView::redraw);
    connect(layer_, &QComboBox::currentIndexChanged, this, &ClsAttentionView::redraw);
}

void ClsAttentionView::dataArrived() {
    int layers = 0;
    for (const auto& d : data_)
        if (d) layers = std::max(layers, d->layers);
    {
        QSignalBlocker block(layer_);
        const int keep = layer_->currentIndex();
        layer_->clear();
        for (int l = 0; l < layers; ++l) layer_->addItem(QString("layer %1").arg(l));
        layer_->setCurrentIndex(keep >= 0 && keep < layers ? keep : layers - 1);
    }
    redraw();
}

void ClsAttentionView::redraw() {
    const bool from = direction_->currentIndex() == 0;
    const QString what = from ? "from_cls" : "to_cls";
    NpyArray arrays[2];
    double hi = 0;
    for (int s = 0; s < 2; ++s) {
        if (!data_[s]) continue;
        try {
            arrays[s] = data_[s]->array("cls/" + what);  // (L, H, T)
            for (double v : arrays[s].values)
                if (std::isfinite(v)) hi = std::max(hi, v);
        } catch (const std::exception& e) {
            emit errorRaised(QString::fromUtf8(e.what()));
            data_[s].reset();
        }
    }
    for (int s = 0; s < 2; ++s) {
        if (!data_[s] || arrays[s].shape.size() != 3) continue;
        const AnalysisData& d = *data_[s];
        const int L = int(arrays[s].shape[0]), H = int(arrays[s].shape[1]),
                  T = int(arrays[s].shape[2]);
        auto at = [&](int l, int h, int t) {
            return arrays[s].values[(size_t(l) * H + h) * T + t];
        };
        plotting::Heatmap m;
        m.title = QString("%1 (%2): %3, mean over heads")
                      .arg(pickers_[s]->label(), d.variant, direction_->currentText())
                      .toStdString();
        m.rows = L;
        m.cols = T;
        for (int l = 0; l < L; ++l) {
            m.row_labels.push_back("layer " + std::to_string(l));
            for (int t = 0; t < T; ++t) {
                double sum = 0;
                for (int h = 0; h < H; ++h) sum += at(l, h, t);
                m.values.push_back(sum / H);
            }
        }
        if (d.tokens.size() == T) m.col_labels = toStdStrings(d.tokens);
        m.x_label = from ? "key" : "query";
        m.value_label = "attention";
        m.range_min = 0;
        m.range_max = hi;  // one colour scale for both sides
        maps_[s]->setData(m);

        QCustomPlot* p = lines_[s];
        p->clearGraphs();
        const int layer = std::clamp(layer_->currentIndex(), 0, L - 1);
        static const QColor colours[] = {QColor(31, 119, 180),  QColor(214, 39, 40),
                                         QColor(44, 160, 44),   QColor(255, 127, 14),
                                         QColor(148, 103, 189), QColor(140, 86, 75),
                                         QColor(227, 119, 194), QColor(127, 127, 127)};
        for (int h = 0; h < H; ++h) {
            QCPGraph* g = p->addGraph();
            g->setName(QString("head %1").arg(h));
            g->setPen(QPen(colours[h % 8], 1.6));
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
            for (int t = 0; t < T; ++t) g->addData(t, at(layer, h, t));
        }
        QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
        for (int t = 0; t < T; ++t)
            ticker->addTick(t, t < d.tokens.size() ? d.tokens[t] : QString::number(t));
        p->xAxis->setTicker(ticker);
        p->xAxis->setTickLabelRotation(60);
        p->xAxis->setRange(-0.5, T - 0.5);
        p->yAxis->setRange(0, std::max(1e-6, hi) * 1.05);
        p->yAxis->setLabel(QString("layer %1 %2").arg(layer).arg(from ? "from [CLS]" : "to [CLS]"));
        p->replot(QCustomPlot::rpQueuedReplot);

        // TUPE's untied [CLS]: theta1 ([CLS] -> others) and theta2 (others -> [CLS]) per head.
        QString text;
        std::set<std::pair<int, int>> seen;  // index.json lists each matrix as .npy and .csv
        for (const AnalysisEntry& e : d.entries) {
            if (e.what != "tupe_total" || e.head < 0 || !e.statistics.count("theta1")) continue;
            if (!seen.insert({e.layer, e.head}).second) continue;
            text += QString("%1h%2: \u03b81 %3, \u03b82 %4;  ")
                        .arg(e.layer >= 0 ? QString("L%1 ").arg(e.layer) : QString())
                        .arg(e.head)
                        .arg(e.statistics.at("theta1"), 0, 'f', 3)
                        .arg(e.statistics.at("theta2"), 0, 'f', 3);
        }
        theta_[s]->setText(text.isEmpty()
                               ? d.variant + ": no \u03b8 ([CLS] is not untied in this variant)"
                               : d.variant + " [CLS] reset values: " + text);
    }
}

QString ClsAttentionView::dataCsv() { return plotCsv(maps_[0]) + "\n" + plotCsv(maps_[1]); }

void ClsAttentionView::prepareScreenshot() { showDefaultPair(); }

// ---- head gallery -------------------------------------------------------------------------

HeadGalleryView::HeadGalleryView(AnalysisService* service, QWidget* parent)
    : WorkbenchView(parent),
      service_(service),
      picker_(new CheckpointPicker("Run")),
      kind_(new QComboBox),
      sentence_(new QLineEdit),
      status_(new QLabel),
      grid_(new QGridLayout),
      gridHost_(new QWidget),
      types_(new HeadTypesPanel) {
    kind_->addItems({"probabilities (row softmax)", "logits"});
    auto* go = new QPushButton("Recompute");
    auto* top = new QHBoxLayout;
    top->addWidget(picker_, 2);
    top->addWidget(new QLabel("Show"));
    top->addWidget(kind_);
    top->addStretch(1);
    gridHost_->setLayout(grid_);
    auto* scroll = new QScrollArea;
    scroll->setWidgetResizable(true);
    scroll->setWidget(gridHost_);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(types_);
    split->addWidget(scroll);
    split->setSizes({260, 560});
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addLayout(sentenceBar(sentence_, go, status_));
    layout->addWidget(split, 1);
    connect(picker_, &CheckpointPicker::errorRaised, this, &WorkbenchView::errorRaised);
    connect(picker_, &CheckpointPicker::changed, this, [this] {
        loadHeadTypes();
        data_.reset();  // the maps were of the other checkpoint: Recompute draws this one's
        redraw();
    });
    connect(go, &QPushButton::clicked, this, &HeadGalleryView::recompute);
    connect(sentence_, &QLineEdit::returnPressed, this, &HeadGalleryView::recompute);
    connect(kind_, &QComboBox::currentIndexChanged, this, &HeadGalleryView::redraw);
    connect(service_, &AnalysisService::ready, this,
            [this](const QString& ckpt, const QString& sentence,
                   std::shared_ptr<const AnalysisData> d) {
                if (sentence != sentence_->text() || picker_->checkpointPath() != ckpt) return;
                data_ = d;
                status_->setText("");
                redraw();
            });
    connect(service_, &AnalysisService::failed, this,
            [this](const QString& ckpt, const QString&, const QString& message) {
                if (picker_->checkpointPath() != ckpt) return;
                status_->setText("analysis failed");
                emit errorRaised(message);
            });
}

void HeadGalleryView::setStore(experiments::ResultStore* store, const QString& dbPath) {
    store_ = store;
    dbPath_ = dbPath;
    picker_->setStore(store, dbPath);
    picker_->select("tupe-a");
    loadHeadTypes();
}

QCustomPlot* HeadGalleryView::exportablePlot() { return types_->counts(); }

void HeadGalleryView::loadHeadTypes() {
    microscope_ = RunMicroscope{};
    const qint64 run = picker_->runId();
    const QString name = picker_->runName();
    if (store_ && run != 0) {
        try {
            microscope_ = readRunMicroscope(store_->artifacts(run), dbPath_);
        } catch (const std::exception& e) {
            emit errorRaised(QString::fromUtf8(e.what()));
        }
        for (const QString& error : microscope_.errors) emit errorRaised(error);
    }
    if (microscope_.hasHeadTypes) return types_->setRun(&microscope_.headTypes, name);
    types_->setRun(nullptr, name,
                   name.isEmpty() ? QString()
                                  : name +
                                        ": no head types stored (analysis.heads in the "
                                        "experiment, or tupe heads --out)");
}

void HeadGalleryView::recompute() {
    data_.reset();
    const QString ckpt = picker_->checkpointPath();
    if (ckpt.isEmpty()) return status_->setText("no checkpoint for this run in the store");
    status_->setText("computing " + picker_->label() + " (tupe analyze)...");
    service_->request(ckpt, sentence_->text());
}

void HeadGalleryView::redraw() {
    while (QLayoutItem* item = grid_->takeAt(0)) {
        delete item->widget();
        delete item;
    }
    if (!data_) return;
    const AnalysisData& d = *data_;
    const bool probs = kind_->currentIndex() == 0;
    // TUPE: its positional correlation per head (and per layer when not shared); BERT: the
    // layer-0 position-position term, which has no taxonomy (positions mix with words there).
    QString kind = d.layersOf("tupe_total").empty() ? "pos_pos"
                   : probs                          ? "tupe_probs"
                                                    : "tupe_total";
    int panel = 0;
    const int columns = std::max(4, std::min(6, d.heads));
    // The heads in the order of their stored types (taxonomy order, strongest first), the rest
    // after; per-layer maps only (a map shared by all layers has no one type).
    std::vector<std::pair<int, int>> order;
    std::map<std::pair<int, int>, QString> typeOf;
    const std::vector<int> mapLayers = d.layersOf(kind);
    if (microscope_.hasHeadTypes && !mapLayers.empty() && mapLayers.front() >= 0)
        for (const HeadTypeGroup& g : groupHeadsByType(microscope_.headTypes.snapshots.back()))
            for (const HeadTypeEntry& h : g.heads) {
                order.emplace_back(h.layer, h.head);
                typeOf[{h.layer, h.head}] = QString("%1 %2").arg(
                    h.type, std::isfinite(h.typeScore()) ? QString::number(h.typeScore(), 'f', 2)
                                                         : QString());
            }
    for (int layer : mapLayers)
        for (int h = 0; h < d.heads; ++h)
            if (!typeOf.count({layer, h})) order.emplace_back(layer, h);
    for (const auto& [layer, h] : order) {
        const AnalysisEntry* e = d.find(kind, layer, h);
        if (!e) continue;
        auto* plot = new HeatmapPlot(nullptr, false);
        plot->setMinimumSize(230, 230);
        try {
            plotting::Heatmap m = squareMap(
                d, *e,
                QString("%1head %2%3%4")
                    .arg(layer >= 0 ? QString("L%1 ").arg(layer) : QString())
                    .arg(h)
                    .arg(typeOf.count({layer, h}) ? " [" + typeOf[{layer, h}] + "]" : QString())
                    .arg(e->label.isEmpty() ? QString() : ": " + e->label));
            m.x_label = m.y_label = "";
            plot->setData(m);
        } catch (const std::exception& ex) {
            plot->clearWithMessage("cannot read");
            emit errorRaised(QString::fromUtf8(ex.what()));
        }
        grid_->addWidget(plot, panel / columns, panel % columns);
        ++panel;
    }
    status_->setText(QString("%1 (%2): %3 heads, %4%5")
                         .arg(picker_->label(), d.variant)
                         .arg(panel)
                         .arg(kind)
                         .arg(kind == "pos_pos" ? " (no TUPE taxonomy for this variant)" : ""));
}

void HeadGalleryView::prepareScreenshot() {
    picker_->select("tupe-a");
    recompute();
}

}  // namespace app
