// Data parallelism over c10d with real processes on loopback: `tupe pretrain --nproc-per-node
// 2` trains to the same weights as one process on the same global batch (with and without
// gradient accumulation, with and without overlapping the all-reduce with backward), a rank
// that dies fails the job naming it and leaves a resumable checkpoint, and missing or bad
// torchrun variables are one-line errors naming the variable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "engine/distributed.h"
#include "engine/tokenizer.h"
#include "engine/trainer.h"
#include "support/test_support.h"

using namespace engine;
namespace fs = std::filesystem;

namespace {

using test_support::read_file;

struct Result {
    int status = -1;
    std::string out, err;
};

// Starts the `tupe` CLI with `args` and extra environment variables; stdout and stderr go
// to files so a test can watch them while the process runs.
pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
            const fs::path& out, const fs::path& err) {
    std::cout.flush();  // else the child's freopen flushes our pending output a second time
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        for (const char* v :
             {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
            ::unsetenv(v);
        for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
        if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr))
            ::_exit(126);
        std::vector<char*> argv = {const_cast<char*>(TUPE_CLI)};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(TUPE_CLI, argv.data());
        ::_exit(127);
    }
    return pid;
}

int exit_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }

class DistributedTest : public test_support::TempDirTest {
  protected:
    DistributedTest() : TempDirTest(test_support::per_test_name("tupe_dist")) {}
    void SetUp() override {
        const test_support::PhraseLists phrases = {
            {"the cat", "a dog", "the old man", "my sister"},
            {"saw", "liked", "found", "followed"},
            {"the house", "a river", "the red car", "the moon"}};
        // Documents of different lengths, so micro-batches pad differently on each rank.
        test_support::write_phrase_corpus(dir_, phrases, 5, 30, [](int d) { return 2 + d % 5; });
        // Dropout off: with it, ranks draw other masks than one process does.
        std::ofstream cfg(dir_ / "tiny.yaml");
        cfg << "model:\n  preset: tupe-r\n  size: tiny\n  max_position_embeddings: 32\n"
            << "  hidden_dropout_prob: 0\n  attention_probs_dropout_prob: 0\n"
            << "data:\n  corpus: " << (dir_ / "corpus.txt").string()
            << "\n  vocab: " << (dir_ / "vocab.txt").string()
            << "\n  cache_dir: " << (dir_ / "cache").string()
            << "\n  max_seq_len: 24\n  validation_fraction: 0.1\n"
            << "train:\n  steps: 6\n  batch_size: 8\n  lr: 0.002\n  warmup_steps: 1\n"
            << "  eval_interval: 3\n  checkpoint_interval: 2\n  threads: 1\n";
    }

    Result tupe(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
        const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
        const pid_t pid = spawn(args, env, out, err);
        int status = 0;
        ::waitpid(pid, &status, 0);
        return {exit_status(status), read_file(out), read_file(err)};
    }

    Result pretrain(const std::string& run, const std::vector<std::string>& extra,
                    const std::vector<std::string>& env = {}) {
        std::vector<std::string> args = {"pretrain", "--config", (dir_ / "tiny.yaml").string(),
                                         "--out", (dir_ / run).string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return tupe(args, env);
    }

    static std::map<std::string, torch::Tensor> weights(const fs::path& run) {
        auto loaded = load_checkpoint(checkpoint_path(run.string()));
        std::map<std::string, torch::Tensor> out;
        for (const auto& [name, t] : named_weights(loaded.model)) out[name] = t.clone();
        return out;
    }

    // Every tensor within `rtol` of the reference, relative to the tensor's largest value.
    static void expect_same_weights(const std::map<std::string, torch::Tensor>& a,
                                    const std::map<std::string, torch::Tensor>& b, double rtol) {
        ASSERT_EQ(a.size(), b.size());
        double worst = 0;
        for (const auto& [name, t] : a) {
            const auto& u = b.at(name);
            const double scale = std::max(1e-3, t.abs().max().item<double>());
            const double diff = (t - u).abs().max().item<double>();
            EXPECT_LE(diff / scale, rtol)
                << name << ": max |diff| " << diff << ", max |w| " << scale;
            worst = std::max(worst, diff / scale);
        }
        std::cout << "largest relative weight difference: " << worst << "\n";
    }
};

TEST_F(DistributedTest, TwoProcessesTrainToTheWeightsOfOne) {
    const auto one = pretrain("one", {});
    ASSERT_EQ(one.status, 0) << one.err;
    // 2 ranks x 2 micro-batches of 2 = the same global batch of 8, overlapped all-reduce.
    const auto two = pretrain("two", {"--nproc-per-node", "2", "--set", "train.grad_accum=2"});
    ASSERT_EQ(two.status, 0) << two.err;
    // Rank 0 alone reports: one "done" line and one validation line per evaluation.
    EXPECT_EQ(two.out.find("done:"), two.out.rfind("done:")) << two.out;
    EXPECT_NE(two.out.find("done:"), std::string::npos) << two.out;
    EXPECT_NE(two.err.find("2 ranks (gloo)"), std::string::npos) << two.err;
    EXPECT_EQ(two.err.find("step 3: validation"), two.err.rfind("step 3: validation")) << two.err;

    const auto w1 = weights(dir_ / "one"), w2 = weights(dir_ / "two");
    expect_same_weights(w1, w2, 1e-5);
    // The same validation curve, and training moved the weights (the comparison means something).
    EXPECT_EQ(load_checkpoint(checkpoint_path((dir_ / "two").string())).step, 6);
    const auto e1 = load_checkpoint(checkpoint_path((dir_ / "one").string())).evals;
    const auto e2 = load_checkpoint(checkpoint_path((dir_ / "two").string())).evals;
    ASSERT_EQ(e1.size(), e2.size());
    for (size_t i = 0; i < e1.size(); ++i) EXPECT_NEAR(e1[i].loss, e2[i].loss, 1e-4);
    EXPECT_LT(e1.back().loss, e1.front().loss - 0.1);
}

TEST_F(DistributedTest, AllReduceAfterBackwardMatchesTooAndShardsDiffer) {
    const auto one = pretrain("one", {});
    ASSERT_EQ(one.status, 0) << one.err;
    // No overlap, tiny buckets (many collectives per step): still the same weights.
    const auto two = pretrain("two", {"--nproc-per-node", "2"},
                              {"TUPE_DIST_OVERLAP=0", "TUPE_DIST_BUCKET_KB=4"});
    ASSERT_EQ(two.status, 0) << two.err;
    expect_same_weights(weights(dir_ / "one"), weights(dir_ / "two"), 1e-5);
    // A different global batch (other seed) gives other weights: the test can fail.
    const auto other = pretrain("other", {"--set", "train.seed=7"});
    ASSERT_EQ(other.status, 0) << other.err;
    const auto w1 = weights(dir_ / "one"), w3 = weights(dir_ / "other");
    double max_diff = 0;
    for (const auto& [name, t] : w1)
        max_diff = std::max(max_diff, (t - w3.at(name)).abs().max().item<double>());
    EXPECT_GT(max_diff, 1e-3);
}

TEST_F(DistributedTest, ADeadRankFailsTheJobNamingItAndTheCheckpointResumes) {
    // Long enough to be killed in the middle; checkpoints every 2 steps.
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const pid_t launcher =
        spawn({"pretrain", "--config", (dir_ / "tiny.yaml").string(), "--out",
               (dir_ / "run").string(), "--nproc-per-node", "2", "--set", "train.steps=400"},
              {}, out, err);
    // Wait for the first checkpoint, then kill rank 1 (its pid is on the launcher's stderr).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    pid_t rank1 = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        std::istringstream lines(read_file(err));
        std::string line;
        while (std::getline(lines, line))
            if (line.rfind("rank 1: pid ", 0) == 0) rank1 = std::stoi(line.substr(12));
        if (rank1 > 0 && fs::exists(checkpoint_path((dir_ / "run").string()))) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_GT(rank1, 0) << read_file(err);
    ASSERT_TRUE(fs::exists(checkpoint_path((dir_ / "run").string()))) << read_file(err);
    ASSERT_EQ(::kill(rank1, SIGKILL), 0);
    int status = 0;
    ::waitpid(launcher, &status, 0);
    const std::string log = read_file(err);
    EXPECT_NE(exit_status(status), 0) << log;
    EXPECT_NE(log.find("tupe pretrain: error: rank 1 of 2 failed (signal 9"), std::string::npos)
        << log;
    EXPECT_NE(log.find("run the same command to resume"), std::string::npos) << log;
    // The surviving rank says why it stopped instead of hanging.
    EXPECT_NE(log.find("rank 0 of 2: "), std::string::npos) << log;
    // The checkpoint is whole and a new run resumes from it.
    const int64_t at = load_checkpoint(checkpoint_path((dir_ / "run").string())).step;
    EXPECT_GT(at, 0);
    const auto resumed = pretrain(
        "run", {"--nproc-per-node", "2", "--set", "train.steps=" + std::to_string(at + 2)});
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_NE(resumed.err.find("resumed from"), std::string::npos) << resumed.err;
    EXPECT_EQ(load_checkpoint(checkpoint_path((dir_ / "run").string())).step, at + 2);
}

TEST_F(DistributedTest, MissingOrBadTorchrunVariablesAreClearErrors) {
    auto expect_error = [&](const std::vector<std::string>& env, const std::string& needle) {
        const auto r = pretrain("run", {}, env);
        EXPECT_NE(r.status, 0) << r.err;
        EXPECT_NE(r.err.find("tupe pretrain: error: "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(checkpoint_path((dir_ / "run").string())));
    };
    expect_error({"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=29511"}, "MASTER_ADDR is not set");
    expect_error({"RANK=0", "WORLD_SIZE=two", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29511"},
                 "WORLD_SIZE='two' is not an integer");
    expect_error({"RANK=2", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29511"},
                 "RANK='2' is not an integer in [0, 1]");
    expect_error({"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=99999"},
                 "MASTER_PORT='99999'");
    // A peer that never comes: the rendezvous times out naming the address.
    expect_error({"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29513",
                  "TUPE_DIST_TIMEOUT=2"},
                 "rank 1 of 2: rendezvous at 127.0.0.1:29513 failed");
}

TEST(DistributedEnv, ReadsTheTorchrunConvention) {
    ::setenv("RANK", "1", 1);
    ::setenv("WORLD_SIZE", "4", 1);
    ::unsetenv("LOCAL_RANK");
    ::setenv("MASTER_ADDR", "node7", 1);
    ::setenv("MASTER_PORT", "29400", 1);
    EXPECT_TRUE(distributed_env_present());
    const DistributedEnv env = read_distributed_env();
    EXPECT_EQ(env.rank, 1);
    EXPECT_EQ(env.world_size, 4);
    EXPECT_EQ(env.local_rank, 1);  // LOCAL_RANK defaults to RANK
    EXPECT_EQ(env.master_addr, "node7");
    EXPECT_EQ(env.master_port, 29400);
    ::setenv("MASTER_PORT", "29400x", 1);
    EXPECT_THROW(read_distributed_env(), DistributedError);
    for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
    EXPECT_FALSE(distributed_env_present());
}

}  // namespace
