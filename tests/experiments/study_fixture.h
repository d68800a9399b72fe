// Tiny studies run through the real `tupe` executable (TUPE_CLI), and what a store holds of one
// experiment table by table, so the reliability, identity and chaos tests compare stores as a
// whole: runs, params, curves, GLUE scores, predictions, checkpoints and artifacts with their
// hashes and identities. Paths are read relative to the store's folder, so two studies run in
// two folders compare equal when they stored the same results.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/sha256.h"
#include "experiments/result_store.h"
#include "support/test_support.h"

namespace test_support {

/// What a study stored, by table. Wall times, start and end times, hosts and ids are left out:
/// they differ between two runs of the same study by design.
struct Stored {
    std::map<std::string, experiments::RunRecord> runs;                 // by name
    std::map<std::pair<std::string, std::string>, std::string> params;  // (run, key)
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, double>>> curves;
    std::map<std::tuple<std::string, std::string, std::string>, double> glue;  // run, task, metric
    std::map<std::pair<std::string, std::string>, std::vector<double>> predictions;  // run, split
    /// (run, step) -> "path size hash", the path relative to the store's folder.
    std::map<std::pair<std::string, int64_t>, std::string> checkpoints;
    /// (run, path relative to the store's folder) -> "kind size hash" and the identity.
    std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> artifacts;
};

inline Stored read_store(const std::filesystem::path& db, const std::string& experiment) {
    namespace fs = std::filesystem;
    Stored out;
    auto store = experiments::ResultStore::open(db.string(), experiments::OpenMode::kReadOnly);
    const auto e = store.find_experiment(experiment);
    if (!e) return out;
    const fs::path base(store.directory());
    const auto relative = [&](const std::string& p) {
        return fs::path(p).lexically_relative(base).generic_string();
    };
    std::map<int64_t, std::string> names;
    for (const auto& r : store.list_runs(e->id)) {
        out.runs[r.name] = r;
        names[r.id] = r.name;
        for (const auto& [key, value] : store.params(r.id)) out.params[{r.name, key}] = value;
        for (const auto& key : store.metric_keys(r.id))
            for (const auto& p : store.metrics(r.id, key))
                out.curves[{r.name, key}].emplace_back(p.step, p.value);
        for (const auto& c : store.checkpoints(r.id))
            out.checkpoints[{r.name, c.step}] =
                relative(c.path) + " " + std::to_string(c.size) + " " + c.hash;
        for (const auto& a : store.artifacts(r.id))
            out.artifacts[{r.name, relative(a.path)}] = {
                a.kind + " " + std::to_string(a.size) + " " + a.hash, a.identity};
    }
    for (const auto& g : store.glue_results(e->id))
        out.glue[{g.run_name, g.task, g.metric}] = g.value;
    for (const auto& p : store.predictions(e->id))
        out.predictions[{names[p.run_id], p.split}] = p.predicted;
    return out;
}

/// path -> SHA-256 of every file under `dir`.
inline std::map<std::string, std::string> file_hashes(const std::filesystem::path& dir) {
    std::map<std::string, std::string> out;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir))
        if (f.is_regular_file())
            out[f.path().lexically_relative(dir).string()] = engine::sha256_file_hex(f.path());
    return out;
}

/// Two stores of the same study hold the same results, table by table: every run finished at
/// the same step with the same fingerprint and config, the same params, curves (throughput, a
/// wall-clock measure, left out; values to 1e-6 relative), GLUE scores (1e-9), predictions,
/// checkpoint rows and artifacts with their hashes and identities. `calm` is the reference
/// (an undisturbed run); it must hold curves, GLUE scores and checkpoints, so that two empty
/// stores do not compare equal.
inline void expect_same_stores(const Stored& calm, const Stored& other) {
    ASSERT_EQ(other.runs.size(), calm.runs.size());
    for (const auto& [name, a] : calm.runs) {
        ASSERT_TRUE(other.runs.count(name)) << name;
        const auto& b = other.runs.at(name);
        EXPECT_EQ(b.status, "finished") << name;
        EXPECT_EQ(b.step, a.step) << name;
        EXPECT_EQ(b.fingerprint, a.fingerprint) << name;
        EXPECT_EQ(b.config_text, a.config_text) << name;
    }
    EXPECT_EQ(other.params, calm.params);
    size_t compared = 0;
    for (const auto& [key, points] : calm.curves) {
        if (key.second.find("per_second") != std::string::npos) continue;
        ASSERT_TRUE(other.curves.count(key)) << key.first << " " << key.second;
        const auto& theirs = other.curves.at(key);
        ASSERT_EQ(theirs.size(), points.size()) << key.first << " " << key.second;
        for (size_t i = 0; i < points.size(); ++i) {
            EXPECT_EQ(theirs[i].first, points[i].first) << key.first << " " << key.second;
            EXPECT_NEAR(theirs[i].second, points[i].second, 1e-6 * (1 + std::abs(points[i].second)))
                << key.first << " " << key.second << " step " << points[i].first;
        }
        ++compared;
    }
    EXPECT_EQ(other.curves.size(), calm.curves.size());
    EXPECT_GT(compared, 0u);
    ASSERT_EQ(other.glue.size(), calm.glue.size());
    EXPECT_FALSE(calm.glue.empty());
    for (const auto& [key, value] : calm.glue)
        EXPECT_NEAR(other.glue.at(key), value, 1e-9) << std::get<0>(key);
    EXPECT_EQ(other.predictions, calm.predictions);
    EXPECT_EQ(other.checkpoints, calm.checkpoints);
    EXPECT_FALSE(calm.checkpoints.empty());
    EXPECT_EQ(other.artifacts, calm.artifacts);
}

/// A temporary folder with the toy corpus and its vocabulary, tiny studies in it, and the
/// processes a test started, killed at the end.
class StudyTest : public TempDirTest {
  protected:
    StudyTest() : TempDirTest(per_test_name("tupe_study")) {}
    void SetUp() override { write_toy_corpus(dir_, 16, 30, 7, 11); }
    void TearDown() override {
        for (const pid_t pid : started_) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }

    // A tiny study `name` in dir/FILE: `variants` (YAML), hidden 16, 32 positions, `steps`
    // steps (evaluations and checkpoints every 2), fine-tuned on syn-cola (1 lr, `seeds`),
    // results in dir/NAME.sqlite unless `db` names another, runs in dir/runs.
    std::filesystem::path study(const std::filesystem::path& dir, const std::string& file,
                                const std::string& name, const std::string& variants, int steps,
                                const std::string& extra = "", const std::string& seeds = "[1]",
                                const std::string& db = "") const {
        const std::filesystem::path path = dir / file;
        write_file(path, "name: " + name + "\nvariants: " + variants +
                             "\nmodel: {size: tiny, hidden_size: 16, intermediate_size: 32, "
                             "max_position_embeddings: 32}\n"
                             "data: {corpus: " +
                             (dir_ / "corpus.txt").string() +
                             ", vocab: " + (dir_ / "vocab.txt").string() +
                             ", cache_dir: " + (dir / "cache").string() +
                             ", max_seq_len: 32, validation_fraction: 0.25}\n"
                             "train: {steps: " +
                             std::to_string(steps) +
                             ", batch_size: 8, eval_interval: 2, checkpoint_interval: 2, "
                             "log_interval: 2, threads: 1}\n"
                             "glue: {data: builtin, tasks: [syn-cola], synthetic_train: 32, "
                             "synthetic_dev: 16}\n"
                             "finetune: {lrs: [1.0e-3], seeds: " +
                             seeds +
                             ", batch_size: 8, epochs: 1, max_seq_len: 32}\n"
                             "database: " +
                             (db.empty() ? (dir / (name + ".sqlite")).string() : db) +
                             "\nruns_dir: " + (dir / "runs").string() + "\n" + extra);
        return path;
    }

    CliResult tupe(const std::string& args) const { return run_tupe(args, dir_ / "stderr.txt"); }

    mutable std::vector<pid_t> started_;
};

}  // namespace test_support
