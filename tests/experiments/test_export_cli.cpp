// `tupe export CHECKPOINT --out DIR` of a run transformers has no direct form for: a BERT-A
// pretrained with type_vocab_size 0 exports as a loadable BertForMaskedLM folder (two zero
// token-type rows), notes that on stderr, and reads back through our HF importer and
// `tupe analyze DIR` to the checkpoint's own logits and matrices.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "analysis/attention_analysis.h"
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

}  // namespace
