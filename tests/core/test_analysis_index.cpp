// index.json's "config" (analysis/analysis_index.h): every model.* field of engine::ModelConfig,
// typed, written and read through the config table (engine::visit_model_fields), so every
// preset at every size comes back as the same config; older indexes (eleven keys, or the
// pre-zoo "rel_pos") still parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis_index.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "support/test_support.h"

namespace {

using analysis::AnalysisIndex;

/// `c` as index.json's config, written and parsed back.
engine::ModelConfig index_round_trip(const engine::ModelConfig& c) {
    AnalysisIndex index;
    index.variant = c.preset;
    index.size = c.size;
    index.config = c;
    return analysis::parse_index_json(analysis::write_index_json(index), "index.json").config;
}

TEST(AnalysisIndexConfig, EveryPresetAtEverySizeRoundTrips) {
    for (const std::string& preset : engine::model_presets())
        for (const std::string& size : engine::model_sizes()) {
            const engine::ModelConfig c = engine::make_model_config(preset, size);
            EXPECT_EQ(test_support::model_values(index_round_trip(c)),
                      test_support::model_values(c))
                << preset << " " << size;
        }
}

TEST(AnalysisIndexConfig, FieldsAwayFromTheirPresetsRoundTrip) {
    engine::ModelConfig c = engine::make_model_config("rope", "small");
    c.rope_base = 500000;
    c.rope_fraction = 0.25;
    c.position_offset = 7;
    c.max_relative_distance = 9;
    c.rel_pos_bins = 16;
    c.max_rel_pos = 48;
    c.pre_layernorm = true;
    c.shared_pos_term = false;
    c.attention_scale_factor = 1.5;
    c.layer_norm_eps = 1e-6;
    c.hidden_dropout_prob = 0.05;
    c.type_vocab_size = 0;
    c.pad_token_id = 3;
    c.intermediate_size = 1000;
    c.initializer_range = 0.01;
    EXPECT_EQ(test_support::model_values(index_round_trip(c)), test_support::model_values(c));
}

TEST(AnalysisIndexConfig, ConfigHoldsEveryModelKeyTyped) {
    AnalysisIndex index;
    index.config = engine::make_model_config("deberta", "tiny");
    const nlohmann::json config =
        nlohmann::json::parse(analysis::write_index_json(index)).at("config");
    std::vector<std::string> expected, written;
    for (const std::string& key : engine::config_keys())
        if (key.rfind("model.", 0) == 0) expected.push_back(key.substr(6));
    for (const auto& item : config.items()) written.push_back(item.key());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(written, expected);  // nlohmann's objects are sorted
    EXPECT_TRUE(config.at("preset").is_string());
    EXPECT_EQ(config.at("relative_position"), "deberta");
    EXPECT_TRUE(config.at("untie_cls").is_boolean());
    EXPECT_TRUE(config.at("shared_pos_term").is_boolean());
    EXPECT_TRUE(config.at("max_relative_distance").is_number_integer());
    EXPECT_TRUE(config.at("num_hidden_layers").is_number_integer());
    EXPECT_TRUE(config.at("rope_base").is_number());
    EXPECT_DOUBLE_EQ(config.at("rope_base").get<double>(), 10000.0);
    EXPECT_DOUBLE_EQ(config.at("attention_scale_factor").get<double>(), 3.0);
}

TEST(AnalysisIndexConfig, ElevenKeyIndexesStillParse) {
    const AnalysisIndex index = analysis::parse_index_json(R"({"model": "m.pt",
 "config": {"absolute_position": "untied", "relative_position": "t5", "untie_cls": true,
  "shared_pos_term": true, "attention_scale_factor": 2.0, "pre_layernorm": false,
  "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 256,
  "max_position_embeddings": 128, "vocab_size": 30522}})",
                                                           "index.json");
    const engine::ModelConfig& c = index.config;
    EXPECT_EQ(c.absolute_position, "untied");
    EXPECT_EQ(c.relative_position, "t5");
    EXPECT_TRUE(c.untie_cls);
    EXPECT_DOUBLE_EQ(c.attention_scale_factor, 2.0);
    EXPECT_EQ(c.num_hidden_layers, 4);
    EXPECT_EQ(c.hidden_size, 256);
    EXPECT_EQ(c.vocab_size, 30522);
    const engine::ModelConfig defaults;  // keys the index lacks: the engine's defaults
    EXPECT_EQ(c.rel_pos_bins, defaults.rel_pos_bins);
    EXPECT_DOUBLE_EQ(c.rope_base, defaults.rope_base);
    EXPECT_EQ(c.intermediate_size, defaults.intermediate_size);
}

TEST(AnalysisIndexConfig, PreZooRelPosAndAbsentConfig) {
    const AnalysisIndex old = analysis::parse_index_json(
        R"({"config": {"absolute_position": "input", "rel_pos": true}})", "index.json");
    EXPECT_EQ(old.config.relative_position, "t5");
    EXPECT_EQ(old.config.absolute_position, "input");
    // Without "config" the eleven keys read as unknown, as before.
    const AnalysisIndex none = analysis::parse_index_json(R"({"variant": "bert-a"})", "x.json");
    EXPECT_EQ(none.config.absolute_position, "");
    EXPECT_EQ(none.config.relative_position, "none");
    EXPECT_EQ(none.config.num_hidden_layers, 0);
    EXPECT_EQ(none.config.num_attention_heads, 0);
    EXPECT_EQ(none.config.hidden_size, 0);
    EXPECT_EQ(none.config.max_position_embeddings, 0);
    EXPECT_EQ(none.config.vocab_size, 0);
    EXPECT_TRUE(none.config.shared_pos_term);
    EXPECT_DOUBLE_EQ(none.config.attention_scale_factor, 1.0);
}

TEST(AnalysisIndexConfig, AWrongTypeNamesTheKey) {
    for (const char* text :
         {R"({"config": {"rope_base": "big"}})", R"({"config": {"max_relative_distance": 2.5}})",
          R"({"config": {"untie_cls": 1}})", R"({"config": {"preset": 3}})"}) {
        try {
            analysis::parse_index_json(text, "index.json");
            ADD_FAILURE() << "no exception for " << text;
        } catch (const engine::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("config."), std::string::npos) << e.what();
        }
    }
}

TEST(AnalysisIndexConfig, WritingIsStableAfterOneTrip) {
    AnalysisIndex index;
    index.config = engine::make_model_config("tupe-r", "base");
    const std::string once = analysis::write_index_json(index);
    EXPECT_EQ(analysis::write_index_json(analysis::parse_index_json(once, "index.json")), once);
}

}  // namespace
