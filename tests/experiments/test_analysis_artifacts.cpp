// Analysis artifacts in the results store: a tiny experiment with an `analysis:` block records
// every file its `tupe analyze` runs wrote (npy, csv, png, txt, index.json) against the
// variant's pretrain run with the right sizes and hashes, through the `tupe` child process
// and in-process; a pretrain run finished before the block was added is analysed on the next
// run; `tupe analyze --db` records by hand; and `tupe export DIR` round-trips through
// `tupe analyze DIR` with byte-identical matrices.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "experiments/analysis_artifacts.h"
#include "experiments/claims.h"
#include "experiments/experiment.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"
#include "support/test_support.h"

using namespace experiments;
using test_support::CliResult;
using test_support::quote;
using test_support::read_file;
namespace fs = std::filesystem;

namespace {

/// Every regular file under dir (recursively) -> its size.
std::map<std::string, int64_t> files_under(const fs::path& dir) {
    std::map<std::string, int64_t> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file())
            out[e.path().string()] = static_cast<int64_t>(fs::file_size(e.path()));
    return out;
}

class AnalysisArtifactsTest : public test_support::TempDirTest {
  protected:
    AnalysisArtifactsTest() : TempDirTest(test_support::per_test_name("tupe_artifacts")) {}
    void SetUp() override { test_support::write_toy_corpus(dir_, 12, 20, 5, 7); }

    /// A study of `variants` with one fine-tuning job per variant, and `analysis` (a YAML
    /// flow mapping, or "" for none).
    std::string study(const std::string& variants, const std::string& analysis) const {
        std::string y =
            "name: tiny\nvariants: [" + variants +
            "]\n"
            "model: {size: tiny, max_position_embeddings: 24}\n"
            "data: {corpus: " +
            (dir_ / "corpus.txt").string() + ", vocab: " + (dir_ / "vocab.txt").string() +
            ", cache_dir: " + (dir_ / "cache").string() +
            ", max_seq_len: 24, validation_fraction: 0.25}\n"
            "train: {steps: 6, batch_size: 4, eval_interval: 6, checkpoint_interval: 6, "
            "log_interval: 2, threads: 1}\n"
            "checkpoints: [1.0]\n"
            "glue: {data: builtin, tasks: [syn-cola], synthetic_train: 24, synthetic_dev: 12}\n"
            "finetune: {lrs: [1.0e-3], seeds: [1], batch_size: 8, epochs: 1, max_seq_len: 24}\n"
            "database: " +
            (dir_ / "db.sqlite").string() + "\nruns_dir: " + (dir_ / "runs").string() + "\n";
        if (!analysis.empty()) y += "analysis: " + analysis + "\n";
        return write("study.yaml", y).string();
    }

    CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }

    /// The artifacts of pretrain run `name` must be exactly the files under its analysis
    /// folder, with their sizes and hashes; returns how many there are.
    size_t expect_artifacts_are_the_files(ResultStore& store, const std::string& name) {
        auto exp = store.find_experiment("tiny");
        EXPECT_TRUE(exp.has_value());
        if (!exp) return 0;
        auto run = store.find_run(exp->id, name);
        EXPECT_TRUE(run.has_value()) << name;
        if (!run) return 0;
        const auto artifacts = store.artifacts(run->id);
        std::map<std::string, int64_t> recorded;
        for (const auto& a : artifacts) {
            recorded[a.path] = a.size;
            EXPECT_EQ(a.hash, file_hash(a.path)) << a.path;
            EXPECT_EQ(a.kind, "analysis-" + fs::path(a.path).extension().string().substr(1))
                << a.path;
            EXPECT_FALSE(a.description.empty()) << a.path;
        }
        EXPECT_EQ(recorded, files_under(dir_ / "runs" / name / "analysis")) << name;
        return artifacts.size();
    }
};

}  // namespace

TEST_F(AnalysisArtifactsTest, RunnerRecordsEveryFileOfTheAnalysisThroughTheCli) {
#if !TUPE_WITH_QT
    GTEST_SKIP() << "figures need the Qt build (TUPE_WITH_QT)";
#endif
    const auto spec = load_experiment(
        study("bert-a, tupe-r", "{checkpoints: [0, 0.5, 1.0], sentences: 5, max_tokens: 16}"));
    ASSERT_TRUE(spec.analysis.enabled);
    // 0: the initialised model, claim 5's control.
    EXPECT_EQ(spec.analysis_steps(spec.variants[0]), (std::vector<int64_t>{0, 3, 6}));
    RunnerOptions options;
    options.self_exe = TUPE_CLI;  // `tupe analyze` children, figures included
    const auto summary = run_experiment(spec, options, {});
    EXPECT_EQ(summary.failed, 0);
    EXPECT_EQ(summary.finished, static_cast<int64_t>(make_plan(spec).size()));

    for (const std::string variant : {"bert-a", "tupe-r"})
        for (const std::string step : {"step0", "step3", "step6"}) {
            const fs::path d = dir_ / "runs" / variant / "analysis" / step;
            EXPECT_TRUE(fs::exists(d / "index.json")) << d;
            EXPECT_TRUE(fs::exists(d / "cls" / "entropy.npy")) << d;
            EXPECT_TRUE(fs::exists(d / "figures" / "cls_heatmaps.png")) << d;
        }
    EXPECT_TRUE(
        fs::exists(dir_ / "runs" / "bert-a" / "analysis" / "step6" / "terms" / "word_pos_h0.csv"));
    EXPECT_TRUE(fs::exists(dir_ / "runs" / "tupe-r" / "analysis" / "step6" / "tupe" / "theta.csv"));

    size_t counts[2] = {0, 0};
    {
        auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
        counts[0] = expect_artifacts_are_the_files(store, "bert-a");
        counts[1] = expect_artifacts_are_the_files(store, "tupe-r");
        EXPECT_GT(counts[0], 50u);
        // The snapshots at steps 0 and 3 exist for the analysis (fine-tuning uses only step 6).
        auto exp = store.find_experiment("tiny");
        auto run = store.find_run(exp->id, "bert-a");
        EXPECT_EQ(store.checkpoints(run->id).size(), 3u);
        // Claim 5 reads the trained analysis and, as its control, the untrained one.
        const auto claims = evaluate_claims(store, "tiny");
        const auto five =
            std::find_if(claims.begin(), claims.end(), [](const Claim& c) { return c.id == "5"; });
        ASSERT_NE(five, claims.end());
        EXPECT_NE(five->evidence.find("; untrained control: "), std::string::npos)
            << five->evidence;
        EXPECT_NE(five->details.back().find("untrained: "), std::string::npos);
    }
    // A rerun skips everything and records nothing twice.
    const auto again = run_experiment(spec, options, {});
    EXPECT_EQ(again.finished, 0);
    auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
    EXPECT_EQ(expect_artifacts_are_the_files(store, "bert-a"), counts[0]);
    EXPECT_EQ(expect_artifacts_are_the_files(store, "tupe-r"), counts[1]);
}

// analysis.ablation: `tupe ablate` on the final checkpoint, its csv and json recorded as
// artifacts of the pretrain run (one row per head and the whole model), not redone on a rerun.
TEST_F(AnalysisArtifactsTest, AblationOfTheFinalCheckpointIsRecorded) {
    const auto spec =
        load_experiment(study("tupe-r", "{sentences: 4, figures: false, ablation: zero}"));
    RunnerOptions options;
    options.self_exe = TUPE_CLI;
    EXPECT_EQ(run_experiment(spec, options, {}).failed, 0);
    const fs::path dir = dir_ / "runs" / "tupe-r" / "ablation";
    ASSERT_TRUE(fs::exists(dir / "ablation.json"));
    std::istringstream csv(read_file(dir / "ablation.csv"));
    int rows = 0;
    for (std::string line; std::getline(csv, line);) ++rows;
    EXPECT_EQ(rows, 1 + 2 * 2 + 1);  // header, tiny's 2 layers x 2 heads, the whole model
    auto kinds = [&]() {
        auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
        auto run = store.find_run(store.find_experiment("tiny")->id, "tupe-r");
        std::multiset<std::string> k;
        for (const auto& a : store.artifacts(run->id))
            if (a.kind.rfind("ablation-", 0) == 0)
                k.insert(a.kind + " " + fs::path(a.path).filename().string());
        return k;
    };
    const std::multiset<std::string> expected = {"ablation-csv ablation.csv",
                                                 "ablation-json ablation.json"};
    EXPECT_EQ(kinds(), expected);
    EXPECT_EQ(run_experiment(spec, options, {}).finished, 0);  // nothing redone
    EXPECT_EQ(kinds(), expected);
}

// analysis.keep_every and analysis.heads: snapshots at 0, 3 and 6, `tupe heads` over all of
// them, its json and csv recorded as artifacts of the pretrain run, not redone on a rerun.
TEST_F(AnalysisArtifactsTest, HeadTypesOfEveryKeptSnapshotAreRecorded) {
    const auto spec = load_experiment(
        study("tupe-a", "{sentences: 4, figures: false, keep_every: 3, heads: true}"));
    RunnerOptions options;
    options.self_exe = TUPE_CLI;
    EXPECT_EQ(run_experiment(spec, options, {}).failed, 0);
    const fs::path runs = dir_ / "runs" / "tupe-a";
    for (int step : {0, 3, 6})
        EXPECT_TRUE(fs::exists(runs / ("checkpoint-" + std::to_string(step) + ".pt"))) << step;
    const std::string json = read_file(runs / "heads" / "heads.json");
    for (const char* step : {"\"step\": 0", "\"step\": 3", "\"step\": 6"})
        EXPECT_NE(json.find(step), std::string::npos) << step;
    auto kinds = [&]() {
        auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
        auto run = store.find_run(store.find_experiment("tiny")->id, "tupe-a");
        std::multiset<std::string> k;
        for (const auto& a : store.artifacts(run->id))
            if (a.kind.rfind("heads-", 0) == 0)
                k.insert(a.kind + " " + fs::path(a.path).filename().string());
        return k;
    };
    const std::multiset<std::string> expected = {"heads-csv heads.csv", "heads-json heads.json"};
    EXPECT_EQ(kinds(), expected);
    EXPECT_EQ(run_experiment(spec, options, {}).finished, 0);  // nothing redone
    EXPECT_EQ(kinds(), expected);
}

TEST_F(AnalysisArtifactsTest, FinishedRunIsAnalysedInProcessWhenTheBlockIsAdded) {
    RunnerOptions options;  // no tupe executable: the runner analyses in its own process
    const auto plain = load_experiment(study("bert-a", ""));
    EXPECT_FALSE(plain.analysis.enabled);
    EXPECT_EQ(run_experiment(plain, options, {}).failed, 0);
    EXPECT_FALSE(fs::exists(dir_ / "runs" / "bert-a" / "analysis"));

    const auto spec = load_experiment(study("bert-a", "{sentences: 4, figures: false}"));
    const auto summary = run_experiment(spec, options, {});
    EXPECT_EQ(summary.failed, 0);
    EXPECT_EQ(summary.finished, 1);  // the analysis of the finished pretrain run
    EXPECT_EQ(summary.skipped, 1);   // its fine-tuning job
    auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
    EXPECT_GT(expect_artifacts_are_the_files(store, "bert-a"), 50u);
    auto exp = store.find_experiment("tiny");
    EXPECT_EQ(store.find_run(exp->id, "bert-a")->status, "finished");
    EXPECT_FALSE(fs::exists(dir_ / "runs" / "bert-a" / "analysis" / "step6" / "figures"));
}

TEST_F(AnalysisArtifactsTest, AnalyzeByHandRecordsAgainstANamedRunOrSaysWhy) {
#if !TUPE_WITH_QT
    GTEST_SKIP() << "figures need the Qt build (TUPE_WITH_QT)";
#endif
    const auto spec = load_experiment(study("bert-a", ""));
    ASSERT_EQ(run_experiment(spec, {}, {}).failed, 0);
    const std::string ckpt = (dir_ / "runs" / "bert-a" / "checkpoint-6.pt").string();
    const std::string db = (dir_ / "db.sqlite").string();
    const std::string out = (dir_ / "by-hand").string();
    auto r = tupe("analyze " + quote(ckpt) + " --corpus " + quote((dir_ / "corpus.txt").string()) +
                  " --sentences 3 --out " + quote(out) + " --compare " + quote(ckpt) + " --db " +
                  quote(db) + " --experiment tiny --run bert-a");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("recorded"), std::string::npos) << r.out;
    {
        auto store = ResultStore::open(db, OpenMode::kReadOnly);
        auto exp = store.find_experiment("tiny");
        auto run = store.find_run(exp->id, "bert-a");
        std::map<std::string, int64_t> recorded;
        for (const auto& a : store.artifacts(run->id)) recorded[a.path] = a.size;
        EXPECT_EQ(recorded, files_under(out));  // compare/ included
        EXPECT_TRUE(recorded.count((fs::path(out) / "compare" / "index.json").string()));
        EXPECT_TRUE(recorded.count((fs::path(out) / "figures" / "compare_cls.png").string()));
    }
    // A run that does not exist: one line naming the database and the runs it has, and
    // nothing written.
    const std::string out2 = (dir_ / "no-run").string();
    r = tupe("analyze " + quote(ckpt) + " --text 'the cat' --out " + quote(out2) + " --db " +
             quote(db) + " --experiment tiny --run bert-z");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("db.sqlite"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bert-z"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bert-a"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out2));
    r = tupe("analyze " + quote(ckpt) + " --text 'the cat' --out " + quote(out2) + " --db " +
             quote(db));
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("go together"), std::string::npos) << r.err;
}

TEST_F(AnalysisArtifactsTest, ExportedFolderAnalysesToIdenticalMatrices) {
    const auto spec = load_experiment(study("bert-a, tupe-r", ""));
    ASSERT_EQ(run_experiment(spec, {}, {}).failed, 0);
    for (const std::string variant : {"bert-a", "tupe-r"}) {
        const std::string ckpt = (dir_ / "runs" / variant / "checkpoint-6.pt").string();
        const fs::path hf = dir_ / ("hf-" + variant);
        auto r = tupe("export " + quote(ckpt) + " --out " + quote(hf.string()));
        ASSERT_EQ(r.status, 0) << r.err;
        for (const char* f :
             {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"})
            EXPECT_TRUE(fs::exists(hf / f)) << variant << " " << f;
        const std::string config = read_file(hf / "config.json");
        EXPECT_NE(config.find(variant == "bert-a" ? "\"model_type\": \"bert\""
                                                  : "\"model_type\": \"tupe\""),
                  std::string::npos)
            << config;
        // No logit lens: it scores a checkpoint's own held-out documents, which an HF folder
        // does not know (it scores the sentences instead).
        const std::string args = " --corpus " + quote((dir_ / "corpus.txt").string()) +
                                 " --sentences 6 --no-figures --no-lens --out ";
        r = tupe("analyze " + quote(ckpt) + args + quote((dir_ / ("a-" + variant)).string()));
        ASSERT_EQ(r.status, 0) << r.err;
        r = tupe("analyze " + quote(hf.string()) + args +
                 quote((dir_ / ("b-" + variant)).string()));
        ASSERT_EQ(r.status, 0) << r.err;
        // Every matrix file identical, byte for byte (index.json differs only in the model name).
        size_t compared = 0;
        for (const auto& [path, size] : files_under(dir_ / ("a-" + variant))) {
            if (fs::path(path).filename() == "index.json") continue;
            const fs::path rel = fs::relative(path, dir_ / ("a-" + variant));
            const fs::path other = dir_ / ("b-" + variant) / rel;
            ASSERT_TRUE(fs::exists(other)) << other;
            EXPECT_EQ(read_file(path), read_file(other)) << rel;
            ++compared;
        }
        EXPECT_GT(compared, 20u) << variant;
        EXPECT_EQ(files_under(dir_ / ("a-" + variant)).size(),
                  files_under(dir_ / ("b-" + variant)).size());
    }
    // The single-file export stays (--out FILE.pt), and the importer reads it as an HF
    // pytorch_model.bin beside the folder's config.json and vocab.txt.
    auto r = tupe("export " + quote((dir_ / "runs" / "bert-a" / "checkpoint-6.pt").string()) +
                  " --out " + quote((dir_ / "w.pt").string()));
    ASSERT_EQ(r.status, 0) << r.err;
    const fs::path bin = dir_ / "hf-bin";
    fs::create_directories(bin);
    fs::copy_file(dir_ / "hf-bert-a" / "config.json", bin / "config.json");
    fs::copy_file(dir_ / "hf-bert-a" / "vocab.txt", bin / "vocab.txt");
    fs::copy_file(dir_ / "w.pt", bin / "pytorch_model.bin");
    r = tupe("analyze " + quote(bin.string()) +
             " --text 'the old cat saw a bird' --no-figures --out " +
             quote((dir_ / "c-bin").string()));
    ASSERT_EQ(r.status, 0) << r.err;
    r = tupe("analyze " + quote((dir_ / "runs" / "bert-a" / "checkpoint-6.pt").string()) +
             " --text 'the old cat saw a bird' --no-figures --out " +
             quote((dir_ / "c-ckpt").string()));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(read_file(dir_ / "c-bin" / "terms" / "word_pos.npy"),
              read_file(dir_ / "c-ckpt" / "terms" / "word_pos.npy"));
    EXPECT_EQ(read_file(dir_ / "c-bin" / "cls" / "from_cls.npy"),
              read_file(dir_ / "c-ckpt" / "cls" / "from_cls.npy"));
}

TEST_F(AnalysisArtifactsTest, AnalysisBlockErrorsNameKeyAndLineOrTheMissingSnapshot) {
    const std::string bad = study("bert-a", "{sentence: 4}");
    try {
        load_experiment(bad);
        ADD_FAILURE() << "unknown key accepted";
    } catch (const std::exception& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("study.yaml:11:"), std::string::npos) << msg;
        EXPECT_NE(msg.find("analysis.sentence"), std::string::npos) << msg;
        EXPECT_NE(msg.find("sentences"), std::string::npos) << msg;  // the nearest key
    }
    EXPECT_THROW(load_experiment(study("bert-a", "{checkpoints: [1.5]}")), std::exception);
    EXPECT_THROW(load_experiment(study("bert-a", "{checkpoints: [-0.1]}")), std::exception);
    EXPECT_THROW(load_experiment(study("bert-a", "{corpus: x.txt, text: a cat}")), std::exception);

    // Pretrained with a snapshot at step 6 only; an analysis of step 3 cannot be made later.
    ASSERT_EQ(run_experiment(load_experiment(study("bert-a", "")), {}, {}).failed, 0);
    try {
        run_experiment(load_experiment(study("bert-a", "{checkpoints: [0.5]}")), {}, {});
        ADD_FAILURE() << "a missing snapshot was not reported";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("checkpoint-3.pt"), std::string::npos) << e.what();
    }
}
