// Tests of the SQLite results store: create and reopen, schema migrations and refusals (newer
// version, another program's database, a file that is not SQLite, missing and write-protected
// files), the record round trips with their replace semantics, concurrency: a reader in
// another thread during batched writes, and a write against another connection's lock; and the
// job claims of runners sharing a plan (claim, refuse while live, take over when stale or
// gone, hand off, release; one winner among simultaneous claimers).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "experiments/result_store.h"
#include "support/test_support.h"

using test_support::has;

namespace {

namespace fs = std::filesystem;
using experiments::ArtifactRecord;
using experiments::CheckpointRecord;
using experiments::ClaimHealth;
using experiments::ClaimOptions;
using experiments::ClaimOwner;
using experiments::ClaimResult;
using experiments::GlueResultRecord;
using experiments::JobClaim;
using experiments::MetricPoint;
using experiments::OpenMode;
using experiments::ResultStore;
using experiments::RunRecord;
using experiments::StoreError;
using experiments::StoreOptions;

// A fresh directory under the system temp dir (tupe_store_test_<pid>_<random>), removed with
// everything in it.
struct TempDir : test_support::TempDir {
    TempDir()
        : test_support::TempDir("tupe_store_test_" + test_support::process_id() + "_" +
                                test_support::random_tag()) {}
};

// A plain sqlite3 connection, to build old or foreign files and to hold locks.
class RawDb {
  public:
    explicit RawDb(const std::string& path) {
        if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK)
            throw std::runtime_error("raw open failed: " + path);
    }
    ~RawDb() { sqlite3_close_v2(db_); }
    void exec(const std::string& sql) {
        char* message = nullptr;
        if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
            const std::string text = message ? message : "?";
            sqlite3_free(message);
            throw std::runtime_error("raw exec failed: " + text + " in " + sql);
        }
    }
    std::string text(const std::string& sql) {
        sqlite3_stmt* stmt = nullptr;
        sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr);
        std::string out;
        if (stmt && sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
            out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
        sqlite3_finalize(stmt);
        return out;
    }
    int user_version() { return std::stoi(text("PRAGMA user_version")); }

  private:
    sqlite3* db_ = nullptr;
};

// Runs `action` and returns the StoreError it throws; fails the test when none is thrown.
StoreError store_error(const std::function<void()>& action) {
    try {
        action();
    } catch (const StoreError& e) {
        return e;
    }
    ADD_FAILURE() << "expected a StoreError";
    return StoreError("", "");
}

RunRecord make_run(std::int64_t experiment_id, const std::string& name,
                   const std::string& kind = "pretrain") {
    RunRecord run;
    run.experiment_id = experiment_id;
    run.kind = kind;
    run.name = name;
    run.variant = kind == "pretrain" ? name : "";
    run.config_text = "model:\n  preset: " + name + "\n";
    run.seed = 1;
    return run;
}

std::vector<MetricPoint> points(const std::string& key, std::int64_t first, std::int64_t count) {
    std::vector<MetricPoint> out;
    for (std::int64_t step = first; step < first + count; ++step)
        out.push_back({key, step, 1.0 / static_cast<double>(step + 1), 1.7e9 + step});
    return out;
}

std::vector<std::int64_t> steps_of(const std::vector<MetricPoint>& curve) {
    std::vector<std::int64_t> out;
    for (const auto& point : curve) out.push_back(point.step);
    return out;
}

TEST(ResultStore, CreatesParentDirsSchemaAndWal) {
    TempDir dir;
    const std::string path = dir.file("a/b/results.db");
    auto store = ResultStore::open(path);
    EXPECT_TRUE(fs::exists(path));
    EXPECT_EQ(store.schema_version(), ResultStore::latest_schema_version());
    EXPECT_EQ(store.path(), path);
    EXPECT_TRUE(store.list_experiments().empty());
    RawDb raw(path);
    EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
    EXPECT_EQ(raw.text("SELECT name FROM sqlite_master WHERE name = 'metrics_run_key_step'"),
              "metrics_run_key_step");
}

TEST(ResultStore, ReopenKeepsEverything) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    std::int64_t experiment_id = 0;
    std::int64_t run_id = 0;
    {
        auto store = ResultStore::open(path);
        experiment_id = store.get_or_create_experiment("glue-small", "exp/glue.yaml", "a: 1\n");
        run_id = store.upsert_run(make_run(experiment_id, "tupe-a"));
        store.add_params(run_id, {{"lr", "1e-4"}, {"batch_size", "32"}});
        store.add_metrics(run_id, points("train/loss", 0, 5));
    }
    for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
        auto store = ResultStore::open(path, mode);
        const auto experiments = store.list_experiments();
        ASSERT_EQ(experiments.size(), 1u);
        EXPECT_EQ(experiments[0].name, "glue-small");
        // A relative path names a file from the working directory; it reads back absolute.
        EXPECT_EQ(experiments[0].yaml_path, fs::absolute("exp/glue.yaml").string());
        EXPECT_EQ(experiments[0].yaml_text, "a: 1\n");
        EXPECT_EQ(experiments[0].created_at.size(), 24u);  // 2024-05-01T12:34:56.789Z
        EXPECT_EQ(experiments[0].created_at.back(), 'Z');
        const auto run = store.find_run(experiment_id, "tupe-a");
        ASSERT_TRUE(run.has_value());
        EXPECT_EQ(run->id, run_id);
        EXPECT_EQ(run->config_text, "model:\n  preset: tupe-a\n");
        EXPECT_EQ(store.params(run_id).at("lr"), "1e-4");
        EXPECT_EQ(store.metrics(run_id, "train/loss").size(), 5u);
    }
}

TEST(ResultStore, MigratesEveryOlderVersion) {
    const auto& steps = experiments::schema_migrations();
    for (std::size_t version = 0; version < steps.size(); ++version) {
        TempDir dir;
        const std::string path = dir.file("old.db");
        {
            RawDb raw(path);
            raw.exec("CREATE TABLE scratch (x); DROP TABLE scratch;");  // A real, empty file.
            for (std::size_t v = 0; v < version; ++v) raw.exec(steps[v]);
            raw.exec("PRAGMA user_version = " + std::to_string(version));
        }
        auto store = ResultStore::open(path);
        EXPECT_EQ(store.schema_version(), ResultStore::latest_schema_version()) << version;
        const auto id = store.get_or_create_experiment("e", "", "");
        EXPECT_GT(store.upsert_run(make_run(id, "bert-a")), 0) << version;
    }
}

TEST(ResultStore, RefusesNewerSchemaVersionAndLeavesFileAlone) {
    TempDir dir;
    const std::string path = dir.file("future.db");
    const int newer = ResultStore::latest_schema_version() + 1;
    {
        RawDb raw(path);
        raw.exec("CREATE TABLE future (x); INSERT INTO future VALUES (42);");
        raw.exec("PRAGMA user_version = " + std::to_string(newer));
    }
    const std::string before = test_support::read_file(path);
    for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
        const auto error = store_error([&] { ResultStore::open(path, mode); });
        EXPECT_TRUE(has(error.what(), "schema version " + std::to_string(newer) +
                                          " is newer than this build supports (" +
                                          std::to_string(newer - 1) + ")"))
            << error.what();
        EXPECT_TRUE(has(error.what(), path)) << error.what();
        EXPECT_EQ(error.path(), path);
    }
    EXPECT_EQ(test_support::read_file(path), before);
    RawDb raw(path);
    EXPECT_EQ(raw.text("PRAGMA journal_mode"), "delete");
    EXPECT_EQ(raw.text("SELECT x FROM future"), "42");
}

TEST(ResultStore, RefusesAnotherProgramsDatabase) {
    TempDir dir;
    const std::string path = dir.file("notes.db");
    {
        RawDb raw(path);
        raw.exec("CREATE TABLE notes (text); INSERT INTO notes VALUES ('keep me');");
    }
    const std::string before = test_support::read_file(path);
    const auto error = store_error([&] { ResultStore::open(path); });
    EXPECT_TRUE(has(error.what(), "not a TUPE results store")) << error.what();
    EXPECT_EQ(test_support::read_file(path), before);
}

TEST(ResultStore, RefusesFileThatIsNotSqlite) {
    TempDir dir;
    const std::string path = dir.file("notes.txt");
    {
        std::ofstream out(path, std::ios::binary);
        for (int i = 0; i < 200; ++i) out << "this is a plain text file, not a database\n";
    }
    const std::string before = test_support::read_file(path);
    for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
        const auto error = store_error([&] { ResultStore::open(path, mode); });
        EXPECT_EQ(std::string(error.what()), "file is not a SQLite database: " + path);
    }
    EXPECT_EQ(test_support::read_file(path), before);
    EXPECT_FALSE(fs::exists(path + "-wal"));
}

TEST(ResultStore, ReadOnlyOpenOfMissingFileFailsWithoutCreatingIt) {
    TempDir dir;
    const std::string path = dir.file("missing/results.db");
    const auto error = store_error([&] { ResultStore::open(path, OpenMode::kReadOnly); });
    EXPECT_TRUE(has(error.what(), "no such database file")) << error.what();
    EXPECT_TRUE(has(error.what(), path)) << error.what();
    EXPECT_FALSE(fs::exists(path));
}

TEST(ResultStore, ReadOnlyOpenOfOlderSchemaAsksForMigration) {
    TempDir dir;
    const std::string path = dir.file("old.db");
    {
        RawDb raw(path);
        raw.exec("CREATE TABLE scratch (x); DROP TABLE scratch;");
    }
    const auto error = store_error([&] { ResultStore::open(path, OpenMode::kReadOnly); });
    EXPECT_TRUE(has(error.what(), "schema version 0 is older than this build")) << error.what();
}

TEST(ResultStore, ReadOnlyStoreRefusesWrites) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    ResultStore::open(path);
    auto store = ResultStore::open(path, OpenMode::kReadOnly);
    EXPECT_EQ(store.mode(), OpenMode::kReadOnly);
    const auto error = store_error([&] { store.get_or_create_experiment("e", "", ""); });
    EXPECT_TRUE(has(error.what(), "opened read-only")) << error.what();
    EXPECT_TRUE(store.list_experiments().empty());
}

TEST(ResultStore, WriteProtectedFileFailsToOpenReadWrite) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    ResultStore::open(path);
    fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    if (::access(path.c_str(), W_OK) == 0) GTEST_SKIP() << "running as root: files stay writable";
    const auto error = store_error([&] { ResultStore::open(path); });
    EXPECT_TRUE(has(error.what(), "read-only")) << error.what();
    EXPECT_NO_THROW(ResultStore::open(path, OpenMode::kReadOnly));
}

TEST(ResultStore, ExperimentGetOrCreateIsIdempotent) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto first = store.get_or_create_experiment("glue", "a.yaml", "x: 1");
    const auto again = store.get_or_create_experiment("glue", "b.yaml", "x: 2");
    const auto other = store.get_or_create_experiment("pretrain", "c.yaml", "");
    EXPECT_EQ(first, again);
    EXPECT_NE(first, other);
    const auto found = store.find_experiment("glue");
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->yaml_text, "x: 1");  // The first YAML is kept.
    EXPECT_EQ(store.list_experiments().size(), 2u);
    EXPECT_FALSE(store.find_experiment("nope").has_value());
}

TEST(ResultStore, UpsertRunIsIdempotentAndUpdates) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto experiment_id = store.get_or_create_experiment("glue", "", "");
    const auto pretrain_id = store.upsert_run(make_run(experiment_id, "tupe-a"));
    EXPECT_EQ(store.upsert_run(make_run(experiment_id, "tupe-a")), pretrain_id);

    auto finetune = make_run(experiment_id, "tupe-a/ckpt300/syn-cola/lr2e-5/seed1", "finetune");
    finetune.parent_run_id = pretrain_id;
    const auto finetune_id = store.upsert_run(finetune);
    finetune.status = "finished";
    finetune.host = "node7";
    finetune.blas = "OpenBLAS 0.3.21, kernels Haswell (OPENBLAS_CORETYPE=Haswell)";
    finetune.step = 120;
    EXPECT_EQ(store.upsert_run(finetune), finetune_id);

    const auto runs = store.list_runs(experiment_id);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].id, pretrain_id);
    EXPECT_FALSE(runs[0].parent_run_id.has_value());
    EXPECT_EQ(runs[1].parent_run_id, pretrain_id);
    EXPECT_EQ(runs[1].kind, "finetune");
    EXPECT_EQ(runs[1].status, "finished");
    EXPECT_EQ(runs[1].host, "node7");
    EXPECT_EQ(runs[1].blas, finetune.blas);
    EXPECT_EQ(runs[0].blas, "");
    EXPECT_EQ(runs[1].step, 120);
    EXPECT_EQ(store.get_run(finetune_id)->name, finetune.name);
    EXPECT_FALSE(store.get_run(999).has_value());
}

TEST(ResultStore, UpsertRunRejectsBadRecords) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto experiment_id = store.get_or_create_experiment("glue", "", "");
    auto run = make_run(experiment_id, "x");
    run.kind = "distill";
    EXPECT_TRUE(has(store_error([&] { store.upsert_run(run); }).what(), "unknown run kind"));
    run.kind = "pretrain";
    run.status = "done";
    EXPECT_TRUE(has(store_error([&] { store.upsert_run(run); }).what(), "unknown run status"));
    run.status = "pending";
    run.experiment_id = 12345;  // Foreign keys are enforced.
    EXPECT_TRUE(has(store_error([&] { store.upsert_run(run); }).what(), "FOREIGN KEY"));
    EXPECT_TRUE(store.list_runs(experiment_id).empty());
}

TEST(ResultStore, RunStatusSetsTimesAndError) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto run_id =
        store.upsert_run(make_run(store.get_or_create_experiment("e", "", ""), "r"));
    store.set_run_status(run_id, "running");
    auto run = store.get_run(run_id).value();
    EXPECT_EQ(run.status, "running");
    EXPECT_FALSE(run.start_time.empty());
    EXPECT_TRUE(run.end_time.empty());
    const std::string started = run.start_time;

    store.set_run_step(run_id, 300);
    store.set_run_status(run_id, "failed", "CUDA out of memory");
    run = store.get_run(run_id).value();
    EXPECT_EQ(run.status, "failed");
    EXPECT_EQ(run.error_message, "CUDA out of memory");
    EXPECT_FALSE(run.end_time.empty());
    EXPECT_EQ(run.step, 300);

    store.set_run_status(run_id, "running");  // A resume keeps the first start time.
    run = store.get_run(run_id).value();
    EXPECT_EQ(run.start_time, started);
    EXPECT_TRUE(run.end_time.empty());
    EXPECT_TRUE(run.error_message.empty());

    EXPECT_TRUE(has(store_error([&] { store.set_run_status(999, "running"); }).what(),
                    "no run with id 999"));
    EXPECT_TRUE(has(store_error([&] { store.set_run_step(999, 1); }).what(), "no run with id 999"));
    EXPECT_TRUE(
        has(store_error([&] { store.set_run_status(run_id, "paused"); }).what(), "unknown"));
}

TEST(ResultStore, ParamsReplaceByKey) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto run_id =
        store.upsert_run(make_run(store.get_or_create_experiment("e", "", ""), "r"));
    store.add_params(run_id, {{"lr", "1e-4"}, {"warmup", "100"}});
    store.add_params(run_id, {{"lr", "2e-5"}});
    const std::map<std::string, std::string> expected = {{"lr", "2e-5"}, {"warmup", "100"}};
    EXPECT_EQ(store.params(run_id), expected);
}

TEST(ResultStore, MetricsRoundTripInStepOrder) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto run_id =
        store.upsert_run(make_run(store.get_or_create_experiment("e", "", ""), "r"));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    store.add_metrics(run_id, {{"train/loss", 20, 2.0, 1.5},
                               {"lr", 10, 1e-4, 1.0},
                               {"train/loss", 10, 3.0, 1.0},
                               {"train/loss", 30, nan, 2.0},
                               {"train/loss", 0, 4.0, 0.5}});
    const auto loss = store.metrics(run_id, "train/loss");
    EXPECT_EQ(steps_of(loss), (std::vector<std::int64_t>{0, 10, 20, 30}));
    EXPECT_EQ(loss[1].value, 3.0);
    EXPECT_EQ(loss[1].wall_time, 1.0);
    EXPECT_EQ(loss[1].key, "train/loss");
    EXPECT_TRUE(std::isnan(loss[3].value));
    EXPECT_EQ(store.metric_keys(run_id), (std::vector<std::string>{"lr", "train/loss"}));
    EXPECT_EQ(steps_of(store.metrics(run_id, "train/loss", 10)),
              (std::vector<std::int64_t>{20, 30}));

    store.add_metrics(run_id, {{"train/loss", 10, 2.5, 9.0}});  // Same step: replaced.
    const auto again = store.metrics(run_id, "train/loss");
    ASSERT_EQ(again.size(), 4u);
    EXPECT_EQ(again[1].value, 2.5);
    EXPECT_TRUE(store.metrics(run_id, "missing").empty());
    EXPECT_TRUE(
        has(store_error([&] { store.add_metrics(999, points("x", 0, 1)); }).what(), "FOREIGN KEY"));
}

TEST(ResultStore, DeleteMetricsAfterLeavesNoDuplicatesOnResume) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto experiment_id = store.get_or_create_experiment("e", "", "");
    const auto run_id = store.upsert_run(make_run(experiment_id, "r"));
    const auto other_id = store.upsert_run(make_run(experiment_id, "other"));
    auto batch = points("loss", 0, 10);
    const auto acc = points("acc", 0, 10);
    batch.insert(batch.end(), acc.begin(), acc.end());
    store.add_metrics(run_id, batch);
    store.add_metrics(other_id, batch);

    EXPECT_EQ(store.delete_metrics_after(run_id, 4), 10);  // Steps 5..9 of both keys.
    EXPECT_EQ(steps_of(store.metrics(run_id, "loss")), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(store.metrics(run_id, "acc").size(), 5u);
    EXPECT_EQ(store.metrics(other_id, "loss").size(), 10u);

    store.add_metrics(run_id, points("loss", 5, 5));  // The resumed run logs again.
    const auto loss = store.metrics(run_id, "loss");
    ASSERT_EQ(loss.size(), 10u);
    for (std::size_t i = 0; i < loss.size(); ++i) EXPECT_EQ(loss[i].step, std::int64_t(i));
    EXPECT_EQ(store.delete_metrics_after(run_id, 100), 0);
}

TEST(ResultStore, GlueResultsReplaceAndJoinRunNames) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto experiment_id = store.get_or_create_experiment("glue", "", "");
    const auto other_experiment = store.get_or_create_experiment("other", "", "");
    const auto pretrain_id = store.upsert_run(make_run(experiment_id, "tupe-a"));
    auto finetune = make_run(experiment_id, "tupe-a/ckpt300/syn-cola/lr2e-5/seed1", "finetune");
    finetune.parent_run_id = pretrain_id;
    const auto finetune_id = store.upsert_run(finetune);
    const auto elsewhere_id = store.upsert_run(make_run(other_experiment, "bert-a"));

    GlueResultRecord result;
    result.run_id = finetune_id;
    result.task = "syn-cola";
    result.split = "dev";
    result.metric = "mcc";
    result.value = 0.41;
    result.checkpoint_step = 300;
    result.lr = 2e-5;
    result.seed = 1;
    store.add_glue_result(result);
    result.value = 0.47;  // Re-evaluated: replaces.
    store.add_glue_result(result);
    result.metric = "accuracy";
    result.value = 0.8;
    store.add_glue_result(result);
    result.run_id = elsewhere_id;
    store.add_glue_result(result);

    const auto rows = store.glue_results(experiment_id);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].metric, "accuracy");
    EXPECT_EQ(rows[1].metric, "mcc");
    EXPECT_DOUBLE_EQ(rows[1].value, 0.47);
    EXPECT_EQ(rows[1].checkpoint_step, 300);
    EXPECT_DOUBLE_EQ(rows[1].lr, 2e-5);
    EXPECT_EQ(rows[1].run_name, finetune.name);
    EXPECT_EQ(rows[1].variant, "tupe-a");  // The parent's variant.
    EXPECT_EQ(store.glue_results(other_experiment).at(0).variant, "bert-a");
}

TEST(ResultStore, CheckpointsAndArtifactsRoundTrip) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto run_id =
        store.upsert_run(make_run(store.get_or_create_experiment("e", "", ""), "r"));
    store.add_checkpoint({0, run_id, 300, "runs/r/ckpt300.pt", 1024, "fnv1a64:aa"});
    store.add_checkpoint({0, run_id, 100, "runs/r/ckpt100.pt", 1000, "fnv1a64:bb"});
    store.add_checkpoint({0, run_id, 300, "runs/r/ckpt300.pt", 2048, "fnv1a64:cc"});
    const auto checkpoints = store.checkpoints(run_id);
    ASSERT_EQ(checkpoints.size(), 2u);
    EXPECT_EQ(checkpoints[0].step, 100);
    EXPECT_EQ(checkpoints[1].size, 2048);
    EXPECT_EQ(checkpoints[1].hash, "fnv1a64:cc");

    store.add_artifact({0, run_id, "attention-npy", "runs/r/attn.npy", 64, "h1", "layer 0"});
    store.add_artifact({0, run_id, "attention-npy", "runs/r/attn.npy", 65, "h2", "layer 0, v2"});
    store.add_artifact({0, run_id, "report", "runs/r/report.md", 10, "", ""});
    const auto artifacts = store.artifacts(run_id);
    ASSERT_EQ(artifacts.size(), 2u);
    EXPECT_EQ(artifacts[0].description, "layer 0, v2");
    EXPECT_EQ(artifacts[0].size, 65);
    EXPECT_EQ(artifacts[1].kind, "report");
}

TEST(ResultStore, AddArtifactsIsOneTransactionThatReplacesByPath) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto run_id =
        store.upsert_run(make_run(store.get_or_create_experiment("e", "", ""), "r"));
    store.add_artifact({0, run_id, "analysis-npy", "a/x.npy", 8, "fnv1a64:01", "old"});
    store.add_artifacts({{0, run_id, "analysis-npy", "a/x.npy", 16, "fnv1a64:02", "new"},
                         {0, run_id, "analysis-png", "a/f.png", 99, "fnv1a64:03", "figure"}});
    auto artifacts = store.artifacts(run_id);
    ASSERT_EQ(artifacts.size(), 2u);
    EXPECT_EQ(artifacts[0].size, 16);
    EXPECT_EQ(artifacts[0].description, "new");
    EXPECT_EQ(artifacts[1].kind, "analysis-png");
    store.add_artifacts({});  // nothing to do, no transaction
    // A bad row (unknown run: foreign key) rolls the whole batch back.
    EXPECT_THROW(store.add_artifacts({{0, run_id, "analysis-csv", "a/y.csv", 1, "", ""},
                                      {0, run_id + 100, "analysis-csv", "a/z.csv", 1, "", ""}}),
                 StoreError);
    EXPECT_EQ(store.artifacts(run_id).size(), 2u);
}

TEST(ResultStore, ErrorIsOneLineWithThePath) {
    const StoreError error("runs/results.db", "cannot write:\nsecond line");
    EXPECT_EQ(std::string(error.what()), "cannot write: second line: runs/results.db");
    EXPECT_EQ(error.message(), "cannot write: second line");
}

TEST(ResultStore, ReaderThreadNeverSeesPartialBatch) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    auto writer = ResultStore::open(path);
    const auto run_id =
        writer.upsert_run(make_run(writer.get_or_create_experiment("e", "", ""), "r"));
    constexpr std::int64_t kBatch = 100;
    constexpr std::int64_t kTotal = 10000;

    std::atomic<bool> writing_done{false};
    std::atomic<int> reads{0};
    std::atomic<bool> reader_failed{false};
    std::mutex failure_mutex;
    std::string failure;
    std::thread reader([&] {
        try {
            auto store = ResultStore::open(path, OpenMode::kReadOnly);
            std::size_t last_size = 0;
            for (;;) {
                const bool last_round = writing_done.load();
                const auto curve = store.metrics(run_id, "train/loss");
                if (curve.size() % kBatch != 0 || curve.size() < last_size)
                    throw std::runtime_error("read " + std::to_string(curve.size()) + " points");
                for (std::size_t i = 0; i < curve.size(); ++i)
                    if (curve[i].step != std::int64_t(i))
                        throw std::runtime_error("step " + std::to_string(curve[i].step) +
                                                 " at index " + std::to_string(i));
                last_size = curve.size();
                ++reads;
                if (last_round) {
                    if (curve.size() != std::size_t(kTotal))
                        throw std::runtime_error("final read saw " + std::to_string(curve.size()));
                    break;
                }
            }
        } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lock(failure_mutex);
            failure = e.what();
            reader_failed = true;
        }
    });
    while (reads.load() == 0 && !reader_failed.load()) std::this_thread::yield();
    for (std::int64_t first = 0; first < kTotal; first += kBatch)
        writer.add_metrics(run_id, points("train/loss", first, kBatch));
    writing_done = true;
    reader.join();
    EXPECT_EQ(failure, "");
    EXPECT_GE(reads.load(), 2);
    EXPECT_EQ(writer.metrics(run_id, "train/loss").size(), std::size_t(kTotal));
}

TEST(ResultStore, WriteWaitsForAnotherConnectionsLock) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    auto store =
        ResultStore::open(path, OpenMode::kReadWrite, StoreOptions{std::chrono::seconds(20)});
    const auto run_id =
        store.upsert_run(make_run(store.get_or_create_experiment("e", "", ""), "r"));

    RawDb other(path);
    other.exec("BEGIN EXCLUSIVE");
    std::atomic<bool> released{false};
    std::thread releaser([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        released = true;
        other.exec("COMMIT");
    });
    store.add_metrics(run_id, points("loss", 0, 10));
    EXPECT_TRUE(released.load());  // It could only have committed after the release.
    releaser.join();
    EXPECT_EQ(store.metrics(run_id, "loss").size(), 10u);
}

TEST(ResultStore, WriteFailsNamingThePathWhenLockIsHeldTooLong) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    auto store =
        ResultStore::open(path, OpenMode::kReadWrite, StoreOptions{std::chrono::milliseconds(200)});
    const auto run_id =
        store.upsert_run(make_run(store.get_or_create_experiment("e", "", ""), "r"));
    store.add_metrics(run_id, points("loss", 0, 3));

    RawDb other(path);
    other.exec("BEGIN EXCLUSIVE");
    const auto error = store_error([&] { store.add_metrics(run_id, points("loss", 3, 3)); });
    EXPECT_EQ(std::string(error.what()), "database is locked by another process: " + path);
    // WAL: reading and opening still work while the other connection holds the write lock.
    EXPECT_EQ(store.metrics(run_id, "loss").size(), 3u);
    EXPECT_NO_THROW(ResultStore::open(path, OpenMode::kReadOnly));
    other.exec("ROLLBACK");

    store.add_metrics(run_id, points("loss", 3, 3));  // The same store works again.
    EXPECT_EQ(steps_of(store.metrics(run_id, "loss")),
              (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(ResultStore, SimultaneousFirstOpensAllSucceed) {
    TempDir dir;
    const std::string path = dir.file("new/results.db");
    std::atomic<bool> go{false};
    std::atomic<int> opened{0};
    std::mutex failure_mutex;
    std::string failure;
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            while (!go.load()) std::this_thread::yield();
            try {
                auto store = ResultStore::open(path);
                store.get_or_create_experiment("e" + std::to_string(i % 2), "", "");
                ++opened;
            } catch (const std::exception& e) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                failure = e.what();
            }
        });
    }
    go = true;
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(failure, "");
    EXPECT_EQ(opened.load(), 4);
    auto store = ResultStore::open(path, OpenMode::kReadOnly);
    EXPECT_EQ(store.schema_version(), ResultStore::latest_schema_version());
    EXPECT_EQ(store.list_experiments().size(), 2u);
}

TEST(ResultStore, MovedStoreKeepsItsConnection) {
    TempDir dir;
    auto first = ResultStore::open(dir.file("results.db"));
    first.get_or_create_experiment("e", "", "");
    ResultStore second = std::move(first);
    EXPECT_EQ(second.list_experiments().size(), 1u);
}

// ---- job claims ------------------------------------------------------------------------------

using Outcome = ClaimResult::Outcome;

// Owners on other hosts: only their heartbeat tells whether they live.
const ClaimOwner kNodeA{"node-a.test", 111};
const ClaimOwner kNodeB{"node-b.test", 222};

// The job's claim row as stored (fails the test when there is none).
JobClaim claim_row(ResultStore& store, std::int64_t experiment_id, const std::string& job) {
    for (const auto& c : store.list_claims(experiment_id))
        if (c.job == job) return c;
    ADD_FAILURE() << "no claim row for " << job;
    return {};
}

TEST(ResultStore, ClaimOwnerTextRoundTrips) {
    const auto owner = ClaimOwner::parse("node7.example:4242");
    ASSERT_TRUE(owner.has_value());
    EXPECT_EQ(owner->host, "node7.example");
    EXPECT_EQ(owner->pid, 4242);
    EXPECT_EQ(owner->text(), "node7.example:4242");
    for (const char* bad : {"", "node7", ":12", "node7:", "node7:0", "node7:12a", "node7:-3"})
        EXPECT_FALSE(ClaimOwner::parse(bad).has_value()) << bad;
    const ClaimOwner self = ClaimOwner::self();
    EXPECT_FALSE(self.host.empty());
    EXPECT_EQ(self.pid, static_cast<std::int64_t>(getpid()));
}

TEST(ResultStore, ClaimRefusedWhileLiveTakenOverWhenStaleAndReleased) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    auto store = ResultStore::open(path);
    const auto id = store.get_or_create_experiment("e", "", "");

    const ClaimResult first = store.claim_job(id, "bert-a", kNodeA);
    ASSERT_EQ(first.outcome, Outcome::kClaimed);
    EXPECT_FALSE(first.previous.has_value());  // the job was free
    EXPECT_EQ(first.claim.owner, kNodeA);
    EXPECT_EQ(first.claim.attempts, 1);
    EXPECT_EQ(first.claim.claimed_at.size(), 24u);
    EXPECT_NEAR(first.claim.heartbeat_time, experiments::unix_time_now(), 5.0);

    // Live (heartbeat just now): refused, nothing changed.
    const ClaimResult refused = store.claim_job(id, "bert-a", kNodeB);
    EXPECT_EQ(refused.outcome, Outcome::kHeld);
    ASSERT_TRUE(refused.previous.has_value());
    EXPECT_EQ(refused.previous->owner, kNodeA);
    EXPECT_EQ(claim_row(store, id, "bert-a").owner, kNodeA);
    // Another job is not affected.
    EXPECT_EQ(store.claim_job(id, "tupe-a", kNodeB).outcome, Outcome::kClaimed);
    ASSERT_EQ(store.heartbeat_claims(kNodeA).size(), 1u);

    // A's heartbeat two minutes old: stale at 60 s, still live at 300 s.
    RawDb(path).exec(
        "UPDATE job_claims SET heartbeat_time = heartbeat_time - 120 "
        "WHERE job = 'bert-a'");
    ClaimOptions patient;
    patient.stale_after_seconds = 300;
    EXPECT_EQ(store.claim_job(id, "bert-a", kNodeB, patient).outcome, Outcome::kHeld);
    const ClaimResult taken = store.claim_job(id, "bert-a", kNodeB);
    ASSERT_EQ(taken.outcome, Outcome::kClaimed);
    ASSERT_TRUE(taken.previous.has_value());
    EXPECT_EQ(taken.previous->owner, kNodeA);
    EXPECT_EQ(taken.claim.attempts, 2);
    // A finds out at its next heartbeat: the claim is no longer among its own.
    EXPECT_TRUE(store.heartbeat_claims(kNodeA).empty());
    const auto b_holds = store.heartbeat_claims(kNodeB);
    ASSERT_EQ(b_holds.size(), 2u);
    EXPECT_EQ(b_holds[0].job, "bert-a");

    // Only the holder releases; the row stays, naming the last owner.
    EXPECT_FALSE(store.release_claim(id, "bert-a", kNodeA));
    EXPECT_TRUE(store.release_claim(id, "bert-a", kNodeB));
    EXPECT_FALSE(store.release_claim(id, "bert-a", kNodeB));  // already released
    const JobClaim released = claim_row(store, id, "bert-a");
    EXPECT_FALSE(released.held());
    EXPECT_EQ(released.owner, kNodeB);
    EXPECT_EQ(released.attempts, 2);
    EXPECT_EQ(store.heartbeat_claims(kNodeB).size(), 1u);  // tupe-a only

    // A released job is free again: a new attempt.
    const ClaimResult again = store.claim_job(id, "bert-a", kNodeA);
    ASSERT_EQ(again.outcome, Outcome::kClaimed);
    EXPECT_FALSE(again.previous.has_value());
    EXPECT_EQ(again.claim.attempts, 3);
    EXPECT_EQ(store.list_claims(id).size(), 2u);
}

TEST(ResultStore, ClaimOfAGoneProcessOnThisHostIsTakenOverAtOnce) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto id = store.get_or_create_experiment("e", "", "");
    const std::string host = ClaimOwner::self().host;
    // A pid that no process has any more: a child that exited and was reaped.
    const pid_t child = fork();
    if (child == 0) _exit(0);
    ASSERT_GT(child, 0);
    waitpid(child, nullptr, 0);
    const ClaimOwner gone{host, child};
    const ClaimOwner parent{host, static_cast<std::int64_t>(getppid())};  // alive

    ASSERT_EQ(store.claim_job(id, "dead", gone).outcome, Outcome::kClaimed);
    ASSERT_EQ(store.claim_job(id, "alive", parent).outcome, Outcome::kClaimed);
    const double now = experiments::unix_time_now();
    EXPECT_EQ(experiments::claim_health(claim_row(store, id, "dead"), 60, now),
              ClaimHealth::kOwnerGone);
    EXPECT_EQ(experiments::claim_health(claim_row(store, id, "alive"), 60, now),
              ClaimHealth::kLive);

    // Heartbeat fresh, but its process is gone: taken over without waiting for the timeout.
    const ClaimResult taken = store.claim_job(id, "dead", ClaimOwner::self());
    ASSERT_EQ(taken.outcome, Outcome::kClaimed);
    ASSERT_TRUE(taken.previous.has_value());
    EXPECT_EQ(taken.previous->owner, gone);
    EXPECT_EQ(store.claim_job(id, "alive", ClaimOwner::self()).outcome, Outcome::kHeld);

    // The pid is checked only on this host: elsewhere the heartbeat alone decides.
    JobClaim remote;
    remote.owner = {"node-z.test", child};
    remote.heartbeat_time = now - 10;
    EXPECT_EQ(experiments::claim_health(remote, 60, now), ClaimHealth::kLive);
    EXPECT_EQ(experiments::claim_health(remote, 5, now), ClaimHealth::kHeartbeatStale);
}

TEST(ResultStore, ClaimRefusesAFinishedRunUnlessAsked) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto id = store.get_or_create_experiment("e", "", "");
    auto run = make_run(id, "bert-a");
    run.status = "failed";
    store.upsert_run(run);
    EXPECT_EQ(store.claim_job(id, "bert-a", kNodeA).outcome, Outcome::kClaimed);  // a retry
    EXPECT_TRUE(store.release_claim(id, "bert-a", kNodeA));
    run.status = "finished";
    store.upsert_run(run);
    EXPECT_EQ(store.claim_job(id, "bert-a", kNodeB).outcome, Outcome::kFinished);
    EXPECT_EQ(claim_row(store, id, "bert-a").owner, kNodeA);  // untouched
    ClaimOptions analysis;
    analysis.allow_finished = true;  // the analysis of a finished pretraining
    EXPECT_EQ(store.claim_job(id, "bert-a", kNodeB, analysis).outcome, Outcome::kClaimed);
}

TEST(ResultStore, HandoffAndOwnClaimCountNoAttempt) {
    TempDir dir;
    auto store = ResultStore::open(dir.file("results.db"));
    const auto id = store.get_or_create_experiment("e", "", "");
    ASSERT_EQ(store.claim_job(id, "j", kNodeA).outcome, Outcome::kClaimed);
    // Claiming one's own claim again is a no-op success (the heartbeat is renewed).
    const ClaimResult own = store.claim_job(id, "j", kNodeA);
    ASSERT_EQ(own.outcome, Outcome::kClaimed);
    EXPECT_FALSE(own.previous.has_value());
    EXPECT_EQ(own.claim.attempts, 1);
    // A child started by A for the job takes the live claim over; a stranger cannot.
    ClaimOptions from_a;
    from_a.handoff_from = kNodeA;
    const ClaimOwner child{"node-a.test", 112};
    ClaimOptions from_b;
    from_b.handoff_from = kNodeB;
    EXPECT_EQ(store.claim_job(id, "j", child, from_b).outcome, Outcome::kHeld);
    const ClaimResult handed = store.claim_job(id, "j", child, from_a);
    ASSERT_EQ(handed.outcome, Outcome::kClaimed);
    ASSERT_TRUE(handed.previous.has_value());
    EXPECT_EQ(handed.previous->owner, kNodeA);
    EXPECT_EQ(handed.claim.attempts, 1);
    // A's release after its child ended does nothing: the child holds the claim.
    EXPECT_FALSE(store.release_claim(id, "j", kNodeA));
    EXPECT_TRUE(claim_row(store, id, "j").held());
}

TEST(ResultStore, ClaimNeedsAnOwnerAndAWritableStore) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    auto store = ResultStore::open(path);
    const auto id = store.get_or_create_experiment("e", "", "");
    const ClaimOwner nobody{"", 1};
    EXPECT_TRUE(
        has(store_error([&] { store.claim_job(id, "j", nobody); }).what(), "a host and a pid"));
    EXPECT_TRUE(has(store_error([&] { store.claim_job(id, "", kNodeA); }).what(), "job name"));
    EXPECT_TRUE(
        has(store_error([&] { store.claim_job(id + 100, "j", kNodeA); }).what(), "FOREIGN KEY"));
    auto reader = ResultStore::open(path, OpenMode::kReadOnly);
    EXPECT_TRUE(
        has(store_error([&] { reader.claim_job(id, "j", kNodeA); }).what(), "opened read-only"));
}

TEST(ResultStore, SimultaneousClaimsHaveOneWinner) {
    TempDir dir;
    const std::string path = dir.file("results.db");
    std::int64_t id = 0;
    {
        auto store = ResultStore::open(path);
        id = store.get_or_create_experiment("e", "", "");
    }
    constexpr int kClaimers = 6;
    std::atomic<bool> go{false};
    std::atomic<int> won{0}, refused{0};
    std::mutex failure_mutex;
    std::string failure;
    std::vector<std::thread> threads;
    for (int i = 0; i < kClaimers; ++i) {
        threads.emplace_back([&, i] {
            try {
                auto store = ResultStore::open(path);  // one connection each, as processes
                while (!go.load()) std::this_thread::yield();
                const ClaimOwner me{"node-" + std::to_string(i) + ".test", 1000 + i};
                const auto outcome = store.claim_job(id, "bert-a", me).outcome;
                (outcome == Outcome::kClaimed ? won : refused)++;
            } catch (const std::exception& e) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                failure = e.what();
            }
        });
    }
    go = true;
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(failure, "");
    EXPECT_EQ(won.load(), 1);
    EXPECT_EQ(refused.load(), kClaimers - 1);
    auto store = ResultStore::open(path, OpenMode::kReadOnly);
    EXPECT_EQ(claim_row(store, id, "bert-a").attempts, 1);
}

TEST(ResultStore, VersionTwoStoreGetsClaimsAndKeepsItsRuns) {
    TempDir dir;
    const std::string path = dir.file("v2.db");
    const auto& steps = experiments::schema_migrations();
    ASSERT_GE(steps.size(), 3u);
    {
        RawDb raw(path);
        raw.exec(steps[0]);
        raw.exec(steps[1]);
        raw.exec("PRAGMA user_version = 2");
        raw.exec(
            "INSERT INTO experiments (id, name, created_at) VALUES (1, 'e', 'now');"
            "INSERT INTO runs (experiment_id, kind, name, status) "
            "VALUES (1, 'pretrain', 'bert-a', 'running');");
    }
    auto store = ResultStore::open(path);
    EXPECT_EQ(store.schema_version(), ResultStore::latest_schema_version());
    ASSERT_EQ(store.list_runs(1).size(), 1u);
    EXPECT_EQ(store.list_runs(1)[0].status, "running");
    EXPECT_TRUE(store.list_claims(1).empty());
    EXPECT_EQ(store.claim_job(1, "bert-a", kNodeA).outcome, Outcome::kClaimed);
}

}  // namespace

// `tupe gather`: a run copied whole from a cluster job's own store into the study's, in one
// transaction, once per token; a later attempt (another token) replaces it, and a finetune
// finds its parent by name in the target store.
TEST(ResultStore, IngestRunCopiesARunWholeOncePerToken) {
    TempDir dir;
    auto job = ResultStore::open(dir.file("jobs/x/job.sqlite"));
    const auto je = job.get_or_create_experiment("exp", "exp.yaml", "name: exp\n");
    RunRecord ft = make_run(je, "tupe-a/step2/syn-cola/lr0.001/seed1", "finetune");
    ft.status = "finished";
    ft.out_dir = dir.file("runs/tupe-a/finetune/1");
    const auto run_id = job.upsert_run(ft);
    job.add_params(run_id, {{"lr", "0.001"}});
    job.add_metrics(run_id, points("dev/mcc", 1, 3));
    job.add_glue_result({0, run_id, "syn-cola", "dev", "mcc", 12.5, 2, 1e-3, 1});
    job.set_predictions({run_id, "dev", {1, 0, 1}, {1, 1, 1}});
    job.add_artifact({0, run_id, "model", dir.file("runs/tupe-a/finetune/1/model.pt"), 7, "h", ""});
    const RunBundle bundle = job.read_run_bundle(run_id);

    auto study = ResultStore::open(dir.file("results/study.sqlite"));
    const auto se = study.get_or_create_experiment("exp", "exp.yaml", "name: exp\n");
    const auto parent = study.upsert_run(make_run(se, "tupe-a"));
    EXPECT_TRUE(study.ingest_run(se, ft.name, "17_0:abc", bundle, "tupe-a"));
    EXPECT_FALSE(study.ingest_run(se, ft.name, "17_0:abc", bundle, "tupe-a"));  // once
    EXPECT_TRUE(study.gathered(se, ft.name, "17_0:abc"));
    const RunBundle stored = study.read_run_bundle(study.find_run(se, ft.name)->id);
    EXPECT_EQ(stored.run.parent_run_id, parent);
    EXPECT_EQ(stored.run.status, "finished");
    EXPECT_EQ(stored.run.out_dir, ft.out_dir);  // absolute when read, wherever each store is
    EXPECT_EQ(stored.params, bundle.params);
    EXPECT_EQ(steps_of(stored.metrics), (std::vector<std::int64_t>{1, 2, 3}));
    ASSERT_EQ(stored.glue.size(), 1u);
    EXPECT_DOUBLE_EQ(stored.glue[0].value, 12.5);
    ASSERT_EQ(stored.predictions.size(), 1u);
    EXPECT_EQ(stored.predictions[0].predicted, (std::vector<double>{1, 1, 1}));
    ASSERT_EQ(stored.artifacts.size(), 1u);
    EXPECT_EQ(stored.artifacts[0].path, bundle.artifacts[0].path);

    // A later attempt of the job replaces the run and everything it held.
    RunBundle second = bundle;
    second.metrics = points("dev/mcc", 1, 1);
    second.glue[0].value = 30;
    EXPECT_TRUE(study.ingest_run(se, ft.name, "18_0:def", second, "tupe-a"));
    const RunBundle replaced = study.read_run_bundle(study.find_run(se, ft.name)->id);
    EXPECT_EQ(steps_of(replaced.metrics), (std::vector<std::int64_t>{1}));
    ASSERT_EQ(replaced.glue.size(), 1u);
    EXPECT_DOUBLE_EQ(replaced.glue[0].value, 30);
    EXPECT_EQ(study.list_runs(se).size(), 2u);
}
