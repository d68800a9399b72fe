// `tupe export CHECKPOINT --out DIR` of a run transformers has no direct form for: a BERT-A
// pretrained with type_vocab_size 0 exports as a loadable BertForMaskedLM folder (two zero
// token-type rows), notes that on stderr, and reads back through our HF importer and
// `tupe analyze DIR` to the checkpoint's own logits and matrices. Every reading command (inspect,
// analyze, heads, ablate) takes that folder, or a BertModel folder without the MLM head, through
// the one model loader (cli/model_loader.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "analysis/attention_analysis.h"
#include "analysis/safetensors.h"
#include "engine/bert.h"
#include "engine/trainer.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using test_support::quote;
using test_support::read_file;

class ExportCliTest : public test_support::TempDirTest {
  protected:
    ExportCliTest() : TempDirTest(test_support::per_test_name("tupe_export_cli")) {}
    void SetUp() override { test_support::write_tiny_pretraining(dir_); }
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
};

// MLM logits at every position of a fixed batch of ids (the vocabulary's first 17 tokens).
torch::Tensor logits(engine::BertForMaskedLM& model) {
    torch::NoGradGuard no_grad;
    model->eval();
    torch::manual_seed(3);
    auto ids = torch::randint(5, 17, {2, 10}, torch::kLong);
    ids.select(1, 0).fill_(2);  // [CLS]
    return model->forward(ids, torch::ones_like(ids), torch::zeros_like(ids)).logits;
}

TEST_F(ExportCliTest, TypeVocabSizeZeroExportsAsAZeroTableWithANote) {
    const fs::path run = dir_ / "run", hf = dir_ / "hf";
    auto r = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) + " --out " +
                  quote(run.string()) +
                  " --set model.preset=bert-a --set model.type_vocab_size=0 --set train.steps=2"
                  " --set train.eval_interval=2 --set train.tensorboard=false");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    const std::string ckpt = engine::checkpoint_path(run.string());

    r = tupe("export " + quote(ckpt) + " --out " + quote(hf.string()));
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    const std::string err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("tupe export: note: type_vocab_size 0 exported as type_vocab_size 2"),
              std::string::npos)
        << err;
    EXPECT_NE(r.out.find("model_type bert"), std::string::npos) << r.out;
    const std::string config = read_file(hf / "config.json");
    EXPECT_NE(config.find("\"type_vocab_size\": 2"), std::string::npos) << config;

    // The importer's model computes the checkpoint's function.
    auto original = engine::load_checkpoint(ckpt);
    ASSERT_EQ(original.config.model.type_vocab_size, 0);
    auto imported = analysis::import_hf_bert(hf.string());
    EXPECT_TRUE(torch::equal(logits(imported), logits(original.model)));

    // And `tupe analyze` of the folder writes the checkpoint's matrices, byte for byte.
    const std::string args =
        " --corpus " + quote((dir_ / "corpus.txt").string()) + " --sentences 4 --no-figures --out ";
    r = tupe("analyze " + quote(ckpt) + args + quote((dir_ / "a").string()));
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    r = tupe("analyze " + quote(hf.string()) + args + quote((dir_ / "b").string()));
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    size_t compared = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "a")) {
        if (!e.is_regular_file() || e.path().extension() != ".npy") continue;
        const fs::path other = dir_ / "b" / fs::relative(e.path(), dir_ / "a");
        ASSERT_TRUE(fs::exists(other)) << other;
        EXPECT_EQ(read_file(e.path()), read_file(other)) << other;
        ++compared;
    }
    EXPECT_GT(compared, 5u);
}

// The ablation.csv rows from the loss column on (the variant and checkpoint columns name the
// input).
std::vector<std::string> ablation_numbers(const std::string& csv) {
    std::vector<std::string> rows;
    std::istringstream in(csv);
    for (std::string line; std::getline(in, line);) {
        size_t cut = 0;
        for (int comma = 0; comma < 2 && cut != std::string::npos; ++comma)
            cut = line.find(',', cut == 0 ? 0 : cut + 1);
        rows.push_back(cut == std::string::npos ? line : line.substr(cut));
    }
    return rows;
}

TEST_F(ExportCliTest, EveryReadingCommandTakesAnHfFolderAndSaysWhenItHasNoMlmHead) {
    const fs::path run = dir_ / "run", hf = dir_ / "hf", enc = dir_ / "enc";
    auto r = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) + " --out " +
                  quote(run.string()) +
                  " --set model.preset=bert-a --set train.steps=2 --set train.eval_interval=2"
                  " --set train.tensorboard=false");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    const std::string ckpt = engine::checkpoint_path(run.string());
    ASSERT_EQ(tupe("export " + quote(ckpt) + " --out " + quote(hf.string())).status, 0)
        << read_file(dir_ / "stderr.txt");
    // A bare BertModel, as sentence-transformers saves it: no "bert." prefix, no cls.* head.
    fs::create_directories(enc);
    for (const char* f : {"config.json", "vocab.txt", "tokenizer_config.json"})
        fs::copy_file(hf / f, enc / f);
    analysis::NamedTensors encoder;
    for (auto& [name, t] : analysis::read_safetensors((hf / "model.safetensors").string()))
        if (name.rfind("bert.", 0) == 0) encoder.emplace_back(name.substr(5), t);
    ASSERT_FALSE(encoder.empty());
    analysis::write_safetensors((enc / "model.safetensors").string(), encoder);

    // inspect: the folders' attention is the checkpoint's, byte for byte.
    const std::string text = " --text 'the cat sat on the mat' --text-b 'a dog ran' --out ";
    for (const auto& [model, out] : {std::pair{ckpt, "i_ckpt"}, std::pair{hf.string(), "i_hf"},
                                     std::pair{enc.string(), "i_enc"}}) {
        r = tupe("inspect " + quote(model) + text + quote((dir_ / out).string()));
        ASSERT_EQ(r.status, 0) << model << ": " << read_file(dir_ / "stderr.txt");
    }
    for (const char* f : {"input_ids.npy", "layer0_probs.npy", "layer1_logits.npy"}) {
        EXPECT_EQ(read_file(dir_ / "i_hf" / f), read_file(dir_ / "i_ckpt" / f)) << f;
        EXPECT_EQ(read_file(dir_ / "i_enc" / f), read_file(dir_ / "i_ckpt" / f)) << f;
    }

    // heads: an HF folder is one model; with no training corpus it needs --corpus.
    const std::string corpus = " --corpus " + quote((dir_ / "corpus.txt").string());
    r = tupe("heads " + quote(enc.string()) + corpus + " --windows 2 --format csv");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    EXPECT_NE(r.out.find("enc," + enc.string() + ",0,0,0,"), std::string::npos) << r.out;
    r = tupe("heads " + quote(enc.string()) + " --windows 2");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(read_file(dir_ / "stderr.txt").find("give --corpus FILE"), std::string::npos)
        << read_file(dir_ / "stderr.txt");

    // ablate: the BertForMaskedLM folder gives the checkpoint's numbers; the BertModel folder
    // is refused in one line.
    const std::string ablate = corpus + " --windows 4 --no-share --format csv";
    r = tupe("ablate " + quote(ckpt) + ablate);
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    const auto from_ckpt = ablation_numbers(r.out);
    r = tupe("ablate " + quote(hf.string()) + ablate);
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    EXPECT_EQ(ablation_numbers(r.out), from_ckpt) << r.out;
    r = tupe("ablate " + quote(enc.string()) + ablate);
    EXPECT_NE(r.status, 0);
    const std::string err = read_file(dir_ / "stderr.txt");
    EXPECT_NE(err.find("needs an MLM head and this folder has none"), std::string::npos) << err;
    EXPECT_NE(err.find("--fit-head N fits one"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    // --fit-head: a head fitted on the text after the scored tokens, said in the report.
    r = tupe("ablate " + quote(enc.string()) + corpus +
             " --windows 10 --length 6 --no-share --max-tokens 40 --fit-head 2000 --format json");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    const auto fitted = nlohmann::json::parse(r.out)["checkpoints"][0];
    EXPECT_TRUE(fitted["mlm_head"]["fitted"].get<bool>()) << r.out;
    EXPECT_GE(fitted["mlm_head"]["windows"].get<int64_t>(), 10) << r.out;
    EXPECT_LE(fitted["mlm_head"]["held_back_loss"].get<double>(),
              fitted["mlm_head"]["held_back_unigram_loss"].get<double>() + 1.0)
        << r.out;
    r = tupe("ablate " + quote(enc.string()) + " --windows 2 --fit-head 2000");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(read_file(dir_ / "stderr.txt").find("--fit-head fits on the --corpus text"),
              std::string::npos)
        << read_file(dir_ / "stderr.txt");

    // analyze: the BertModel folder's maps, without the probes that score MLM predictions.
    r = tupe("analyze " + quote(enc.string()) + corpus +
             " --sentences 4 --no-figures --no-properties --out " + quote((dir_ / "a").string()));
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "stderr.txt");
    EXPECT_NE(r.out.find("logit lens and order probe skipped"), std::string::npos) << r.out;
    // Fig. 2 decided on the folder by claim 5's test: 2 heads x 2 mixed terms.
    EXPECT_NE(r.out.find("Fig. 2, layer 0 (claim 5's test): "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" of 4 (head, term) comparisons flatter than word-word"),
              std::string::npos)
        << r.out;
}

}  // namespace
