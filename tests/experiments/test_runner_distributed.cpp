// `tupe run --nproc-per-node 2`: every job of a study (pretraining and fine-tuning) runs on two
// data-parallel workers over Gloo on loopback, and the study ends with the same runs, GLUE
// scores and curves as the same study in one process (dropout off, so both compute the same
// global batches). Through the real CLI. Losses agree to float rounding (the ranks pad their
// shards to their own longest example and sum gradients in another order: ~1e-7 measured);
// dev scores get a looser bound, because Pearson over 16 nearly constant predictions of an
// untrained regressor turns that rounding into ~1e-3 points on the 0-100 scale.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

#include "cli_fixture.h"
#include "experiments/result_store.h"

using namespace experiments;
namespace fs = std::filesystem;

namespace {

class RunnerDistributedTest : public test_support::TempDirTest {
  protected:
    RunnerDistributedTest() : TempDirTest("tupe_dp_run_" + test_support::process_id()) {}
    void SetUp() override { test_support::write_toy_corpus(dir_, 16, 30, 7, 5); }

    // batch 7 over 2 ranks gives shards of 3 and 4; 29 train examples end each epoch with a
    // batch of 1, where one rank has no example at all.
    fs::path study(const std::string& tag) const {
        const fs::path path = dir_ / (tag + ".yaml");
        std::ofstream(path)
            << "name: dp\nvariants: [tupe-r]\n"
               "model: {size: tiny, max_position_embeddings: 32, hidden_dropout_prob: 0, "
               "attention_probs_dropout_prob: 0}\n"
               "data: {corpus: "
            << (dir_ / "corpus.txt").string() << ", vocab: " << (dir_ / "vocab.txt").string()
            << ", cache_dir: " << (dir_ / ("cache-" + tag)).string()
            << ", max_seq_len: 32, validation_fraction: 0.25}\n"
               "train: {steps: 6, batch_size: 8, eval_interval: 3, checkpoint_interval: 3, "
               "log_interval: 1}\n"
               "checkpoints: [1.0]\n"
               "glue: {data: builtin, tasks: [syn-cola, syn-stsb], synthetic_train: 29, "
               "synthetic_dev: 16}\n"
               "finetune: {lrs: [1.0e-3], seeds: [3], batch_size: 7, epochs: 2, max_seq_len: 32, "
               "classifier_dropout: 0}\n"
               "database: "
            << (dir_ / (tag + ".sqlite")).string()
            << "\nruns_dir: " << (dir_ / ("runs-" + tag)).string() << "\n";
        return path;
    }
};

struct Results {
    std::map<std::string, std::string> status;
    std::map<std::tuple<std::string, std::string, std::string>, double> glue;  // run, split, metric
    std::map<std::pair<std::string, std::string>, std::map<int64_t, double>> curves;
};

Results read(const fs::path& db) {
    Results out;
    auto store = ResultStore::open(db.string(), OpenMode::kReadOnly);
    const auto exp = store.find_experiment("dp");
    if (!exp) return out;
    for (const auto& run : store.list_runs(exp->id)) {
        out.status[run.name] = run.status;
        for (const auto& key : store.metric_keys(run.id))
            for (const auto& p : store.metrics(run.id, key))
                out.curves[{run.name, key}][p.step] = p.value;
    }
    for (const auto& g : store.glue_results(exp->id))
        out.glue[{g.run_name, g.split, g.metric}] = g.value;
    return out;
}

}  // namespace

TEST_F(RunnerDistributedTest, TwoWorkersPerJobMatchOneProcess) {
    using test_support::quote;
    const auto one = test_support::run_tupe("run " + quote(study("one").string()) + " --threads 1",
                                            dir_ / "one.err");
    ASSERT_EQ(one.status, 0) << one.err;
    const auto two = test_support::run_tupe(
        "run " + quote(study("two").string()) + " --nproc-per-node 2 --threads 2",
        dir_ / "two.err");
    ASSERT_EQ(two.status, 0) << two.err;
    // Each of the 3 jobs went through the launcher, one thread per worker.
    size_t launches = 0;
    for (size_t at = two.err.find("launching 2 workers"); at != std::string::npos;
         at = two.err.find("launching 2 workers", at + 1))
        ++launches;
    EXPECT_EQ(launches, 3u) << two.err;
    EXPECT_NE(two.err.find("1 thread each"), std::string::npos) << two.err;

    const Results a = read(dir_ / "one.sqlite"), b = read(dir_ / "two.sqlite");
    ASSERT_EQ(a.status.size(), 3u);
    EXPECT_EQ(a.status, b.status);
    for (const auto& [name, status] : b.status) EXPECT_EQ(status, "finished") << name;

    // syn-cola: mcc; syn-stsb: pearson and spearman.
    ASSERT_EQ(a.glue.size(), 3u);
    ASSERT_EQ(b.glue.size(), a.glue.size());
    for (const auto& [key, value] : a.glue) {
        ASSERT_TRUE(b.glue.count(key)) << std::get<0>(key) << " " << std::get<2>(key);
        EXPECT_NEAR(b.glue.at(key), value, 0.05) << std::get<0>(key) << " " << std::get<2>(key);
    }
    // Pretraining loss per step, fine-tuning loss per epoch, dev scores per epoch.
    ASSERT_EQ(b.curves.size(), a.curves.size());
    size_t compared = 0;
    for (const auto& [key, points] : a.curves) {
        if (key.second == "train/tokens_per_second") continue;  // wall-clock
        ASSERT_TRUE(b.curves.count(key)) << key.first << " " << key.second;
        const auto& other = b.curves.at(key);
        ASSERT_EQ(other.size(), points.size()) << key.first << " " << key.second;
        for (const auto& [step, value] : points) {
            ASSERT_TRUE(other.count(step)) << key.first << " " << key.second << " step " << step;
            const bool loss = key.second.find("loss") != std::string::npos;
            EXPECT_NEAR(other.at(step), value, loss ? 1e-5 * std::fabs(value) : 0.05)
                << key.first << " " << key.second << " step " << step;
            ++compared;
        }
    }
    EXPECT_GT(compared, 20u);
}

// A worker of a group runs one job: without --job it says so in one line.
TEST_F(RunnerDistributedTest, WorkerWithoutJobIsRefused) {
    const auto r = test_support::run_tupe(
        "run " + test_support::quote(study("w").string()) + " </dev/null", dir_ / "w.err");
    ASSERT_EQ(r.status, 0) << r.err;  // sanity: the study itself runs
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "1", 1);
    const auto bad =
        test_support::run_tupe("run " + test_support::quote(study("w").string()), dir_ / "w2.err");
    unsetenv("WORLD_SIZE");
    unsetenv("RANK");
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.err.find("--job NAME"), std::string::npos) << bad.err;
}
