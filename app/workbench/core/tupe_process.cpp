// The child-process runner (see tupe_process.h).
#include "core/tupe_process.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QStandardPaths>
#include <QTimer>
#include <algorithm>
#include <cmath>

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

bool parseRunProgressLine(const QString& line, PlanProgressInfo& p, QString* display) {
    if (display) *display = line;
    if (!line.startsWith('{')) return false;
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(line.toUtf8(), &error);
    if (error.error != QJsonParseError::NoError || !doc.isObject()) return false;
    const QJsonObject e = doc.object();
    const QString event = e.value("event").toString();
    if (event.isEmpty()) return false;
    if (display) display->clear();
    if (event == "plan") {
        p.jobCount = e.value("jobs").toInt();
        if (display)
            *display = QString("experiment %1: %2 jobs, results in %3")
                           .arg(e.value("experiment").toString())
                           .arg(p.jobCount)
                           .arg(e.value("database").toString());
        return true;
    }
    if (event == "job") {
        p.jobIndex = e.value("index").toInt();
        p.jobCount = e.value("total").toInt(p.jobCount);
        p.job = e.value("job").toString();
        p.jobFraction = 0;
        p.planFraction = p.jobCount > 0 ? double(p.jobIndex - 1) / p.jobCount : 0;
        p.status.clear();
        if (display) *display = QString("[%1/%2] %3").arg(p.jobIndex).arg(p.jobCount).arg(p.job);
        return true;
    }
    if (event == "progress") {
        const int total = e.value("total").toInt(p.jobCount);
        if (total <= 0) return false;
        p.jobCount = total;
        p.job = e.value("job").toString(p.job);
        p.jobIndex = e.value("done").toInt() + 1;
        p.jobFraction = std::clamp(e.value("fraction").toDouble(), 0.0, 1.0);
        p.planFraction = std::min(1.0, (e.value("done").toDouble() + p.jobFraction) / total);
        p.status = e.value("status").toString();
        const QJsonValue eta = e.value("eta_s");
        if (eta.isDouble()) {
            const int s = int(std::lround(eta.toDouble()));
            p.status +=
                s >= 3600
                    ? QString("  ETA %1h%2m").arg(s / 3600).arg(s % 3600 / 60, 2, 10, QChar('0'))
                : s >= 60 ? QString("  ETA %1m%2s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'))
                          : QString("  ETA %1s").arg(s);
        }
        return true;
    }
    if (event == "message") {
        if (display) *display = e.value("text").toString();
        return false;
    }
    if (event == "summary") {
        const int failed = e.value("failed").toInt();
        const bool stopped = e.value("stopped").toBool();
        if (display)
            *display = QString("%1 finished, %2 already done, %3 failed%4")
                           .arg(e.value("finished").toInt())
                           .arg(e.value("skipped").toInt())
                           .arg(failed)
                           .arg(stopped ? "; stopped" : "");
        if (failed == 0 && !stopped) {
            p.planFraction = 1;
            p.jobFraction = 1;
            return true;
        }
        return false;
    }
    return false;  // an event of a newer tupe: not progress this app knows
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
    // Lines end in '\n' (JSON events on stdout, plain lines on stderr).
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
        QString display;
        const bool changed = parseRunProgressLine(line, progress_, &display);
        if (!display.isEmpty()) {
            lastLine_ = display;
            if (display.contains("error", Qt::CaseInsensitive)) lastError_ = display;
            emit lineReceived(display);
        }
        if (changed) emit progressChanged(progress_);
    }
}

void TupeProcess::setState(State s) {
    if (s == state_) return;
    state_ = s;
    emit stateChanged(s);
}

}  // namespace app
