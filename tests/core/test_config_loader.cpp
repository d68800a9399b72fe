// Tests of the YAML pretraining-config loader: defaults and presets, overrides of every
// section, --set overrides (including a preset switch), and the error messages with their
// file:line:column, key path and nearest-key suggestion.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>

#include "experiments/config_loader.h"
#include "support/test_support.h"

using test_support::has;

namespace {

using experiments::ConfigError;
using experiments::load_pretrain_config_from_string;

// Runs the loader and returns the ConfigError it throws; fails the test when none is thrown.
ConfigError load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
    try {
        load_pretrain_config_from_string(yaml, "cfg.yaml", overrides);
    } catch (const ConfigError& e) {
        return e;
    }
    ADD_FAILURE() << "expected a ConfigError for:\n" << yaml;
    return ConfigError("", 0, 0, "", "");
}

TEST(ConfigLoader, EmptyFileGivesDefaults) {
    const auto config = load_pretrain_config_from_string("", "cfg.yaml");
    const auto expected = engine::make_model_config("bert-a", "tiny");
    EXPECT_EQ(config.model.preset, "bert-a");
    EXPECT_EQ(config.model.size, "tiny");
    EXPECT_EQ(config.model.hidden_size, expected.hidden_size);
    EXPECT_EQ(config.model.max_position_embeddings, expected.max_position_embeddings);
    EXPECT_EQ(config.train.steps, engine::TrainConfig{}.steps);
    EXPECT_EQ(config.data.cache_dir, engine::DataConfig{}.cache_dir);
    EXPECT_EQ(config.out_dir, engine::PretrainConfig{}.out_dir);
}

TEST(ConfigLoader, PresetAndSizeBuildTheBaseModel) {
    const auto config =
        load_pretrain_config_from_string("model:\n  preset: tupe-r\n  size: small\n", "cfg.yaml");
    const auto expected = engine::make_model_config("tupe-r", "small");
    EXPECT_EQ(config.model.preset, "tupe-r");
    EXPECT_EQ(config.model.size, "small");
    EXPECT_EQ(config.model.hidden_size, 256);
    EXPECT_EQ(config.model.absolute_position, "untied");
    EXPECT_EQ(config.model.relative_position, "t5");
    EXPECT_TRUE(config.model.untie_cls);
    EXPECT_DOUBLE_EQ(config.model.attention_scale_factor, expected.attention_scale_factor);
}

TEST(ConfigLoader, KeysOfEverySectionOverrideDefaults) {
    const std::string yaml =
        "# a comment\n"
        "model:\n"
        "  preset: bert-r\n"
        "  hidden_size: 64\n"
        "  num_attention_heads: 4\n"
        "  rel_pos_bins: 16\n"
        "  pre_layernorm: true\n"
        "  absolute_position: none\n"
        "data:\n"
        "  corpus: data/default/brown.txt\n"
        "  vocab: ../vocab.txt\n"
        "  max_seq_len: 64\n"
        "  whole_word_masking: True\n"
        "train:\n"
        "  lr: 1e-4\n"
        "  warmup_steps: 10\n"
        "  seed: 7\n"
        "  device: cuda:0\n"
        "out_dir: runs/x\n";
    const auto config = load_pretrain_config_from_string(yaml, "cfg.yaml");
    EXPECT_EQ(config.model.preset, "bert-r");
    EXPECT_EQ(config.model.relative_position, "t5");  // from the preset
    EXPECT_EQ(config.model.hidden_size, 64);
    EXPECT_EQ(config.model.num_attention_heads, 4);
    EXPECT_EQ(config.model.rel_pos_bins, 16);
    EXPECT_TRUE(config.model.pre_layernorm);
    EXPECT_EQ(config.model.absolute_position, "none");
    EXPECT_EQ(config.data.corpus, "data/default/brown.txt");
    EXPECT_EQ(config.data.vocab, "../vocab.txt");  // relative paths kept as written
    EXPECT_EQ(config.data.max_seq_len, 64);
    EXPECT_TRUE(config.data.whole_word_masking);
    EXPECT_DOUBLE_EQ(config.train.lr, 1e-4);
    EXPECT_EQ(config.train.warmup_steps, 10);
    EXPECT_EQ(config.train.seed, 7u);
    EXPECT_EQ(config.train.device, "cuda:0");
    EXPECT_EQ(config.out_dir, "runs/x");
}

TEST(ConfigLoader, EmptySectionIsAllowed) {
    const auto config = load_pretrain_config_from_string("model:\ntrain:\n", "cfg.yaml");
    EXPECT_EQ(config.model.preset, "bert-a");
}

TEST(ConfigLoader, UnknownKeyAtDepthGivesLineColumnAndSuggestion) {
    const auto e = load_error("model:\n  preset: tupe-a\ntrain:\n  lr: 1e-4\n  warmup_step: 10\n");
    EXPECT_EQ(e.file(), "cfg.yaml");
    EXPECT_EQ(e.line(), 5);
    EXPECT_EQ(e.column(), 3);
    EXPECT_EQ(e.key(), "train.warmup_step");
    EXPECT_STREQ(e.what(),
                 "cfg.yaml:5:3: train.warmup_step: unknown key, did you mean "
                 "'train.warmup_steps'?");
}

TEST(ConfigLoader, UnknownKeyFarFromAnyGivesNoSuggestion) {
    const auto e = load_error("data:\n  zzzzzzzz: 1\n");
    EXPECT_EQ(e.key(), "data.zzzzzzzz");
    EXPECT_EQ(e.line(), 2);
    EXPECT_TRUE(has(e.what(), "unknown key"));
    EXPECT_FALSE(has(e.what(), "did you mean"));
}

TEST(ConfigLoader, UnknownSectionSuggestsTheNearestOne) {
    const auto e = load_error("trian:\n  lr: 1\n");
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), 1);
    EXPECT_TRUE(has(e.what(), "did you mean 'train'?")) << e.what();
}

TEST(ConfigLoader, BareFieldAtTopLevelSuggestsItsSection) {
    const auto e = load_error("warmup_steps: 3\n");
    EXPECT_TRUE(has(e.what(), "did you mean 'train.warmup_steps'?")) << e.what();
}

TEST(ConfigLoader, WrongTypesAreErrorsWithPosition) {
    {
        const auto e = load_error("train:\n  lr: abc\n");
        EXPECT_EQ(e.key(), "train.lr");
        EXPECT_EQ(e.line(), 2);
        EXPECT_EQ(e.column(), 7);
        EXPECT_TRUE(has(e.what(), "cfg.yaml:2:7: train.lr: not a number")) << e.what();
    }
    {
        const auto e = load_error("train:\n  steps: 1.5\n");
        EXPECT_EQ(e.key(), "train.steps");
    }
    {
        const auto e = load_error("model:\n  hidden_size:\n    a: 1\n");
        EXPECT_EQ(e.key(), "model.hidden_size");
        EXPECT_EQ(e.line(), 3);
        EXPECT_TRUE(has(e.what(), "got a mapping")) << e.what();
    }
    {
        const auto e = load_error("train:\n  lr: [1, 2]\n");
        EXPECT_EQ(e.key(), "train.lr");
        EXPECT_EQ(e.line(), 2);
        EXPECT_TRUE(has(e.what(), "got a sequence")) << e.what();
    }
    {
        const auto e = load_error("data:\n  lower_case: yes\n");
        EXPECT_EQ(e.key(), "data.lower_case");
        EXPECT_TRUE(has(e.what(), "true or false")) << e.what();
    }
    {
        const auto e = load_error("train: 5\n");
        EXPECT_EQ(e.key(), "train");
        EXPECT_EQ(e.line(), 1);
        EXPECT_TRUE(has(e.what(), "expected a mapping")) << e.what();
    }
    {
        const auto e = load_error("out_dir:\n  a: b\n");
        EXPECT_EQ(e.key(), "out_dir");
    }
    {
        const auto e = load_error("train:\n  lr:\n");
        EXPECT_EQ(e.key(), "train.lr");
        EXPECT_EQ(e.line(), 2);
        EXPECT_TRUE(has(e.what(), "missing value")) << e.what();
    }
    {
        const auto e = load_error("- a\n- b\n");
        EXPECT_TRUE(has(e.what(), "expected a mapping")) << e.what();
    }
}

TEST(ConfigLoader, IntegerFieldsSayNotAnIntegerOrOutOfRangeWithTheRange) {
    const std::string range = "an integer from -9223372036854775808 to 9223372036854775807";
    EXPECT_STREQ(load_error("train:\n  steps: 1e12\n").what(),
                 ("cfg.yaml:2:10: train.steps: not an integer: '1e12' (write it in digits, "
                  "1000000000000; " +
                  range + ")")
                     .c_str());
    EXPECT_STREQ(load_error("train:\n  steps: 2.5\n").what(),
                 ("cfg.yaml:2:10: train.steps: not an integer: '2.5' (" + range + ")").c_str());
    EXPECT_STREQ(
        load_error("train:\n  steps: 99999999999999999999\n").what(),
        ("cfg.yaml:2:10: train.steps: out of range: '99999999999999999999' (" + range + ")")
            .c_str());
    EXPECT_TRUE(has(load_error("", {"train.seed=1e30"}).what(),
                    "--set train.seed=1e30: out of range: '1e30' (an integer from 0 to "
                    "18446744073709551615)"));
}

TEST(ConfigLoader, TrainRangesAreCheckedAtTheirLine) {
    const auto warmup = load_error("train:\n  warmup_steps: -5\n");
    EXPECT_EQ(warmup.key(), "train.warmup_steps");
    EXPECT_STREQ(warmup.what(),
                 "cfg.yaml:2:17: train.warmup_steps must be >= 0 (0 = no warm-up), got -5");
    EXPECT_STREQ(load_error("", {"train.warmup_steps=-5"}).what(),
                 "--set train.warmup_steps=-5: train.warmup_steps must be >= 0 (0 = no warm-up), "
                 "got -5");
    EXPECT_TRUE(has(load_error("train:\n  steps: 0\n").what(),
                    "cfg.yaml:2:10: train.steps must be >= 1, got 0"));
    EXPECT_EQ(load_pretrain_config_from_string("train:\n  warmup_steps: 0\n", "cfg.yaml")
                  .train.warmup_steps,
              0);
}

TEST(ConfigLoader, DuplicateKeyIsAnError) {
    const auto e = load_error("train:\n  lr: 1\n  lr: 2\n");
    EXPECT_EQ(e.key(), "train.lr");
    EXPECT_EQ(e.line(), 3);
    EXPECT_TRUE(has(e.what(), "duplicate key (first given at line 2)")) << e.what();
}

TEST(ConfigLoader, MalformedYamlGivesYamlPosition) {
    const auto e = load_error("model:\n  preset: [tupe-a\ntrain:\n  lr: 1\n");
    EXPECT_EQ(e.file(), "cfg.yaml");
    EXPECT_GT(e.line(), 0);
    EXPECT_GT(e.column(), 0);
    EXPECT_TRUE(has(e.what(), "malformed YAML")) << e.what();
    const std::string prefix = "cfg.yaml:" + std::to_string(e.line()) + ":";
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();

    const auto tab = load_error("train:\n\tlr: 1\n");
    EXPECT_TRUE(has(tab.what(), "malformed YAML")) << tab.what();
    EXPECT_EQ(tab.line(), 2);
}

TEST(ConfigLoader, UnknownPresetPointsAtItsLineAndListsNames) {
    const auto e = load_error("train:\n  lr: 1\nmodel:\n  preset: tupe-x\n");
    EXPECT_EQ(e.key(), "model.preset");
    EXPECT_EQ(e.line(), 4);
    EXPECT_EQ(e.column(), 11);
    EXPECT_TRUE(has(e.what(), "unknown model preset 'tupe-x'")) << e.what();
    EXPECT_TRUE(has(e.what(), "bert-a, bert-r, tupe-a, tupe-r, tupe-a-tie-cls, bert-ad"));
    EXPECT_TRUE(has(e.what(), "did you mean 'tupe-a'?")) << e.what();
}

TEST(ConfigLoader, UnknownSizePointsAtItsLine) {
    const auto e = load_error("model:\n  preset: tupe-a\n  size: huge\n");
    EXPECT_EQ(e.key(), "model.size");
    EXPECT_EQ(e.line(), 3);
    EXPECT_TRUE(has(e.what(), "tiny, small, base")) << e.what();
}

TEST(ConfigLoader, SetOverridesApplyAfterTheFile) {
    const auto config = load_pretrain_config_from_string(
        "train:\n  lr: 1e-3\n  steps: 50\n", "cfg.yaml",
        {"train.lr=2e-4", "data.corpus=x.txt", "out_dir=runs/y", "model.hidden_size=64"});
    EXPECT_DOUBLE_EQ(config.train.lr, 2e-4);
    EXPECT_EQ(config.train.steps, 50);
    EXPECT_EQ(config.data.corpus, "x.txt");
    EXPECT_EQ(config.out_dir, "runs/y");
    EXPECT_EQ(config.model.hidden_size, 64);
}

TEST(ConfigLoader, SetUnknownKeyNamesTheOverride) {
    const auto e = load_error("", {"trian.lr=1"});
    EXPECT_EQ(e.key(), "trian.lr");
    EXPECT_EQ(e.line(), 0);
    EXPECT_STREQ(e.what(), "--set trian.lr=1: unknown key 'trian.lr', did you mean 'train.lr'?");
}

TEST(ConfigLoader, SetBadValueAndMissingEquals) {
    const auto bad = load_error("", {"train.steps=many"});
    EXPECT_EQ(bad.key(), "train.steps");
    EXPECT_TRUE(has(bad.what(), "--set train.steps=many: not a number")) << bad.what();
    const auto no_eq = load_error("", {"train.steps"});
    EXPECT_TRUE(has(no_eq.what(), "expected key=value")) << no_eq.what();
    const auto preset = load_error("", {"model.preset=tupe"});
    EXPECT_TRUE(has(preset.what(), "--set model.preset=tupe: unknown model preset"))
        << preset.what();
}

TEST(ConfigLoader, SetPresetRebuildsModelKeepingFileKeys) {
    const std::string yaml =
        "model:\n  preset: bert-a\n  num_hidden_layers: 3\n  hidden_dropout_prob: 0.0\n";
    const auto config = load_pretrain_config_from_string(yaml, "cfg.yaml", {"model.preset=tupe-a"});
    const auto tupe = engine::make_model_config("tupe-a", "tiny");
    EXPECT_EQ(config.model.preset, "tupe-a");
    EXPECT_EQ(config.model.absolute_position, "untied");
    EXPECT_TRUE(config.model.untie_cls);
    EXPECT_DOUBLE_EQ(config.model.attention_scale_factor, tupe.attention_scale_factor);
    EXPECT_EQ(config.model.num_hidden_layers, 3);  // the file's override is kept
    EXPECT_DOUBLE_EQ(config.model.hidden_dropout_prob, 0.0);

    const auto sized = load_pretrain_config_from_string(yaml, "cfg.yaml", {"model.size=small"});
    EXPECT_EQ(sized.model.size, "small");
    EXPECT_EQ(sized.model.hidden_size, 256);
    EXPECT_EQ(sized.model.num_hidden_layers, 3);
}

TEST(ConfigLoader, InvalidModelNamesTheFile) {
    const auto e = load_error("model:\n  hidden_size: 32\n  num_attention_heads: 3\n");
    EXPECT_EQ(e.file(), "cfg.yaml");
    EXPECT_EQ(e.key(), "model.num_attention_heads");
    EXPECT_EQ(e.line(), 3);
    EXPECT_STREQ(e.what(),
                 "cfg.yaml:3:24: invalid model config: model.num_attention_heads (3) must divide "
                 "hidden_size (32)");

    const auto from_set = load_error("", {"model.num_attention_heads=5"});
    EXPECT_EQ(from_set.file(), "cfg.yaml");
    EXPECT_TRUE(has(from_set.what(), "after --set model.num_attention_heads=5")) << from_set.what();
}

TEST(ConfigLoader, LoadsFromFileAndReportsMissingFile) {
    const std::string path = testing::TempDir() + "config_loader_test.yaml";
    {
        std::ofstream out(path);
        out << "train:\n  steps: 12\n  bogus: 1\n";
    }
    try {
        experiments::load_pretrain_config(path);
        FAIL() << "expected a ConfigError";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.file(), path);
        EXPECT_EQ(std::string(e.what()).rfind(path + ":3:3: train.bogus", 0), 0u) << e.what();
    }
    {
        std::ofstream out(path);
        out << "train:\n  steps: 12\n";
    }
    EXPECT_EQ(experiments::load_pretrain_config(path).train.steps, 12);
    std::remove(path.c_str());
    EXPECT_THROW(experiments::load_pretrain_config(path), ConfigError);
}

TEST(NearestKey, SuggestsOnlyCloseKeys) {
    const std::vector<std::string> keys = {"train.lr", "train.warmup_steps", "model.hidden_size"};
    EXPECT_EQ(experiments::nearest_key("trian.lr", keys), "train.lr");
    EXPECT_EQ(experiments::nearest_key("train.warmupsteps", keys), "train.warmup_steps");
    EXPECT_EQ(experiments::nearest_key("Model.Hidden_Size", keys), "model.hidden_size");
    EXPECT_EQ(experiments::nearest_key("data.corpus", keys), "");
    EXPECT_EQ(experiments::nearest_key("x", {}), "");
}

}  // namespace

// Files from before the positional zoo said `rel_pos: true` for the T5 bias; they still load.
TEST(ConfigLoader, LegacyRelPosKeyMeansTheT5Bias) {
    const auto config =
        load_pretrain_config_from_string("model:\n  preset: bert-a\n  rel_pos: true\n", "old.yaml");
    EXPECT_EQ(config.model.relative_position, "t5");
    EXPECT_EQ(config.model.absolute_position, "input");
    const auto off = load_pretrain_config_from_string(
        "model:\n  preset: tupe-r\n  rel_pos: false\n", "old.yaml");
    EXPECT_EQ(off.model.relative_position, "none");
    // A misspelt new key is still refused with a suggestion.
    try {
        load_pretrain_config_from_string("model:\n  relative_positon: rope\n", "new.yaml");
        FAIL() << "misspelt key accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("model.relative_position"), std::string::npos)
            << e.what();
    }
}

// ---- the resolved config as YAML (engine::config_to_yaml) -------------------------------------

namespace {

// A config of `preset` at `size` with every field it can have away from its default: strings
// YAML would misread unquoted ("", ": ", " #", quotes, backslashes, "null"), the largest seed,
// doubles without a short decimal form.
engine::PretrainConfig unusual_config(const std::string& preset, const std::string& size) {
    engine::PretrainConfig c;
    c.model = engine::make_model_config(preset, size);
    auto& m = c.model;
    m.vocab_size = 1234, m.hidden_size = 48, m.num_hidden_layers = 3, m.num_attention_heads = 3;
    m.intermediate_size = 100;
    m.max_position_embeddings = 77, m.type_vocab_size = 0, m.hidden_dropout_prob = 0.125;
    m.attention_probs_dropout_prob = 1.0 / 3.0, m.layer_norm_eps = 1e-7;
    m.initializer_range = 0.037, m.pad_token_id = 3, m.rel_pos_bins = 16, m.max_rel_pos = 64;
    m.max_relative_distance = 9, m.rope_fraction = 0.5, m.rope_base = 1.5e20;
    m.position_offset = 2, m.pre_layernorm = !m.pre_layernorm;  // the modern-* presets set it
    m.scale_input_positions = !m.scale_input_positions;         // the sinusoidal preset sets it
    // The backbone, away from both BERT's defaults and the modern-* presets' values.
    m.norm = "rmsnorm", m.bias = !m.bias, m.ffn = m.ffn == "swiglu" ? "geglu" : "swiglu";
    m.skip_first_attention_norm = !m.skip_first_attention_norm, m.local_window = 5;
    m.global_every = 2, m.rope_base_local = 2.5e4;
    m.randomized_positions_max = 75;  // offset 2 + 75 rows: the learned tables' 77
    auto& d = c.data;
    d.corpus = "data/my corpus: v2 #1.txt", d.vocab = "C:\\vocab \"x\".txt", d.cache_dir = "null";
    d.max_seq_len = 77, d.validation_fraction = 0.1, d.mask_prob = 0.2;
    d.whole_word_masking = true, d.lower_case = false, d.eval_mask_prob = 0.15;
    auto& t = c.train;
    t.steps = 7, t.batch_size = 6, t.grad_accum = 3, t.lr = 3e-4, t.warmup_steps = 0;
    t.weight_decay = 0, t.adam_beta1 = 0.8, t.adam_beta2 = 0.999, t.adam_eps = 1e-8;
    t.clip_norm = 0, t.eval_interval = 3, t.eval_batches = 2, t.checkpoint_interval = 5;
    t.log_interval = 1, t.seed = 18446744073709551615ULL, t.device = "cuda:1", t.dtype = "bf16";
    t.threads = 3, t.tensorboard = false, t.schedule = "wsd-sqrt", t.decay_fraction = 0.25;
    c.out_dir = "";
    return c;
}

// What a preset fixes about its positional scheme: left at the preset's values.
bool scheme_key(const std::string& key) {
    return key == "model.preset" || key == "model.size" || key == "model.absolute_position" ||
           key == "model.relative_position" || key == "model.untie_cls" ||
           key == "model.shared_pos_term" || key == "model.attention_scale_factor";
}

}  // namespace

TEST(ConfigYaml, LoadOfWriteIsTheConfigForEveryPresetAndSize) {
    for (const auto& preset : engine::model_presets()) {
        for (const auto& size : engine::model_sizes()) {
            SCOPED_TRACE(preset + " " + size);
            // The preset as it is, and with every other field away from its default.
            engine::PretrainConfig plain;
            plain.model = engine::make_model_config(preset, size);
            const engine::PretrainConfig unusual = unusual_config(preset, size);
            for (const auto& key : engine::config_keys())
                if (!scheme_key(key))
                    EXPECT_NE(engine::get_config_value(unusual, key),
                              engine::get_config_value(plain, key))
                        << key << " is at its default";
            for (const engine::PretrainConfig* config :
                 std::vector<const engine::PretrainConfig*>{&plain, &unusual}) {
                const std::string yaml = engine::config_to_yaml(*config);
                engine::PretrainConfig back;
                try {
                    back = load_pretrain_config_from_string(yaml, "config.yaml");
                } catch (const ConfigError& e) {
                    FAIL() << e.what() << "\n" << yaml;
                }
                // Every field, through the flat text form of all keys.
                EXPECT_EQ(engine::config_to_text(back), engine::config_to_text(*config)) << yaml;
            }
        }
    }
}

TEST(ConfigYaml, WritesEveryKeyInItsSectionReadably) {
    engine::PretrainConfig c;
    c.train.lr = 0.1;
    c.data.corpus = "a: b";
    const std::string yaml = engine::config_to_yaml(c);
    const YAML::Node root = YAML::Load(yaml);
    for (const auto& key : engine::config_keys()) {
        const auto dot = key.find('.');
        const YAML::Node node =
            dot == std::string::npos ? root[key] : root[key.substr(0, dot)][key.substr(dot + 1)];
        EXPECT_TRUE(node.IsScalar()) << key << " missing in\n" << yaml;
    }
    // Numbers in the shortest exact form.
    EXPECT_TRUE(has(yaml, "\n  lr: 0.1\n")) << yaml;
    EXPECT_TRUE(has(yaml, "\n  rope_base: 10000\n")) << yaml;
    EXPECT_TRUE(has(yaml, "\n  adam_eps: 1e-6\n")) << yaml;
    EXPECT_TRUE(has(yaml, "\n  layer_norm_eps: 1e-12\n")) << yaml;
    EXPECT_TRUE(has(yaml, "\n  corpus: \"a: b\"\n")) << yaml;
    EXPECT_TRUE(has(yaml, "\n  tensorboard: true\n")) << yaml;
    EXPECT_TRUE(has(yaml, "\nout_dir: \"runs/pretrain\"\n")) << yaml;
}

// ---- other toolkits' names: hints, never accepted ---------------------------------------------

TEST(ConfigAliases, HfEvalStepsIsTheEvalIntervalNotTrainSteps) {
    const auto e = load_error("model:\n  preset: bert-a\ntrain:\n  lr: 1e-4\n  eval_steps: 50\n");
    EXPECT_EQ(e.key(), "train.eval_steps");
    EXPECT_EQ(e.line(), 5);
    EXPECT_STREQ(e.what(),
                 "cfg.yaml:5:3: train.eval_steps: unknown key; the HF name eval_steps is "
                 "train.eval_interval here");
    EXPECT_FALSE(has(e.what(), "'train.steps'")) << e.what();
}

TEST(ConfigAliases, OtherHfAndFairseqNamesPointAtOurKeys) {
    EXPECT_TRUE(has(load_error("train:\n  max_steps: 9\n").what(),
                    "train.max_steps: unknown key; the HF name max_steps is train.steps here"));
    EXPECT_TRUE(has(load_error("train:\n  save_interval_updates: 9\n").what(),
                    "the fairseq name save_interval_updates is train.checkpoint_interval here"));
    EXPECT_TRUE(has(load_error("model:\n  encoder_layers: 4\n").what(),
                    "the fairseq name encoder_layers is model.num_hidden_layers here"));
    EXPECT_TRUE(has(load_error("train:\n  gradient_accumulation_steps: 2\n").what(),
                    "the HF name gradient_accumulation_steps is train.grad_accum here"));
    EXPECT_TRUE(has(load_error("data:\n  max_seq_length: 64\n").what(),
                    "the HF name max_seq_length is data.max_seq_len here"));
    EXPECT_TRUE(has(load_error("train:\n  adam_betas: '(0.9, 0.98)'\n").what(),
                    "the fairseq name adam_betas is train.adam_beta1 and train.adam_beta2 here"));
    EXPECT_TRUE(has(load_error("train:\n  lr_scheduler_type: cosine\n").what(),
                    "the HF name lr_scheduler_type has no key here: the schedule is a linear "
                    "warm-up over train.warmup_steps"));
    // At the top level and in --set too.
    const auto top = load_error("bf16: true\n");
    EXPECT_EQ(top.line(), 1);
    EXPECT_TRUE(has(top.what(), "the HF and fairseq name bf16 is train.dtype: bf16 here"))
        << top.what();
    EXPECT_STREQ(load_error("", {"train.save_steps=5"}).what(),
                 "--set train.save_steps=5: unknown key 'train.save_steps'; the HF name "
                 "save_steps is train.checkpoint_interval here");
}

TEST(ConfigAliases, AMisplacedFieldAndPlainTyposKeepTheirSuggestions) {
    // One of our fields under the wrong section: its section is named.
    EXPECT_TRUE(has(load_error("model:\n  lr: 1e-4\n").what(), "did you mean 'train.lr'?"));
    EXPECT_TRUE(
        has(load_error("train:\n  hidden_size: 8\n").what(), "did you mean 'model.hidden_size'?"));
    // Typos of our keys: the edit-distance suggestion, not an alias.
    EXPECT_TRUE(has(load_error("train:\n  eval_intervall: 5\n").what(),
                    "did you mean 'train.eval_interval'?"));
    EXPECT_TRUE(has(load_error("train:\n  stpes: 5\n").what(), "did you mean 'train.steps'?"));
    EXPECT_TRUE(has(load_error("", {"model.num_hidden_layer=3"}).what(),
                    "did you mean 'model.num_hidden_layers'?"));
}

TEST(ConfigAliases, AnAliasIsNeverAccepted) {
    for (const auto& alias : experiments::key_aliases()) {
        SCOPED_TRACE(alias.name);
        EXPECT_THROW(
            load_pretrain_config_from_string("train:\n  " + alias.name + ": 1\n", "c.yaml"),
            ConfigError);
        EXPECT_THROW(load_pretrain_config_from_string("", "c.yaml", {alias.name + "=1"}),
                     ConfigError);
    }
}

TEST(ConfigAliases, EveryAliasNamesARealKeyOrExplainsWhyNot) {
    const auto keys = engine::config_keys();
    std::set<std::string> names;
    for (const auto& alias : experiments::key_aliases()) {
        SCOPED_TRACE(alias.name);
        EXPECT_TRUE(names.insert(alias.name).second) << "listed twice";
        for (const char c : alias.name) EXPECT_FALSE(std::isupper(static_cast<unsigned char>(c)));
        // Not one of our own field names (those are found as misplaced fields).
        for (const auto& key : keys)
            EXPECT_NE(key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1),
                      alias.name);
        if (alias.key.empty())
            EXPECT_FALSE(alias.note.empty());
        else
            EXPECT_NE(std::find(keys.begin(), keys.end(), alias.key), keys.end()) << alias.key;
        EXPECT_TRUE(alias.origin == "HF" || alias.origin == "fairseq" ||
                    alias.origin == "HF and fairseq")
            << alias.origin;
    }
    EXPECT_GE(names.size(), 30u);
}

TEST(ModelConfigValidate, MessagesNameTheKeyTheRuleAndTheValue) {
    // Each broken field alone, on a valid config: the message names the key and what was given.
    auto message = [](const std::function<void(engine::ModelConfig&)>& breakIt) {
        engine::ModelConfig c;
        breakIt(c);
        try {
            c.validate();
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message([](engine::ModelConfig& c) { c.hidden_size = 0; }),
              "model.hidden_size must be > 0, got 0");
    EXPECT_EQ(message([](engine::ModelConfig& c) { c.hidden_dropout_prob = 1.5; }),
              "model.hidden_dropout_prob must be in [0, 1), got 1.5");
    EXPECT_EQ(message([](engine::ModelConfig& c) { c.max_position_embeddings = 2; }),
              "model.max_position_embeddings must be >= 3, got 2");
    EXPECT_EQ(message([](engine::ModelConfig& c) { c.pad_token_id = c.vocab_size; }),
              "model.pad_token_id must be in [0, vocab_size " +
                  std::to_string(engine::ModelConfig{}.vocab_size) + "), got " +
                  std::to_string(engine::ModelConfig{}.vocab_size));
    EXPECT_EQ(message([](engine::ModelConfig& c) { c.attention_scale_factor = -2; }),
              "model.attention_scale_factor must be > 0, got -2");
}
