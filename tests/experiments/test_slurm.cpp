// The Slurm executor against a real Slurm: munged, slurmctld and one slurmd started on this
// machine by tests/support/slurm_cluster.sh (Debian's slurm-wlm and munge, installed by
// ./run.sh). A tiny study submitted with `tupe run --executor slurm --wait` stores what the same
// study run locally stores, each job gathered once; a pretraining killed mid-run is submitted
// again, resumes from its checkpoint, and the study still ends with every job once and the
// undisturbed scores; `tupe cancel` cancels what is pending. A machine where the cluster
// cannot start fails these tests with the script's reason; they are never skipped.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "experiments/result_store.h"
#include "support/test_support.h"

using namespace experiments;
namespace fs = std::filesystem;
using test_support::has;
using test_support::quote;
using test_support::read_file;
using test_support::run_cli;
using test_support::run_tupe;
using test_support::write_file;

namespace {

// What a study stored, by run name: status and step, curves (speeds left out), GLUE scores.
struct SlurmStored {
    std::map<std::string, std::pair<std::string, int64_t>> runs;
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, double>>> curves;
    std::map<std::tuple<std::string, std::string, std::string>, double> glue;
    std::map<std::string, int> gathered;  // job -> gathered attempts
};

SlurmStored read_slurm_store(const fs::path& db, const std::string& experiment) {
    SlurmStored out;
    auto store = ResultStore::open(db.string(), OpenMode::kReadOnly);
    const auto e = store.find_experiment(experiment);
    if (!e) return out;
    for (const auto& r : store.list_runs(e->id)) {
        out.runs[r.name] = {r.status, r.step};
        for (const auto& key : store.metric_keys(r.id))
            if (key.find("per_second") == std::string::npos)  // a speed, not a result
                for (const auto& p : store.metrics(r.id, key))
                    out.curves[{r.name, key}].emplace_back(p.step, p.value);
    }
    for (const auto& g : store.glue_results(e->id))
        out.glue[{g.run_name, g.task, g.metric}] = g.value;
    return out;
}

// The gathered_jobs rows of a store, counted per job.
std::map<std::string, int> gathered_counts(const fs::path& db) {
    std::map<std::string, int> out;
    sqlite3* handle = nullptr;
    if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(handle);
        ADD_FAILURE() << "cannot open " << db;
        return out;
    }
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(handle, "SELECT job FROM gathered_jobs", -1, &stmt, nullptr) ==
        SQLITE_OK)
        while (sqlite3_step(stmt) == SQLITE_ROW)
            ++out[reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))];
    sqlite3_finalize(stmt);
    sqlite3_close(handle);
    return out;
}

class SlurmTest : public test_support::TempDirTest {
  protected:
    SlurmTest() : TempDirTest(test_support::per_test_name("tupe_slurm")) {}

    static void SetUpTestSuite() {
        cluster_ = fs::temp_directory_path() / ("tupe_slurm_cluster_" + test_support::process_id());
        script_ = fs::path(TUPE_SOURCE_DIR) / "tests" / "support" / "slurm_cluster.sh";
        const auto r = run_cli(quote(script_.string()), "start " + quote(cluster_.string()),
                               fs::temp_directory_path() /
                                   ("tupe_slurm_start_" + test_support::process_id() + ".err"));
        start_error_ = r.status == 0   ? ""
                       : r.err.empty() ? "exit " + std::to_string(r.status)
                                       : r.err;
        ::setenv("SLURM_CONF", (cluster_ / "slurm.conf").c_str(), 1);
    }
    static void TearDownTestSuite() {
        run_cli(
            quote(script_.string()), "stop " + quote(cluster_.string()),
            fs::temp_directory_path() / ("tupe_slurm_stop_" + test_support::process_id() + ".err"));
        std::error_code ignored;
        fs::remove_all(cluster_, ignored);
    }

    void SetUp() override {
        ASSERT_TRUE(start_error_.empty())
            << "the test Slurm cluster did not start (tests/support/slurm_cluster.sh): "
            << start_error_;
        test_support::write_toy_corpus(dir_, 16, 30, 7, 11);
    }

    // A tiny study: `variants`, hidden 16, `steps` steps (checkpoints every 2), fine-tuned
    // from the half-way and the final snapshot on syn-cola (1 lr, 2 seeds) and scored
    // zero-shot on syn-bshift, in dir/NAME.sqlite and dir/runs-NAME.
    fs::path study(const std::string& name, const std::string& variants, int steps) const {
        const fs::path path = dir_ / (name + ".yaml");
        write_file(path, "name: study\nvariants: " + variants +
                             "\nmodel: {size: tiny, hidden_size: 16, intermediate_size: 32, "
                             "max_position_embeddings: 32}\n"
                             "data: {corpus: " +
                             (dir_ / "corpus.txt").string() +
                             ", vocab: " + (dir_ / "vocab.txt").string() +
                             ", cache_dir: " + (dir_ / "cache").string() +
                             ", max_seq_len: 32, validation_fraction: 0.25}\n"
                             "train: {steps: " +
                             std::to_string(steps) +
                             ", batch_size: 8, eval_interval: 2, checkpoint_interval: 2, "
                             "log_interval: 2, threads: 1}\n"
                             "checkpoints: [0.5, 1.0]\n"
                             "glue: {data: builtin, tasks: [syn-cola, syn-bshift], "
                             "synthetic_train: 32, synthetic_dev: 16}\n"
                             "finetune: {lrs: [1.0e-3], seeds: [1, 2], batch_size: 8, epochs: 1, "
                             "max_seq_len: 32}\n"
                             "database: " +
                             (dir_ / (name + ".sqlite")).string() +
                             "\nruns_dir: " + (dir_ / ("runs-" + name)).string() + "\n");
        return path;
    }

    test_support::CliResult tupe(const std::string& args) const {
        return run_tupe(args, dir_ / "stderr.txt");
    }

    static fs::path cluster_, script_;
    static std::string start_error_;
};

fs::path SlurmTest::cluster_;
fs::path SlurmTest::script_;
std::string SlurmTest::start_error_;

// 2 pretraining jobs and 2 x 2 arrays of 3 fine-tuning jobs (2 seeds of syn-cola, syn-bshift).
constexpr size_t kStudyJobs = 14;

}  // namespace

TEST_F(SlurmTest, StudyThroughSlurmStoresWhatALocalRunStoresEachJobOnce) {
    const fs::path cluster = study("cluster", "[bert-a, tupe-a]", 6);
    const auto r =
        tupe("run " + quote(cluster.string()) + " --executor slurm --wait --poll 1 --threads 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "as an array after Slurm job")) << r.err;
    EXPECT_TRUE(has(r.err, "14 finished, 0 already done, 0 failed")) << r.err;
    const fs::path local = study("local", "[bert-a, tupe-a]", 6);
    const auto l = tupe("run " + quote(local.string()) + " --quiet --threads 1");
    ASSERT_EQ(l.status, 0) << l.err;

    const SlurmStored a = read_slurm_store(dir_ / "cluster.sqlite", "study");
    const SlurmStored b = read_slurm_store(dir_ / "local.sqlite", "study");
    ASSERT_EQ(a.runs.size(), kStudyJobs);
    EXPECT_EQ(a.runs, b.runs);
    EXPECT_EQ(a.curves, b.curves);
    EXPECT_EQ(a.glue, b.glue);
    EXPECT_FALSE(a.glue.empty());
    const auto counts = gathered_counts(dir_ / "cluster.sqlite");
    EXPECT_EQ(counts.size(), kStudyJobs);
    for (const auto& [job, n] : counts) EXPECT_EQ(n, 1) << job;

    // Gathering again stores nothing twice; status shows Slurm's side beside the store's.
    const auto again = tupe("gather " + quote(cluster.string()));
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_TRUE(has(again.out, "0 jobs gathered")) << again.out;
    EXPECT_TRUE(has(again.out, "14 gathered before")) << again.out;
    EXPECT_EQ(gathered_counts(dir_ / "cluster.sqlite").size(), kStudyJobs);
    const auto status = tupe("status " + quote(cluster.string()));
    EXPECT_TRUE(has(status.out, "finished 14")) << status.out;
    EXPECT_TRUE(has(status.out, "Slurm (14 jobs submitted, newest attempt each): COMPLETED 14"))
        << status.out;
    const auto json =
        nlohmann::json::parse(tupe("status " + quote(cluster.string()) + " --format json").out);
    ASSERT_EQ(json.at("slurm").size(), kStudyJobs);
    for (const auto& job : json.at("slurm")) {
        EXPECT_EQ(job.at("state"), "COMPLETED") << job;
        EXPECT_EQ(job.at("node"), "tupe-node1") << job;
        EXPECT_EQ(job.at("result"), "finished") << job;
    }
}

TEST_F(SlurmTest, KilledPretrainingIsSubmittedAgainAndTheStudyEndsWithEveryJobOnce) {
    const fs::path file = study("killed", "[tupe-a]", 8);
    // The first submission's pretraining kills itself right after step 4 (its checkpoint and
    // curves stored); its fine-tuning arrays can then never start, and Slurm cancels them.
    const auto first = run_cli("TUPE_TEST_RAISE_AT_STEP=4:KILL " + quote(TUPE_CLI),
                               "run " + quote(file.string()) + " --executor slurm --threads 1",
                               dir_ / "first.err");
    ASSERT_EQ(first.status, 0) << read_file(dir_ / "first.err");
    std::string status;
    for (int i = 0; i < 300 && !has(status, "FAILED"); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        status = tupe("status " + quote(file.string())).out;
    }
    ASSERT_TRUE(has(status, "tupe-a  slurm ")) << status;
    EXPECT_TRUE(has(status, "exit code 0, signal 9")) << status;

    const auto rest =
        tupe("run " + quote(file.string()) + " --executor slurm --wait --poll 1 --threads 1");
    ASSERT_EQ(rest.status, 0) << rest.err;
    EXPECT_TRUE(has(rest.err, "submitted tupe-a as Slurm job")) << rest.err;
    const SlurmStored a = read_slurm_store(dir_ / "killed.sqlite", "study");
    ASSERT_EQ(a.runs.size(), 7u);
    for (const auto& [name, run] : a.runs) EXPECT_EQ(run.first, "finished") << name;
    EXPECT_EQ(a.runs.at("tupe-a").second, 8);
    for (const auto& [job, n] : gathered_counts(dir_ / "killed.sqlite")) EXPECT_EQ(n, 1) << job;
    EXPECT_EQ(gathered_counts(dir_ / "killed.sqlite").size(), 7u);

    // The scores and curves of an undisturbed local run of the same study.
    const fs::path local = study("undisturbed", "[tupe-a]", 8);
    ASSERT_EQ(tupe("run " + quote(local.string()) + " --quiet --threads 1").status, 0);
    const SlurmStored b = read_slurm_store(dir_ / "undisturbed.sqlite", "study");
    EXPECT_EQ(a.curves, b.curves);
    EXPECT_EQ(a.glue, b.glue);
}

TEST_F(SlurmTest, CancelCancelsTheStudysPendingJobs) {
    const fs::path file = study("cancelled", "[bert-a]", 4);
    // Held back an hour: every job of the study is pending when it is cancelled.
    const auto r = tupe("run " + quote(file.string()) +
                        " --executor slurm --sbatch-arg=--begin=now+3600 --threads 1");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto pending = tupe("status " + quote(file.string()));
    // 1 pretraining job and 2 arrays of 3 fine-tuning jobs.
    EXPECT_TRUE(has(pending.out, "PENDING 7")) << pending.out;
    const auto cancel = tupe("cancel " + quote(file.string()));
    EXPECT_EQ(cancel.status, 0) << cancel.err;
    EXPECT_TRUE(has(cancel.out, "7 Slurm jobs cancelled")) << cancel.out;
    const auto after = tupe("status " + quote(file.string()));
    EXPECT_TRUE(has(after.out, "CANCELLED 7")) << after.out;
    EXPECT_TRUE(has(tupe("cancel " + quote(file.string())).out, "0 Slurm jobs cancelled"));
}
