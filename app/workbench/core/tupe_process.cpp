// The child-process runner (see tupe_process.h).
#include "core/tupe_process.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTimer>

namespace app {

QString findTupeCli() {
    const QString env = qEnvironmentVariable("TUPE_CLI");
    if (!env.isEmpty() && QFileInfo(env).isExecutable()) return env;
    if (QCoreApplication::instance()) {
        const QString beside = QCoreApplication::applicationDirPath() + "/tupe";
        if (QFileInfo(beside).isExecutable()) return beside;
    }
#ifdef TUPE_BUILD_CLI
    if (QFileInfo(TUPE_BUILD_CLI).isExecutable()) return QStringLiteral(TUPE_BUILD_CLI);
#endif
    return QStandardPaths::findExecutable("tupe");
}

bool parseRunProgressLine(const QString& raw, PlanProgressInfo& p) {
    QString line = raw;
    const int cr = line.lastIndexOf('\r');
    if (cr >= 0) line = line.mid(cr + 1);
    line.remove(QRegularExpression("\x1b\\[[0-9;]*[A-Za-z]"));
    line = line.trimmed();
    static const QRegularExpression job("^\\[(\\d+)/(\\d+)\\]\\s+(\\S.*)$");
    static const QRegularExpression bar(
        "^(?:\\[[#.]*\\]\\s*)?(\\d+)/(\\d+)\\s+(.*?)\\s*(?:ETA\\s+\\S+)?$");
    if (const auto m = job.match(line); m.hasMatch()) {
        p.jobIndex = m.captured(1).toInt();
        p.jobCount = m.captured(2).toInt();
        p.job = m.captured(3).trimmed();
        p.jobFraction = 0;
        p.planFraction = p.jobCount > 0 ? double(p.jobIndex - 1) / p.jobCount : 0;
        p.status.clear();
        return true;
    }
    if (const auto m = bar.match(line); m.hasMatch()) {
        const double done = m.captured(1).toDouble(), total = m.captured(2).toDouble();
        if (total <= 0) return false;
        p.planFraction = std::min(1.0, done / total);
        if (p.jobCount > 0 && p.jobIndex > 0) {
            // The bar counts hundredths of a job: total = jobs * 100.
            const double perJob = total / p.jobCount;
            p.jobFraction = std::clamp((done - (p.jobIndex - 1) * perJob) / perJob, 0.0, 1.0);
        }
        p.status = m.captured(3).trimmed();
        return true;
    }
    return false;
}

namespace {

// The child leads its own process group, so one signal reaches it and everything it starts:
// `tupe run --jobs N` children and `--nproc-per-node` workers pause, resume and stop with it.
// Falls back to the child alone if it has no group of its own (see start()).
void signalGroup(qint64 pid, int sig) {
    if (pid <= 0) return;
    if (::kill(-static_cast<pid_t>(pid), sig) != 0) ::kill(static_cast<pid_t>(pid), sig);
}

}  // namespace

TupeProcess::TupeProcess(QObject* parent) : QObject(parent), process_(new QProcess(this)) {
    process_->setProcessChannelMode(QProcess::MergedChannels);
    process_->setChildProcessModifier([] { ::setpgid(0, 0); });
    connect(process_, &QProcess::readyRead, this, &TupeProcess::readOutput);
    connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart) return;
        setState(State::kIdle);
        emit failed("cannot start " + process_->program() + ": " + process_->errorString());
    });
    connect(process_, qOverload<int, QProcess::ExitStatus>(&QProcess::finished), this,
            [this](int code, QProcess::ExitStatus status) {
                readOutput();
                if (!buffer_.isEmpty()) {
                    const QString rest = QString::fromUtf8(buffer_);
                    buffer_.clear();
                    emit lineReceived(rest);
                }
                const int exitCode = status == QProcess::CrashExit ? -1 : code;
                QString message;
                if (exitCode != 0)
                    message = cancelled_              ? QStringLiteral("cancelled")
                              : !lastError_.isEmpty() ? lastError_
                              : !lastLine_.isEmpty()  ? lastLine_
                                                      : QString("exit code %1").arg(exitCode);
                setState(State::kIdle);
                emit finished(exitCode, cancelled_, message);
            });
}

TupeProcess::~TupeProcess() {
    if (process_->state() != QProcess::NotRunning) {
        signalGroup(process_->processId(), SIGCONT);
        signalGroup(process_->processId(), SIGKILL);
        process_->waitForFinished(3000);
    }
}

bool TupeProcess::start(const QString& program, const QStringList& args, const QString& dir) {
    if (state_ != State::kIdle) {
        emit failed("a process is already running");
        return false;
    }
    progress_ = PlanProgressInfo{};
    buffer_.clear();
    lastError_.clear();
    lastLine_.clear();
    cancelled_ = false;
    if (program.isEmpty()) {
        emit failed("the `tupe` command line was not found (set TUPE_CLI or put tupe on PATH)");
        return false;
    }
    process_->setWorkingDirectory(dir);
    process_->start(program, args);
    if (!process_->waitForStarted(10000)) return false;  // errorOccurred emitted failed()
    // The child makes itself a group leader before exec; doing it from here too closes the
    // window in which a signal to the group could find no group (the shells' double setpgid;
    // EACCES once the child has exec'd means it is done already).
    ::setpgid(static_cast<pid_t>(process_->processId()), static_cast<pid_t>(process_->processId()));
    setState(State::kRunning);
    return true;
}

qint64 TupeProcess::pid() const { return process_->processId(); }

void TupeProcess::pause() {
    if (state_ != State::kRunning) return;
    signalGroup(process_->processId(), SIGSTOP);
    setState(State::kPaused);
}

void TupeProcess::resume() {
    if (state_ != State::kPaused) return;
    signalGroup(process_->processId(), SIGCONT);
    setState(State::kRunning);
}

void TupeProcess::cancel(int graceMs) {
    if (state_ == State::kIdle || state_ == State::kStopping) return;
    cancelled_ = true;
    const qint64 pid = process_->processId();
    if (state_ == State::kPaused) signalGroup(pid, SIGCONT);
    signalGroup(pid, SIGTERM);
    setState(State::kStopping);
    QTimer::singleShot(graceMs, this, [this, pid] {
        if (process_->state() != QProcess::NotRunning && process_->processId() == pid)
            signalGroup(pid, SIGKILL);
    });
}

void TupeProcess::readOutput() {
    buffer_ += process_->readAll();
    // Lines end in '\n'; a progress bar on a terminal ends in '\r' (not here: no tty).
    for (;;) {
        int cut = -1;
        for (int i = 0; i < buffer_.size(); ++i)
            if (buffer_[i] == '\n' || buffer_[i] == '\r') {
                cut = i;
                break;
            }
        if (cut < 0) break;
        const QString line = QString::fromUtf8(buffer_.left(cut)).trimmed();
        buffer_.remove(0, cut + 1);
        if (line.isEmpty()) continue;
        lastLine_ = line;
        if (line.contains("error", Qt::CaseInsensitive)) lastError_ = line;
        emit lineReceived(line);
        if (parseRunProgressLine(line, progress_)) emit progressChanged(progress_);
    }
}

void TupeProcess::setState(State s) {
    if (s == state_) return;
    state_ = s;
    emit stateChanged(s);
}

}  // namespace app
