// Job identities (experiments/job_identity.h) and the store's paths relative to its folder:
// what enters a fingerprint and what does not, the report's pooling key, the change list a
// refused rerun prints; stored paths that resolve from any working directory, after the store
// and its runs move together, and in a store written before schema 5; the empty-file and
// lock-wait messages of the store.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/config.h"
#include "experiments/analysis_artifacts.h"
#include "experiments/experiment.h"
#include "experiments/job_identity.h"
#include "experiments/result_store.h"
#include "support/test_support.h"

using namespace experiments;
namespace fs = std::filesystem;
using test_support::read_file;
using test_support::write_file;

namespace {

// Changes the working directory for its lifetime.
class InDirectory {
  public:
    explicit InDirectory(const fs::path& dir) : before_(fs::current_path()) {
        fs::current_path(dir);
    }
    ~InDirectory() { fs::current_path(before_); }

  private:
    fs::path before_;
};

class JobIdentityTest : public test_support::TempDirTest {
  protected:
    JobIdentityTest() : TempDirTest(test_support::per_test_name("tupe_identity")) {}
    void SetUp() override {
        write_file(dir_ / "corpus.txt", "the cat sat .\n\na dog ran .\n");
        write_file(dir_ / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n");
        write_file(dir_ / "study.yaml",
                   "name: s\nvariants: [bert-a, tupe-a]\ndata: {corpus: " +
                       (dir_ / "corpus.txt").string() +
                       ", vocab: " + (dir_ / "vocab.txt").string() +
                       "}\ncheckpoints: [0.5, 1.0]\nruns_dir: " + (dir_ / "runs").string() + "\n");
    }
    ExperimentSpec spec(const std::vector<std::string>& overrides = {}) const {
        return load_experiment((dir_ / "study.yaml").string(), overrides);
    }
    std::string pretrain_fp(const ExperimentSpec& s, int variant = 0) const {
        FileHashes hashes;
        return pretrain_identity(s, s.variants[variant], hashes).fingerprint();
    }
};

TEST(JobIdentity, TextIsSortedAndTheCellLeavesOutThePooledKeys) {
    JobIdentity a;
    a.set("train.seed", "1");
    a.set("model.hidden_size", "64");
    a.set("train.lr", "0.002");
    EXPECT_EQ(a.text(), "model.hidden_size=64\ntrain.lr=0.002\ntrain.seed=1\n");
    EXPECT_EQ(a.fingerprint().size(), 16u);
    JobIdentity b = JobIdentity::parse(a.text());
    EXPECT_EQ(b.text(), a.text());
    b.set("train.seed", "2");
    EXPECT_NE(b.fingerprint(), a.fingerprint());                // another job ...
    EXPECT_EQ(b.cell({"train.seed"}), a.cell({"train.seed"}));  // ... pooled into one cell
    b.set("train.lr", "0.001");
    EXPECT_NE(b.cell({"train.seed"}), a.cell({"train.seed"}));
}

TEST(JobIdentity, ChangesNameEachDifferingKeyWithBothValues) {
    const auto changes = identity_changes("a=1\nb=2\nc=3\n", "a=1\nb=5\nd=4\n");
    ASSERT_EQ(changes.size(), 3u);
    EXPECT_EQ(changes[0], "b: 2 -> 5");
    EXPECT_EQ(changes[1], "c: 3 -> (none)");
    EXPECT_EQ(changes[2], "d: (none) -> 4");
}

TEST(JobIdentity, LabelsNameWhatTellsCellsApartAndIgnoreSeeds) {
    const auto labels =
        distinguishing_labels({"pretrain.train.lr=0.001\npretrain.train.seed=1\nfinetune.lr=1\n",
                               "pretrain.train.lr=0.0005\npretrain.train.seed=2\nfinetune.lr=2\n"},
                              true);
    ASSERT_EQ(labels.size(), 2u);
    EXPECT_EQ(labels[0], "train.lr=0.001");
    EXPECT_EQ(labels[1], "train.lr=0.0005");
    // The checkpoint step is a report row's own "@ step": never a label.
    const auto steps =
        distinguishing_labels({"finetune.checkpoint_step=900\nfinetune.protocol=a\n",
                               "finetune.checkpoint_step=3000\nfinetune.protocol=b\n"},
                              true);
    EXPECT_EQ(steps, (std::vector<std::string>{"", ""}));
    // Of a value of several words only the words that differ, not the hash they share.
    const auto data = distinguishing_labels(
        {"finetune.task_data=builtin v1 corpus=abc fraction=0.1 train=1000 dev=1000\n",
         "finetune.task_data=builtin v2 corpus=abc fraction=0.1 train=10000 dev=1000\n",
         "finetune.task_data=folder 1234\n"},
        true);
    EXPECT_EQ(data[0], "finetune.task_data=builtin v1 corpus=abc fraction=0.1 train=1000 dev=1000");
    const auto two = distinguishing_labels(
        {"finetune.task_data=builtin v1 corpus=abc fraction=0.1 train=1000 dev=1000\n",
         "finetune.task_data=builtin v2 corpus=abc fraction=0.1 train=10000 dev=1000\n"},
        true);
    EXPECT_EQ(two, (std::vector<std::string>{"finetune.task_data=v1 train=1000",
                                             "finetune.task_data=v2 train=10000"}));
}

TEST_F(JobIdentityTest, PretrainFingerprintFollowsWhatShapesTheRunNotWhereItRuns) {
    const std::string base = pretrain_fp(spec());
    EXPECT_EQ(base, pretrain_fp(spec()));  // deterministic
    EXPECT_NE(base, pretrain_fp(spec({"train.lr=0.0001"})));
    EXPECT_NE(base, pretrain_fp(spec({"model.hidden_size=64"})));
    EXPECT_NE(base, pretrain_fp(spec(), 1));  // tupe-a
    // Run control and places are not the run's identity.
    EXPECT_EQ(base, pretrain_fp(spec({"train.threads=1", "train.log_interval=7",
                                      "train.checkpoint_interval=3", "data.cache_dir=elsewhere"})));
    // The corpus counts by content: the same bytes elsewhere are the same run, an edit is not.
    fs::copy_file(dir_ / "corpus.txt", dir_ / "moved.txt");
    EXPECT_EQ(base, pretrain_fp(spec({"data.corpus=" + (dir_ / "moved.txt").string()})));
    write_file(dir_ / "corpus.txt", "the cat sat .\n\na dog sat .\n");
    EXPECT_NE(base, pretrain_fp(spec()));
}

// Snapshots kept for the head-type scan (analysis.keep_every, analysis.heads) change what is
// stored beside a run, not the run: its identity stays, and the kept steps are 0, N, 2N, last.
TEST_F(JobIdentityTest, KeptSnapshotsForHeadTypesStayOutOfTheIdentity) {
    const ExperimentSpec plain = spec({"train.steps=10"});
    ExperimentSpec kept = plain;
    kept.analysis.enabled = true;
    kept.analysis.keep_every = 4;
    kept.analysis.heads = true;
    EXPECT_EQ(pretrain_fp(plain), pretrain_fp(kept));
    EXPECT_EQ(kept.kept_steps(kept.variants[0]), (std::vector<int64_t>{0, 4, 8, 10}));
    EXPECT_TRUE(plain.kept_steps(plain.variants[0]).empty());
}

// A field added later stays out of the identity at the value that reproduces what came before
// it, so the runs stored before it existed stay "already done"; at another value it enters.
TEST_F(JobIdentityTest, AFieldAddedLaterEntersTheIdentityOnlyAwayFromItsDefault) {
    FileHashes hashes;
    const ExperimentSpec plain = spec();
    const JobIdentity before = pretrain_identity(plain, plain.variants[0], hashes);
    EXPECT_EQ(before.fields().count("model.scale_input_positions"), 0u);
    EXPECT_EQ(before.fields().count("model.pre_layernorm"), 1u);  // an original field: always
    const ExperimentSpec scaled = spec({"model.scale_input_positions=true"});
    const JobIdentity after = pretrain_identity(scaled, scaled.variants[0], hashes);
    EXPECT_EQ(after.fields().at("model.scale_input_positions"), "true");
    EXPECT_NE(before.fingerprint(), after.fingerprint());
    // The modern backbone's fields (engine::config_keys_omitted_at_default) likewise.
    for (const auto& [key, value] : engine::config_keys_omitted_at_default())
        EXPECT_EQ(before.fields().count(key), 0u) << key;
    const ExperimentSpec rms = spec({"model.norm=rmsnorm"});
    EXPECT_EQ(pretrain_identity(rms, rms.variants[0], hashes).fields().at("model.norm"), "rmsnorm");
}

TEST_F(JobIdentityTest, FineTuningIdentityHoldsItsPretrainingProtocolAndTaskData) {
    const ExperimentSpec s = spec();
    FileHashes hashes;
    const JobIdentity pre = pretrain_identity(s, s.variants[0], hashes);
    const std::string data = task_data_identity(s, {"syn-cola"}, hashes);
    EXPECT_NE(data.find("builtin v"), std::string::npos) << data;
    const auto ft = [&](double lr, uint64_t seed, const std::string& task_data) {
        return finetune_identity(s, s.variants[0], pre, 5, "syn-cola", lr, seed, task_data);
    };
    const JobIdentity a = ft(1e-3, 1, data);
    EXPECT_EQ(a.fields().at("pretrain.train.lr"), pre.fields().at("train.lr"));
    EXPECT_NE(a.fingerprint(), ft(2e-3, 1, data).fingerprint());
    EXPECT_EQ(a.cell(pooled_keys(true)), ft(2e-3, 2, data).cell(pooled_keys(true)));
    EXPECT_NE(a.cell(pooled_keys(true)), ft(1e-3, 1, data + " other").cell(pooled_keys(true)));
    // More synthetic examples are other task data.
    ExperimentSpec bigger = s;
    bigger.glue.synthetic_train *= 2;
    EXPECT_NE(task_data_identity(bigger, {"syn-cola"}, hashes), data);
}

TEST_F(JobIdentityTest, ZeroShotTasksKeepTheirIdentityWhenOnlyTrainExamplesAreAdded) {
    ExperimentSpec s = spec();
    FileHashes hashes;
    s.glue.synthetic_train = 1000;
    s.glue.synthetic_dev = 1000;
    const std::string equal = task_data_identity(s, {"syn-bshift"}, hashes);
    EXPECT_NE(equal.find("builtin v1 "), std::string::npos) << equal;  // as stored before v2
    EXPECT_EQ(zero_shot_task_data_identity(s, {"syn-bshift"}, hashes), equal);
    s.glue.synthetic_train = 10000;  // dev.tsv unchanged, train.tsv another set
    const std::string more = task_data_identity(s, {"syn-cola"}, hashes);
    EXPECT_NE(more.find("builtin v2 "), std::string::npos) << more;
    EXPECT_EQ(zero_shot_task_data_identity(s, {"syn-bshift"}, hashes), equal);
    s.glue.synthetic_dev = 500;  // another dev.tsv
    EXPECT_NE(zero_shot_task_data_identity(s, {"syn-bshift"}, hashes), equal);
    s.glue.synthetic_train = 200;
    EXPECT_NE(task_data_identity(s, {"syn-cola"}, hashes).find("builtin v1 "), std::string::npos);
}

TEST_F(JobIdentityTest, StoredPathsResolveFromAnyDirectoryAndAfterAMove) {
    const fs::path work = dir_ / "work";
    fs::create_directories(work / "results");
    write_file(work / "runs" / "v" / "checkpoint.pt", "x");
    int64_t run_id = 0;
    {
        InDirectory in(work);  // the runner's working directory: relative paths as typed
        auto store = ResultStore::open("results/s.sqlite");
        const auto e = store.get_or_create_experiment("s", "study.yaml", "name: s\n");
        RunRecord r;
        r.experiment_id = e;
        r.name = "v";
        r.out_dir = "runs/v";
        run_id = store.upsert_run(r);
        store.add_checkpoint({0, run_id, 4, "runs/v/checkpoint.pt", 1, ""});
        store.add_artifact({0, run_id, "report", "runs/v/checkpoint.pt", 1, "", ""});
    }
    const auto read_paths = [&](const fs::path& db) {
        auto store = ResultStore::open_for_reading(db.string());
        const auto e = store.find_experiment("s");
        std::vector<std::string> out = {store.list_runs(e->id).at(0).out_dir,
                                        store.checkpoints(run_id).at(0).path,
                                        store.artifacts(run_id).at(0).path, e->yaml_path};
        return out;
    };
    const fs::path abs = fs::absolute(work).lexically_normal();
    const std::vector<std::string> expected = {
        (abs / "runs/v").generic_string(), (abs / "runs/v/checkpoint.pt").generic_string(),
        (abs / "runs/v/checkpoint.pt").generic_string(), (abs / "study.yaml").generic_string()};
    {
        InDirectory in(dir_);
        EXPECT_EQ(read_paths(work / "results/s.sqlite"), expected);
    }
    {
        InDirectory in("/");
        EXPECT_EQ(read_paths(abs / "results/s.sqlite"), expected);
    }
    // The store and its runs moved together: the paths follow them.
    fs::rename(work, dir_ / "moved");
    const fs::path moved = fs::absolute(dir_ / "moved").lexically_normal();
    const auto after = read_paths(moved / "results/s.sqlite");
    EXPECT_EQ(after[1], (moved / "runs/v/checkpoint.pt").generic_string());
    EXPECT_TRUE(fs::exists(after[1]));
}

// A store as schema 4 wrote it: paths as the runner was given them, relative to its working
// directory. The migration finds each one where it exists and stores it relative to the store.
TEST_F(JobIdentityTest, MigrationFromSchema4RelocatesRelativePaths) {
    const fs::path project = dir_ / "project";
    write_file(project / "runs" / "q" / "bert-a" / "analysis" / "index.json", "{}");
    fs::create_directories(project / "results");
    const std::string db = (project / "results" / "old.sqlite").string();
    {
        sqlite3* raw = nullptr;
        ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
        const auto& steps = schema_migrations();
        for (int v = 0; v < 4; ++v)
            ASSERT_EQ(sqlite3_exec(raw, steps[v].c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        const char* rows =
            "PRAGMA user_version = 4;"
            "INSERT INTO experiments (id, name, yaml_path, created_at) VALUES "
            "(1, 'q', 'experiments/q.yaml', 'then');"
            "INSERT INTO runs (id, experiment_id, kind, name, out_dir) VALUES "
            "(1, 1, 'pretrain', 'bert-a', 'runs/q/bert-a');"
            "INSERT INTO artifacts (run_id, kind, path) VALUES "
            "(1, 'analysis', 'runs/q/bert-a/analysis/index.json');";
        ASSERT_EQ(sqlite3_exec(raw, rows, nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(raw);
    }
    InDirectory in("/");  // not where the runner ran: the store folder's parent holds runs/
    auto store = ResultStore::open_for_reading(db);
    EXPECT_EQ(store.schema_version(), ResultStore::latest_schema_version());
    const fs::path root = fs::absolute(project).lexically_normal();
    EXPECT_EQ(store.artifacts(1).at(0).path,
              (root / "runs/q/bert-a/analysis/index.json").generic_string());
    EXPECT_EQ(store.list_runs(1).at(0).out_dir, (root / "runs/q/bert-a").generic_string());
    EXPECT_TRUE(store.list_runs(1).at(0).identity.empty());  // stored before identities
}

// A schema-4 store whose relative paths also name files in another project (the working
// directory of a reader, or of a writer): only a folder holding the store's own files (their
// recorded hashes) is taken, a reader never looks in its working directory, and two folders
// that both hold them are refused as ambiguous, leaving the file as it was.
TEST_F(JobIdentityTest, MigrationFromSchema4TakesOnlyTheFolderThatHoldsTheStoresFiles) {
    const auto make = [&](const fs::path& project, const std::string& content) {
        write_file(project / "runs" / "q" / "bert-a" / "analysis" / "index.json", content);
        fs::create_directories(project / "results");
    };
    const auto old_store = [&](const fs::path& db) {
        sqlite3* raw = nullptr;
        ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
        const auto& steps = schema_migrations();
        for (int v = 0; v < 4; ++v)
            ASSERT_EQ(sqlite3_exec(raw, steps[v].c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        const std::string hash = experiments::file_hash(
            (dir_ / "mine" / "runs" / "q" / "bert-a" / "analysis" / "index.json").string());
        const std::string rows =
            "PRAGMA user_version = 4;"
            "INSERT INTO experiments (id, name, yaml_path, created_at) VALUES (1, 'q', '', 'x');"
            "INSERT INTO runs (id, experiment_id, kind, name, out_dir) VALUES "
            "(1, 1, 'pretrain', 'bert-a', 'runs/q/bert-a');"
            "INSERT INTO artifacts (run_id, kind, path, hash) VALUES "
            "(1, 'analysis', 'runs/q/bert-a/analysis/index.json', '" +
            hash + "');";
        ASSERT_EQ(sqlite3_exec(raw, rows.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(raw);
    };
    make(dir_ / "mine", "{\"mine\": 1}");
    make(dir_ / "theirs", "{\"theirs\": 1}");  // same name, other content
    const fs::path db = dir_ / "mine" / "results" / "old.sqlite";
    old_store(db);
    const fs::path root = fs::canonical(dir_ / "mine");
    {
        // A writer in the other project: its file has another hash, so it is not evidence.
        InDirectory in(dir_ / "theirs");
        auto store = ResultStore::open(db.string());
        EXPECT_EQ(store.artifacts(1).at(0).path,
                  (root / "runs/q/bert-a/analysis/index.json").generic_string());
    }
    // The same store again, read from a folder holding an identical copy: a reader does not
    // look there; and a writer there finds two folders with the store's files.
    fs::remove(db);
    old_store(db);
    fs::create_directories(dir_ / "copy");
    fs::copy(dir_ / "mine" / "runs", dir_ / "copy" / "runs", fs::copy_options::recursive);
    {
        InDirectory in(dir_ / "copy");
        try {
            ResultStore::open(db.string());
            FAIL() << "an ambiguous migration was taken";
        } catch (const StoreError& e) {
            EXPECT_NE(std::string(e.what()).find("cannot migrate the schema-4 store"),
                      std::string::npos)
                << e.what();
        }
        sqlite3* raw = nullptr;
        ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
        sqlite3_stmt* q = nullptr;
        sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &q, nullptr);
        sqlite3_step(q);
        EXPECT_EQ(sqlite3_column_int(q, 0), 4);  // left as it was
        sqlite3_finalize(q);
        sqlite3_close(raw);
        auto reader = ResultStore::open_for_reading(db.string());
        EXPECT_EQ(reader.artifacts(1).at(0).path,
                  (root / "runs/q/bert-a/analysis/index.json").generic_string());
    }
}

TEST_F(JobIdentityTest, AnEmptyFileIsNotCalledAnOlderStore) {
    write_file(dir_ / "empty.sqlite", "");
    try {
        ResultStore::open_for_reading((dir_ / "empty.sqlite").string());
        FAIL() << "an empty file opened for reading";
    } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("empty database"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("older"), std::string::npos) << e.what();
    }
    EXPECT_EQ(fs::file_size(dir_ / "empty.sqlite"), 0u);  // left as it was
}

TEST_F(JobIdentityTest, AWaitForTheLockIsSaidOnceThenGivenUp) {
    const std::string db = (dir_ / "locked.sqlite").string();
    auto holder = ResultStore::open(db);
    const auto e = holder.get_or_create_experiment("x", "", "");
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    StoreOptions options;
    options.lock_timeout = std::chrono::milliseconds(600);
    options.wait_notice_after = std::chrono::milliseconds(100);
    std::vector<std::string> notices;
    options.on_wait = [&](const std::string& line) { notices.push_back(line); };
    auto waiter = ResultStore::open(db, OpenMode::kReadWrite, options);
    RunRecord r;
    r.experiment_id = e;
    r.name = "r";
    EXPECT_THROW(waiter.upsert_run(r), StoreError);
    sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("waiting for the lock on " + db), std::string::npos) << notices[0];
}

}  // namespace
