// Faults a run must survive, with real processes (the `tupe` CLI as a child). A disk that fills
// up (a file-size limit, `ulimit -f`, with SIGXFSZ ignored so that writes fail with EFBIG as on
// a full disk) while a checkpoint is written, and while metrics are written into the results
// store; a read-only store; a runner killed (SIGKILL) inside a store transaction, through the
// test hook TUPE_TEST_KILL_IN_TRANSACTION. Each must end with one line naming the file, not an
// abort; afterwards the previous checkpoint loads and resumes, and the store opens with every
// row committed before the fault, passes PRAGMA integrity_check and takes the run to its end.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/result_store.h"
#include "support/test_support.h"

using test_support::has;

namespace fs = std::filesystem;

namespace {

using test_support::quote;

// The last line of `err` that starts with `prefix` ("" when none).
std::string last_line_starting(const std::string& err, const std::string& prefix) {
    std::istringstream lines(err);
    std::string line, found;
    while (std::getline(lines, line))
        if (line.rfind(prefix, 0) == 0) found = line;
    return found;
}

// One SQL query's rows, each as its columns joined by '|', through SQLite itself (not the
// store): "" columns for NULL. ADD_FAILURE when the file cannot be opened or read.
std::vector<std::string> sql_rows(const fs::path& db, const std::string& sql) {
    std::vector<std::string> rows;
    sqlite3* handle = nullptr;
    if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        ADD_FAILURE() << "cannot open " << db << ": " << sqlite3_errmsg(handle);
        sqlite3_close(handle);
        return rows;
    }
    sqlite3_busy_timeout(handle, 10000);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(handle, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
        ADD_FAILURE() << sql << ": " << sqlite3_errmsg(handle);
    } else {
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
            std::string row;
            for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
                const auto* text = sqlite3_column_text(stmt, c);
                row +=
                    (c ? "|" : "") + std::string(text ? reinterpret_cast<const char*>(text) : "");
            }
            rows.push_back(row);
        }
        if (rc != SQLITE_DONE) ADD_FAILURE() << sql << ": " << sqlite3_errmsg(handle);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(handle);
    return rows;
}

// PRAGMA integrity_check: {"ok"} for a sound file.
std::vector<std::string> integrity(const fs::path& db) {
    return sql_rows(db, "PRAGMA integrity_check");
}

// Every row the store holds for experiment `name` (its runs, params, metrics, checkpoints and
// claims), as text, in a fixed order: equal before and after a fault when nothing was lost or
// changed.
std::vector<std::string> rows_of(const fs::path& db, const std::string& name) {
    const std::string exp = "(SELECT id FROM experiments WHERE name = '" + name + "')";
    const std::string runs = "(SELECT id FROM runs WHERE experiment_id = " + exp + ")";
    std::vector<std::string> out;
    for (const std::string& sql :
         {"SELECT 'run', id, kind, name, status, step, config_text FROM runs WHERE "
          "experiment_id = " +
              exp + " ORDER BY id",
          "SELECT 'param', run_id, key, value FROM params WHERE run_id IN " + runs +
              " ORDER BY run_id, key",
          "SELECT 'metric', run_id, key, step, value, wall_time FROM metrics WHERE run_id IN " +
              runs + " ORDER BY run_id, key, step",
          "SELECT 'checkpoint', run_id, step, path, size, hash FROM checkpoints WHERE run_id IN " +
              runs + " ORDER BY run_id, step",
          "SELECT 'claim', job, released_at, attempts FROM job_claims WHERE experiment_id = " +
              exp + " ORDER BY job"}) {
        const auto rows = sql_rows(db, sql);
        out.insert(out.end(), rows.begin(), rows.end());
    }
    return out;
}

size_t count_starting(const std::vector<std::string>& rows, const std::string& prefix) {
    return static_cast<size_t>(std::count_if(
        rows.begin(), rows.end(), [&](const std::string& r) { return r.rfind(prefix, 0) == 0; }));
}

class FaultTest : public test_support::TempDirTest {
  protected:
    FaultTest() : TempDirTest(test_support::per_test_name("tupe_faults")) {}
    void SetUp() override {
        test_support::write_tiny_pretraining(dir_);
        fs::create_directories(dir_ / "toy");
        test_support::write_toy_corpus(dir_ / "toy", 16, 30, 7, 11);
    }
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
    // `tupe ARGS` under a file-size limit of `kib` KiB, SIGXFSZ ignored (a full disk).
    test_support::CliResult tupe_limited(const std::string& args, int kib) const {
        return test_support::run_cli(
            "/bin/sh",
            "-c " + quote("ulimit -f " + std::to_string(kib * 2) + "; trap '' XFSZ; exec " +
                          quote(TUPE_CLI) + " " + args),
            dir_ / "stderr.txt");
    }

    // The results store of the studies below, in a folder of its own (for chmod).
    fs::path database() const { return dir_ / "store" / "results.sqlite"; }

    // Experiment `name`: bert-a (tiny, `steps` steps of batch 4 on the toy corpus, metrics
    // every `log_interval` steps, one checkpoint at the end), fine-tuned once on syn-cola, into
    // database(); returns the quoted path of its YAML file.
    std::string study(const std::string& name, int steps, int log_interval = 1) const {
        const fs::path path = dir_ / (name + ".yaml");
        std::ofstream(path) << "name: " << name
                            << "\nvariants: [bert-a]\n"
                               "model: {size: tiny, max_position_embeddings: 32}\n"
                               "data: {corpus: "
                            << (dir_ / "toy" / "corpus.txt").string()
                            << ", vocab: " << (dir_ / "toy" / "vocab.txt").string()
                            << ", cache_dir: " << (dir_ / "cache").string()
                            << ", max_seq_len: 32, validation_fraction: 0.2}\n"
                               "train: {steps: "
                            << steps << ", batch_size: 4, eval_interval: " << steps
                            << ", checkpoint_interval: " << steps
                            << ", log_interval: " << log_interval
                            << ", threads: 1}\n"
                               "glue: {data: builtin, tasks: [syn-cola], synthetic_train: 16, "
                               "synthetic_dev: 8}\n"
                               "finetune: {lrs: [1.0e-3], seeds: [1], batch_size: 8, epochs: 1, "
                               "max_seq_len: 32}\n"
                               "database: "
                            << database().string()
                            << "\nruns_dir: " << (dir_ / ("runs-" + name)).string() << "\n";
        return quote(path.string());
    }
};

}  // namespace

TEST_F(FaultTest, FullDiskDuringACheckpointIsOneLineAndKeepsThePreviousOne) {
    const std::string cfg = quote((dir_ / "tiny.yaml").string());
    const std::string run = quote((dir_ / "run").string());
    auto first = tupe("pretrain --config " + cfg + " --out " + run);
    ASSERT_EQ(first.status, 0) << first.err;
    const fs::path ckpt = dir_ / "run" / "checkpoint.pt";
    ASSERT_GT(fs::file_size(ckpt), 200u * 1024);  // the limit below is smaller
    const auto before = test_support::read_file(ckpt);

    // ulimit -f counts 512-byte blocks in dash and 1024-byte blocks in bash: 2 x kib blocks is
    // at most 2 x 100 KiB either way, below the checkpoint's size, above every other file's.
    auto full =
        tupe_limited("pretrain --config " + cfg + " --out " + run + " --set train.steps=6", 100);
    EXPECT_NE(full.status, 0) << full.err;
    EXPECT_NE(full.status, -1) << "killed by a signal instead of an error: " << full.err;
    EXPECT_EQ(full.err.find("terminate called"), std::string::npos) << full.err;
    std::istringstream lines(full.err);
    std::string line, error;
    while (std::getline(lines, line))
        if (line.rfind("tupe pretrain: error", 0) == 0 || line.rfind("tupe pretrain:", 0) == 0)
            error = line;
    EXPECT_NE(error.find("checkpoint.pt"), std::string::npos) << full.err;
    EXPECT_NE(error.find("previous checkpoint is kept"), std::string::npos) << full.err;
    EXPECT_FALSE(fs::exists(dir_ / "run" / "checkpoint.pt.tmp"));
    EXPECT_EQ(test_support::read_file(ckpt), before);  // untouched

    // With room again, the same command resumes from step 3 and finishes.
    auto again = tupe("pretrain --config " + cfg + " --out " + run + " --set train.steps=6");
    EXPECT_EQ(again.status, 0) << again.err;
    const std::string said = again.out + again.err;
    EXPECT_NE(said.find("resumed from"), std::string::npos) << said;
    EXPECT_NE(said.find("at step 3"), std::string::npos) << said;
}

TEST_F(FaultTest, FullDiskWhileWritingMetricsIsOneLineAndLosesNoCommittedRow) {
    auto first = tupe("run " + study("first", 6) + " --threads 1");
    ASSERT_EQ(first.status, 0) << first.err;
    const auto before = rows_of(database(), "first");
    ASSERT_GT(count_starting(before, "metric|"), 6u) << "the first run stored no curve";

    // The limit, from what the first run wrote: above every file it wrote (the store, its
    // checkpoint, the data cache, logs), so that only growth beyond that hits it. The second
    // run logs every step (into the store 50 steps, 200 points, a transaction) and writes its
    // checkpoint only at the end: the store's write-ahead log and file outgrow the limit long
    // before its 1,000 steps are done (measured: after ~350 steps at 64 KiB over the
    // checkpoint's size), while its other files (metrics.tsv, the events file) stay below.
    uintmax_t largest = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir_))
        if (entry.is_regular_file()) largest = std::max(largest, entry.file_size());
    const int kib = static_cast<int>(largest / 1024) + 64;
    ASSERT_LT(fs::file_size(database()), static_cast<uintmax_t>(kib) * 1024);
    ASSERT_LT(kib, 1024) << "a file of the first run grew past 960 KiB: the second run would "
                            "no longer fill the store before its other files";

    auto full = tupe_limited("run " + study("second", 1000) + " --threads 1", kib);
    EXPECT_NE(full.status, 0) << full.err;
    EXPECT_NE(full.status, -1) << "killed by a signal instead of an error: " << full.err;
    EXPECT_FALSE(has(full.err, "terminate called")) << full.err;
    const std::string error = last_line_starting(full.err, "tupe run:");
    EXPECT_TRUE(has(error, database().string())) << "limit " << kib << " KiB:\n" << full.err;
    EXPECT_TRUE(has(error, "disk is full") || has(error, "is the disk full?")) << full.err;
    EXPECT_FALSE(has(full.err, "checkpoint.pt")) << "the checkpoint hit the limit first:\n"
                                                 << full.err;

    // The store opens, is sound, and holds every row of the first experiment as it was.
    EXPECT_EQ(integrity(database()), std::vector<std::string>{"ok"});
    EXPECT_EQ(rows_of(database(), "first"), before);
    auto status = tupe("status " + study("first", 6));
    EXPECT_EQ(status.status, 0) << status.err;
    EXPECT_TRUE(has(status.out, "finished 2")) << status.out;
    // What the second run committed before the fault is there too, step after step.
    const auto partial = sql_rows(database(),
                                  "SELECT step FROM metrics WHERE key = 'train/loss' AND run_id "
                                  "IN (SELECT r.id FROM runs r JOIN experiments e ON e.id = "
                                  "r.experiment_id WHERE e.name = 'second') ORDER BY step");
    ASSERT_FALSE(partial.empty()) << "no row of the second run was committed before the fault";
    for (size_t i = 0; i < partial.size(); ++i) EXPECT_EQ(partial[i], std::to_string(i + 1));

    // With room again, the same command takes the second experiment to its end.
    auto again = tupe("run " + study("second", 1000) + " --threads 1");
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(integrity(database()), std::vector<std::string>{"ok"});
    EXPECT_EQ(rows_of(database(), "first"), before);
}

namespace {

// A read-only results store: the file 0444 and its folder 0555 (so that no journal can be
// created either), restored for the clean-up. As root, whom permissions do not stop, the CLI
// runs as `nobody` through setpriv; without setpriv the test is skipped.
class ReadOnlyStoreTest : public FaultTest {
  protected:
    void TearDown() override {
        std::error_code ignored;
        fs::permissions(database().parent_path(), fs::perms::owner_all, fs::perm_options::add,
                        ignored);
        fs::permissions(database(), fs::perms::owner_read | fs::perms::owner_write,
                        fs::perm_options::add, ignored);
    }
    // `tupe ARGS` as a user that cannot write the store.
    test_support::CliResult tupe_unprivileged(const std::string& args) const {
        if (::geteuid() != 0) return tupe(args);
        return test_support::run_cli(
            "setpriv", "--reuid=65534 --regid=65534 --clear-groups " + quote(TUPE_CLI) + " " + args,
            dir_ / "stderr.txt");
    }
};

}  // namespace

TEST_F(ReadOnlyStoreTest, WritesSayReadOnlyAndReadsStillWork) {
    // As root, the CLI runs as nobody: that needs setpriv and a build nobody may run (not
    // one under a private home directory).
    if (::geteuid() == 0 && std::system(("setpriv --reuid=65534 --regid=65534 --clear-groups " +
                                         quote(TUPE_CLI) + " --help >/dev/null 2>&1")
                                            .c_str()) != 0)
        GTEST_SKIP() << "running as root, whom file permissions do not stop, and the CLI cannot "
                        "run as nobody here (setpriv missing, or the build is not readable by "
                        "other users)";
    auto first = tupe("run " + study("first", 6) + " --threads 1");
    ASSERT_EQ(first.status, 0) << first.err;
    const auto before = rows_of(database(), "first");
    // Readable by anyone (nobody, as root), writable by no one.
    fs::permissions(dir_, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
    fs::permissions(database(),
                    fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(database().parent_path(), fs::perms::owner_read | fs::perms::owner_exec |
                                                  fs::perms::group_read | fs::perms::group_exec |
                                                  fs::perms::others_read | fs::perms::others_exec);
    const std::string db = quote(database().string());

    // A run needs to write: one line naming the file and saying it is read-only.
    auto run = tupe_unprivileged("run " + study("first", 6) + " --threads 1");
    EXPECT_NE(run.status, 0) << run.err;
    EXPECT_NE(run.status, -1) << run.err;
    EXPECT_FALSE(has(run.err, "terminate called")) << run.err;
    const std::string error = last_line_starting(run.err, "tupe run:");
    EXPECT_TRUE(has(error, database().string())) << run.err;
    EXPECT_TRUE(has(error, "read-only")) << run.err;

    // Reading needs no write: report, status and claims work on the read-only store.
    auto report = tupe_unprivileged("report --db " + db);
    EXPECT_EQ(report.status, 0) << report.err;
    EXPECT_TRUE(has(report.out, "first")) << report.out;
    auto status = tupe_unprivileged("status " + study("first", 6));
    EXPECT_EQ(status.status, 0) << status.err;
    EXPECT_TRUE(has(status.out, "finished 2")) << status.out;
    auto claims = tupe_unprivileged("claims --db " + db);
    EXPECT_EQ(claims.status, 0) << claims.err;
    EXPECT_TRUE(has(claims.out, "first")) << claims.out;

    EXPECT_EQ(rows_of(database(), "first"), before);
    EXPECT_EQ(integrity(database()), std::vector<std::string>{"ok"});
}

TEST_F(FaultTest, RunnerKilledInsideATransactionLosesOnlyThatTransaction) {
    auto first = tupe("run " + study("first", 6) + " --threads 1");
    ASSERT_EQ(first.status, 0) << first.err;
    const auto before = rows_of(database(), "first");

    // The pretraining stores its curves 200 points (50 steps) a transaction: the 3rd metrics
    // transaction of the second run dies after its first row, halfway through its 200 steps.
    const std::string cfg = study("second", 200);
    auto killed =
        test_support::run_cli("TUPE_TEST_KILL_IN_TRANSACTION=metrics:3 " + quote(TUPE_CLI),
                              "run " + cfg + " --threads 1", dir_ / "stderr.txt");
    // Killed: run_cli's -1, or 128 + SIGKILL from the shell that started it.
    ASSERT_TRUE(killed.status == -1 || killed.status == 128 + 9)
        << "expected death by SIGKILL, got status " << killed.status << ":\n"
        << killed.err;
    static const std::regex said(
        R"(SIGKILL after (\d+) committed metric rows, inside a transaction of (\d+) rows of run (\d+) \(first: (\S+) at step (\d+)\))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(killed.err, m, said)) << killed.err;
    const size_t committed = std::stoul(m[1]);
    const std::string run_id = m[3], key = m[4], step = m[5];
    ASSERT_GT(committed, 0u);
    ASSERT_GT(std::stol(step), 1);

    // The next process finds the half transaction rolled back and every committed one there.
    EXPECT_EQ(integrity(database()), std::vector<std::string>{"ok"});
    EXPECT_EQ(rows_of(database(), "first"), before);
    const auto second =
        sql_rows(database(), "SELECT count(*) FROM metrics WHERE run_id = " + run_id);
    EXPECT_EQ(second, std::vector<std::string>{std::to_string(committed)});
    EXPECT_TRUE(sql_rows(database(), "SELECT value FROM metrics WHERE run_id = " + run_id +
                                         " AND key = '" + key + "' AND step = " + step)
                    .empty())
        << "the row written inside the killed transaction survived";
    // The curve up to the killed transaction is whole: every step before it, once.
    const auto kept = sql_rows(database(), "SELECT step FROM metrics WHERE run_id = " + run_id +
                                               " AND key = '" + key + "' ORDER BY step");
    ASSERT_EQ(kept.size(), static_cast<size_t>(std::stol(step) - 1));
    for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i], std::to_string(i + 1));
    auto status = tupe("status " + cfg);
    EXPECT_EQ(status.status, 0) << status.err;
    EXPECT_TRUE(has(status.out, "no such process")) << status.out;

    // And the run completes: every curve point once, at every logged step.
    auto again = tupe("run " + cfg + " --threads 1");
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(integrity(database()), std::vector<std::string>{"ok"});
    EXPECT_EQ(rows_of(database(), "first"), before);
    const auto steps = sql_rows(database(), "SELECT step FROM metrics WHERE run_id = " + run_id +
                                                " AND key = 'train/loss' ORDER BY step");
    ASSERT_EQ(steps.size(), 200u);
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], std::to_string(i + 1));
    auto done = tupe("status " + cfg);
    EXPECT_TRUE(has(done.out, "finished 2")) << done.out;
}
