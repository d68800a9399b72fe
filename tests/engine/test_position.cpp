// Tests of the positional zoo (engine/position.h): every scheme's attention logits against its
// formula evaluated here, independently, from the module's own weights in float64 (every head,
// with padding); ALiBi's slopes against the paper's; relative schemes unchanged by a shift of
// all positions, absolute ones changed; NoPE permutation-equivariant; gradients of every
// preset against central differences; extrapolation allowed or refused per scheme.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/position.h"
#include "support/test_support.h"

using namespace engine;

namespace {

constexpr int64_t kVocab = 40;

ModelConfig zoo_config(const std::string& preset) {
    ModelConfig c = make_model_config(preset, "tiny");
    c.vocab_size = kVocab;
    c.hidden_size = 32;
    c.num_attention_heads = 4;  // d = 8
    c.intermediate_size = 48;
    c.max_position_embeddings = 16;
    c.hidden_dropout_prob = 0;
    c.attention_probs_dropout_prob = 0;
    return c;
}

const std::vector<std::string> kZoo = {
    "bert-a", "bert-r", "tupe-a",  "tupe-r", "tupe-a-tie-cls", "bert-ad", "sinusoidal", "nope",
    "t5",     "shaw",   "shaw-kq", "rope",   "rope-cls",       "alibi",   "alibi-cls",  "deberta"};

torch::Tensor named_param(torch::nn::Module& m, const std::string& name) {
    auto* p = m.named_parameters().find(name);
    TORCH_CHECK(p, "no parameter ", name);
    return p->detach();
}

// Every parameter from N(0, 0.3) (cls_theta and zero-initialised biases included), so that
// every term is visible.
void randomize_normal(torch::nn::Module& m, uint64_t seed) {
    torch::manual_seed(seed);
    torch::NoGradGuard g;
    for (auto& p : m.parameters()) p.normal_(0.0, 0.3);
}

// A model of `c` with randomize_normal(seed)'s weights, in eval mode (no dropout), in `dtype`.
template <typename Model>
Model random_model(const ModelConfig& c, uint64_t seed, torch::ScalarType dtype = torch::kFloat) {
    Model m(c);
    randomize_normal(*m, seed);
    m->to(dtype);
    m->eval();
    return m;
}

torch::Tensor ids(int64_t B, int64_t T, uint64_t seed) {
    torch::manual_seed(seed);
    auto x = torch::randint(5, kVocab, {B, T}, torch::kLong);
    x.select(1, 0).fill_(2);  // [CLS]
    return x;
}

// ---- the formulas, written out here ----------------------------------------------------------

double t5_bucket_ref(int64_t rel, int64_t nb, int64_t max_d) {
    // Raffel et al. 2020, bidirectional, as in guolinke/TUPE (float arithmetic).
    int64_t ret = 0, n = -rel;
    nb /= 2;
    if (n < 0) ret += nb;
    n = std::abs(n);
    const int64_t exact = nb / 2;
    if (n < exact) return static_cast<double>(ret + n);
    const float r = std::log(static_cast<float>(n) / static_cast<float>(exact)) /
                    static_cast<float>(std::log(static_cast<double>(max_d) / exact));
    int64_t large = exact + static_cast<int64_t>(r * static_cast<float>(nb - exact));
    return static_cast<double>(ret + std::min(large, nb - 1));
}

std::vector<double> alibi_ref(int64_t H) {
    auto pow2 = [](int64_t n) {
        std::vector<double> s;
        for (int64_t h = 1; h <= n; ++h) s.push_back(std::pow(2.0, -8.0 * h / n));
        return s;
    };
    int64_t n = 1;
    while (n * 2 <= H) n *= 2;
    auto s = pow2(n);
    const auto extra = pow2(2 * n);
    for (int64_t i = 0; static_cast<int64_t>(s.size()) < H; i += 2) s.push_back(extra[i]);
    return s;
}

// Layer 0's logits (B, H, T, T) in float64 for `c`, from the weights of `m` (a double model).
torch::Tensor reference_logits(BertModel& m, const ModelConfig& c, const torch::Tensor& input,
                               int64_t offset) {
    torch::NoGradGuard g;
    const int64_t B = input.size(0), T = input.size(1), C = c.hidden_size,
                  H = c.num_attention_heads, d = C / H;
    auto pos = torch::arange(offset, offset + T, torch::kDouble);
    // Embeddings: words + (learned | sinusoidal) + token type 0, LayerNorm.
    auto x = named_param(*m, "embeddings.word_embeddings.weight").index_select(0, input.view({-1}));
    x = x.view({B, T, C});
    const double input_scale = c.scale_input_positions ? 1.0 / std::sqrt(double(C)) : 1.0;
    if (c.absolute_position == "input")
        x = x + input_scale * named_param(*m, "embeddings.position_embeddings.weight")
                                  .slice(0, offset, offset + T);
    if (c.absolute_position == "sinusoidal") {
        auto table = torch::zeros({T, C}, torch::kDouble);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t i = 0; i < C; ++i) {
                const double w = std::pow(10000.0, -static_cast<double>(i - i % 2) / C);
                table[t][i] = i % 2 == 0 ? std::sin(pos[t].item<double>() * w)
                                         : std::cos(pos[t].item<double>() * w);
            }
        x = x + input_scale * table;
    }
    x = x + named_param(*m, "embeddings.token_type_embeddings.weight")[0];
    x = torch::layer_norm(x, {C}, named_param(*m, "embeddings.LayerNorm.weight"),
                          named_param(*m, "embeddings.LayerNorm.bias"), c.layer_norm_eps);
    const std::string s = "encoder.layer.0.attention.self.";
    auto q =
        torch::linear(x, named_param(*m, s + "query.weight"), named_param(*m, s + "query.bias"));
    auto k = torch::linear(x, named_param(*m, s + "key.weight"), named_param(*m, s + "key.bias"));
    const double sc = 1.0 / std::sqrt(d * c.attention_scale_factor);
    const int64_t kc =
        c.max_relative_distance > 0 ? c.max_relative_distance : c.max_position_embeddings - 1;
    auto out = torch::zeros({B, H, T, T}, torch::kDouble);
    const auto slopes = alibi_ref(H);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
            auto qh = q[b].slice(1, h * d, (h + 1) * d), kh = k[b].slice(1, h * d, (h + 1) * d);
            auto qr = qh.clone(), kr = kh.clone();
            if (c.relative_position == "rope") {
                const int64_t r = static_cast<int64_t>(d * c.rope_fraction) / 2 * 2;
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t p = 0; p < r / 2; ++p) {
                        const double a =
                            pos[t].item<double>() * std::pow(c.rope_base, -2.0 * p / r);
                        for (auto* v : {&qr, &kr}) {
                            auto src = (v == &qr ? qh : kh);
                            const double x1 = src[t][2 * p].item<double>(),
                                         x2 = src[t][2 * p + 1].item<double>();
                            (*v)[t][2 * p] = x1 * std::cos(a) - x2 * std::sin(a);
                            (*v)[t][2 * p + 1] = x2 * std::cos(a) + x1 * std::sin(a);
                        }
                    }
            }
            for (int64_t i = 0; i < T; ++i)
                for (int64_t j = 0; j < T; ++j) {
                    const bool cls = c.untie_cls && (i == 0 || j == 0);
                    // RoPE + reset: [CLS]'s row and column unrotated.
                    double v = (cls && c.relative_position == "rope")
                                   ? qh[i].dot(kh[j]).item<double>() * sc
                                   : qr[i].dot(kr[j]).item<double>() * sc;
                    const int64_t pi = offset + i, pj = offset + j;
                    if (c.relative_position == "t5") {
                        double bucket = t5_bucket_ref(pj - pi, c.rel_pos_bins, c.max_rel_pos);
                        if (c.untie_cls && j == 0) bucket = c.rel_pos_bins;
                        if (c.untie_cls && i == 0) bucket = c.rel_pos_bins / 2;
                        v += named_param(*m, "position_bias.relative_attention_bias.weight")
                                 [static_cast<int64_t>(bucket)][h]
                                     .item<double>();
                    }
                    if (c.relative_position == "alibi" && !cls)
                        v += -slopes[h] * std::abs(static_cast<double>(pi - pj));
                    if (c.relative_position == "shaw" || c.relative_position == "shaw_key_query") {
                        auto e = named_param(*m, "position_bias.distance_embedding.0.weight")
                            [std::clamp<int64_t>(pi - pj, -kc, kc) + kc];
                        v += qh[i].dot(e).item<double>() * sc;  // HF relative_key
                        if (c.relative_position == "shaw_key_query")
                            v += kh[j].dot(e).item<double>() * sc;
                    }
                    if (c.relative_position == "deberta") {
                        const std::string pr = "position_bias.projections.0.";
                        auto P = named_param(*m, "position_bias.rel_embeddings.weight");
                        auto delta = [&](int64_t a, int64_t bb) {
                            return std::clamp<int64_t>(a - bb + kc, 0, 2 * kc - 1);
                        };
                        auto kr_ = torch::linear(P[delta(pi, pj)],
                                                 named_param(*m, pr + "pos_k_linear.weight"),
                                                 named_param(*m, pr + "pos_k_linear.bias"))
                                       .slice(0, h * d, (h + 1) * d);
                        auto qr_ = torch::linear(P[delta(pj, pi)],
                                                 named_param(*m, pr + "pos_q_linear.weight"),
                                                 named_param(*m, pr + "pos_q_linear.bias"))
                                       .slice(0, h * d, (h + 1) * d);
                        v += qh[i].dot(kr_).item<double>() * sc;  // c2p
                        v += kh[j].dot(qr_).item<double>() * sc;  // p2c
                    }
                    if (c.untie_cls && c.absolute_position != "untied") {
                        auto theta = named_param(*m, "position_bias.cls_theta");
                        if (i == 0)
                            v += theta[0][h].item<double>();
                        else if (j == 0)
                            v += theta[1][h].item<double>();
                    }
                    out[b][h][i][j] = v;
                }
        }
    return out;
}

}  // namespace

// ---- formulas --------------------------------------------------------------------------------

TEST(PositionZoo, AlibiSlopesAreThePapers) {
    auto expect = [](int64_t H, std::vector<double> want) {
        const auto got = alibi_slopes(H);
        ASSERT_EQ(got.size(), want.size()) << H;
        for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << H << " " << i;
    };
    const double r = std::sqrt(0.5);
    expect(4, {0.25, 0.0625, 0.015625, 0.00390625});
    expect(8, {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625});
    // 12: the 8 slopes, then slopes 1, 3, 5, 7 of 16 (2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5).
    expect(12, {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625, r, r / 2, r / 4,
                r / 8});
    expect(6, {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});  // non-power of 2
}

TEST(PositionZoo, SinusoidalTableIsVaswanis) {
    auto t = sinusoidal_table(torch::arange(5, torch::kLong), 6);
    ASSERT_EQ(t.sizes(), (std::vector<int64_t>{5, 6}));
    EXPECT_DOUBLE_EQ(t[3][0].item<double>(), std::sin(3.0));
    EXPECT_DOUBLE_EQ(t[3][1].item<double>(), std::cos(3.0));
    EXPECT_DOUBLE_EQ(t[3][4].item<double>(), std::sin(3.0 / std::pow(10000.0, 4.0 / 6)));
    EXPECT_DOUBLE_EQ(t[3][5].item<double>(), std::cos(3.0 / std::pow(10000.0, 4.0 / 6)));
}

// Each scheme's layer-0 logits equal its formula, every head, with a padded second sequence.
// (TUPE's untied term and BERT-Ad's projections have their own formula tests: test_model.cpp.)
TEST(PositionZoo, LogitsEqualTheFormulaForEveryScheme) {
    for (const auto& preset : kZoo) {
        if (preset.rfind("tupe", 0) == 0 || preset == "bert-ad") continue;
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        if (preset == "rope") c.rope_fraction = 0.5;  // partial rotation: 4 of 8 dimensions
        auto m = random_model<BertModel>(c, 11, torch::kDouble);
        auto x = ids(2, 7, 3);
        auto mask = torch::ones({2, 7}, torch::kLong);
        mask[1].slice(0, 5).zero_();  // two padded keys in sequence 1
        torch::NoGradGuard g;
        auto out = m->forward(x, mask, {}, /*output_attentions=*/true);
        auto logits = out.attention_logits[0];
        auto want = reference_logits(m, c, x, 0);
        ASSERT_EQ(logits.sizes(), want.sizes());
        EXPECT_TRUE(torch::allclose(logits, want, 1e-10, 1e-10))
            << "max |diff| " << (logits - want).abs().max().item<double>();
        // Padded keys get no attention; every row sums to 1.
        auto probs = out.attention_probs[0];
        EXPECT_LT(probs[1].slice(2, 5).abs().max().item<double>(), 1e-12);
        EXPECT_TRUE(torch::allclose(probs.sum(-1), torch::ones({2, 4, 7}, torch::kDouble)));
    }
}

TEST(PositionZoo, NamedTermsAddUpToTheLogits) {
    for (const auto& preset : kZoo) {
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        auto m = random_model<BertModel>(c, 12, torch::kDouble);
        torch::NoGradGuard g;
        auto x = ids(1, 6, 4);
        auto out = m->forward(x, {}, {}, true);
        auto terms = m->position->forward(6);
        // Layer 0's q and k, as the layer computes them.
        auto emb = m->embeddings->forward(x, {}, terms.input);
        auto& self = *m->encoder->layer[0]->as<BertLayerImpl>()->attention->self;
        auto q = self.query(emb), k = self.key(emb);
        terms.layers[0].offset_qk(q, k);
        q = q.view({1, 6, 4, 8}).transpose(1, 2), k = k.view({1, 6, 4, 8}).transpose(1, 2);
        auto parts = terms.layers[0].terms(q, k);
        auto sum = torch::zeros_like(out.attention_logits[0]);
        std::vector<std::string> names;
        for (auto& [name, t] : parts) sum = sum + t, names.push_back(name);
        EXPECT_EQ(names, m->position->description().logit_terms);
        EXPECT_TRUE(torch::allclose(sum, out.attention_logits[0], 1e-10, 1e-10));
    }
}

// RoPE, ALiBi, T5, Shaw and DeBERTa see only j - i: shifting every position leaves the logits;
// absolute schemes change.
TEST(PositionZoo, RelativeSchemesIgnoreAShiftAbsoluteOnesDoNot) {
    for (const auto& preset : kZoo) {
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        c.max_position_embeddings = 32;
        auto m = random_model<BertModel>(c, 13);
        auto shifted_config = c;
        shifted_config.position_offset = 9;
        BertModel shifted(shifted_config);
        {
            torch::NoGradGuard g;
            auto src = m->named_parameters();
            for (auto& p : shifted->named_parameters()) p.value().copy_(*src.find(p.key()));
        }
        shifted->eval();
        auto x = ids(1, 8, 5);
        torch::NoGradGuard g;
        auto a = m->forward(x, {}, {}, true).attention_logits[0];
        auto b = shifted->forward(x, {}, {}, true).attention_logits[0];
        const auto& d = m->position->description();
        const bool relative_only = !d.input_slot && !d.untied && !d.qk_offsets;
        if (relative_only)
            EXPECT_TRUE(torch::allclose(a, b, 1e-6, 1e-6))
                << "max |diff| " << (a - b).abs().max().item<double>();
        else
            EXPECT_GT((a - b).abs().max().item<double>(), 1e-3);
    }
}

TEST(PositionZoo, NopeIsPermutationEquivariant) {
    auto c = zoo_config("nope");
    c.type_vocab_size = 2;
    auto m = random_model<BertModel>(c, 14);
    torch::NoGradGuard g;
    auto x = ids(1, 9, 6);
    auto types = torch::tensor({{0, 0, 0, 0, 1, 1, 1, 1, 1}}, torch::kLong);
    auto perm = torch::tensor({3, 0, 8, 1, 5, 2, 7, 4, 6}, torch::kLong);
    auto y = m->forward(x, {}, types).last_hidden_state;
    auto yp =
        m->forward(x.index_select(1, perm), {}, types.index_select(1, perm)).last_hidden_state;
    EXPECT_TRUE(torch::allclose(yp, y.index_select(1, perm), 1e-5, 1e-5));
    // A scheme with positions is not.
    auto r = random_model<BertModel>(zoo_config("rope"), 14);
    auto z = r->forward(x, {}, types).last_hidden_state;
    auto zp =
        r->forward(x.index_select(1, perm), {}, types.index_select(1, perm)).last_hidden_state;
    EXPECT_FALSE(torch::allclose(zp, z.index_select(1, perm), 1e-3, 1e-3));
}

// Autograd against central differences, float64, for a few entries of every positional
// parameter and of the layer-0 query of every preset.
TEST(PositionZoo, GradientsMatchFiniteDifferencesForEveryPreset) {
    for (const auto& preset : kZoo) {
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        c.num_hidden_layers = 2;
        auto m = random_model<BertForMaskedLM>(c, 15, torch::kDouble);
        auto x = ids(2, 6, 7);
        auto mask = torch::ones({2, 6}, torch::kLong);
        mask[1][5] = 0;
        auto labels = torch::full({2, 6}, -100, torch::kLong);
        labels[0][2] = 7, labels[1][3] = 9, labels[0][5] = 11;
        auto loss_of = [&]() { return m->forward(x, mask, labels).loss; };
        m->zero_grad();
        loss_of().backward();
        int checked = 0;
        for (auto& item : m->named_parameters()) {
            const auto& name = item.key();
            const bool positional =
                name.find("position") != std::string::npos ||
                name.find("layer.0.attention.self.query.weight") != std::string::npos;
            if (!positional) continue;
            auto& p = item.value();
            ASSERT_TRUE(p.grad().defined()) << name;
            auto flat = p.view({-1});
            for (int64_t idx : {int64_t{0}, flat.size(0) / 2, flat.size(0) - 1}) {
                const double eps = 1e-6;
                double plus = 0, minus = 0;
                {
                    torch::NoGradGuard g;
                    const double v = flat[idx].item<double>();
                    flat[idx] = v + eps;
                    plus = loss_of().item<double>();
                    flat[idx] = v - eps;
                    minus = loss_of().item<double>();
                    flat[idx] = v;
                }
                const double numeric = (plus - minus) / (2 * eps);
                const double analytic = p.grad().view({-1})[idx].item<double>();
                EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric))
                    << name << "[" << idx << "]";
                ++checked;
            }
        }
        EXPECT_GE(checked, 3);
    }
}

TEST(PositionZoo, LongerSequencesWorkWhereTheSchemeAllowsIt) {
    for (const auto& preset : kZoo) {
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        BertModel m(c);
        m->eval();
        torch::NoGradGuard g;
        auto x = ids(1, c.max_position_embeddings + 8, 8);
        if (m->position->description().extrapolates) {
            auto y = m->forward(x).last_hidden_state;
            EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
        } else {
            try {
                m->forward(x);
                FAIL() << "a learned table extrapolated";
            } catch (const c10::Error& e) {
                EXPECT_NE(std::string(e.what()).find("cannot extrapolate"), std::string::npos)
                    << e.what();
            }
        }
    }
}

TEST(PositionZoo, DescriptionsAndBadCombinations) {
    EXPECT_EQ(describe_position(make_model_config("deberta", "tiny")).logit_terms,
              (std::vector<std::string>{"content", "c2p", "p2c"}));
    EXPECT_EQ(describe_position(make_model_config("tupe-a", "tiny")).logit_terms,
              (std::vector<std::string>{"content", "bias"}));
    EXPECT_EQ(describe_position(make_model_config("rope", "tiny")).logit_terms,
              (std::vector<std::string>{"content", "rotation"}));
    EXPECT_TRUE(describe_position(make_model_config("nope", "tiny")).order_blind);
    EXPECT_FALSE(describe_position(make_model_config("alibi-cls", "tiny")).order_blind);
    auto c = make_model_config("shaw", "tiny");
    c.untie_cls = true;
    try {
        c.validate();
        FAIL() << "shaw + untie_cls accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("model.untie_cls"), std::string::npos) << e.what();
    }
    c = make_model_config("bert-a", "tiny");
    c.relative_position = "xpos";
    EXPECT_THROW(c.validate(), std::invalid_argument);
    c = make_model_config("rope", "tiny");
    c.rope_fraction = 0.0;
    EXPECT_THROW(c.validate(), std::invalid_argument);
}
