// Export of models transformers has no direct form for, read back by our own HF importer:
// a BERT-A without segment embeddings (type_vocab_size 0) is written with a zero
// token_type_embeddings table of two rows (BertEmbeddings always has one; BertTokenizer gives
// a pair's second segment type 1), which is the same function, and says so in a note.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analysis/attention_analysis.h"
#include "analysis/safetensors.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"
#include "support/torch_support.h"

namespace {

namespace fs = std::filesystem;

// (B, T, C) hidden states of a fixed batch of word_vocab() ids, token types all `type`.
torch::Tensor hidden_states(engine::BertForMaskedLM& model, int64_t type) {
    torch::NoGradGuard no_grad;
    model->eval();
    torch::manual_seed(5);
    auto ids = torch::randint(5, test_support::word_vocab().size(), {2, 12}, torch::kLong);
    ids.select(1, 0).fill_(2);  // [CLS]
    const auto types = torch::full({2, 12}, type, torch::kLong);
    return model->bert->forward(ids, {}, types).last_hidden_state;
}

// MLM logits at every position of the same batch.
torch::Tensor export_mlm_logits(engine::BertForMaskedLM& model) {
    torch::NoGradGuard no_grad;
    model->eval();
    torch::manual_seed(5);
    auto ids = torch::randint(5, test_support::word_vocab().size(), {2, 12}, torch::kLong);
    ids.select(1, 0).fill_(2);
    return model->forward(ids, torch::ones_like(ids), torch::zeros_like(ids)).logits;
}

TEST(HfExportTypes, TypeVocabSizeZeroExportsAZeroTableWithTheSameOutputs) {
    const test_support::TempDir temp(test_support::per_test_name("tupe_hf_types"));
    engine::ModelConfig config =
        test_support::tiny16_config("bert-a", test_support::word_vocab().size(), 32, false);
    config.type_vocab_size = 0;
    engine::BertForMaskedLM model(config);
    test_support::randomize_parameters(*model, 17, 0.5, true);
    model->eval();
    ASSERT_TRUE(model->bert->embeddings->token_type_embeddings.is_empty());
    test_support::word_vocab().save(temp.file("vocab.txt"));

    const std::string out = temp.file("hf");
    std::vector<std::string> notes;
    analysis::export_hf_bert(model, temp.file("vocab.txt"), true, out, &notes);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("type_vocab_size 0"), std::string::npos) << notes[0];

    // A config transformers' BertModel can build: model_type bert, type_vocab_size >= 1.
    const auto j = nlohmann::json::parse(std::ifstream(fs::path(out) / "config.json"));
    EXPECT_EQ(j["model_type"], "bert");
    EXPECT_EQ(j["type_vocab_size"], 2);
    bool found = false;
    for (const auto& [name, tensor] :
         analysis::read_safetensors((fs::path(out) / "model.safetensors").string())) {
        if (name != "bert.embeddings.token_type_embeddings.weight") continue;
        found = true;
        EXPECT_EQ(tensor.sizes(), (std::vector<int64_t>{2, config.hidden_size}));
        EXPECT_EQ(tensor.abs().max().item<double>(), 0.0);
    }
    EXPECT_TRUE(found) << "no token_type_embeddings.weight in model.safetensors";

    // Our importer reads it back to the same function, for either segment.
    auto imported = analysis::import_hf_bert(out);
    EXPECT_EQ(imported->config().type_vocab_size, 2);
    EXPECT_TRUE(torch::equal(export_mlm_logits(imported), export_mlm_logits(model)));
    EXPECT_TRUE(torch::equal(hidden_states(imported, 0), hidden_states(model, 0)));
    EXPECT_TRUE(torch::equal(hidden_states(imported, 1), hidden_states(model, 0)));
}

TEST(HfExportTypes, ModelsWithSegmentEmbeddingsExportThemUnchangedWithoutANote) {
    const test_support::TempDir temp(test_support::per_test_name("tupe_hf_types"));
    engine::ModelConfig config =
        test_support::tiny16_config("bert-a", test_support::word_vocab().size(), 32, false);
    config.type_vocab_size = 3;
    engine::BertForMaskedLM model(config);
    test_support::randomize_parameters(*model, 17, 0.5, true);
    test_support::word_vocab().save(temp.file("vocab.txt"));
    std::vector<std::string> notes;
    analysis::export_hf_bert(model, temp.file("vocab.txt"), true, temp.file("hf"), &notes);
    EXPECT_TRUE(notes.empty());
    const auto j = nlohmann::json::parse(std::ifstream(fs::path(temp.file("hf")) / "config.json"));
    EXPECT_EQ(j["type_vocab_size"], 3);
    auto imported = analysis::import_hf_bert(temp.file("hf"));
    EXPECT_TRUE(torch::equal(hidden_states(imported, 2), hidden_states(model, 2)));
}

// `c` through hf_config_for and read_hf_bert_config (config.json at `path`).
engine::ModelConfig hf_config_round_trip(const engine::ModelConfig& c, const std::string& path) {
    std::ofstream(path, std::ios::trunc) << analysis::hf_config_for(c);
    return analysis::read_hf_bert_config(path);
}

TEST(HfExportConfig, EveryPresetAtEverySizeRoundTripsThroughConfigJson) {
    const test_support::TempDir temp(test_support::per_test_name("tupe_hf_presets"));
    for (const std::string& preset : engine::model_presets())
        for (const std::string& size : engine::model_sizes()) {
            const engine::ModelConfig c = engine::make_model_config(preset, size);
            EXPECT_EQ(test_support::model_values(hf_config_round_trip(c, temp.file("config.json"))),
                      test_support::model_values(c))
                << preset << " " << size;
        }
}

TEST(HfExportConfig, TheWorkbenchBlockHoldsEveryFieldHfHasNoKeyFor) {
    const test_support::TempDir temp(test_support::per_test_name("tupe_hf_block"));
    engine::ModelConfig rope = engine::make_model_config("rope", "tiny");
    rope.rope_base = 500000;
    rope.rope_fraction = 0.5;
    rope.position_offset = 3;
    rope.pre_layernorm = true;
    engine::ModelConfig shaw = engine::make_model_config("shaw", "small");
    shaw.max_relative_distance = 5;  // not HF's clip: model_type "tupe"
    engine::ModelConfig randomized = engine::make_model_config("bert-a", "tiny");
    randomized.randomized_positions_max = 100;  // training only, but kept: model_type "tupe"
    for (const engine::ModelConfig& c : {rope, shaw, randomized}) {
        EXPECT_EQ(test_support::model_values(hf_config_round_trip(c, temp.file("config.json"))),
                  test_support::model_values(c))
            << c.preset;
        const nlohmann::json j = nlohmann::json::parse(analysis::hf_config_for(c));
        EXPECT_EQ(j.at("model_type"), "tupe") << c.preset;
        const nlohmann::json& block = j.at("tupe_workbench");
        for (const std::string& key : engine::config_keys()) {
            if (key.rfind("model.", 0) != 0) continue;
            const std::string name = key.substr(6);
            EXPECT_TRUE(block.contains(name) || j.contains(name)) << name;
            EXPECT_FALSE(block.contains(name) && j.contains(name)) << name;  // once
        }
    }
    const nlohmann::json block =
        nlohmann::json::parse(analysis::hf_config_for(rope))["tupe_workbench"];
    EXPECT_DOUBLE_EQ(block.at("rope_base").get<double>(), 500000.0);
    EXPECT_TRUE(block.at("pre_layernorm").is_boolean());
    EXPECT_TRUE(block.at("position_offset").is_number_integer());
}

}  // namespace
