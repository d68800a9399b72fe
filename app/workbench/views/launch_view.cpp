// The launch and queue view (see launch_view.h).
#include "views/launch_view.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QMenu>
#include <QSplitter>
#include <QTextBlock>
#include <QVBoxLayout>

#include "core/experiment_check.h"
#include "experiments/result_store.h"
#include "experiments/study_design.h"

namespace app {

LaunchView::LaunchView(QWidget* parent)
    : WorkbenchView(parent),
      editor_(new QPlainTextEdit),
      fileLabel_(new QLabel("(new file)")),
      check_(new QLabel),
      queue_(new QTableWidget(0, 4)),
      start_(new QPushButton("Start queue")),
      pause_(new QPushButton("Pause")),
      cancel_(new QPushButton("Cancel")),
      jobBar_(new QProgressBar),
      planBar_(new QProgressBar),
      log_(new QPlainTextEdit),
      live_(makePlot(nullptr)),
      throttle_(new ReplotThrottle(live_)),
      process_(new TupeProcess(this)) {
    styleWidgets();
    QWidget* left = buildEditorPane();
    QWidget* right = buildQueuePane();
    auto* split = new QSplitter;
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(split);
    setUpLivePlot();

    validateTimer_.setSingleShot(true);
    validateTimer_.setInterval(400);
    connect(&validateTimer_, &QTimer::timeout, this, &LaunchView::validate);
    connect(editor_, &QPlainTextEdit::textChanged, &validateTimer_, qOverload<>(&QTimer::start));
    connectProcess();
    liveTimer_.setInterval(1000);
    connect(&liveTimer_, &QTimer::timeout, this, &LaunchView::pollLive);
    newFile("defaults");  // a new file starts from the field tables, not an empty editor
}

// Fonts, headers, formats and initial states of the member widgets.
void LaunchView::styleWidgets() {
    editor_->setFont(QFont("monospace", 9));
    editor_->setLineWrapMode(QPlainTextEdit::NoWrap);
    check_->setWordWrap(true);
    check_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    log_->setReadOnly(true);
    log_->setMaximumBlockCount(2000);
    log_->setFont(QFont("monospace", 8));
    queue_->setHorizontalHeaderLabels({"experiment file", "status", "job", "plan"});
    queue_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    queue_->verticalHeader()->setVisible(false);
    queue_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    jobBar_->setFormat("job: %p%");
    planBar_->setFormat("plan: %p%");
    pause_->setEnabled(false);
    cancel_->setEnabled(false);
}

// The left pane: the file buttons, the YAML editor and its check.
QWidget* LaunchView::buildEditorPane() {
    auto* newB = new QPushButton("New");
    newB->setObjectName("newFile");
    auto* starts = new QMenu(newB);
    starts->addAction("Every key at its documented default", this, [this] { newFile("defaults"); });
    starts->addAction("The quickstart (experiments/quickstart.yaml)", this,
                      [this] { newFile("quickstart"); });
    newB->setMenu(starts);
    auto* open = new QPushButton("Open...");
    auto* saveB = new QPushButton("Save");
    auto* saveAs = new QPushButton("Save as...");
    auto* enqueue = new QPushButton("Add to queue");
    auto* fileBar = new QHBoxLayout;
    fileBar->addWidget(fileLabel_, 1);
    fileBar->addWidget(newB);
    fileBar->addWidget(open);
    fileBar->addWidget(saveB);
    fileBar->addWidget(saveAs);
    fileBar->addWidget(enqueue);
    auto* left = new QWidget;
    auto* ll = new QVBoxLayout(left);
    ll->setContentsMargins(0, 0, 0, 0);
    ll->addLayout(fileBar);
    ll->addWidget(editor_, 1);
    ll->addWidget(check_);
    connectFileButtons(open, saveB, saveAs, enqueue);
    return left;
}

// The right pane: the queue, its controls, the progress bars, the live curve and the log.
QWidget* LaunchView::buildQueuePane() {
    auto* controls = new QHBoxLayout;
    controls->addWidget(start_);
    controls->addWidget(pause_);
    controls->addWidget(cancel_);
    auto* right = new QWidget;
    auto* rl = new QVBoxLayout(right);
    rl->setContentsMargins(0, 0, 0, 0);
    rl->addWidget(queue_, 1);
    rl->addLayout(controls);
    rl->addWidget(jobBar_);
    rl->addWidget(planBar_);
    rl->addWidget(live_, 2);
    rl->addWidget(log_, 1);
    return right;
}

// The live curve's axes and its hint while no job runs.
void LaunchView::setUpLivePlot() {
    liveHint_ = new QCPItemText(live_);
    liveHint_->position->setType(QCPItemPosition::ptAxisRectRatio);
    liveHint_->position->setCoords(0.5, 0.5);
    liveHint_->setColor(QColor(120, 120, 120));
    liveHint_->setText(
        "No job running: the running job's train/loss appears here, polled from its store.");
    live_->xAxis->setLabel("step");
    live_->yAxis->setLabel("train/loss (running job)");
}

// Open, Save, Save as and Add to queue.
void LaunchView::connectFileButtons(QPushButton* open, QPushButton* saveB, QPushButton* saveAs,
                                    QPushButton* enqueue) {
    connect(open, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getOpenFileName(this, "Open experiment", workDir_,
                                                       "YAML (*.yaml *.yml);;All files (*)");
        if (p.isEmpty()) return;
        QFile f(p);
        if (!f.open(QIODevice::ReadOnly))
            return emit errorRaised("cannot open " + p + ": " + f.errorString());
        openText(p, QString::fromUtf8(f.readAll()));
    });
    connect(saveB, &QPushButton::clicked, this, [this] {
        if (path_.isEmpty()) {
            const QString p =
                QFileDialog::getSaveFileName(this, "Save experiment", workDir_, "YAML (*.yaml)");
            if (!p.isEmpty()) save(p);
        } else {
            save(path_);
        }
    });
    connect(saveAs, &QPushButton::clicked, this, [this] {
        const QString p =
            QFileDialog::getSaveFileName(this, "Save experiment as", path_, "YAML (*.yaml)");
        if (!p.isEmpty()) save(p);
    });
    connect(enqueue, &QPushButton::clicked, this, &LaunchView::addToQueue);
}

// The queue controls and the child process's signals.
void LaunchView::connectProcess() {
    connect(start_, &QPushButton::clicked, this, &LaunchView::startNext);
    connect(pause_, &QPushButton::clicked, this, [this] {
        if (process_->state() == TupeProcess::State::kPaused)
            process_->resume();
        else
            process_->pause();
    });
    connect(cancel_, &QPushButton::clicked, this, [this] { process_->cancel(); });
    connect(process_, &TupeProcess::lineReceived, this,
            [this](const QString& line) { log_->appendPlainText(line); });
    connect(process_, &TupeProcess::stateChanged, this, &LaunchView::showProcessState);
    connect(process_, &TupeProcess::progressChanged, this, &LaunchView::showProgress);
    connect(process_, &TupeProcess::finished, this, &LaunchView::finishRun);
    connect(process_, &TupeProcess::failed, this,
            [this](const QString& message) { finishRun(-1, false, message); });
}

// The buttons and the running item's status for the child's state `s`.
void LaunchView::showProcessState(TupeProcess::State s) {
    pause_->setText(s == TupeProcess::State::kPaused ? "Resume" : "Pause");
    pause_->setEnabled(s == TupeProcess::State::kRunning || s == TupeProcess::State::kPaused);
    cancel_->setEnabled(s != TupeProcess::State::kIdle);
    start_->setEnabled(s == TupeProcess::State::kIdle);
    if (running_ >= 0) {
        items_[size_t(running_)].status = s == TupeProcess::State::kPaused     ? "paused"
                                          : s == TupeProcess::State::kStopping ? "stopping"
                                          : s == TupeProcess::State::kRunning
                                              ? "running"
                                              : items_[size_t(running_)].status;
        updateQueueRow(running_);
    }
}

// The progress bars, and a fresh live curve when the running job changes.
void LaunchView::showProgress(const PlanProgressInfo& p) {
    if (running_ < 0) return;
    items_[size_t(running_)].progress = p;
    jobBar_->setFormat(QString("job %1/%2 %3: %p%").arg(p.jobIndex).arg(p.jobCount).arg(p.job));
    jobBar_->setValue(int(std::lround(p.jobFraction * 100)));
    planBar_->setFormat("plan: %p%  " + p.status);
    planBar_->setValue(int(std::lround(p.planFraction * 100)));
    if (p.job != liveJob_) {
        liveJob_ = p.job;
        liveLastStep_ = std::numeric_limits<std::int64_t>::min();
        live_->clearGraphs();
        live_->addGraph()->setName(p.job);
        liveHint_->setText("");
        live_->yAxis->setLabel("train/loss of " + p.job);
    }
    updateQueueRow(running_);
}

// The running item ended (exit `code`, -1 when it crashed or could not start): records it and,
// unless cancelled, starts the next.
void LaunchView::finishRun(int code, bool cancelled, const QString& message) {
    if (running_ < 0) return;
    QueueItem& item = items_[size_t(running_)];
    item.status = code == 0 ? "finished" : cancelled ? "cancelled" : "failed: " + message;
    if (code == 0) item.progress.planFraction = 1, planBar_->setValue(100);
    if (code != 0 && !cancelled) emit errorRaised(QFileInfo(item.path).fileName() + ": " + message);
    updateQueueRow(running_);
    running_ = -1;
    liveTimer_.stop();
    pollLive();
    // The last job of a study is often a short task with no curve: show the plan's pretraining.
    if (code == 0) showPlanCurves(item);
    emit runFinished();
    if (!cancelled) startNext();
}

void LaunchView::setStore(experiments::ResultStore*, const QString& dbPath) {
    if (!dbPath.isEmpty()) workDir_ = projectRootFor(dbPath);
    // An untouched new file becomes the quickstart of the project the store belongs to.
    const QString defaults =
        QString::fromStdString(experiments::documented_defaults_yaml("new_study"));
    if (path_.isEmpty() &&
        (editor_->toPlainText().isEmpty() || editor_->toPlainText() == defaults)) {
        const QString quick = workDir_ + "/experiments/quickstart.yaml";
        QFile f(quick);
        if (f.open(QIODevice::ReadOnly)) openText(quick, QString::fromUtf8(f.readAll()));
    }
}

void LaunchView::openText(const QString& path, const QString& text) {
    // A stored experiment path is relative to the runner's directory.
    path_ =
        QFileInfo(path).isAbsolute() || workDir_.isEmpty() ? path : QDir(workDir_).filePath(path);
    fileLabel_->setText(path_.isEmpty() ? "(new file)" : path_);
    editor_->setPlainText(text);
    validate();
}

void LaunchView::validate() {
    const ExperimentCheck c = checkExperimentYaml(editor_->toPlainText(), path_);
    QList<QTextEdit::ExtraSelection> marks;
    if (c.ok) {
        check_->setStyleSheet("color: #1b6e2d;");
        check_->setText(QString("OK: experiment \"%1\", variants %2; %3 pretraining job(s), %4 "
                                "fine-tuning job(s); results in %5, runs in %6")
                            .arg(c.name, c.variants.join(", "))
                            .arg(c.pretrainJobs)
                            .arg(c.finetuneJobs < 0 ? QString("one per available task x lr x seed")
                                                    : QString::number(c.finetuneJobs))
                            .arg(c.database, c.runsDir));
    } else {
        check_->setStyleSheet("color: #a11a1a;");
        check_->setText(
            (c.line > 0 ? QString("line %1, column %2: ").arg(c.line).arg(c.column) : QString()) +
            c.message);
        if (c.line > 0) {
            QTextEdit::ExtraSelection mark;
            mark.format.setBackground(QColor(255, 215, 215));
            mark.format.setProperty(QTextFormat::FullWidthSelection, true);
            mark.format.setToolTip(c.message);
            mark.cursor = QTextCursor(editor_->document()->findBlockByNumber(c.line - 1));
            marks << mark;
            if (c.column > 0) {
                QTextEdit::ExtraSelection at;
                at.format.setUnderlineStyle(QTextCharFormat::WaveUnderline);
                at.format.setUnderlineColor(Qt::red);
                at.cursor = mark.cursor;
                at.cursor.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor, c.column - 1);
                at.cursor.movePosition(QTextCursor::EndOfWord, QTextCursor::KeepAnchor);
                marks << at;
            }
        }
    }
    editor_->setExtraSelections(marks);
}

bool LaunchView::save(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(editor_->toPlainText().toUtf8()) < 0) {
        emit errorRaised("cannot write " + path + ": " + f.errorString());
        return false;
    }
    path_ = path;
    fileLabel_->setText(path_);
    emit statusMessage("saved " + path);
    return true;
}

void LaunchView::addToQueue() {
    const ExperimentCheck c = checkExperimentYaml(editor_->toPlainText(), path_);
    if (!c.ok) return emit errorRaised("not queued: " + check_->text());
    if (path_.isEmpty()) {
        const QString p =
            QFileDialog::getSaveFileName(this, "Save experiment", workDir_, "YAML (*.yaml)");
        if (p.isEmpty() || !save(p)) return;
    } else if (!save(path_)) {
        return;
    }
    QueueItem item;
    item.path = path_;
    item.name = c.name;
    item.database =
        QFileInfo(c.database).isAbsolute() ? c.database : QDir(workDir_).filePath(c.database);
    items_.push_back(item);
    queue_->setRowCount(int(items_.size()));
    updateQueueRow(int(items_.size()) - 1);
}

void LaunchView::updateQueueRow(int row) {
    const QueueItem& item = items_[size_t(row)];
    queue_->setItem(row, 0, new QTableWidgetItem(item.path));
    queue_->setItem(row, 1, new QTableWidgetItem(item.status));
    auto bar = [&](int col, double fraction, const QString& text) {
        auto* b = qobject_cast<QProgressBar*>(queue_->cellWidget(row, col));
        if (!b) {
            b = new QProgressBar;
            queue_->setCellWidget(row, col, b);
        }
        b->setValue(int(std::lround(fraction * 100)));
        b->setFormat(text);
    };
    bar(2, item.progress.jobFraction,
        item.progress.jobIndex > 0
            ? QString("%1/%2 %p%").arg(item.progress.jobIndex).arg(item.progress.jobCount)
            : QString("%p%"));
    bar(3, item.progress.planFraction, "%p%");
}

void LaunchView::startNext() {
    if (running_ >= 0) return;
    for (size_t i = 0; i < items_.size(); ++i) {
        if (items_[i].status != "queued") continue;
        running_ = int(i);
        log_->appendPlainText("$ tupe run " + items_[i].path);
        liveStore_ = StoreHandle{};
        liveJob_.clear();
        if (process_->start(findTupeCli(), {"run", items_[i].path, "--progress", "jsonl"},
                            workDir_))
            liveTimer_.start();
        return;
    }
}

void LaunchView::pollLive() {
    if (running_ < 0 || liveJob_.isEmpty()) return;
    const QueueItem& item = items_[size_t(running_)];
    if (!liveStore_.store) {
        liveStore_ = openStoreReadOnly(item.database);
        if (!liveStore_.store) return;  // the runner has not created it yet
    }
    try {
        const auto exp = liveStore_.store->find_experiment(item.name.toStdString());
        if (!exp) return;
        const auto run = liveStore_.store->find_run(exp->id, liveJob_.toStdString());
        if (!run) return;
        const auto points = liveStore_.store->metrics(run->id, "train/loss", liveLastStep_);
        if (points.empty() || live_->graphCount() == 0) return;
        for (const auto& p : points) live_->graph(0)->addData(double(p.step), p.value);
        liveLastStep_ = points.back().step;
        live_->rescaleAxes();
        throttle_->request();
    } catch (const std::exception& e) {
        liveStore_ = StoreHandle{};  // reopen next time (e.g. locked during a migration)
    }
}

void LaunchView::showPlanCurves(const QueueItem& item) {
    StoreHandle h = openStoreReadOnly(item.database);
    if (!h.store) return;
    try {
        const auto exp = h.store->find_experiment(item.name.toStdString());
        if (!exp) return;
        live_->clearGraphs();
        int colour = 0;
        for (const auto& run : h.store->list_runs(exp->id)) {
            if (run.kind != "pretrain") continue;
            QCPGraph* g = live_->addGraph();
            g->setName(QString::fromStdString(run.name));
            g->setPen(QPen(QColor::fromHsv((colour++ * 47) % 360, 200, 200), 1.5));
            for (const auto& p : h.store->metrics(run.id, "train/loss"))
                g->addData(double(p.step), p.value);
        }
        live_->legend->setVisible(live_->graphCount() <= 12);
        live_->yAxis->setLabel("train/loss of " + item.name + "'s pretraining runs");
        liveHint_->setText(live_->graphCount() ? QString()
                                               : "The study stored no pretraining run.");
        live_->rescaleAxes();
        throttle_->request();
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
}

bool LaunchView::enqueueFile(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        emit errorRaised("cannot open " + path + ": " + f.errorString());
        return false;
    }
    openText(path, QString::fromUtf8(f.readAll()));
    const int before = int(items_.size());
    addToQueue();
    return int(items_.size()) > before;
}

void LaunchView::newFile(const QString& startingPoint) {
    if (startingPoint == "quickstart") {
        QFile f(QDir(workDir_).filePath("experiments/quickstart.yaml"));
        if (!f.open(QIODevice::ReadOnly))
            return emit errorRaised("cannot open " + f.fileName() + ": " + f.errorString());
        openText({}, QString::fromUtf8(f.readAll()));
    } else {
        openText({}, QString::fromStdString(experiments::documented_defaults_yaml("new_study")));
    }
}

void LaunchView::prepareScreenshot() { validate(); }

}  // namespace app
