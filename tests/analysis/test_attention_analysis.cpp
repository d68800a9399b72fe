// Tests of the microscope (analysis/attention_analysis.h) and the HF import
// (analysis/safetensors.h): the layer-0 terms add up to the model's own logits, hand-set weights
// give known terms, hand-made attention maps (identity, uniform, band) give known statistics and
// patterns, and tiny HF checkpoints round-trip (safetensors, sharded safetensors, bare BertModel
// and sequence-classification saves always, pytorch_model.bin when /usr/bin/python3 has torch).
// Tiny configs, fixed seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/attention_analysis.h"
#include "analysis/inspect.h"
#include "analysis/safetensors.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"
#include "support/torch_support.h"

using test_support::has;

namespace fs = std::filesystem;
using namespace analysis;

namespace {

constexpr int64_t kVocab = 40;
constexpr int64_t kAttentionMaxPositions = 16;

engine::ModelConfig tiny_config(const std::string& preset) {
    return test_support::tiny16_config(preset, kVocab, kAttentionMaxPositions);
}

/// Every parameter ~N(0, 0.5), LayerNorm gains around 1: logits of order 1, nonzero biases, so
/// every term (and the LayerNorm split) is exercised.
void randomize(torch::nn::Module& module, uint64_t seed) {
    test_support::randomize_parameters(module, seed, 0.5, /*unit_layer_norm_gains=*/true);
}

struct Batch {
    torch::Tensor ids, mask;
};

/// Two sequences of T tokens, the second padded after 7 tokens.
Batch make_batch(int64_t T, uint64_t seed = 7) {
    torch::manual_seed(seed);
    auto ids = torch::randint(5, kVocab, {2, T}, torch::kLong);
    ids.select(1, 0).fill_(2);  // [CLS]
    auto mask = torch::ones({2, T}, torch::kLong);
    mask[1].slice(0, 7).zero_();
    ids[1].slice(0, 7).zero_();  // [PAD]
    return {ids, mask};
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double atol,
                  const std::string& what) {
    ASSERT_EQ(a.sizes(), b.sizes()) << what;
    const double diff = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
    EXPECT_LE(diff, atol) << what << ": max abs difference " << diff;
}

/// The decomposition of a randomised model adds up to its logits; returns the terms.
FourTerms check_terms_add_up(const engine::ModelConfig& config, uint64_t seed) {
    engine::BertModel model(config);
    randomize(*model, seed);
    auto batch = make_batch(12);
    FourTerms terms = decompose_first_layer(model, batch.ids, batch.mask);
    EXPECT_EQ(terms.word_word.sizes(),
              (std::vector<int64_t>{2, config.num_attention_heads, 12, 12}));
    const double scale = terms.logits.abs().max().item<double>();
    EXPECT_GT(scale, 0.5) << "logits too small for a meaningful check";
    expect_close(terms.sum(), terms.logits, 2e-5 * std::max(1.0, scale), config.preset + " sum");
    expect_close(terms.remainder, terms.bias + terms.rest, 1e-6, "remainder = bias + rest");
    return terms;
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

/// A fresh directory tupe_attention_test_<name>_<pid>, removed with its files at the end.
struct TempDir : test_support::TempDir {
    explicit TempDir(const std::string& name)
        : test_support::TempDir("tupe_attention_test_" + name + "_" + test_support::process_id()) {}
};

}  // namespace

// ---- the four terms ---------------------------------------------------------------------------

TEST(FourTerms, AddUpToLogitsBertA) {
    auto terms = check_terms_add_up(tiny_config("bert-a"), 1);
    // BERT-A has position terms and no model bias.
    EXPECT_GT(max_abs(terms.word_pos), 1e-3);
    EXPECT_GT(max_abs(terms.pos_pos), 1e-3);
    EXPECT_EQ(max_abs(terms.bias), 0.0);
}

TEST(FourTerms, AddUpToLogitsBertR) {
    auto terms = check_terms_add_up(tiny_config("bert-r"), 2);
    EXPECT_GT(max_abs(terms.bias), 1e-3);  // the T5 relative bias
}

TEST(FourTerms, AddUpToLogitsBertAd) {
    auto terms = check_terms_add_up(tiny_config("bert-ad"), 3);
    EXPECT_GT(max_abs(terms.pos_word), 1e-3);
    EXPECT_GT(max_abs(terms.pos_pos), 1e-3);
}

TEST(FourTerms, AddUpToLogitsTupeRAndPreLayerNorm) {
    auto tupe = check_terms_add_up(tiny_config("tupe-r"), 4);
    EXPECT_EQ(max_abs(tupe.word_pos), 0.0);  // untied: no cross terms
    EXPECT_GT(max_abs(tupe.pos_pos), 1e-3);
    auto pre = tiny_config("bert-a");
    pre.pre_layernorm = true;
    check_terms_add_up(pre, 5);
    auto cls = tiny_config("bert-a");
    cls.untie_cls = true;  // BERT-A + [CLS] reset: cls_theta goes to bias
    check_terms_add_up(cls, 6);
}

TEST(FourTerms, ZeroPositionTableZeroesPositionTerms) {
    for (const std::string preset : {"bert-a", "bert-ad"}) {
        engine::BertModel model(tiny_config(preset));
        randomize(*model, 11);
        {
            torch::NoGradGuard no_grad;
            if (preset == "bert-a")
                model->embeddings->position_embeddings->weight.zero_();
            else
                model->position->pos->weight.zero_();
        }
        auto batch = make_batch(10);
        auto terms = decompose_first_layer(model, batch.ids, batch.mask);
        EXPECT_LT(max_abs(terms.word_pos), 1e-6) << preset;
        EXPECT_LT(max_abs(terms.pos_word), 1e-6) << preset;
        EXPECT_LT(max_abs(terms.pos_pos), 1e-6) << preset;
        EXPECT_GT(max_abs(terms.word_word), 1e-2) << preset;
        expect_close(terms.sum(), terms.logits, 2e-5 * std::max(1.0, max_abs(terms.logits)),
                     preset);
    }
}

TEST(FourTerms, WordTermMatchesHandFormula) {
    // No segments, unit LayerNorm, no Q/K biases, no positions: logits = word_word =
    // (LN(w) W^Q)(LN(w) W^K)^T / sqrt(d), and nothing else.
    auto config = tiny_config("bert-a");
    config.type_vocab_size = 0;
    engine::BertModel model(config);
    randomize(*model, 12);
    auto& self = *model->encoder->layer[0]->as<engine::BertLayerImpl>()->attention->self;
    {
        torch::NoGradGuard no_grad;
        model->embeddings->position_embeddings->weight.zero_();
        model->embeddings->LayerNorm->weight.fill_(1.0);
        model->embeddings->LayerNorm->bias.zero_();
        self.query->bias.zero_();
        self.key->bias.zero_();
    }
    auto batch = make_batch(9);
    auto terms = decompose_first_layer(model, batch.ids, batch.mask);
    EXPECT_LT(max_abs(terms.rest), 1e-6);
    EXPECT_LT(max_abs(terms.remainder), 1e-6);

    torch::NoGradGuard no_grad;
    auto w = model->embeddings->word_embeddings->weight.to(torch::kDouble).index({batch.ids});
    auto x = (w - w.mean(-1, true)) / torch::sqrt(w.var(-1, false, true) + config.layer_norm_eps);
    const int64_t H = config.num_attention_heads, d = config.head_dim();
    auto q =
        torch::linear(x, self.query->weight.to(torch::kDouble)).view({2, 9, H, d}).transpose(1, 2);
    auto k =
        torch::linear(x, self.key->weight.to(torch::kDouble)).view({2, 9, H, d}).transpose(1, 2);
    auto expected = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    expect_close(terms.word_word, expected, 1e-5, "hand formula");
    expect_close(terms.logits, expected, 1e-4, "model logits");
}

TEST(FourTerms, RestoresTrainingModeAndRejectsLongInput) {
    engine::BertModel model(tiny_config("bert-a"));
    model->train();
    auto batch = make_batch(8);
    decompose_first_layer(model, batch.ids);
    EXPECT_TRUE(model->is_training());
    auto too_long = torch::full({1, kAttentionMaxPositions + 1}, 5, torch::kLong);
    EXPECT_THROW(decompose_first_layer(model, too_long), std::invalid_argument);
}

TEST(FourTerms, OneForwardPassGivesTheSameTermsAsTheStandaloneCall) {
    // The overload takes the logits of the caller's own pass (e.g. the [CLS] maps' pass) and
    // runs none itself: its terms equal the standalone call's and still add up.
    for (const std::string preset : {"bert-a", "bert-r", "bert-ad"}) {
        engine::BertModel model(tiny_config(preset));
        randomize(*model, 21);
        auto batch = make_batch(11);
        const FourTerms own = decompose_first_layer(model, batch.ids, batch.mask);
        torch::NoGradGuard no_grad;
        model->eval();
        const engine::EncoderOutput encoded = model->forward(batch.ids, batch.mask, {}, true);
        const FourTerms shared = decompose_first_layer(model, batch.ids, batch.mask, encoded);
        EXPECT_TRUE(torch::equal(shared.logits, encoded.attention_logits[0])) << preset;
        for (const TermField& f : term_fields())
            EXPECT_TRUE(torch::equal(shared.*f.tensor, own.*f.tensor)) << preset << " " << f.name;
        EXPECT_TRUE(torch::equal(shared.logits, own.logits)) << preset;
        expect_close(shared.sum(), shared.logits, 2e-5 * std::max(1.0, max_abs(shared.logits)),
                     preset);
    }
}

TEST(FourTerms, OneForwardPassRejectsAnEncoderOutputWithoutMaps) {
    engine::BertModel model(tiny_config("bert-a"));
    auto batch = make_batch(8);
    torch::NoGradGuard no_grad;
    model->eval();
    const engine::EncoderOutput plain = model->forward(batch.ids, batch.mask, {}, false);
    try {
        decompose_first_layer(model, batch.ids, batch.mask, plain);
        ADD_FAILURE() << "no attention logits accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("output_attentions"), std::string::npos) << e.what();
    }
    // A pass over other input (fewer tokens) does not fit these input_ids.
    const engine::EncoderOutput shorter =
        model->forward(batch.ids.slice(1, 0, 6), batch.mask.slice(1, 0, 6), {}, true);
    try {
        decompose_first_layer(model, batch.ids, batch.mask, shorter);
        ADD_FAILURE() << "mis-shaped logits accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("(2, 2, 8, 8)"), std::string::npos) << e.what();
    }
}

// ---- uniformity -------------------------------------------------------------------------------

TEST(TermFields, CoverEveryTermOnceInTableOrder) {
    const auto& fields = term_fields();
    const std::vector<std::string> names = {"word_word", "word_pos", "pos_word",
                                            "pos_pos",   "bias",     "rest"};
    TermSpread s{1, 2, 3, 4, 5, 6};
    for (size_t k = 0; k < fields.size(); ++k) {
        EXPECT_EQ(fields[k].name, names[k]);
        EXPECT_EQ(s.*fields[k].spread, static_cast<double>(k + 1));
    }
    const TermSpread r = relative_to_word_word(TermSpread{2, 1, 4, 0, 6, 8});
    EXPECT_DOUBLE_EQ(r.word_word, 1.0);
    EXPECT_DOUBLE_EQ(r.word_pos, 0.5);
    EXPECT_DOUBLE_EQ(r.rest, 4.0);
    EXPECT_TRUE(std::isnan(relative_to_word_word(TermSpread{}).pos_pos));
}

TEST(Uniformity, ConstantMapIsZeroAndBandIsLarger) {
    const int64_t T = 12;
    EXPECT_EQ(uniformity(torch::full({T, T}, 3.5)), 0.0);
    // Constant along each row: softmax cannot see it.
    EXPECT_NEAR(uniformity(torch::arange(T, torch::kFloat).unsqueeze(1).expand({T, T})), 0.0,
                1e-12);
    auto idx = torch::arange(T);
    auto band = ((idx.unsqueeze(1) - idx.unsqueeze(0)).abs() <= 1).to(torch::kFloat) * 4.0;
    const double u = uniformity(band);
    EXPECT_GT(u, 1.0);
    // Known value for a 0/4 map: per row, 4 * sqrt(f (1 - f)), f = share of band entries.
    double var = 0;
    for (int64_t i = 0; i < T; ++i) {
        const double f = ((i > 0) + 1 + (i < T - 1)) / static_cast<double>(T);
        var += 16 * f * (1 - f);
    }
    EXPECT_NEAR(u, std::sqrt(var / T), 1e-9);
}

TEST(Uniformity, IgnoresPadding) {
    const int64_t T = 6;
    auto term = torch::zeros({1, T, T});
    term[0].slice(1, 4).fill_(100.0);  // large values only on padded keys
    auto mask = torch::tensor({{1, 1, 1, 1, 0, 0}});
    EXPECT_EQ(uniformity(term, mask), 0.0);
    EXPECT_GT(uniformity(term), 10.0);
}

TEST(TermStatistics, RelativeToWordWord) {
    engine::BertModel model(tiny_config("bert-a"));
    randomize(*model, 13);
    {
        torch::NoGradGuard no_grad;
        model->embeddings->position_embeddings->weight.zero_();
    }
    auto batch = make_batch(10);
    auto stats = term_statistics(decompose_first_layer(model, batch.ids, batch.mask));
    ASSERT_EQ(stats.spread.size(), 2u);
    for (size_t h = 0; h < 2; ++h) {
        EXPECT_GT(stats.spread[h].word_word, 0.0);
        EXPECT_DOUBLE_EQ(stats.relative[h].word_word, 1.0);
        EXPECT_LT(stats.relative[h].word_pos, 1e-5);
        EXPECT_LT(stats.relative[h].pos_pos, 1e-5);
        EXPECT_EQ(stats.spread[h].bias, 0.0);
    }
}

// ---- TUPE's positional correlation ------------------------------------------------------------

TEST(PositionalCorrelation, ThetaPositionsAndSoftmaxRows) {
    auto config = tiny_config("tupe-r");
    engine::BertModel model(config);
    randomize(*model, 21);
    const int64_t T = 10, H = config.num_attention_heads, d = config.head_dim();
    auto pc = tupe_positional_correlation(model, T);
    ASSERT_EQ(pc.groups.size(), 1u);
    ASSERT_TRUE(pc.cls_reset);
    ASSERT_TRUE(pc.relative.defined());
    const auto& g = pc.groups[0];
    EXPECT_EQ(g.raw.sizes(), (std::vector<int64_t>{H, T, T}));

    // theta1 by hand: p'_0 = pos_ln(pos[0]); (p'_0 U^Q)_h . (p'_0 U^K)_h / sqrt(2d).
    torch::NoGradGuard no_grad;
    auto& pb = model->position;
    auto proj = pb->projections->ptr<engine::PositionProjectionImpl>(0);
    auto p = pb->pos_ln(pb->pos->weight.slice(0, 0, 2));  // rows 0 and 1
    auto q = proj->pos_q_linear(p).view({2, H, d});
    auto k = proj->pos_k_linear(p).view({2, H, d});
    const double scale = 1.0 / std::sqrt(2.0 * d);
    for (int64_t h = 0; h < H; ++h) {
        const double theta1 = (q[0][h] * k[0][h]).sum().item<double>() * scale;
        const double theta2 = (q[1][h] * k[1][h]).sum().item<double>() * scale;
        EXPECT_NEAR(g.theta1[h].item<double>(), theta1, 1e-5);
        EXPECT_NEAR(g.theta2[h].item<double>(), theta2, 1e-5);
        // Row 0 is theta1 everywhere ([0,0] included), column 0 below it is theta2.
        expect_close(g.reset[h][0], torch::full({T}, theta1), 1e-5, "row 0");
        expect_close(g.reset[h].select(1, 0).slice(0, 1), torch::full({T - 1}, theta2), 1e-5,
                     "column 0");
        // Elsewhere the reset leaves the raw term.
        expect_close(g.reset[h].slice(0, 1).slice(1, 1), g.raw[h].slice(0, 1).slice(1, 1), 0,
                     "body");
        // raw[i][j] is A over position rows i + 1, j + 1: [1][1] of raw is A[2][2].
        auto p2 = pb->pos_ln(pb->pos->weight[2]);
        auto q2 = proj->pos_q_linear(p2).view({H, d}), k2 = proj->pos_k_linear(p2).view({H, d});
        EXPECT_NEAR(g.raw[h][1][1].item<double>(), (q2[h] * k2[h]).sum().item<double>() * scale,
                    1e-5);
    }
    expect_close(g.total, g.reset + pc.relative, 1e-5, "total = reset + relative");
    expect_close(g.probs.sum(-1), torch::ones({H, T}), 1e-5, "softmax rows");
    expect_close(g.probs, torch::softmax(g.total, -1), 1e-6, "softmax of total");
}

// A model trained at model.position_offset: raw reads the rows its layers read (p_t + 1), so
// total = reset + relative still holds, and theta1/theta2 stay rows 0 and 1.
TEST(PositionalCorrelation, FollowsThePositionOffset) {
    auto config = tiny_config("tupe-r");
    config.position_offset = 5;
    engine::BertModel model(config);
    randomize(*model, 22);
    const int64_t T = 8, H = config.num_attention_heads, d = config.head_dim();
    auto pc = tupe_positional_correlation(model, T);
    const auto& g = pc.groups[0];
    torch::NoGradGuard no_grad;
    auto& pb = model->position;
    auto proj = pb->projections->ptr<engine::PositionProjectionImpl>(0);
    auto p = pb->pos_ln(pb->pos->weight);
    auto q = proj->pos_q_linear(p).view({-1, H, d});
    auto k = proj->pos_k_linear(p).view({-1, H, d});
    const double scale = 1.0 / std::sqrt(2.0 * d);
    for (int64_t h = 0; h < H; ++h) {
        EXPECT_NEAR(g.theta2[h].item<double>(), (q[1][h] * k[1][h]).sum().item<double>() * scale,
                    1e-5);
        // raw[2][3] is A over rows offset + 3 and offset + 4.
        EXPECT_NEAR(g.raw[h][2][3].item<double>(),
                    (q[5 + 3][h] * k[5 + 4][h]).sum().item<double>() * scale, 1e-5);
    }
    expect_close(g.total, g.reset + pc.relative, 1e-5, "total = reset + relative");
}

TEST(PositionalCorrelation, PerLayerGroupsTieClsAndWrongVariant) {
    auto config = tiny_config("tupe-a");
    config.shared_pos_term = false;
    engine::BertModel per_layer(config);
    randomize(*per_layer, 22);
    auto pc = tupe_positional_correlation(per_layer, 8);
    ASSERT_EQ(pc.groups.size(), static_cast<size_t>(config.num_hidden_layers));
    EXPECT_FALSE(pc.relative.defined());
    EXPECT_GT(max_abs(pc.groups[0].raw - pc.groups[1].raw), 1e-3);

    engine::BertModel tied(tiny_config("tupe-a-tie-cls"));
    randomize(*tied, 23);
    auto tc = tupe_positional_correlation(tied, 8);
    EXPECT_FALSE(tc.cls_reset);
    expect_close(tc.groups[0].reset, tc.groups[0].raw, 0, "no reset");
    expect_close(tc.groups[0].total, tc.groups[0].raw, 1e-6, "total");

    engine::BertModel bert(tiny_config("bert-a"));
    EXPECT_THROW(tupe_positional_correlation(bert, 8), std::invalid_argument);
    EXPECT_THROW(tupe_positional_correlation(tied, kAttentionMaxPositions + 1),
                 std::invalid_argument);
}

// ---- [CLS] attention --------------------------------------------------------------------------

TEST(ClsAttention, IdentityAndUniform) {
    const int64_t T = 6, H = 2;
    auto identity = torch::eye(T).expand({1, H, T, T});
    auto uniform = torch::full({1, H, T, T}, 1.0 / T);
    auto cls = cls_attention({identity, uniform}, {}, 3);
    ASSERT_EQ(cls.from_cls.sizes(), (std::vector<int64_t>{2, H, T}));
    auto onehot = torch::zeros({T});
    onehot[0] = 1;
    for (int64_t h = 0; h < H; ++h) {
        expect_close(cls.from_cls[0][h], onehot, 1e-7, "identity from");
        expect_close(cls.to_cls[0][h], onehot, 1e-7, "identity to");
        EXPECT_NEAR(cls.entropy[0][h].item<double>(), 0.0, 1e-7);
        EXPECT_NEAR(cls.mean_distance[0][h].item<double>(), 0.0, 1e-7);
        EXPECT_NEAR(cls.first_k_mass[0][h].item<double>(), 1.0, 1e-7);

        expect_close(cls.from_cls[1][h], torch::full({T}, 1.0 / T), 1e-7, "uniform from");
        expect_close(cls.to_cls[1][h], torch::full({T}, 1.0 / T), 1e-7, "uniform to");
        EXPECT_NEAR(cls.entropy[1][h].item<double>(), std::log(6.0), 1e-6);
        EXPECT_NEAR(cls.mean_distance[1][h].item<double>(), 2.5, 1e-6);  // (0+...+5)/6
        EXPECT_NEAR(cls.first_k_mass[1][h].item<double>(), 0.5, 1e-6);   // 3 of 6
    }
}

TEST(ClsAttention, BandWithPaddingAveragesOverTokens) {
    // Example 0: 5 tokens, uniform attention over them. Example 1: 3 tokens then padding,
    // uniform over its 3 tokens; padded rows hold junk that must be ignored.
    const int64_t T = 5;
    auto probs = torch::zeros({2, 1, T, T});
    probs[0][0].fill_(1.0 / 5);
    probs[1][0].slice(1, 0, 3).fill_(1.0 / 3);
    probs[1][0].slice(0, 3).fill_(0.0);
    probs[1][0][3][0] = 1.0;  // junk on a padded query row
    auto mask = torch::tensor({{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}});
    auto cls = cls_attention({probs}, mask, 2);
    const double a = (1.0 / 5 + 1.0 / 3) / 2;
    auto from = cls.from_cls[0][0];
    EXPECT_NEAR(from[0].item<double>(), a, 1e-6);
    EXPECT_NEAR(from[2].item<double>(), a, 1e-6);
    EXPECT_NEAR(from[3].item<double>(), 1.0 / 5, 1e-6);  // only example 0 has position 3
    EXPECT_NEAR(cls.to_cls[0][0][3].item<double>(), 1.0 / 5, 1e-6);  // junk ignored
    expect_close(cls.token_count, torch::tensor({2.f, 2.f, 2.f, 1.f, 1.f}), 0, "counts");
    EXPECT_NEAR(cls.entropy[0][0].item<double>(), (std::log(5.0) + std::log(3.0)) / 2, 1e-6);
    EXPECT_NEAR(cls.mean_distance[0][0].item<double>(), (2.0 + 1.0) / 2, 1e-6);
    EXPECT_NEAR(cls.first_k_mass[0][0].item<double>(), (2.0 / 5 + 2.0 / 3) / 2, 1e-6);

    // A band |i - j| <= 1, rows normalised: [CLS] splits between 0 and 1.
    auto idx = torch::arange(T);
    auto band = ((idx.unsqueeze(1) - idx.unsqueeze(0)).abs() <= 1).to(torch::kFloat);
    band = (band / band.sum(-1, true)).view({1, 1, T, T});
    auto b = cls_attention({band});
    EXPECT_NEAR(b.mean_distance[0][0].item<double>(), 0.5, 1e-6);
    EXPECT_NEAR(b.entropy[0][0].item<double>(), std::log(2.0), 1e-6);
    EXPECT_NEAR(b.to_cls[0][0][1].item<double>(), 1.0 / 3, 1e-6);
    EXPECT_NEAR(b.to_cls[0][0][2].item<double>(), 0.0, 1e-7);
    EXPECT_THROW(cls_attention({band}, torch::ones({2, T})), std::invalid_argument);
}

TEST(ClsAttention, ReadsModelAttention) {
    engine::BertModel model(tiny_config("tupe-r"));
    randomize(*model, 41);
    model->eval();
    torch::NoGradGuard no_grad;
    auto ids = torch::randint(5, kVocab, {3, 10}, torch::kLong);
    auto out = model->forward(ids, {}, {}, true);
    auto cls = cls_attention(out.attention_probs);
    EXPECT_EQ(cls.entropy.sizes(), (std::vector<int64_t>{2, 2}));
    // Without padding the batch-mean [CLS] row is still a distribution over the T positions.
    expect_close(cls.from_cls.sum(-1), torch::ones({2, 2}), 1e-5, "rows");
    EXPECT_TRUE(torch::all(cls.entropy <= std::log(10.0) + 1e-5).item<bool>());
    EXPECT_TRUE(torch::all(cls.first_k_mass <= 1.0 + 1e-6).item<bool>());
    // The statistics of layer 1 match a direct computation from the probabilities.
    auto row = out.attention_probs[1].select(2, 0).to(torch::kDouble);  // (B, H, T)
    auto dist = (row * torch::arange(10, torch::kDouble)).sum(-1).mean(0);
    expect_close(cls.mean_distance[1], dist, 1e-5, "distance");
}

// ---- head taxonomy ----------------------------------------------------------------------------

namespace {

/// Row-normalised 0/1 map of `keep(i, j)` over T positions.
template <typename F>
torch::Tensor pattern(int64_t T, F keep) {
    auto m = torch::zeros({T, T}, torch::kDouble);
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) m[i][j] = keep(i, j) ? 1.0 : 0.0;
    return m / m.sum(-1, true);
}

}  // namespace

TEST(HeadTaxonomy, ClassifiesConstructedPatterns) {
    const int64_t T = 65;  // 64 positions after dropping [CLS]
    auto uniform = pattern(T, [](int64_t, int64_t) { return true; });
    auto narrow = pattern(T, [](int64_t i, int64_t j) { return std::abs(i - j) <= 2; });
    auto wide = pattern(T, [](int64_t i, int64_t j) { return std::abs(i - j) <= 16; });
    auto lower = pattern(T, [](int64_t i, int64_t j) { return j <= i; });
    auto upper = pattern(T, [](int64_t i, int64_t j) { return j >= i; });
    auto prev_token =
        pattern(T, [](int64_t i, int64_t j) { return j == std::max<int64_t>(i - 1, 0); });
    EXPECT_EQ(classify_head(uniform), HeadPattern::kGlobal);
    EXPECT_EQ(classify_head(narrow), HeadPattern::kLocal);
    EXPECT_EQ(classify_head(wide), HeadPattern::kBroad);
    EXPECT_EQ(classify_head(lower), HeadPattern::kPrevious);
    EXPECT_EQ(classify_head(upper), HeadPattern::kNext);
    EXPECT_EQ(classify_head(prev_token), HeadPattern::kPrevious);
    EXPECT_STREQ(to_string(classify_head(wide)), "broad");

    auto s = head_statistics(uniform);
    EXPECT_EQ(s.positions, 64);
    EXPECT_NEAR(s.entropy, 1.0, 1e-9);
    EXPECT_NEAR(s.mean_distance, (64.0 * 64 - 1) / (3 * 64) / 64, 1e-9);
    EXPECT_NEAR(s.previous_mass, s.next_mass, 1e-9);

    auto heads = classify_heads(torch::stack({uniform, narrow, lower}));
    EXPECT_EQ(heads, (std::vector<HeadPattern>{HeadPattern::kGlobal, HeadPattern::kLocal,
                                               HeadPattern::kPrevious}));
}

// The thresholds are relative to the sequence (n positions after [CLS]), so what a pattern is
// called depends on the length the model was analysed at: at every n a uniform map is global,
// the previous and next token are previous and next, and a +-n/16 band is local; a +-2 band is
// local from n = 64 on and broad at n = 16, where it covers 5 of 16 keys; a +-n/4 band is broad.
TEST(HeadTaxonomy, PatternsByLengthUnderTheDefaultThresholds) {
    for (const int64_t n : {16, 64, 256}) {
        const int64_t T = n + 1;
        const int64_t band = std::max<int64_t>(1, n / 16), quarter = n / 4;
        SCOPED_TRACE("n = " + std::to_string(n));
        EXPECT_EQ(classify_head(pattern(T, [](int64_t, int64_t) { return true; })),
                  HeadPattern::kGlobal);
        EXPECT_EQ(classify_head(pattern(
                      T, [](int64_t i, int64_t j) { return j == std::max<int64_t>(i - 1, 1); })),
                  HeadPattern::kPrevious);
        EXPECT_EQ(
            classify_head(pattern(
                T, [T](int64_t i, int64_t j) { return j == std::min<int64_t>(i + 1, T - 1); })),
            HeadPattern::kNext);
        EXPECT_EQ(classify_head(
                      pattern(T, [band](int64_t i, int64_t j) { return std::abs(i - j) <= band; })),
                  HeadPattern::kLocal);
        EXPECT_EQ(classify_head(pattern(
                      T, [quarter](int64_t i, int64_t j) { return std::abs(i - j) <= quarter; })),
                  HeadPattern::kBroad);
        EXPECT_EQ(
            classify_head(pattern(T, [](int64_t i, int64_t j) { return std::abs(i - j) <= 2; })),
            n >= 64 ? HeadPattern::kLocal : HeadPattern::kBroad);
    }
    EXPECT_EQ(describe(TaxonomyThresholds{}),
              "previous/next if |previous - next mass| >= 0.3, global if entropy >= 0.9 ln n, "
              "local if mean distance <= 0.05 n, broad otherwise ([CLS] left out)");
}

TEST(HeadTaxonomy, MeanAttentionDistance) {
    const int64_t T = 8;
    EXPECT_EQ(mean_attention_distance(torch::eye(T)), 0.0);
    EXPECT_NEAR(mean_attention_distance(torch::full({T, T}, 1.0 / T)), (T * T - 1.0) / (3 * T),
                1e-9);
    auto shift = pattern(T, [](int64_t i, int64_t j) { return j == std::max<int64_t>(i - 1, 0); });
    EXPECT_NEAR(mean_attention_distance(shift), 7.0 / 8, 1e-9);           // row 0 attends to itself
    EXPECT_THROW(head_statistics(torch::eye(2)), std::invalid_argument);  // 1 left without [CLS]
}

TEST(HeadTaxonomy, TupeModelAtInitIsGlobal) {
    // At init (N(0, 0.02)) the positional correlation is near zero: softmax rows are uniform.
    engine::BertModel model(tiny_config("tupe-a"));
    auto pc = tupe_positional_correlation(model, kAttentionMaxPositions);
    auto heads = classify_heads(pc.groups[0].probs);
    ASSERT_EQ(heads.size(), 2u);
    for (auto h : heads) EXPECT_EQ(h, HeadPattern::kGlobal);
}

// ---- safetensors and the HF import ------------------------------------------------------------

namespace {

nlohmann::json hf_config_json(const engine::ModelConfig& c) {
    return {{"architectures", {"BertForMaskedLM"}},
            {"model_type", "bert"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"num_hidden_layers", c.num_hidden_layers},
            {"num_attention_heads", c.num_attention_heads},
            {"intermediate_size", c.intermediate_size},
            {"max_position_embeddings", c.max_position_embeddings},
            {"type_vocab_size", c.type_vocab_size},
            {"layer_norm_eps", c.layer_norm_eps},
            {"hidden_act", "gelu"},
            {"hidden_dropout_prob", 0.1},
            {"attention_probs_dropout_prob", 0.1},
            {"initializer_range", 0.02},
            {"pad_token_id", 0},
            {"position_embedding_type", "absolute"},
            {"transformers_version", "4.30.0"}};
}

using test_support::write_file;

std::vector<std::string> vocab_tokens() {
    std::vector<std::string> t = {"[PAD]",  "[UNK]", "[CLS]", "[SEP]",
                                  "[MASK]", "the",   "cat",   "sat"};
    while (static_cast<int64_t>(t.size()) < kVocab) t.push_back("w" + std::to_string(t.size()));
    return t;
}

/// A randomised tiny BERT-A and its HF directory (config.json, model.safetensors, vocab.txt),
/// with the extra tensors HF files carry (pooler, position_ids) to be ignored.
struct HfFixture {
    engine::ModelConfig config = tiny_config("bert-a");
    engine::BertForMaskedLM model{nullptr};
    TempDir temp;
    fs::path dir;
    NamedTensors tensors;

    explicit HfFixture(const std::string& name) : temp(name), dir(temp.path()) {
        model = engine::BertForMaskedLM(config);
        randomize(*model, 31);
        model->eval();
        for (auto& item : model->named_parameters()) tensors.emplace_back(item.key(), item.value());
        tensors.emplace_back("bert.pooler.dense.weight", torch::randn({16, 16}));
        tensors.emplace_back("bert.pooler.dense.bias", torch::randn({16}));
        tensors.emplace_back("bert.embeddings.position_ids",
                             torch::arange(config.max_position_embeddings).unsqueeze(0));
        write_file(dir / "config.json", hf_config_json(config).dump(2));
        engine::Vocab::from_tokens(vocab_tokens()).save((dir / "vocab.txt").string());
    }
    void write(const NamedTensors& t) const {
        write_safetensors((dir / "model.safetensors").string(), t);
    }
};

/// MLM logits at every position of a fixed batch.
torch::Tensor mlm_logits(engine::BertForMaskedLM& model) {
    auto batch = make_batch(12);
    torch::NoGradGuard no_grad;
    model->eval();
    auto labels = torch::zeros_like(batch.ids);
    return model->forward(batch.ids, batch.mask, labels).logits;
}

/// Runs `f` and returns the CheckpointError message (empty when nothing was thrown).
template <typename F>
std::string checkpoint_error(F f) {
    try {
        f();
    } catch (const engine::CheckpointError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Safetensors, RoundTripsDtypesAndMetadata) {
    const TempDir temp("st_dtypes");
    const fs::path& dir = temp.path();
    const std::string path = (dir / "t.safetensors").string();
    torch::manual_seed(1);
    NamedTensors in = {{"f32", torch::randn({3, 4})},
                       {"f16", torch::randn({5}).to(torch::kHalf)},
                       {"bf16", torch::randn({2, 2}).to(torch::kBFloat16)},
                       {"i64", torch::arange(7)},
                       {"empty", torch::zeros({0, 3})},
                       {"strided", torch::randn({4, 3}).t()}};
    write_safetensors(path, in, {{"format", "pt"}});
    auto out = read_safetensors(path);
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        EXPECT_EQ(out[i].first, in[i].first);
        EXPECT_EQ(out[i].second.scalar_type(), in[i].second.scalar_type()) << in[i].first;
        EXPECT_TRUE(torch::equal(out[i].second, in[i].second)) << in[i].first;
    }
    // Layout per the format: 8-byte length, a JSON header padded to 8 bytes.
    std::ifstream f(path, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    EXPECT_EQ(n % 8, 0u);
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    auto j = nlohmann::json::parse(header);
    EXPECT_EQ(j["__metadata__"]["format"], "pt");
    EXPECT_EQ(j["f16"]["dtype"], "F16");
    EXPECT_EQ(j["bf16"]["dtype"], "BF16");
}

TEST(Safetensors, RejectsTruncatedAndMalformedFiles) {
    const TempDir temp("st_bad");
    const fs::path& dir = temp.path();
    const std::string path = (dir / "t.safetensors").string();
    write_safetensors(path, {{"a", torch::randn({64})}});
    const auto size = fs::file_size(path);
    fs::resize_file(path, size - 10);
    auto msg = checkpoint_error([&] { read_safetensors(path); });
    EXPECT_TRUE(has(msg, path) && has(msg, "'a'")) << msg;

    write_file(dir / "junk.safetensors", std::string("\x10\0\0\0\0\0\0\0{not json at all}", 24));
    msg = checkpoint_error([&] { read_safetensors((dir / "junk.safetensors").string()); });
    EXPECT_TRUE(has(msg, "junk.safetensors")) << msg;
    msg = checkpoint_error([&] { read_safetensors((dir / "missing.safetensors").string()); });
    EXPECT_TRUE(has(msg, "missing.safetensors")) << msg;
}

TEST(HfImport, SafetensorsRoundTripGivesIdenticalOutputs) {
    HfFixture fx("hf_st");
    fx.write(fx.tensors);
    auto imported = import_hf_bert(fx.dir.string());
    EXPECT_FALSE(imported->is_training());
    EXPECT_EQ(imported->config().hidden_size, fx.config.hidden_size);
    EXPECT_EQ(imported->config().absolute_position, "input");
    EXPECT_TRUE(torch::equal(mlm_logits(imported), mlm_logits(fx.model)));

    // The vocabulary, and a text that needs more positions than the model has.
    auto vocab = import_hf_vocab(fx.dir.string(), imported->config());
    EXPECT_EQ(vocab.size(), kVocab);
    engine::WordPieceTokenizer tokenizer(vocab);
    auto inspection = inspect_text(imported, tokenizer, "the cat sat");
    EXPECT_EQ(inspection.tokens.size(), 5u);
    std::string long_text;
    for (int i = 0; i < kAttentionMaxPositions; ++i) long_text += "the cat ";
    EXPECT_THROW(inspect_text(imported, tokenizer, long_text), engine::InputError);
}

TEST(HfImport, AcceptsHalfPrecisionGammaBetaAndTiedDecoder) {
    HfFixture fx("hf_half");
    NamedTensors t;
    for (const auto& [name, tensor] : fx.tensors) {
        std::string n = name;
        if (n == "bert.embeddings.LayerNorm.weight") n = "bert.embeddings.LayerNorm.gamma";
        if (n == "bert.embeddings.LayerNorm.bias") n = "bert.embeddings.LayerNorm.beta";
        t.emplace_back(n, tensor.is_floating_point() ? tensor.to(torch::kHalf) : tensor);
    }
    t.emplace_back("cls.predictions.decoder.weight",
                   fx.model->bert->embeddings->word_embeddings->weight.to(torch::kHalf));
    fx.write(t);
    auto imported = import_hf_bert(fx.dir.string());
    for (auto& item : imported->named_parameters()) {
        auto original = fx.model->named_parameters()[item.key()];
        EXPECT_TRUE(torch::equal(item.value(), original.to(torch::kHalf).to(torch::kFloat)))
            << item.key();
    }
}

TEST(HfImport, ClearErrorsForCheckpointsThatDoNotFit) {
    HfFixture fx("hf_bad");
    const std::string st = (fx.dir / "model.safetensors").string();
    const std::string cfg = (fx.dir / "config.json").string();
    auto without = [&](const std::string& drop) {
        NamedTensors t;
        for (const auto& item : fx.tensors)
            if (item.first != drop) t.push_back(item);
        return t;
    };
    // No weights at all.
    auto msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, "model.safetensors") && has(msg, "pytorch_model.bin")) << msg;

    // A missing tensor names the file and the tensor.
    fx.write(without("bert.encoder.layer.1.output.dense.weight"));
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, st) && has(msg, "bert.encoder.layer.1.output.dense.weight")) << msg;

    // A mis-shaped tensor.
    auto t = without("cls.predictions.bias");
    t.emplace_back("cls.predictions.bias", torch::zeros({kVocab + 1}));
    fx.write(t);
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, "cls.predictions.bias") && has(msg, "expects")) << msg;

    // A checkpoint with more layers than config.json says.
    fx.write(fx.tensors);
    auto j = hf_config_json(fx.config);
    j["num_hidden_layers"] = 1;
    write_file(fx.dir / "config.json", j.dump());
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, "unexpected tensor 'bert.encoder.layer.1.")) << msg;

    // Configs the engine cannot represent, or cannot parse.
    j = hf_config_json(fx.config);
    j["hidden_act"] = "relu";
    write_file(fx.dir / "config.json", j.dump());
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, cfg) && has(msg, "hidden_act")) << msg;
    j = hf_config_json(fx.config);
    j.erase("hidden_size");
    write_file(fx.dir / "config.json", j.dump());
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, "missing key 'hidden_size'")) << msg;
    write_file(fx.dir / "config.json", "{\"vocab_size\": 40,");
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, cfg) && has(msg, "malformed JSON")) << msg;
    j = hf_config_json(fx.config);
    write_file(fx.dir / "config.json", j.dump());

    // Not a BERT checkpoint at all, and an untied decoder.
    fx.write({{"roberta.embeddings.word_embeddings.weight", torch::randn({kVocab, 16})}});
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, st) && has(msg, "not a BertForMaskedLM")) << msg;
    t = fx.tensors;
    t.emplace_back("cls.predictions.decoder.weight", torch::randn({kVocab, 16}));
    fx.write(t);
    msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, "untied")) << msg;

    // A vocabulary larger than the embedding table.
    auto tokens = vocab_tokens();
    tokens.push_back("extra");
    engine::Vocab::from_tokens(tokens).save((fx.dir / "vocab.txt").string());
    msg = checkpoint_error([&] { import_hf_vocab(fx.dir.string(), fx.config); });
    EXPECT_TRUE(has(msg, "vocab.txt") && has(msg, "41 tokens")) << msg;
}

TEST(HfImport, PytorchModelBinFromPython) {
    if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0)
        GTEST_SKIP() << "/usr/bin/python3 has no torch";
    HfFixture fx("hf_bin");
    // Export with torch::pickle_save, rebuild an HF-style state dict in Python (OrderedDict with
    // _metadata, decoder tied to the word embeddings, old gamma/beta names) and torch.save it.
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [name, tensor] : fx.tensors) dict.insert(name, tensor.detach().clone());
    const auto bytes = torch::pickle_save(dict);
    {
        std::ofstream out(fx.dir / "export.pt", std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    write_file(
        fx.dir / "convert.py",
        "import collections, sys, torch\n"
        "d = torch.load(sys.argv[1])\n"
        "sd = collections.OrderedDict()\n"
        "for k in sorted(d):\n"
        "    n = k.replace('attention.output.LayerNorm.weight', "
        "'attention.output.LayerNorm.gamma')\n"
        "    sd[n] = d[k]\n"
        "sd['cls.predictions.decoder.weight'] = sd['bert.embeddings.word_embeddings.weight']\n"
        "sd['cls.predictions.decoder.bias'] = sd['cls.predictions.bias']\n"
        "b = sd['cls.predictions.bias']\n"
        "sd['cls.predictions.bias'] = torch.cat([torch.zeros(3), b])[3:]  # offset view\n"
        "sd._metadata = collections.OrderedDict([('', {'version': 1})])\n"
        "torch.save(sd, sys.argv[2])\n"
        "torch.save(sd, sys.argv[2] + '.p4', pickle_protocol=4)\n");
    const std::string cmd = "/usr/bin/python3 " + (fx.dir / "convert.py").string() + " " +
                            (fx.dir / "export.pt").string() + " " +
                            (fx.dir / "pytorch_model.bin").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto imported = import_hf_bert(fx.dir.string());
    EXPECT_TRUE(torch::equal(mlm_logits(imported), mlm_logits(fx.model)));
    // Pickle protocol 4 (frames, memoize, short strings).
    fs::rename(fx.dir / "pytorch_model.bin.p4", fx.dir / "pytorch_model.bin");
    auto imported4 = import_hf_bert(fx.dir.string());
    EXPECT_TRUE(torch::equal(mlm_logits(imported4), mlm_logits(fx.model)));

    // A file that is not a torch.save archive names itself.
    write_file(fx.dir / "pytorch_model.bin", "not a zip");
    auto msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, "pytorch_model.bin")) << msg;
}

TEST(HfImport, ReadsLibTorchPickleSaveArchives) {
    // `tupe export --out FILE.pt` writes torch::pickle_save of a c10::Dict, which pickles the
    // dict inside restore_type_tag(...): the importer reads it as pytorch_model.bin.
    HfFixture fx("hf_pickle_save");
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [name, tensor] : fx.tensors) dict.insert(name, tensor.detach().clone());
    const auto bytes = torch::pickle_save(dict);
    {
        std::ofstream out(fx.dir / "pytorch_model.bin", std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    const auto state = read_torch_state_dict((fx.dir / "pytorch_model.bin").string());
    ASSERT_EQ(state.size(), fx.tensors.size());
    auto imported = import_hf_bert(fx.dir.string());
    EXPECT_TRUE(torch::equal(mlm_logits(imported), mlm_logits(fx.model)));
}

namespace {

/// The encoder of `a` and `b` on a fixed batch: the same hidden states and attention logits.
void expect_same_encoder(engine::BertForMaskedLM& a, engine::BertForMaskedLM& b) {
    auto batch = make_batch(12);
    torch::NoGradGuard no_grad;
    a->eval();
    b->eval();
    auto x = a->bert->forward(batch.ids, batch.mask, {}, /*output_attentions=*/true);
    auto y = b->bert->forward(batch.ids, batch.mask, {}, /*output_attentions=*/true);
    EXPECT_TRUE(torch::equal(x.last_hidden_state, y.last_hidden_state));
    ASSERT_EQ(x.attention_logits.size(), y.attention_logits.size());
    for (size_t i = 0; i < x.attention_logits.size(); ++i)
        EXPECT_TRUE(torch::equal(x.attention_logits[i], y.attention_logits[i])) << "layer " << i;
}

bool any_has(const std::vector<std::string>& lines, const std::string& part) {
    for (const auto& line : lines)
        if (has(line, part)) return true;
    return false;
}

/// fx.model as transformers' BertModel saves it: no "bert." prefix, no cls.* head.
NamedTensors bare_bert_model(const HfFixture& fx) {
    NamedTensors bare;
    for (const auto& [name, tensor] : fx.tensors)
        if (name.rfind("bert.", 0) == 0) bare.emplace_back(name.substr(5), tensor);
    return bare;
}

}  // namespace

TEST(HfImport, BareBertModelImportsTheEncoderWithAFreshTiedHead) {
    HfFixture fx("hf_bare");
    fx.write(bare_bert_model(fx));
    std::vector<std::string> notes;
    auto imported = import_hf_bert(fx.dir.string(), &notes);
    EXPECT_FALSE(imported->is_training());
    expect_same_encoder(imported, fx.model);
    EXPECT_TRUE(any_has(notes, "bare BertModel")) << notes.size();
    EXPECT_TRUE(any_has(notes, "no MLM head")) << notes.size();
    // The head is the fresh one, not the fixture's; its decoder is the imported word table.
    auto params = imported->named_parameters();
    EXPECT_FALSE(
        torch::equal(params["cls.predictions.transform.dense.weight"],
                     fx.model->named_parameters()["cls.predictions.transform.dense.weight"]));
    EXPECT_TRUE(torch::isfinite(mlm_logits(imported)).all().item<bool>());
    // Without a notes vector the same import is silent and identical.
    auto again = import_hf_bert(fx.dir.string());
    expect_same_encoder(again, fx.model);
}

TEST(HfImport, SequenceClassificationImportsTheEncoderAndIgnoresTheClassifier) {
    HfFixture fx("hf_seqcls");
    NamedTensors t;
    for (const auto& item : fx.tensors)
        if (item.first.rfind("cls.", 0) != 0) t.push_back(item);
    t.emplace_back("classifier.weight", torch::randn({3, 16}));
    t.emplace_back("classifier.bias", torch::randn({3}));
    fx.write(t);
    std::vector<std::string> notes;
    auto imported = import_hf_bert(fx.dir.string(), &notes);
    expect_same_encoder(imported, fx.model);
    EXPECT_TRUE(any_has(notes, "classifier")) << notes.size();
    EXPECT_TRUE(any_has(notes, "no MLM head")) << notes.size();
    EXPECT_FALSE(any_has(notes, "bare"));

    // A partial MLM head is an error, not a silent re-initialisation.
    t.emplace_back("cls.predictions.bias", torch::zeros({kVocab}));
    fx.write(t);
    auto msg = checkpoint_error([&] { import_hf_bert(fx.dir.string()); });
    EXPECT_TRUE(has(msg, "missing tensor 'cls.predictions.transform.")) << msg;
}

TEST(HfImport, ShardedSafetensorsReadsEveryShard) {
    HfFixture fx("hf_sharded");
    const fs::path out = fx.dir / "export";
    export_hf_bert(fx.model, (fx.dir / "vocab.txt").string(), true, out.string());
    const auto all = read_safetensors((out / "model.safetensors").string());
    ASSERT_GT(all.size(), 2u);
    fs::remove(out / "model.safetensors");
    const std::string shard1 = "model-00001-of-00002.safetensors";
    const std::string shard2 = "model-00002-of-00002.safetensors";
    NamedTensors first(all.begin(), all.begin() + all.size() / 2);
    NamedTensors second(all.begin() + all.size() / 2, all.end());
    write_safetensors((out / shard1).string(), first, {{"format", "pt"}});
    write_safetensors((out / shard2).string(), second, {{"format", "pt"}});
    nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                            {"weight_map", nlohmann::json::object()}};
    for (const auto& item : first) index["weight_map"][item.first] = shard1;
    for (const auto& item : second) index["weight_map"][item.first] = shard2;
    const fs::path index_path = out / "model.safetensors.index.json";
    write_file(index_path, index.dump(2));

    EXPECT_EQ(read_hf_state_dict(out.string()).size(), all.size());
    auto imported = import_hf_bert(out.string());
    expect_same_encoder(imported, fx.model);
    EXPECT_TRUE(torch::equal(mlm_logits(imported), mlm_logits(fx.model)));

    // A tensor the index places in a shard that lacks it: the shard and the tensor are named.
    auto moved = index;
    moved["weight_map"][first.front().first] = shard2;
    write_file(index_path, moved.dump());
    auto msg = checkpoint_error([&] { import_hf_bert(out.string()); });
    EXPECT_TRUE(has(msg, shard2) && has(msg, "'" + first.front().first + "'")) << msg;

    // A missing shard file: the index and the shard are named.
    fs::remove(out / shard2);
    write_file(index_path, index.dump());
    msg = checkpoint_error([&] { import_hf_bert(out.string()); });
    EXPECT_TRUE(has(msg, index_path.string()) && has(msg, shard2) && has(msg, "not found")) << msg;

    // A malformed index, and one without a weight map.
    write_file(index_path, "{\"weight_map\": {");
    msg = checkpoint_error([&] { import_hf_bert(out.string()); });
    EXPECT_TRUE(has(msg, index_path.string()) && has(msg, "malformed JSON")) << msg;
    write_file(index_path, "{\"metadata\": {}}");
    msg = checkpoint_error([&] { import_hf_bert(out.string()); });
    EXPECT_TRUE(has(msg, index_path.string()) && has(msg, "weight_map")) << msg;
    write_file(index_path, "{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
    msg = checkpoint_error([&] { import_hf_bert(out.string()); });
    EXPECT_TRUE(has(msg, index_path.string()) && has(msg, "not a file in the folder")) << msg;
}

TEST(HfImport, LegacyTorchSaveNamesTheFileAndTheConversion) {
    HfFixture fx("hf_legacy");
    const fs::path bin = fx.dir / "pytorch_model.bin";
    // What torch.save(..., _use_new_zipfile_serialization=False) writes first: PROTO 2 and the
    // magic number 0x1950a86a20f9469cfc6c as a LONG1 (torch/serialization.py).
    write_file(bin, std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15) +
                        std::string(64, '\0'));
    auto check = [&](const std::string& msg) {
        EXPECT_TRUE(has(msg, bin.string()) && has(msg, "legacy") &&
                    has(msg, "_use_new_zipfile_serialization=True") && !has(msg, "\n"))
            << msg;
    };
    check(checkpoint_error([&] { import_hf_bert(fx.dir.string()); }));
    check(checkpoint_error([&] { read_torch_state_dict(bin.string()); }));
    // A real legacy file, when /usr/bin/python3 has torch.
    if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0) {
        const std::string cmd =
            "/usr/bin/python3 -c \"import torch; torch.save({'a': torch.ones(2)}, '" +
            bin.string() + "', _use_new_zipfile_serialization=False)\"";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        check(checkpoint_error([&] { read_torch_state_dict(bin.string()); }));
    }
}

// ---- HF export (tupe export DIR) ------------------------------------------------------------

TEST(HfExport, EveryVariantRoundTripsThroughTheImporter) {
    const TempDir temp("hf_export");
    const fs::path& dir = temp.path();
    engine::Vocab::from_tokens(vocab_tokens()).save((dir / "vocab-src.txt").string());
    std::vector<engine::ModelConfig> configs;
    for (const std::string preset : engine::model_presets()) configs.push_back(tiny_config(preset));
    auto pre_ln = tiny_config("bert-a");
    pre_ln.pre_layernorm = true;  // BERT-A, but not what transformers' BertForMaskedLM computes
    configs.push_back(pre_ln);
    auto per_layer = tiny_config("tupe-r");
    per_layer.shared_pos_term = false;
    configs.push_back(per_layer);
    for (const auto& config : configs) {
        const std::string what = config.preset + (config.pre_layernorm ? " pre-LN" : "") +
                                 (config.shared_pos_term ? "" : " per-layer");
        engine::BertForMaskedLM model(config);
        randomize(*model, 41);
        model->eval();
        const fs::path out = dir / "out";
        fs::remove_all(out);
        export_hf_bert(model, (dir / "vocab-src.txt").string(), false, out.string());
        const auto j = nlohmann::json::parse(std::ifstream(out / "config.json"));
        // transformers 5 computes bert-a itself (position_embedding_type "absolute"); every
        // other scheme is model_type "tupe" with python/tupe_hf/ named in auto_map.
        const bool plain_bert = config.preset == "bert-a" && !config.pre_layernorm;
        EXPECT_EQ(j["model_type"], plain_bert ? "bert" : "tupe") << what;
        if (plain_bert) EXPECT_EQ(j["position_embedding_type"], "absolute") << what;
        EXPECT_EQ(j.contains("auto_map"), !plain_bert) << what;
        EXPECT_EQ(fs::exists(out / "modeling_tupe.py"), !plain_bert) << what;
        EXPECT_EQ(j["tupe_workbench"]["preset"], config.preset) << what;
        EXPECT_FALSE(read_hf_lower_case(out.string(), true)) << what;

        auto imported = import_hf_bert(out.string());
        const auto& c = imported->config();
        EXPECT_EQ(c.preset, config.preset) << what;
        EXPECT_EQ(c.absolute_position, config.absolute_position) << what;
        EXPECT_EQ(c.relative_position, config.relative_position) << what;
        EXPECT_EQ(c.untie_cls, config.untie_cls) << what;
        EXPECT_EQ(c.shared_pos_term, config.shared_pos_term) << what;
        EXPECT_EQ(c.pre_layernorm, config.pre_layernorm) << what;
        EXPECT_EQ(c.attention_scale_factor, config.attention_scale_factor) << what;
        EXPECT_TRUE(torch::equal(mlm_logits(imported), mlm_logits(model))) << what;
        EXPECT_EQ(import_hf_vocab(out.string(), c).tokens(), vocab_tokens()) << what;
        // model.safetensors holds every parameter once under its HF name, and no decoder copy.
        const auto stored = read_safetensors((out / "model.safetensors").string());
        EXPECT_EQ(stored.size(), model->named_parameters().size()) << what;
        for (const auto& [name, tensor] : stored)
            EXPECT_NE(name, "cls.predictions.decoder.weight") << what;
    }
}

TEST(HfExport, ConfigBlockErrorsNameTheFileAndKey) {
    const TempDir temp("hf_export_bad");
    const fs::path& dir = temp.path();
    engine::Vocab::from_tokens(vocab_tokens()).save((dir / "vocab-src.txt").string());
    engine::BertForMaskedLM model(tiny_config("tupe-r"));
    export_hf_bert(model, (dir / "vocab-src.txt").string(), true, (dir / "m").string());
    EXPECT_TRUE(read_hf_lower_case((dir / "m").string(), false));
    const std::string cfg = (dir / "m" / "config.json").string();
    const auto good = nlohmann::json::parse(std::ifstream(cfg));

    auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
        auto j = good;
        edit(j);
        write_file(cfg, j.dump(2));
        return checkpoint_error([&] { read_hf_bert_config(cfg); });
    };
    // transformers' model_type with a TUPE block would silently mean another function.
    auto msg = with([](nlohmann::json& j) { j["model_type"] = "bert"; });
    EXPECT_TRUE(has(msg, cfg) && has(msg, "tupe-r") && has(msg, "untied")) << msg;
    msg = with([](nlohmann::json& j) { j.erase("tupe_workbench"); });
    EXPECT_TRUE(has(msg, "tupe_workbench")) << msg;
    msg = with([](nlohmann::json& j) { j["tupe_workbench"]["rel_pos_binz"] = 3; });
    EXPECT_TRUE(has(msg, "unknown key 'rel_pos_binz'")) << msg;
    msg = with([](nlohmann::json& j) { j["tupe_workbench"]["rel_pos"] = "yes"; });
    EXPECT_TRUE(has(msg, "tupe_workbench\".rel_pos")) << msg;
    msg = with([](nlohmann::json& j) { j["tupe_workbench"]["absolute_position"] = "sideways"; });
    EXPECT_TRUE(has(msg, "sideways")) << msg;

    // A vocabulary larger than the model is refused before anything is written.
    std::vector<std::string> big = vocab_tokens();
    big.push_back("extra");
    engine::Vocab::from_tokens(big).save((dir / "big.txt").string());
    msg = checkpoint_error(
        [&] { export_hf_bert(model, (dir / "big.txt").string(), true, (dir / "n").string()); });
    EXPECT_TRUE(has(msg, "big.txt") && has(msg, "vocab_size")) << msg;
    EXPECT_FALSE(fs::exists(dir / "n"));
}
