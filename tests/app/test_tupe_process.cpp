// The child-process runner: progress parsing of `tupe run` output, signals from a real child
// (lines, progress, exit code and message), pause (SIGSTOP) and resume, cancellation (also of
// the child's own children), and the
// real `tupe` CLI: a malformed experiment fails with its file and line, and a running tiny
// experiment stops on cancel (SIGTERM -> exit 130, "run the same command to resume"); and the
// app's own command line (`tupe-workbench --help` with no display).
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QThread>
#include <fstream>
#include <functional>
#include <vector>

#include "app_test_util.h"
#include "core/tupe_process.h"

using namespace app;

namespace {

struct Finished {
    bool seen = false;
    int code = 0;
    bool cancelled = false;
    QString message;
};

Finished* watch(TupeProcess& p) {
    auto* f = new Finished;
    QObject::connect(&p, &TupeProcess::finished, &p,
                     [f](int code, bool cancelled, const QString& m) {
                         f->seen = true, f->code = code, f->cancelled = cancelled, f->message = m;
                     });
    QObject::connect(&p, &QObject::destroyed, [f] { delete f; });
    return f;
}

char processState(qint64 pid) {
    QFile f(QString("/proc/%1/stat").arg(pid));
    if (!f.open(QIODevice::ReadOnly)) return '?';
    const QByteArray s = f.readAll();
    const int close = s.lastIndexOf(')');
    return close >= 0 && close + 2 < s.size() ? s[close + 2] : '?';
}

// Every process of process group `pgid` is stopped: 'T', or 'D' for a shell blocked in vfork()
// until its stopped child execs. At least one must be 'T'.
bool groupStopped(qint64 pgid) {
    bool any = false;
    for (const QString& entry : QDir("/proc").entryList(QDir::Dirs)) {
        bool numeric = false;
        entry.toLongLong(&numeric);
        if (!numeric) continue;
        QFile f("/proc/" + entry + "/stat");
        if (!f.open(QIODevice::ReadOnly)) continue;
        const QByteArray s = f.readAll();
        const int close = s.lastIndexOf(')');
        if (close < 0) continue;
        const QList<QByteArray> fields = s.mid(close + 2).split(' ');  // state ppid pgrp ...
        if (fields.size() < 3 || fields[2].toLongLong() != pgid) continue;
        if (fields[0] == "T")
            any = true;
        else if (fields[0] != "D")
            return false;
    }
    return any;
}

}  // namespace

TEST(RunProgress, FoldsTheJsonEventsOfTupeRun) {
    PlanProgressInfo p;
    QString shown;
    EXPECT_TRUE(parseRunProgressLine(
        R"({"event":"plan","experiment":"q","variants":2,"jobs":4,"database":"r.sqlite"})", p,
        &shown));
    EXPECT_EQ(p.jobCount, 4);
    EXPECT_EQ(shown, "experiment q: 4 jobs, results in r.sqlite");
    EXPECT_TRUE(
        parseRunProgressLine(R"({"event":"job","job":"tupe-a","index":2,"total":4})", p, &shown));
    EXPECT_EQ(p.jobIndex, 2);
    EXPECT_EQ(p.job, "tupe-a");
    EXPECT_DOUBLE_EQ(p.planFraction, 0.25);
    EXPECT_EQ(shown, "[2/4] tupe-a");
    // Job 2 (1 done) half done: plan (1 + 0.5) / 4.
    EXPECT_TRUE(parseRunProgressLine(
        R"({"event":"progress","job":"tupe-a","done":1,"total":4,"fraction":0.5,)"
        R"("status":"loss 6.21","eta_s":125})",
        p, &shown));
    EXPECT_DOUBLE_EQ(p.jobFraction, 0.5);
    EXPECT_DOUBLE_EQ(p.planFraction, 0.375);
    EXPECT_EQ(p.status, "loss 6.21  ETA 2m05s");
    EXPECT_TRUE(shown.isEmpty());  // progress is drawn as bars, not logged
    EXPECT_FALSE(
        parseRunProgressLine(R"({"event":"message","text":"bert-a: resumed at 40"})", p, &shown));
    EXPECT_EQ(shown, "bert-a: resumed at 40");
    // Lines that are not events (stderr: the error line) are shown as they are.
    EXPECT_FALSE(parseRunProgressLine("tupe run: error: x.yaml:3: unknown key", p, &shown));
    EXPECT_EQ(shown, "tupe run: error: x.yaml:3: unknown key");
    EXPECT_FALSE(parseRunProgressLine("{not json", p, &shown));
    EXPECT_EQ(shown, "{not json");
    EXPECT_TRUE(parseRunProgressLine(
        R"({"event":"summary","finished":4,"skipped":0,"failed":0,"stopped":false})", p, &shown));
    EXPECT_DOUBLE_EQ(p.planFraction, 1.0);
    EXPECT_EQ(p.jobIndex, 2);  // unchanged by events that do not name a job
}

TEST(TupeProcess, EmitsLinesProgressAndFailure) {
    app_test::ensureApplication();
    TupeProcess p;
    Finished* f = watch(p);
    QStringList lines;
    int progress = 0;
    QObject::connect(&p, &TupeProcess::lineReceived, [&](const QString& l) { lines << l; });
    QObject::connect(&p, &TupeProcess::progressChanged,
                     [&](const PlanProgressInfo&) { ++progress; });
    ASSERT_TRUE(p.start(
        "/bin/sh",
        {"-c",
         R"(echo '{"event":"job","job":"bert-a","index":1,"total":2}'; )"
         R"(echo '{"event":"progress","job":"bert-a","done":0,"total":2,"fraction":0.5,"status":"loss 3"}'; )"
         R"(echo 'tupe run: error: boom' >&2; exit 3)"}));
    ASSERT_TRUE(app_test::processEventsUntil([&] { return f->seen; }, 10000));
    EXPECT_EQ(f->code, 3);
    EXPECT_FALSE(f->cancelled);
    EXPECT_EQ(f->message, "tupe run: error: boom");
    EXPECT_EQ(lines, (QStringList{"[1/2] bert-a", "tupe run: error: boom"}));
    EXPECT_EQ(progress, 2);
    EXPECT_DOUBLE_EQ(p.progress().jobFraction, 0.5);
    EXPECT_EQ(p.state(), TupeProcess::State::kIdle);
}

TEST(TupeProcess, PauseStopsTheChildAndResumeContinues) {
    app_test::ensureApplication();
    TupeProcess p;
    Finished* f = watch(p);
    ASSERT_TRUE(p.start("/bin/sh", {"-c", "sleep 0.6; echo done"}));
    p.pause();
    EXPECT_EQ(p.state(), TupeProcess::State::kPaused);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return groupStopped(p.pid()); }, 3000));
    EXPECT_FALSE(
        app_test::processEventsUntil([&] { return f->seen; }, 1500));  // stopped: it cannot finish
    p.resume();
    EXPECT_EQ(p.state(), TupeProcess::State::kRunning);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return f->seen; }, 10000));
    EXPECT_EQ(f->code, 0);
}

// `tupe run --jobs N` and `--nproc-per-node N` start processes of their own: pause, resume and
// cancel must reach them too (the child leads a process group that the signals go to).
TEST(TupeProcess, SignalsReachTheChildsOwnChildren) {
    app_test::ensureApplication();
    TupeProcess p;
    Finished* f = watch(p);
    QStringList lines;
    QObject::connect(&p, &TupeProcess::lineReceived, [&](const QString& l) { lines << l; });
    ASSERT_TRUE(p.start("/bin/sh", {"-c", "sleep 30 & echo $!; wait"}));
    ASSERT_TRUE(app_test::processEventsUntil([&] { return !lines.isEmpty(); }, 5000));
    const qint64 grandchild = lines.first().toLongLong();
    ASSERT_GT(grandchild, 0) << lines.first().toStdString();
    p.pause();
    EXPECT_TRUE(
        app_test::processEventsUntil([&] { return processState(grandchild) == 'T'; }, 3000));
    p.resume();
    EXPECT_TRUE(
        app_test::processEventsUntil([&] { return processState(grandchild) == 'S'; }, 3000));
    p.cancel(2000);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return f->seen; }, 10000));
    // The grandchild got SIGTERM as well: gone, or a zombie waiting for its reaper.
    EXPECT_TRUE(app_test::processEventsUntil(
        [&] {
            const char s = processState(grandchild);
            return s == '?' || s == 'Z';
        },
        3000))
        << processState(grandchild);
}

TEST(TupeProcess, CancelEndsAPausedChild) {
    app_test::ensureApplication();
    TupeProcess p;
    Finished* f = watch(p);
    std::vector<TupeProcess::State> states;
    QObject::connect(&p, &TupeProcess::stateChanged,
                     [&](TupeProcess::State s) { states.push_back(s); });
    ASSERT_TRUE(p.start("sleep", {"30"}));
    p.pause();
    p.cancel(2000);
    EXPECT_EQ(p.state(), TupeProcess::State::kStopping);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return f->seen; }, 10000));
    // The states it went through, in order (not how long it took: a loaded machine may be
    // slow, but a paused child must still be woken, stopped and reaped): a sleep of 30 s that
    // ended before its time was cancelled, not finished.
    const std::vector<TupeProcess::State> expected = {
        TupeProcess::State::kRunning, TupeProcess::State::kPaused, TupeProcess::State::kStopping,
        TupeProcess::State::kIdle};
    EXPECT_EQ(states, expected);
    EXPECT_EQ(p.state(), TupeProcess::State::kIdle);
    EXPECT_TRUE(f->cancelled);
    EXPECT_NE(f->code, 0);
    EXPECT_EQ(f->message, "cancelled");
}

TEST(TupeProcess, MissingProgramFails) {
    app_test::ensureApplication();
    TupeProcess p;
    QString failure;
    QObject::connect(&p, &TupeProcess::failed, [&](const QString& m) { failure = m; });
    EXPECT_FALSE(p.start("/nonexistent/tupe", {"run", "x.yaml"}));
    EXPECT_TRUE(failure.contains("/nonexistent/tupe")) << failure.toStdString();
    EXPECT_EQ(p.state(), TupeProcess::State::kIdle);
}

TEST(TupeCli, MalformedExperimentFailsWithFileAndLine) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::ofstream(dir.file("bad.yaml")) << "name: bad\ntrain:\n  stpes: 3\n";
    TupeProcess p;
    Finished* f = watch(p);
    ASSERT_TRUE(p.start(TUPE_CLI, {"run", QString::fromStdString(dir.file("bad.yaml"))}));
    ASSERT_TRUE(app_test::processEventsUntil([&] { return f->seen; }, 60000));
    EXPECT_NE(f->code, 0);
    EXPECT_TRUE(f->message.contains("bad.yaml:3")) << f->message.toStdString();
}

TEST(TupeCli, CancelStopsARunningExperiment) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    test_support::write_toy_corpus(dir.path(), 20, 30, 7, 7);
    std::ofstream(dir.file("tiny.yaml"))
        << "name: tiny\nvariants: [bert-a]\nmodel: {size: tiny, max_position_embeddings: 32}\n"
        << "data: {corpus: " << dir.file("corpus.txt") << ", vocab: " << dir.file("vocab.txt")
        << ", cache_dir: " << dir.file("cache") << ", max_seq_len: 32, validation_fraction: 0.25}\n"
        << "train: {steps: 100000, batch_size: 8, eval_interval: 1000, checkpoint_interval: 1000, "
           "log_interval: 10, threads: 1}\n"
        << "glue: {data: builtin, tasks: [syn-cola], synthetic_train: 40, synthetic_dev: 20}\n"
        << "finetune: {lrs: [1.0e-3], seeds: [1], batch_size: 8, epochs: 1, max_seq_len: 32}\n"
        << "database: " << dir.file("db.sqlite") << "\nruns_dir: " << dir.file("runs") << "\n";
    TupeProcess p;
    Finished* f = watch(p);
    // As the app's launcher runs it: progress as JSON events on stdout.
    ASSERT_TRUE(p.start(
        TUPE_CLI, {"run", QString::fromStdString(dir.file("tiny.yaml")), "--progress", "jsonl"}));
    // The first job starts (a "job" event for bert-a), then the cancel stops it between steps.
    ASSERT_TRUE(app_test::processEventsUntil([&] { return p.progress().jobIndex == 1 || f->seen; },
                                             120000));
    ASSERT_FALSE(f->seen) << f->message.toStdString();
    EXPECT_EQ(p.progress().job, "bert-a");
    EXPECT_EQ(p.progress().jobCount, 2);
    // Progress events inside the job move its fraction (100,000 steps: far from done).
    ASSERT_TRUE(app_test::processEventsUntil(
        [&] { return p.progress().jobFraction > 0 || f->seen; }, 60000));
    EXPECT_LT(p.progress().jobFraction, 0.5);
    EXPECT_TRUE(p.progress().status.contains("loss")) << p.progress().status.toStdString();
    p.cancel(30000);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return f->seen; }, 60000));
    EXPECT_TRUE(f->cancelled);
    EXPECT_EQ(f->code, 130);  // stopped cleanly, resumable
}

// `tupe-workbench --help` answers on a machine with no display at all: no DISPLAY, no Wayland,
// no QT_QPA_PLATFORM (a QApplication would abort there before printing anything).
TEST(WorkbenchCommandLine, HelpWorksWithoutADisplay) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(name);
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(TUPE_WORKBENCH, {"--help"});
    ASSERT_TRUE(p.waitForFinished(10000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    EXPECT_EQ(p.exitStatus(), QProcess::NormalExit) << p.readAllStandardError().toStdString();
    EXPECT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
    EXPECT_TRUE(out.contains("Usage: ")) << out.toStdString();
    EXPECT_TRUE(out.contains("--db <FILE>")) << out.toStdString();
    EXPECT_TRUE(out.contains("--screenshots <DIR>")) << out.toStdString();
}
