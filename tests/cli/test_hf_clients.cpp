// transformers as a client of the workbench's files (docs/microscope.md, "HF folders"): for every
// preset, a tiny checkpoint with every parameter random, `tupe export` into an HF folder, and
// `tupe fill-mask --format json` on that folder; then tests/python/check_hf_exports.py, in the
// project's Python environment (TUPE_VENV, `./run.sh venv`), loads each folder with
// AutoTokenizer and AutoModelForMaskedLM (trust_remote_code: python/tupe_hf/) and compares the
// log-probabilities at the [MASK] tokens (fp32, 1e-4), and sends a random transformers
// BertForMaskedLM through `tupe export` and back. A fine-tuned run's model.pt (finetune.save:
// best) goes out for AutoModelForSequenceClassification with its head and label names, and
// transformers' logits equal `tupe classify`'s. Also fill-mask's and classify's one-line errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/attention_analysis.h"
#include "analysis/fill_mask.h"
#include "analysis/safetensors.h"
#include "checkpoint_internal.h"
#include "command_table.h"
#include "engine/config.h"
#include "engine/finetune.h"
#include "engine/trainer.h"
#include "support/test_support.h"
#include "support/torch_support.h"

namespace {

namespace fs = std::filesystem;
using test_support::quote;
using test_support::read_file;

// Two masks, 15 tokens with [CLS] and [SEP]: distances past T5's 8 exact buckets, past a local
// window, and both sides of every query.
constexpr const char* kText = "the old man saw the [MASK] near a red bird on the [MASK] mat .";

std::vector<std::string> vocab_tokens() {
    std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (const char* w :
         {"the", "old", "man", "saw", "near", "a",   "red", "bird",  "on",    "mat",
          ".",   "cat", "dog", "sat", "ran",  "##s", "big", "small", "house", "tree"})
        t.emplace_back(w);
    return t;
}

/// The project's Python: $TUPE_VENV (./run.sh exports it), else the environment ./run.sh venv
/// makes for this python/requirements.txt (TUPE_DEFAULT_VENV, set by tests/CMakeLists.txt).
std::string venv_python(std::string* why) {
    const char* env = std::getenv("TUPE_VENV");
    const std::string venv = env && *env ? env : TUPE_DEFAULT_VENV;
    const std::string python = venv + "/bin/python";
    if (!fs::exists(python)) {
        *why = "no Python environment at " + venv + " (TUPE_VENV " +
               (env ? "= " + std::string(env) : "unset") +
               "): run `./run.sh venv` (or ./run.sh test, which exports TUPE_VENV)";
        return "";
    }
    return python;
}

class HfClientsTest : public test_support::TempDirTest {
  protected:
    HfClientsTest() : TempDirTest(test_support::per_test_name("tupe_hf_clients")) {}
    void SetUp() override { test_support::write_vocab(dir_ / "vocab.txt", vocab_tokens()); }
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
    /// A tiny checkpoint of `preset` (hidden 16, 2 layers, 2 heads, 32 positions, no dropout)
    /// with every parameter from N(0, 0.3^2), norm gains around 1, so that no positional term
    /// is zero; its vocab.txt beside it.
    fs::path checkpoint(const std::string& preset, uint64_t seed) const {
        engine::PretrainConfig config;
        config.model = test_support::tiny16_config(
            preset, static_cast<int64_t>(vocab_tokens().size()), 32, /*dropout=*/false);
        // A local layer (ModernBERT's backbone: layer 1) sees a 7-token window of the 15.
        if (config.model.local_window > 0) config.model.local_window = 3;
        config.data.vocab = (dir_ / "vocab.txt").string();
        config.data.lower_case = true;
        engine::BertForMaskedLM model(config.model);
        test_support::randomize_parameters(*model, seed, 0.3, true);
        model->eval();
        const fs::path run = dir_ / preset;
        fs::create_directories(run);
        fs::copy_file(dir_ / "vocab.txt", run / "vocab.txt");
        torch::optim::AdamW optimizer(model->parameters());
        engine::detail::save_checkpoint((run / "checkpoint.pt").string(), config, model, optimizer,
                                        0, 0, {});
        return run / "checkpoint.pt";
    }
    /// A fine-tuned classifier of `preset` on `task` (every parameter random, as checkpoint())
    /// where a study writes it: RUN/finetune/JOB/model.pt, the vocabulary in the run folder.
    fs::path finetuned(const std::string& preset, const std::string& task, int64_t num_labels,
                       uint64_t seed) const {
        engine::PretrainConfig config;
        config.model = test_support::tiny16_config(
            preset, static_cast<int64_t>(vocab_tokens().size()), 32, /*dropout=*/false);
        config.data.vocab = (dir_ / "vocab.txt").string();
        config.data.lower_case = true;
        engine::BertForSequenceClassification model(config.model, num_labels, 0.0);
        test_support::randomize_parameters(*model, seed, 0.3, true);
        model->eval();
        const fs::path run = dir_ / "classifiers" / (preset + "-" + task);
        fs::create_directories(run / "finetune" / "job");
        fs::copy_file(dir_ / "vocab.txt", run / "vocab.txt");
        const fs::path path = run / "finetune" / "job" / "model.pt";
        engine::save_finetuned(path.string(), model, config, task, 3);
        return path;
    }
};

// What `tupe COMMAND ARGS` prints, run in this process (the binary's own code, cli::command_table,
// without the ~1 s a LibTorch process takes to start); throws what the command throws.
std::string run_in_process(const std::string& command, const cli::Argv& args) {
    std::ostringstream out;
    std::streambuf* saved = std::cout.rdbuf(out.rdbuf());
    try {
        const int status = cli::command_spec(command).run(args);
        std::cout.rdbuf(saved);
        EXPECT_EQ(status, 0) << command;
    } catch (...) {
        std::cout.rdbuf(saved);
        throw;
    }
    return out.str();
}

// Two fill-mask JSON documents: the same masks and candidate ids, log-probs within 1e-5.
void expect_same_candidates(const nlohmann::json& a, const nlohmann::json& b,
                            const std::string& what) {
    ASSERT_EQ(a["masks"].size(), b["masks"].size()) << what;
    for (size_t m = 0; m < a["masks"].size(); ++m) {
        const auto &x = a["masks"][m], &y = b["masks"][m];
        EXPECT_EQ(x["position"], y["position"]) << what;
        ASSERT_EQ(x["top"].size(), y["top"].size()) << what;
        for (size_t r = 0; r < x["top"].size(); ++r) {
            EXPECT_EQ(x["top"][r]["id"], y["top"][r]["id"]) << what;
            EXPECT_EQ(x["top"][r]["token"], y["top"][r]["token"]) << what;
            EXPECT_NEAR(x["top"][r]["logprob"].get<double>(), y["top"][r]["logprob"].get<double>(),
                        1e-5)
                << what;
        }
    }
}

TEST_F(HfClientsTest, TransformersLoadsEveryPresetsExportWithFillMasksLogProbs) {
    std::string why;
    const std::string python = venv_python(&why);
    if (python.empty()) FAIL() << why;
    uint64_t seed = 100;
    for (const std::string& preset : engine::model_presets()) {
        const fs::path ckpt = checkpoint(preset, seed++), hf = ckpt.parent_path() / "hf";
        // `tupe export CKPT --out HF`, then `tupe fill-mask HF --text T --format json`.
        run_in_process("export", {ckpt.string(), "--out", hf.string()});
        const std::string json = run_in_process(
            "fill-mask", {hf.string(), "--text", kText, "--top-k", "5", "--format", "json"});
        ASSERT_EQ(nlohmann::json::parse(json)["masks"].size(), 2u) << preset << ": " << json;
        test_support::write_file(ckpt.parent_path() / "fill_mask.json", json);
        if (preset == "bert-a" || preset == "tupe-r" || preset == "modern-tupe-r") {
            // The tupe executable prints the same, on the folder and on the checkpoint (the
            // export holds the checkpoint's function), to rounding: its own process picks its
            // thread count and BLAS blocking.
            for (const fs::path& model : {hf, ckpt}) {
                const auto r = tupe("fill-mask " + quote(model.string()) + " --text " +
                                    quote(kText) + " --top-k 5 --format json");
                ASSERT_EQ(r.status, 0) << preset << ": " << read_file(dir_ / "stderr.txt");
                expect_same_candidates(nlohmann::json::parse(r.out), nlohmann::json::parse(json),
                                       preset + " " + model.string());
            }
        }
    }
    const std::string script = std::string(TUPE_SOURCE_DIR) + "/tests/python/check_hf_exports.py";
    const auto r = test_support::run_cli(quote(python),
                                         quote(script) + " --work " + quote(dir_.string()) +
                                             " --tupe " + quote(TUPE_CLI) + " --vocab " +
                                             quote((dir_ / "vocab.txt").string()) + " --text " +
                                             quote(kText) + " </dev/null",
                                         dir_ / "python_stderr.txt");
    std::cout << r.out;
    EXPECT_EQ(r.status, 0) << r.out << read_file(dir_ / "python_stderr.txt");
    for (const std::string& preset : engine::model_presets())
        EXPECT_NE(r.out.find(preset + "\t"), std::string::npos) << "no line for " << preset;
}

// A fine-tuned run exports for AutoModelForSequenceClassification: model_type bert (bert-a),
// python/tupe_hf's TupeForSequenceClassification (tupe-r; modern-tupe-r: pre-LN, RMSNorm, no
// biases), with the task's labels; a pair task of 3 labels (MNLI) and a regression (STS-B).
// transformers' logits on the folder equal `tupe classify`'s on the model.pt (fp32, 1e-4), and
// a transformers BertForSequenceClassification goes through `tupe export` with its pooler and
// classifier identical.
TEST_F(HfClientsTest, TransformersLoadsAFineTunedRunsClassifierWithItsLabels) {
    std::string why;
    const std::string python = venv_python(&why);
    if (python.empty()) FAIL() << why;
    const std::string a = "the old man saw a red bird .",
                      b = "a man saw the small dog on the mat .";
    struct Case {
        std::string preset, task;
        int64_t labels;
        std::vector<std::string> names;
    };
    const std::vector<Case> cases = {
        {"bert-a", "rte", 2, {"entailment", "not_entailment"}},
        {"tupe-r", "mnli", 3, {"entailment", "neutral", "contradiction"}},
        {"modern-tupe-r", "stsb", 1, {"score"}}};
    uint64_t seed = 300;
    for (const Case& c : cases) {
        const fs::path model = finetuned(c.preset, c.task, c.labels, seed++);
        const fs::path run = model.parent_path().parent_path().parent_path();
        const std::string out =
            run_in_process("export", {model.string(), "--out", (run / "hf").string()});
        EXPECT_NE(out.find(std::to_string(c.labels) + " labels"), std::string::npos) << out;
        const auto config = nlohmann::json::parse(read_file(run / "hf" / "config.json"));
        for (size_t i = 0; i < c.names.size(); ++i)
            EXPECT_EQ(config["id2label"][std::to_string(i)], c.names[i]) << c.preset;
        EXPECT_EQ(config["problem_type"],
                  c.labels == 1 ? "regression" : "single_label_classification");
        const std::string json = run_in_process(
            "classify", {model.string(), "--text", a, "--text-b", b, "--format", "json"});
        const auto got = nlohmann::json::parse(json);
        ASSERT_EQ(got.contains("score"), c.labels == 1) << json;
        if (c.labels > 1) {
            ASSERT_EQ(got["labels"].size(), static_cast<size_t>(c.labels)) << json;
            double total = 0;
            for (const auto& l : got["labels"]) total += l["probability"].get<double>();
            EXPECT_NEAR(total, 1.0, 1e-9) << json;
        }
        test_support::write_file(run / "classify.json", json);
        // The folder reads back as the same classifier: `tupe classify` on it prints the same.
        const auto back = nlohmann::json::parse(run_in_process(
            "classify", {(run / "hf").string(), "--text", a, "--text-b", b, "--format", "json"}));
        EXPECT_EQ(back["tokens"], got["tokens"]);
        EXPECT_EQ(back["task"], got["task"]);
        if (c.labels == 1) {
            EXPECT_NEAR(back["score"].get<double>(), got["score"].get<double>(), 1e-5);
        } else {
            EXPECT_EQ(back["predicted"], got["predicted"]);
            for (size_t i = 0; i < got["labels"].size(); ++i)
                EXPECT_NEAR(back["labels"][i]["logit"].get<double>(),
                            got["labels"][i]["logit"].get<double>(), 1e-5);
        }
    }
    const std::string script = std::string(TUPE_SOURCE_DIR) + "/tests/python/check_hf_exports.py";
    const auto r = test_support::run_cli(
        quote(python),
        quote(script) + " --part classifier --work " + quote((dir_ / "classifiers").string()) +
            " --tupe " + quote(TUPE_CLI) + " --vocab " + quote((dir_ / "vocab.txt").string()) +
            " --text " + quote(a) + " --text-b " + quote(b) + " </dev/null",
        dir_ / "python_stderr.txt");
    std::cout << r.out;
    EXPECT_EQ(r.status, 0) << r.out << read_file(dir_ / "python_stderr.txt");
    for (const Case& c : cases)
        EXPECT_NE(r.out.find(c.preset + "-" + c.task + "\t"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("BertForSequenceClassification: "), std::string::npos) << r.out;
}

TEST_F(HfClientsTest, ClassifyRefusesInOneLine) {
    const fs::path ckpt = checkpoint("bert-a", 1);
    // A pretraining checkpoint is not a classifier, and load_checkpoint names a classifier.
    auto r = tupe("classify " + quote(ckpt.string()) + " --text 'a cat .'");
    EXPECT_NE(r.status, 0);
    std::string err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("is not a fine-tuned model"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    const fs::path model = finetuned("bert-a", "rte", 2, 7);
    r = tupe("fill-mask " + quote(model.string()) + " --text 'a [MASK] .'");
    EXPECT_NE(r.status, 0);
    err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("is a fine-tuned classifier, not a pretraining checkpoint"),
              std::string::npos)
        << err;
    // An MLM export is not a classifier folder.
    const fs::path hf = dir_ / "hf";
    ASSERT_EQ(tupe("export " + quote(ckpt.string()) + " --out " + quote(hf.string())).status, 0);
    r = tupe("classify " + quote(hf.string()) + " --text 'a cat .'");
    EXPECT_NE(r.status, 0);
    err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("names no *ForSequenceClassification"), std::string::npos) << err;
    r = tupe("export " + quote(model.string()) + " --out " + quote((dir_ / "w.pt").string()));
    EXPECT_NE(r.status, 0);
    err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("exports to an HF folder only"), std::string::npos) << err;
    // The table: every label with its logit and probability, the predicted one marked.
    r = tupe("classify " + quote(model.string()) +
             " --text 'the cat sat .' --text-b 'a dog ran .'");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    EXPECT_NE(r.out.find("bert-a fine-tuned on RTE, epoch 3"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tokens: [CLS] the cat sat . [SEP] a dog ran . [SEP]"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("not_entailment"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("predicted: "), std::string::npos) << r.out;
}

TEST_F(HfClientsTest, FillMaskRefusesInOneLine) {
    const fs::path ckpt = checkpoint("bert-a", 1);
    auto r = tupe("fill-mask " + quote(ckpt.string()) + " --text 'no mask here .'");
    EXPECT_NE(r.status, 0);
    std::string err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("no [MASK] in"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

    r = tupe("fill-mask " + quote((dir_ / "missing.pt").string()) + " --text 'a [MASK] .'");
    EXPECT_NE(r.status, 0);
    err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("no such checkpoint or HF folder"), std::string::npos) << err;

    // An HF folder without cls.predictions.* (a BertModel): no MLM head to ask.
    const fs::path hf = dir_ / "hf";
    ASSERT_EQ(tupe("export " + quote(ckpt.string()) + " --out " + quote(hf.string())).status, 0);
    auto tensors = analysis::read_hf_state_dict(hf.string());
    analysis::NamedTensors encoder;
    for (auto& [name, t] : tensors)
        if (name.rfind("cls.", 0) != 0) encoder.emplace_back(name, t);
    analysis::write_safetensors((hf / "model.safetensors").string(), encoder, {});
    r = tupe("fill-mask " + quote(hf.string()) + " --text 'a [MASK] .'");
    EXPECT_NE(r.status, 0);
    err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("has no MLM head"), std::string::npos) << err;

    r = tupe("fill-mask " + quote(ckpt.string()) + " --text 'the [MASK] sat .' --top-k 3");
    EXPECT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    EXPECT_NE(r.out.find("[MASK] at position 2"), std::string::npos) << r.out;
}

}  // namespace
