// Heavy work off the GUI thread as a child `tupe` process (training and analysis need torch,
// which no Qt file may include): QProcess runs `tupe run FILE` or `tupe analyze ...`, its
// stderr/stdout lines are parsed into plan progress, and pause/resume/cancel are signals to
// the child's process group, so they reach the processes `tupe run --jobs N` and
// `--nproc-per-node N` start as well (SIGSTOP/SIGCONT; SIGTERM makes `tupe run` stop after the
// current step and keep its checkpoint, a SIGKILL follows if it does not exit in time).
#pragma once

#include <QMetaType>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace app {

/// Where the `tupe` CLI is: $TUPE_CLI, then `tupe` next to this executable, then the build
/// tree's CLI (compiled in), then PATH. Empty when none exists.
QString findTupeCli();

/// Progress of `tupe run` as its output says it.
struct PlanProgressInfo {
    int jobIndex = 0;        ///< 1-based index of the job running now (0 = none yet)
    int jobCount = 0;        ///< jobs in the plan
    QString job;             ///< its name, e.g. "tupe-a" or "tupe-a/step180/syn-cola/lr0.001/seed1"
    double jobFraction = 0;  ///< 0..1 inside the current job
    double planFraction = 0;  ///< 0..1 for the whole plan
    QString status;           ///< e.g. "step 42/200  loss 7.624"
};

/// Folds one line of `tupe run --progress jsonl` into `p`; returns whether it changed the
/// progress. The events are JSON objects (cli/cmd_experiment.cpp): "plan" {jobs}, "job" {job,
/// index, total}, "progress" {job, done, total, fraction, status, eta_s}, "message" {text} and
/// "summary" {finished, skipped, failed, stopped}. `display` receives what a person reads in
/// the log for the line: a job's "[k/N] JOB", a message's text, nothing for progress events,
/// and the line itself when it is not an event (stderr: warnings, the error line).
bool parseRunProgressLine(const QString& line, PlanProgressInfo& p, QString* display = nullptr);

/// One child `tupe` process with line-wise output.
class TupeProcess : public QObject {
    Q_OBJECT
  public:
    enum class State { kIdle, kRunning, kPaused, kStopping };

    explicit TupeProcess(QObject* parent = nullptr);
    ~TupeProcess() override;

    /// Starts `program args` in `workingDir` (empty: the current one). False (and
    /// failed() emitted) when already running or the program cannot start.
    bool start(const QString& program, const QStringList& args, const QString& workingDir = {});
    void pause();   ///< SIGSTOP
    void resume();  ///< SIGCONT
    /// SIGTERM (after SIGCONT when paused); a SIGKILL when the child is still there after
    /// `graceMs`.
    void cancel(int graceMs = 15000);

    State state() const { return state_; }
    const PlanProgressInfo& progress() const { return progress_; }
    QString lastErrorLine() const { return lastError_; }  ///< last line with "error"
    qint64 pid() const;

  signals:
    void lineReceived(const QString& line);
    void progressChanged(const app::PlanProgressInfo& progress);
    void stateChanged(app::TupeProcess::State state);
    /// The child ended: exit code (-1 when it crashed or was killed), whether cancel() was
    /// asked, and a one-line reason when it failed.
    void finished(int exitCode, bool cancelled, const QString& message);
    void failed(const QString& message);  ///< could not start

  private:
    void readOutput();
    void setState(State s);

    QProcess* process_;
    State state_ = State::kIdle;
    PlanProgressInfo progress_;
    QByteArray buffer_;
    QString lastError_, lastLine_;
    bool cancelled_ = false;
};

}  // namespace app

Q_DECLARE_METATYPE(app::PlanProgressInfo)
