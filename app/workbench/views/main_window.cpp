// The main window (see main_window.h).
#include "views/main_window.h"

#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QSettings>
#include <QStatusBar>
#include <QThread>
#include <QVBoxLayout>
#include <tuple>

#include "core/analysis_service.h"
#include "views/analysis_views.h"
#include "views/browser_view.h"
#include "views/claims_view.h"
#include "views/curves_view.h"
#include "views/factor_view.h"
#include "views/fill_mask_panel.h"
#include "views/glue_view.h"
#include "views/launch_view.h"
#include "views/plot_util.h"
#include "views/properties_view.h"
#include "views/study_builder_view.h"

namespace app {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      banner_(new QLabel),
      tabs_(new QTabWidget),
      analysis_(new AnalysisService(this)) {
    setWindowTitle("TUPE Workbench");
    banner_->setWordWrap(true);
    banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    banner_->setStyleSheet(
        "QLabel { background: #fde2e1; color: #8a1c1c; padding: 6px; "
        "border: 1px solid #e5a3a0; }");
    banner_->hide();

    browser_ = new BrowserView;
    curves_ = new CurvesView;
    launch_ = new LaunchView;
    glue_ = new GlueView;
    maps_ = new CorrelationMapsView(analysis_);
    claims_ = new ClaimsView;
    auto* cls = new ClsAttentionView(analysis_);
    auto* gallery = new HeadGalleryView(analysis_);
    properties_ = new PropertiesView;
    builder_ = new StudyBuilderView;
    factors_ = new FactorView;
    const std::vector<std::tuple<WorkbenchView*, QString, QString>> tabs = {
        {browser_, "Experiments", "experiments"},  {builder_, "Study builder", "study-builder"},
        {launch_, "Launch && queue", "launch"},    {curves_, "Training curves", "curves"},
        {glue_, "GLUE results", "glue"},           {claims_, "Claims", "claims"},
        {factors_, "Factors", "factors"},          {maps_, "Correlation maps", "correlation-maps"},
        {cls, "[CLS] attention", "cls-attention"}, {gallery, "Head gallery", "head-gallery"},
        {properties_, "Properties", "properties"}};
    for (const auto& [view, title, file] : tabs) {
        views_.push_back(view);
        tabs_->addTab(view, title);
        screenshotNames_ << file;
    }
    for (WorkbenchView* v : views_) {
        connect(v, &WorkbenchView::errorRaised, this, &MainWindow::showError);
        connect(v, &WorkbenchView::statusMessage, this,
                [this](const QString& m) { statusBar()->showMessage(m, 8000); });
    }
    connect(browser_, &BrowserView::runsChosen, this, [this](const QList<qint64>& ids) {
        curves_->showRuns(ids);
        tabs_->setCurrentWidget(curves_);
    });
    connect(browser_, &BrowserView::yamlOpened, this,
            [this](const QString& path, const QString& text) {
                launch_->openText(path, text);
                tabs_->setCurrentWidget(launch_);
            });
    connect(claims_, &ClaimsView::runsRequested, this, &MainWindow::showClaimRuns);
    connect(launch_, &LaunchView::runFinished, this, [this] {
        if (!store_.path.isEmpty()) openDatabase(store_.path);
    });
    connectStudyViews();

    auto* central = new QWidget;
    auto* layout = new QVBoxLayout(central);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(banner_);
    layout->addWidget(tabs_, 1);
    setCentralWidget(central);

    QMenu* file = menuBar()->addMenu("&File");
    file->addAction("&Open database...", QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, "Open results database",
                                                          QFileInfo(store_.path).absolutePath(),
                                                          "SQLite (*.sqlite *.db);;All files (*)");
        if (!path.isEmpty()) openDatabase(path);
    });
    file->addAction("&Reload", QKeySequence::Refresh, this, [this] { openDatabase(store_.path); });
    file->addAction("Open &model folder...", this, [this] {
        // HF folders (tupe export, transformers' save_pretrained) usually sit beside the runs.
        const QString dir = QFileDialog::getExistingDirectory(
            this, "Open an HF model folder (config.json, model.safetensors, vocab.txt)",
            QFileInfo(store_.path).absolutePath());
        if (!dir.isEmpty()) openModelFolder(dir);
    });
    file->addSeparator();
    file->addAction("Export &plot (PNG + PDF + SVG)...", this, &MainWindow::exportPlot);
    file->addAction("Export &data (CSV)...", this, &MainWindow::exportData);
    file->addAction("Export &raw data (CSV)...", this, &MainWindow::exportRawData);
    file->addAction("Copy table as &Markdown", this, [this] { copyTable("markdown"); });
    file->addAction("Copy table as &LaTeX", this, [this] { copyTable("latex"); });
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);

    QSettings settings;
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());
    if (settings.contains("curves/smoothing"))
        curves_->setSmoothing(settings.value("curves/smoothing").toDouble());
    connect(curves_, &CurvesView::smoothingChanged, this,
            [](double w) { QSettings().setValue("curves/smoothing", w); });
    if (geometry().width() < 400) resize(1400, 900);
}

MainWindow::~MainWindow() = default;

// The study builder hands its YAML to the Launch & queue view; the factor view's runs open in
// the training curves.
void MainWindow::connectStudyViews() {
    connect(builder_, &StudyBuilderView::openInEditor, this,
            [this](const QString& path, const QString& text) {
                launch_->openText(path, text);
                tabs_->setCurrentWidget(launch_);
            });
    connect(builder_, &StudyBuilderView::queueRequested, this, [this](const QString& path) {
        launch_->enqueueFile(path);
        tabs_->setCurrentWidget(launch_);
    });
    connect(builder_, &StudyBuilderView::editorTextRequested, this,
            [this] { builder_->loadText(launch_->filePath(), launch_->text()); });
    connect(factors_, &FactorView::runsChosen, this, [this](const QList<qint64>& ids) {
        curves_->showRuns(ids);
        curves_->showMetric("validation/loss");
        tabs_->setCurrentWidget(curves_);
    });
}

void MainWindow::closeEvent(QCloseEvent* event) {
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    QMainWindow::closeEvent(event);
}

bool MainWindow::openDatabase(const QString& path) {
    store_ = openStoreReadOnly(path);
    if (store_.store) {
        clearError();
        QSettings().setValue("db/last", QFileInfo(path).absoluteFilePath());
        analysis_->setWorkingDirectory(projectRootFor(path));
        setWindowTitle("TUPE Workbench \u2014 " + path);
    } else {
        showError(store_.error);
        setWindowTitle("TUPE Workbench");
    }
    for (WorkbenchView* v : views_) v->setStore(store_.store.get(), path);
    return store_.store != nullptr;
}

QString MainWindow::bannerText() const {
    return banner_->isVisible() ? banner_->text() : QString();
}

bool MainWindow::openModelFolder(const QString& dir) {
    const QString problem = maps_->openModelFolder(dir);
    if (!problem.isEmpty()) {
        showError(problem);
        return false;
    }
    clearError();
    tabs_->setCurrentWidget(maps_);
    return true;
}

void MainWindow::showError(const QString& message) {
    banner_->setText(message);
    banner_->show();
    statusBar()->showMessage(message, 10000);
}

void MainWindow::clearError() {
    banner_->clear();
    banner_->hide();
}

WorkbenchView* MainWindow::currentView() const {
    return qobject_cast<WorkbenchView*>(tabs_->currentWidget());
}

void MainWindow::showClaimRuns(const QString& view, const QString& experiment,
                               const QStringList& runs) {
    if (!store_.store) return showError("No database open: cannot show the runs of a claim.");
    if (view == "curves") {
        QList<qint64> ids;
        try {
            ids = runIdsByName(*store_.store, experiment, runs);
        } catch (const std::exception& e) {
            return showError(QString::fromUtf8(e.what()));
        }
        if (ids.isEmpty())
            return showError("None of the claim's runs (" + runs.join(", ") +
                             ") is in experiment " + experiment + ".");
        curves_->showRuns(ids);
        curves_->showMetric("validation/loss");
        tabs_->setCurrentWidget(curves_);
    } else if (view == "glue") {
        if (!glue_->showExperiment(experiment))
            return showError("No GLUE results for experiment " + experiment + ".");
        tabs_->setCurrentWidget(glue_);
    } else if (view == "maps") {
        const QStringList pair = sideBySidePair(runs);
        if (!pair.isEmpty() && maps_->showPair(pair) == 0)
            return showError("No checkpoint of " + pair.join(" or ") + " in the store.");
        tabs_->setCurrentWidget(maps_);
    }
}

void MainWindow::exportPlot() {
    WorkbenchView* v = currentView();
    const QList<QCustomPlot*> plots = v ? v->exportablePlots() : QList<QCustomPlot*>{};
    if (plots.isEmpty()) return showError("This view has no plot to export.");
    const QString path =
        QFileDialog::getSaveFileName(this, "Export plot (PNG, PDF and SVG)", "plot.png",
                                     "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)");
    if (path.isEmpty()) return;
    QStringList written;
    const QString error = app::exportPlots(plots, path, &written);
    if (!error.isEmpty()) return showError(error);
    statusBar()->showMessage(
        "wrote " + written.join(", ") + " and the PDF and SVG files beside them", 8000);
}

void MainWindow::exportData() {
    WorkbenchView* v = currentView();
    const QString csv = v ? v->dataCsv() : QString();
    if (csv.isEmpty()) return showError("This view has no data to export.");
    const QString path =
        QFileDialog::getSaveFileName(this, "Export data", "data.csv", "CSV (*.csv)");
    if (path.isEmpty()) return;
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(csv.toUtf8()) < 0)
        return showError("cannot write " + path + ": " + f.errorString());
    statusBar()->showMessage("wrote " + path, 8000);
}

void MainWindow::exportRawData() {
    WorkbenchView* v = currentView();
    const QString csv = v ? v->rawDataCsv() : QString();
    if (csv.isEmpty())
        return showError("This view has no stored series to export raw (Training curves has).");
    const QString path =
        QFileDialog::getSaveFileName(this, "Export raw data", "raw.csv", "CSV (*.csv)");
    if (path.isEmpty()) return;
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(csv.toUtf8()) < 0)
        return showError("cannot write " + path + ": " + f.errorString());
    statusBar()->showMessage("wrote " + path, 8000);
}

void MainWindow::copyTable(const QString& format) {
    WorkbenchView* v = currentView();
    const QString text = v ? v->tableText(format) : QString();
    if (text.isEmpty()) return showError("This view has no table to copy.");
    QApplication::clipboard()->setText(text);
    statusBar()->showMessage("table copied as " + format, 8000);
}

QStringList MainWindow::renderScreenshots(const QString& dir, int waitMs,
                                          const QString& modelFolder) {
    QDir().mkpath(dir);
    resize(1500, 950);
    show();
    for (WorkbenchView* v : views_) v->prepareScreenshot();
    // Analyses run in child processes and the properties on a worker thread; wait for them (the
    // GUI keeps processing events).
    QElapsedTimer timer;
    timer.start();
    do {
        QApplication::processEvents(QEventLoop::AllEvents, 100);
        QThread::msleep(20);
    } while ((analysis_->busy() || claims_->busy() || properties_->busy()) &&
             timer.elapsed() < waitMs);
    QStringList written;
    for (int i = 0; i < tabs_->count(); ++i) {
        tabs_->setCurrentIndex(i);
        for (int k = 0; k < 10; ++k) QApplication::processEvents();
        for (QCustomPlot* p : tabs_->widget(i)->findChildren<QCustomPlot*>()) p->replot();
        QApplication::processEvents();
        const QString path = QString("%1/workbench-%2.png").arg(dir, screenshotNames_.value(i));
        if (grab().save(path)) written << path;
    }
    if (modelFolder.isEmpty() || !openModelFolder(modelFolder)) return written;
    maps_->fillMaskPanel()->predict();
    timer.restart();
    do {
        QApplication::processEvents(QEventLoop::AllEvents, 100);
        QThread::msleep(20);
    } while ((analysis_->busy() || maps_->fillMaskPanel()->service()->busy()) &&
             timer.elapsed() < waitMs);
    for (int k = 0; k < 10; ++k) QApplication::processEvents();
    for (QCustomPlot* p : maps_->findChildren<QCustomPlot*>()) p->replot();
    QApplication::processEvents();
    const QString path = dir + "/workbench-model-folder.png";
    if (grab().save(path)) written << path;
    return written;
}

}  // namespace app
