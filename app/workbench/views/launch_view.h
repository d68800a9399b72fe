// Launch and queue: an experiment YAML editor whose mistakes are shown inline at their line
// (checked as `tupe run` reads it), a queue of experiment files run one after another as
// child `tupe run FILE` processes (start, pause = SIGSTOP, resume, cancel = SIGTERM, which
// stops after the current step and keeps the checkpoint), a progress bar per job and for the
// plan, the child's log, and a live curve of the running job polled from its store (after a
// study, the train/loss of its pretraining runs). A new file starts from the field tables'
// documented defaults or the quickstart.
#pragma once

#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QTimer>
#include <memory>

#include "core/store_access.h"
#include "core/tupe_process.h"
#include "views/plot_util.h"
#include "views/workbench_view.h"

namespace app {

class LaunchView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit LaunchView(QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QCustomPlot* exportablePlot() override { return live_; }
    QString dataCsv() override { return plotCsv(live_); }
    void prepareScreenshot() override;

    /// Shows `text` as the file `path` in the editor (not saved until Save).
    void openText(const QString& path, const QString& text);
    /// Opens the saved file `path` in the editor and adds it to the queue (the study builder's
    /// Queue); false (banner) when it cannot be read or does not load.
    bool enqueueFile(const QString& path);
    /// A new file in the editor: "defaults" (every key of the field tables at its documented
    /// default, commented) or "quickstart" (experiments/quickstart.yaml).
    void newFile(const QString& startingPoint);
    QString text() const { return editor_->toPlainText(); }
    QString filePath() const { return path_; }
    QTableWidget* queueTable() const { return queue_; }
    QCustomPlot* livePlot() const { return live_; }

  signals:
    void runFinished();

  private:
    struct QueueItem {
        QString path, status = "queued";
        PlanProgressInfo progress;
        QString database;  ///< the experiment's database, for the live curve
        QString name;      ///< the experiment's name
    };
    void styleWidgets();
    QWidget* buildEditorPane();
    QWidget* buildQueuePane();
    void setUpLivePlot();
    void connectFileButtons(QPushButton* open, QPushButton* saveB, QPushButton* saveAs,
                            QPushButton* enqueue);
    void connectProcess();
    void showProcessState(TupeProcess::State s);
    void showProgress(const PlanProgressInfo& p);
    void finishRun(int code, bool cancelled, const QString& message);
    void validate();
    bool save(const QString& path);
    void addToQueue();
    void startNext();
    void updateQueueRow(int row);
    void pollLive();
    void showPlanCurves(const QueueItem& item);

    QString path_;
    QString workDir_;
    QPlainTextEdit* editor_;
    QLabel* fileLabel_;
    QLabel* check_;
    QTimer validateTimer_;
    QTableWidget* queue_;
    QPushButton* start_;
    QPushButton* pause_;
    QPushButton* cancel_;
    QProgressBar* jobBar_;
    QProgressBar* planBar_;
    QPlainTextEdit* log_;
    QCustomPlot* live_;
    ReplotThrottle* throttle_;
    QTimer liveTimer_;
    TupeProcess* process_;
    std::vector<QueueItem> items_;
    int running_ = -1;
    StoreHandle liveStore_;
    QString liveJob_;
    QCPItemText* liveHint_ = nullptr;
    std::int64_t liveLastStep_ = std::numeric_limits<std::int64_t>::min();
};

}  // namespace app
