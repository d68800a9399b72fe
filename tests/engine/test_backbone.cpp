// Tests of the modern backbone (model.norm, bias, ffn, skip_first_attention_norm,
// local_window, global_every, rope_base_local; docs/zoo.md, "A modern backbone"): RMSNorm and
// the gated FFNs against their closed forms, the local window's zeros, the local RoPE base,
// every modern-* preset trained one step and round-tripped through a checkpoint, and the
// config text of the models from before the backbone unchanged.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/norm.h"
#include "engine/position.h"
#include "engine/trainer.h"
#include "support/test_support.h"

using namespace engine;

namespace {

const std::vector<std::string> kModernPresets = {"modern-rope", "modern-tupe-a", "modern-tupe-r",
                                                 "modern-alibi", "modern-bert-a"};

// The fields the backbone added, written here rather than taken from the engine's table.
const std::vector<std::string> kBackboneKeys = {"model.norm",
                                                "model.bias",
                                                "model.ffn",
                                                "model.skip_first_attention_norm",
                                                "model.local_window",
                                                "model.global_every",
                                                "model.rope_base_local"};

// A modern preset at hidden 16, 2 heads, 2 layers (layer 0 global, layer 1 local), no dropout.
ModelConfig modern_tiny(const std::string& preset, int64_t max_positions = 24) {
    ModelConfig c = make_model_config(preset, "tiny");
    c.vocab_size = 40;
    c.hidden_size = 16;
    c.intermediate_size = 24;
    c.max_position_embeddings = max_positions;
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0;
    return c;
}

torch::Tensor random_ids(int64_t B, int64_t T, uint64_t seed) {
    torch::manual_seed(seed);
    auto ids = torch::randint(5, 40, {B, T}, torch::kLong);
    ids.select(1, 0).fill_(2);  // [CLS]
    return ids;
}

}  // namespace

TEST(Norm, RmsNormMatchesItsClosedForm) {
    ModelConfig c;
    c.norm = "rmsnorm";
    c.layer_norm_eps = 1e-6;
    Norm norm(5, c);
    torch::manual_seed(3);
    norm->weight.data().uniform_(0.5, 1.5);
    auto x = torch::randn({3, 5});
    auto y = norm(x);
    for (int64_t r = 0; r < 3; ++r) {
        double sq = 0;
        for (int64_t i = 0; i < 5; ++i) sq += std::pow(x[r][i].item<double>(), 2);
        const double rms = std::sqrt(sq / 5 + 1e-6);  // Zhang & Sennrich 2019, Eq. 4
        for (int64_t i = 0; i < 5; ++i)
            EXPECT_NEAR(y[r][i].item<double>(),
                        x[r][i].item<double>() / rms * norm->weight[i].item<double>(), 1e-6);
    }
    EXPECT_FALSE(norm->bias.defined()) << "RMSNorm is a scale only, whatever model.bias says";
}

TEST(Norm, DefaultIsTorchLayerNormBitForBitAndBiasFreeHasNoShift) {
    ModelConfig c;
    Norm norm(6, c);
    torch::nn::LayerNorm reference(torch::nn::LayerNormOptions({6}).eps(c.layer_norm_eps));
    torch::manual_seed(4);
    norm->weight.data().uniform_(0.5, 1.5);
    norm->bias.data().uniform_(-1, 1);
    reference->weight.data().copy_(norm->weight);
    reference->bias.data().copy_(norm->bias);
    auto x = torch::randn({4, 6});
    EXPECT_TRUE(torch::equal(norm(x), reference(x)));

    c.bias = false;
    Norm plain(6, c);
    EXPECT_FALSE(plain->bias.defined());
    auto centred = x - x.mean(-1, true);
    auto expected = centred / torch::sqrt(centred.pow(2).mean(-1, true) + c.layer_norm_eps);
    EXPECT_TRUE(torch::allclose(plain(x), expected, 1e-5, 1e-6));
}

TEST(Backbone, BiasFreeModelKeepsOnlyTheDecoderBias) {
    for (const auto& preset : kModernPresets) {
        BertForMaskedLM model(modern_tiny(preset));
        std::vector<std::string> biases;
        for (const auto& p : model->named_parameters())
            if (p.key().size() >= 4 && p.key().compare(p.key().size() - 4, 4, "bias") == 0)
                biases.push_back(p.key());
        EXPECT_EQ(biases, std::vector<std::string>{"cls.predictions.bias"}) << preset;
    }
    // The default keeps every bias: query, key, value, the norms, the FFN, the head.
    BertForMaskedLM bert(make_model_config("bert-a", "tiny"));
    int64_t n = 0;
    for (const auto& p : bert->named_parameters())
        n += p.key().find("bias") != std::string::npos ? 1 : 0;
    // The embedding LayerNorm; per layer query, key, value, the two output denses, the two
    // LayerNorms and intermediate.dense; the head's dense and LayerNorm; the decoder.
    EXPECT_EQ(n, 1 + 2 * 8 + 3);
}

TEST(Backbone, GatedFfnMatchesAHandComputation) {
    // C = 2, F = 2: dense is (4, 2); rows 0-1 are W (activated), rows 2-3 V (the gate).
    const std::vector<std::vector<double>> w = {{0.5, -1.0}, {2.0, 0.25}, {-0.75, 1.5}, {1.0, 1.0}};
    const std::vector<double> x = {0.8, -0.3};
    auto dot = [&](size_t row) { return w[row][0] * x[0] + w[row][1] * x[1]; };
    auto gelu = [](double a) { return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))); };
    auto silu = [](double a) { return a / (1.0 + std::exp(-a)); };
    for (const std::string ffn : {"geglu", "swiglu"}) {
        ModelConfig c;
        c.hidden_size = 2, c.intermediate_size = 2, c.ffn = ffn;
        BertIntermediate layer(c);
        ASSERT_EQ(layer->dense->weight.sizes(), (torch::IntArrayRef{4, 2}));
        torch::NoGradGuard g;
        for (size_t r = 0; r < 4; ++r)
            for (size_t k = 0; k < 2; ++k) layer->dense->weight[r][k] = w[r][k];
        layer->dense->bias.fill_(0.0);
        auto y = layer(torch::tensor({x[0], x[1]}, torch::kFloat).view({1, 2}));
        ASSERT_EQ(y.sizes(), (torch::IntArrayRef{1, 2}));
        for (size_t i = 0; i < 2; ++i) {
            const double a = dot(i), gate = dot(i + 2);
            const double expected = (ffn == "geglu" ? gelu(a) : silu(a)) * gate;  // Shazeer 2020
            EXPECT_NEAR(y[0][static_cast<int64_t>(i)].item<double>(), expected, 1e-6) << ffn;
        }
    }
}

TEST(LocalAttention, KeysOutsideTheWindowGetExactlyZeroInLocalLayersOnly) {
    ModelConfig c = modern_tiny("modern-bert-a");
    c.local_window = 3, c.global_every = 2;  // layer 0 global, layer 1 local
    BertModel bert(c);
    test_support::randomize_parameters(*bert, 5, 0.5, /*unit_layer_norm_gains=*/true);
    bert->eval();
    torch::NoGradGuard g;
    const int64_t T = 16;
    auto ids = random_ids(2, T, 8);
    auto mask = torch::ones({2, T}, torch::kLong);
    mask[1].slice(0, 12).fill_(0);  // the second sentence padded: the window joins the mask
    auto out = bert->forward(ids, mask, {}, /*output_attentions=*/true);
    auto dist = (torch::arange(T).view({T, 1}) - torch::arange(T).view({1, T})).abs();
    auto outside = (dist > 3).view({1, 1, T, T}).expand({2, c.num_attention_heads, T, T});
    auto local = out.attention_probs[1], global = out.attention_probs[0];
    EXPECT_EQ(local.masked_select(outside).abs().max().item<float>(), 0.0f);
    EXPECT_GT(global[0].masked_select(outside[0]).min().item<float>(), 0.0f);
    // Padding still masked: no real query of the second sentence attends to a padded key.
    EXPECT_EQ(local[1].slice(1, 0, 12).slice(2, 12).abs().max().item<float>(), 0.0f);
    // Inside the window the local layer attends (rows sum to one over the window).
    EXPECT_TRUE(torch::allclose(local.sum(-1), torch::ones({2, c.num_attention_heads, T})));
    // The training path (the fused kernel, window in the bias) computes the same function.
    auto fused = bert->forward(ids, mask, {}, /*output_attentions=*/false);
    EXPECT_TRUE(torch::allclose(fused.last_hidden_state, out.last_hidden_state, 1e-5, 1e-5));
}

TEST(LocalAttention, RopeBaseLocalOnlyInLocalLayers) {
    ModelConfig c = modern_tiny("modern-rope");
    c.num_hidden_layers = 4, c.global_every = 3;  // layers 0 and 3 global, 1 and 2 local
    ASSERT_EQ(c.rope_base, 160000.0);
    ASSERT_EQ(c.rope_base_local, 10000.0);
    PositionEncoding position(c);
    const int64_t T = 10, r = c.head_dim();
    auto terms = position->forward(T);
    ASSERT_EQ(terms.layers.size(), 4u);
    for (int64_t l = 0; l < 4; ++l) {
        const double base = l % 3 == 0 ? c.rope_base : c.rope_base_local;
        const auto& cos = terms.for_layer(static_cast<size_t>(l)).rope_cos;  // (T, r/2)
        for (int64_t t : {1, 7})
            for (int64_t i : {int64_t{1}, r / 2 - 1})
                EXPECT_NEAR(cos[t][i].item<double>(),
                            std::cos(static_cast<double>(t) * std::pow(base, -2.0 * i / r)), 1e-6)
                    << "layer " << l;
        EXPECT_EQ(terms.for_layer(static_cast<size_t>(l)).window.defined(), l % 3 != 0);
    }
}

TEST(ModernPresets, EachTrainsAStepAndRoundTripsThroughItsConfigText) {
    for (const auto& preset : kModernPresets) {
        SCOPED_TRACE(preset);
        ModelConfig c = modern_tiny(preset);
        c.local_window = 4;  // layer 1 local within these 12 tokens
        torch::manual_seed(1);
        BertForMaskedLM model(c);
        auto ids = random_ids(2, 12, 9);
        auto labels = torch::full({2, 12}, -100, torch::kLong);
        labels.select(1, 3).copy_(ids.select(1, 3));
        labels.select(1, 8).copy_(ids.select(1, 8));
        auto out = model->forward(ids, torch::ones_like(ids), labels);
        ASSERT_TRUE(std::isfinite(out.loss.item<double>()));
        out.loss.backward();
        for (const auto& p : model->named_parameters()) {
            ASSERT_TRUE(p.value().grad().defined()) << p.key();
            EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
        }
        // What a checkpoint holds: the config as text and the module's archive.
        PretrainConfig whole;
        whole.model = c;
        const PretrainConfig back = parse_config_text(config_to_text(whole));
        for (const auto& key : kBackboneKeys)
            EXPECT_EQ(get_config_value(back, key), get_config_value(whole, key)) << key;
        std::stringstream archive;
        torch::save(model, archive);
        BertForMaskedLM loaded(back.model);
        torch::load(loaded, archive);
        model->eval(), loaded->eval();
        torch::NoGradGuard g;
        auto a = model->forward(ids, torch::ones_like(ids), labels);
        auto b = loaded->forward(ids, torch::ones_like(ids), labels);
        EXPECT_TRUE(torch::equal(a.logits, b.logits));
    }
}

class ModernPretrainTest : public test_support::TempDirTest {
  protected:
    ModernPretrainTest() : TempDirTest(test_support::per_test_name("tupe_backbone")) {}
};

TEST_F(ModernPretrainTest, CheckpointFileKeepsTheBackbone) {
    test_support::write_phrase_corpus(dir_, {{"the cat", "a dog"}, {"saw", "liked"}, {"a river"}},
                                      3, 8, [](int) { return 4; });
    PretrainConfig c;
    c.model = make_model_config("modern-tupe-r", "tiny");
    c.model.max_position_embeddings = 32;
    c.model.local_window = 2;
    c.data.corpus = (dir_ / "corpus.txt").string();
    c.data.vocab = (dir_ / "vocab.txt").string();
    c.data.cache_dir = (dir_ / "cache").string();
    c.data.max_seq_len = 16;
    c.data.validation_fraction = 0.25;
    c.train.steps = 3, c.train.batch_size = 4, c.train.warmup_steps = 1;
    c.train.eval_interval = 3, c.train.checkpoint_interval = 3, c.train.threads = 1;
    c.train.tensorboard = false;
    c.out_dir = (dir_ / "run").string();
    const auto result = pretrain(c);
    ASSERT_FALSE(result.evals.empty());
    EXPECT_TRUE(std::isfinite(result.evals.back().loss));
    const auto loaded = load_checkpoint(result.checkpoint);
    for (const auto& key : kBackboneKeys)
        EXPECT_EQ(get_config_value(loaded.config, key), get_config_value(c, key)) << key;
    EXPECT_FALSE(loaded.model->config().bias);
    EXPECT_EQ(loaded.model->config().ffn, "geglu");
}

// The models from before the backbone keep their config text: every field of the old table,
// none of the new ones, so stored checkpoints and run records read and compare as before.
TEST(ConfigText, PresetsFromBeforeTheBackboneKeepTheirText) {
    for (const auto& preset : model_presets()) {
        if (preset.rfind("modern-", 0) == 0) continue;
        PretrainConfig c;
        c.model = make_model_config(preset, "tiny");
        // Added after the backbone, at their defaults: randomized positions off, BERT's linear
        // schedule, validation masked as training is.
        const std::vector<std::string> later = {"model.randomized_positions_max", "train.schedule",
                                                "train.decay_fraction", "data.eval_mask_prob"};
        std::string old_text;  // what config_to_text wrote before: every key but the new ones
        for (const auto& key : config_keys())
            if (std::find(kBackboneKeys.begin(), kBackboneKeys.end(), key) == kBackboneKeys.end() &&
                std::find(later.begin(), later.end(), key) == later.end())
                old_text += key + " = " + get_config_value(c, key) + "\n";
        EXPECT_EQ(config_to_text(c), old_text) << preset;
    }
    // Away from its default a field enters the text.
    PretrainConfig rms;
    rms.model.norm = "rmsnorm";
    EXPECT_NE(config_to_text(rms).find("model.norm = rmsnorm\n"), std::string::npos);
    EXPECT_EQ(parse_config_text(config_to_text(rms)).model.norm, "rmsnorm");
}

TEST(ModelConfigValidate, BackboneFieldsNameTheKeyAndTheRule) {
    auto message = [](const std::function<void(ModelConfig&)>& edit) {
        ModelConfig c = make_model_config("modern-rope", "tiny");
        edit(c);
        try {
            c.validate();
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(message([](ModelConfig&) {}), "");
    EXPECT_EQ(message([](ModelConfig& c) { c.norm = "batchnorm"; }).rfind("model.norm", 0), 0u);
    EXPECT_EQ(message([](ModelConfig& c) { c.ffn = "relu"; }).rfind("model.ffn", 0), 0u);
    EXPECT_EQ(message([](ModelConfig& c) {
                  c.pre_layernorm = false;
              }).rfind("model.skip_first_attention_norm", 0),
              0u);
    EXPECT_EQ(message([](ModelConfig& c) { c.global_every = 0; }).rfind("model.global_every", 0),
              0u);
    EXPECT_EQ(
        message([](ModelConfig& c) { c.rope_base_local = 0.5; }).rfind("model.rope_base_local", 0),
        0u);
    EXPECT_EQ(message([](ModelConfig& c) { c.local_window = -1; }).rfind("model.local_window", 0),
              0u);
}
