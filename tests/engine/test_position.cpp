// Tests of the positional zoo (engine/position.h): every scheme's attention logits against its
// formula evaluated here, independently, from the module's own weights in float64 (every head,
// with padding); ALiBi's slopes against the paper's; relative schemes unchanged by a shift of
// all positions, absolute ones (and FIRE) changed; NoPE permutation-equivariant; gradients of
// every preset against central differences; extrapolation allowed or refused per scheme; FIRE's
// two-sided input, KERPLE's kernels and their projection, randomized positions in training and
// RoPE's scalings against their closed forms.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/position.h"
#include "engine/position_scheme.h"
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
    "bert-a",    "bert-r",  "tupe-a", "tupe-r",     "tupe-a-tie-cls", "bert-ad",  "sinusoidal",
    "nope",      "t5",      "shaw",   "shaw-kq",    "rope",           "rope-cls", "alibi",
    "alibi-cls", "deberta", "fire",   "kerple-log", "kerple-power",   "cope"};

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

// KERPLE's r1, r2 moved inside their range (r > 0; the power kernel's r2 <= 2), away from the
// floor, so that its formula and gradients are tested where they are not clamped.
void make_kerple_valid(torch::nn::Module& m) {
    torch::NoGradGuard g;
    for (auto& item : m.named_parameters()) {
        const auto& name = item.key();
        if (name.find("kerple_r") == std::string::npos) continue;
        item.value().abs_().add_(0.1).clamp_max_(1.9);
    }
}

// A model of `c` with randomize_normal(seed)'s weights, in eval mode (no dropout), in `dtype`.
template <typename Model>
Model random_model(const ModelConfig& c, uint64_t seed, torch::ScalarType dtype = torch::kFloat) {
    Model m(c);
    randomize_normal(*m, seed);
    make_kerple_valid(*m);
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

// What reference_logits evaluates besides the weights: the positions (empty: 0..T-1) and, for
// RoPE, its frequencies theta_p (empty: rope_base^(-2p/r)) and a factor on the logits.
struct ReferencePositions {
    std::vector<int64_t> positions;
    std::vector<double> rope_theta;
    double logit_scale = 1.0;
};

// CoPE's term for query i and key j of one head (Golovneva et al. 2024, two-sided as
// docs/zoo.md defines it): p_ij = the sum of sigmoid(q_i . k_t * sc) over the tokens t whose
// positions lie between p_i and p_j (both included), capped at k; e[p] interpolated between
// rows floor(p) and ceil(p) of cope_left (p_j <= p_i) or cope_right; the term q_i . e[p] * sc.
double cope_ref(BertModel& m, const ModelConfig& c, const torch::Tensor& qh,
                const torch::Tensor& kh, const std::vector<int64_t>& ps, int64_t i, int64_t j,
                double sc) {
    const int64_t pi = ps[static_cast<size_t>(i)], pj = ps[static_cast<size_t>(j)];
    double count = 0;
    for (int64_t t = 0; t < qh.size(0); ++t) {
        const int64_t pt = ps[static_cast<size_t>(t)];
        if (pt < std::min(pi, pj) || pt > std::max(pi, pj)) continue;
        count += 1.0 / (1.0 + std::exp(-qh[i].dot(kh[t]).item<double>() * sc));
    }
    const int64_t k =
        c.max_relative_distance > 0 ? c.max_relative_distance : c.max_position_embeddings - 1;
    count = std::min(count, static_cast<double>(k));
    auto table = named_param(*m, pj <= pi ? "position_bias.cope_left" : "position_bias.cope_right");
    const double w = count - std::floor(count);
    auto e = table[0][static_cast<int64_t>(std::ceil(count))] * w +
             table[0][static_cast<int64_t>(std::floor(count))] * (1 - w);
    return qh[i].dot(e).item<double>() * sc;
}

// Layer 0's logits (B, H, T, T) in float64 for `c`, from the weights of `m` (a double model).
torch::Tensor reference_logits(BertModel& m, const ModelConfig& c, const torch::Tensor& input,
                               const ReferencePositions& at = {}) {
    torch::NoGradGuard g;
    const int64_t B = input.size(0), T = input.size(1), C = c.hidden_size,
                  H = c.num_attention_heads, d = C / H;
    std::vector<int64_t> ps = at.positions;
    for (int64_t t = static_cast<int64_t>(ps.size()); t < T; ++t) ps.push_back(t);
    auto pos = torch::tensor(ps, torch::kLong).to(torch::kDouble);
    // Embeddings: words + (learned | sinusoidal) + token type 0, LayerNorm.
    auto x = named_param(*m, "embeddings.word_embeddings.weight").index_select(0, input.view({-1}));
    x = x.view({B, T, C});
    const double input_scale = c.scale_input_positions ? 1.0 / std::sqrt(double(C)) : 1.0;
    if (c.absolute_position == "input")
        x = x + input_scale * named_param(*m, "embeddings.position_embeddings.weight")
                                  .index_select(0, torch::tensor(ps, torch::kLong));
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
    const double sc = at.logit_scale / std::sqrt(d * c.attention_scale_factor);
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
                        const double theta = at.rope_theta.empty()
                                                 ? std::pow(c.rope_base, -2.0 * p / r)
                                                 : at.rope_theta[static_cast<size_t>(p)];
                        const double a = pos[t].item<double>() * theta;
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
                    const int64_t pi = ps[static_cast<size_t>(i)], pj = ps[static_cast<size_t>(j)];
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
                    if (c.relative_position == "kerple_log" ||
                        c.relative_position == "kerple_power") {
                        // Chi et al. 2022: -r1 ln(1 + r2 d), -r1 d^r2; r >= 0.01, power r2 <= 2.
                        const double dist = cls ? 0.0 : std::abs(static_cast<double>(pi - pj));
                        double r1 = named_param(*m, "position_bias.kerple_r1")[0][h].item<double>();
                        double r2 = named_param(*m, "position_bias.kerple_r2")[0][h].item<double>();
                        r1 = std::max(r1, 0.01), r2 = std::max(r2, 0.01);
                        if (c.relative_position == "kerple_log")
                            v += -r1 * std::log(1 + r2 * dist);
                        else
                            v += -r1 * std::pow(dist, std::min(r2, 2.0));
                    }
                    if (c.relative_position == "fire") {
                        // Li et al. 2024, two-sided: f(sign(p_i - p_j) psi(|p_i - p_j|) /
                        // (psi(max(L, p_i, p_j)) + 1e-6)), psi(x) = ln(|c| x + 1), f 1 -> 32 -> H.
                        const std::string fp = "position_bias.fire.0.";
                        const double cc = std::abs(named_param(*m, fp + "c").item<double>());
                        const double L =
                            std::abs(named_param(*m, fp + "L_multiplier").item<double>()) *
                            std::max(1.0, c.max_position_embeddings / 4.0);
                        const double delta = static_cast<double>(pi - pj);
                        const double later = std::max({L, double(pi), double(pj)});
                        double xin = (delta > 0   ? 1
                                      : delta < 0 ? -1
                                                  : 0) *
                                     std::log(cc * std::abs(delta) + 1) /
                                     (std::log(cc * later + 1) + 1e-6);
                        if (cls) xin = 0;
                        auto w1 = named_param(*m, fp + "mlp.0.weight");
                        auto b1 = named_param(*m, fp + "mlp.0.bias");
                        auto w2 = named_param(*m, fp + "mlp.2.weight");
                        double f = named_param(*m, fp + "mlp.2.bias")[h].item<double>();
                        for (int64_t k = 0; k < w1.size(0); ++k)
                            f +=
                                w2[h][k].item<double>() *
                                std::max(0.0, w1[k][0].item<double>() * xin + b1[k].item<double>());
                        v += f;
                    }
                    if (c.relative_position == "cope") v += cope_ref(m, c, qh, kh, ps, i, j, sc);
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

namespace {

// Layer 0's logits of a float64 model of `c` against reference_logits, every head, with a
// padded second sequence; padded keys get no attention and every row sums to 1.
void expect_logits_equal_formula(const ModelConfig& c) {
    auto m = random_model<BertModel>(c, 11, torch::kDouble);
    auto x = ids(2, 7, 3);
    auto mask = torch::ones({2, 7}, torch::kLong);
    mask[1].slice(0, 5).zero_();  // two padded keys in sequence 1
    torch::NoGradGuard g;
    auto out = m->forward(x, mask, {}, /*output_attentions=*/true);
    auto logits = out.attention_logits[0];
    auto want = reference_logits(m, c, x);
    ASSERT_EQ(logits.sizes(), want.sizes());
    EXPECT_TRUE(torch::allclose(logits, want, 1e-10, 1e-10))
        << "max |diff| " << (logits - want).abs().max().item<double>();
    auto probs = out.attention_probs[0];
    EXPECT_LT(probs[1].slice(2, 5).abs().max().item<double>(), 1e-12);
    EXPECT_TRUE(torch::allclose(probs.sum(-1), torch::ones({2, 4, 7}, torch::kDouble)));
}

}  // namespace

// Each scheme's layer-0 logits equal its formula, every head, with a padded second sequence.
// (TUPE's untied term and BERT-Ad's projections have their own formula tests: test_model.cpp.)
TEST(PositionZoo, LogitsEqualTheFormulaForEveryScheme) {
    for (const auto& preset : kZoo) {
        if (preset.rfind("tupe", 0) == 0 || preset == "bert-ad") continue;
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        if (preset == "rope") c.rope_fraction = 0.5;  // partial rotation: 4 of 8 dimensions
        expect_logits_equal_formula(c);
    }
}

// FIRE and KERPLE take the [CLS] reset as ALiBi does: [CLS]'s row and column at distance 0,
// plus theta1 / theta2. FIRE's threshold below the positions, so its normaliser varies.
TEST(PositionZoo, FireAndKerpleWithTheClsResetEqualTheFormula) {
    for (const std::string preset : {"fire", "kerple-log", "kerple-power"}) {
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        c.untie_cls = true;
        expect_logits_equal_formula(c);
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

// RoPE, ALiBi, T5, Shaw, DeBERTa and KERPLE see only j - i: shifting every position leaves the
// logits; absolute schemes change, and FIRE, whose normaliser reads the later position (its
// threshold, |N(0, 0.3)| x 8 here, lies below the shifted positions 9..16).
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
        if (m->position->description().shift_invariant)
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

// ---- FIRE, KERPLE -----------------------------------------------------------------------------

// Left of the query FIRE's input is the paper's, psi(i - j) / psi(max(L, i)); the right side is
// its mirror image (x^T = -x), and |x| <= 1 at a length far beyond L: what the MLP sees at an
// unseen length stays inside what it saw in training.
TEST(Fire, InputIsThePapersOnTheLeftAndStaysWithinOneAtAnyLength) {
    const double c = 0.1, L = 8;
    auto ct = torch::full({}, c, torch::kDouble), Lt = torch::full({}, L, torch::kDouble);
    auto x = fire_input(torch::arange(600, torch::kLong), ct, Lt);  // (600, 600)
    ASSERT_EQ(x.sizes(), (std::vector<int64_t>{600, 600}));
    auto paper = [&](int64_t i, int64_t j) {  // Li et al. 2024, j <= i
        return std::log(c * double(i - j) + 1) / (std::log(c * std::max(L, double(i)) + 1) + 1e-6);
    };
    for (auto [i, j] : std::vector<std::pair<int64_t, int64_t>>{
             {5, 2}, {7, 0}, {300, 299}, {599, 0}, {450, 17}, {4, 4}}) {
        EXPECT_NEAR(x[i][j].item<double>(), paper(i, j), 1e-12) << i << " " << j;
        EXPECT_NEAR(x[j][i].item<double>(), -paper(i, j), 1e-12) << j << " " << i;
    }
    EXPECT_TRUE(torch::allclose(x.t(), -x, 0, 0));
    EXPECT_LE(x.abs().max().item<double>(), 1.0);
    EXPECT_GT(x.abs().max().item<double>(), 0.99);  // the far ends reach it
}

// The normaliser reads the later position: below the threshold L every position sees psi(L),
// so FIRE is shift-invariant there; once the positions pass L, a shift changes the bias.
TEST(Fire, ShiftInvariantOnlyWhilePositionsStayBelowItsThreshold) {
    torch::manual_seed(21);
    FireBias fire(3, /*init_threshold=*/10.0);
    {
        torch::NoGradGuard g;
        for (auto& p : fire->mlp->parameters()) p.normal_(0.0, 0.5);
    }
    torch::NoGradGuard g;
    auto at = [&](int64_t first) { return fire->forward(torch::arange(first, first + 6), false); };
    EXPECT_TRUE(torch::allclose(at(0), at(4), 1e-6, 1e-6));  // positions 0..9: below L = 10
    EXPECT_GT((at(0) - at(40)).abs().max().item<double>(), 1e-3);
    fire->L_multiplier.fill_(10.0);  // L = 100: the same shift is now below it
    EXPECT_TRUE(torch::allclose(at(0), at(40), 1e-6, 1e-6));
    EXPECT_EQ(at(0).sizes(), (std::vector<int64_t>{3, 6, 6}));
}

// KERPLE's bias is symmetric, 0 on the diagonal and falls with distance, also far beyond the
// learned table's length (its extrapolation: a fixed kernel of distance, nothing to run out of).
TEST(Kerple, BiasIsSymmetricAndFallsWithDistanceBeyondTheTrainingLength) {
    for (const std::string preset : {"kerple-log", "kerple-power"}) {
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        auto m = random_model<BertModel>(c, 22, torch::kDouble);
        torch::NoGradGuard g;
        const int64_t T = 3 * c.max_position_embeddings;
        auto terms = m->position->forward(T);
        ASSERT_EQ(terms.layers.size(), 2u);  // one kernel per layer (the preset)
        auto bias = terms.layers[1].bias;    // (H, T, T)
        ASSERT_EQ(bias.sizes(), (std::vector<int64_t>{4, T, T}));
        EXPECT_TRUE(torch::allclose(bias, bias.transpose(1, 2), 0, 0));
        EXPECT_EQ(bias.diagonal(0, 1, 2).abs().max().item<double>(), 0.0);
        auto row = bias.select(1, 0);  // (H, T): distance 0..T-1 from the first token
        EXPECT_TRUE((row.slice(1, 1) < row.slice(1, 0, T - 1)).all().item<bool>());
        EXPECT_FALSE(torch::allclose(terms.layers[0].bias, bias));
    }
}

// In training the parameters are projected onto KERPLE's range before use (their code's
// in-place clamp), so one pushed out of it keeps a gradient; evaluation leaves them as they are.
TEST(Kerple, TrainingProjectsTheParametersOntoTheirRange) {
    auto c = zoo_config("kerple-power");
    BertModel m(c);
    {
        torch::NoGradGuard g;
        named_param(*m->position, "kerple_r1").fill_(-1.0);
        named_param(*m->position, "kerple_r2").fill_(3.0);
    }
    auto r1 = *m->position->named_parameters().find("kerple_r1");
    auto r2 = *m->position->named_parameters().find("kerple_r2");
    auto x = ids(1, 6, 23);
    m->eval();
    {
        torch::NoGradGuard g;
        m->forward(x);
    }
    EXPECT_EQ(r1.min().item<double>(), -1.0);
    m->train();
    m->forward(x).last_hidden_state.sum().backward();
    EXPECT_NEAR(r1.max().item<double>(), 0.01, 1e-7);
    EXPECT_NEAR(r2.min().item<double>(), 2.0, 1e-7);
    EXPECT_GT(r1.grad().abs().max().item<double>(), 0.0);
}

// ---- CoPE --------------------------------------------------------------------------------------

// With every gate open (q . k large) a count is the number of tokens from the query to the key,
// |i - j| + 1: CoPE's term is then q_i . e[|i - j| + 1] from the left table for keys at or left
// of the query and from the right table for keys to its right, capped at k.
TEST(Cope, OpenGatesCountTokensOnBothSidesWithTheirOwnTables) {
    auto c = zoo_config("cope");
    c.max_relative_distance = 4;  // k: counts above 4 read row 4
    auto m = random_model<BertModel>(c, 30, torch::kDouble);
    torch::NoGradGuard g;
    const int64_t T = 7, d = 8;
    auto terms = m->position->forward(T);
    auto q = torch::ones({1, 4, T, d}, torch::kDouble) * 10.0;  // q . k * sc = 800: gates at 1
    auto parts = terms.layers[0].terms(q, q);
    ASSERT_EQ(parts.size(), 2u);  // content, c2p
    ASSERT_EQ(parts[1].first, "c2p");
    const auto& c2p = parts[1].second;  // (1, H, T, T)
    auto left = named_param(*m->position, "cope_left")[0];
    auto right = named_param(*m->position, "cope_right")[0];
    const double sc = 1.0 / std::sqrt(8.0);
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
            const int64_t n = std::min<int64_t>(std::abs(i - j) + 1, 4);
            auto e = (j <= i ? left : right)[n];
            EXPECT_NEAR(c2p[0][2][i][j].item<double>(), q[0][2][i].dot(e).item<double>() * sc, 1e-9)
                << i << " " << j;
        }
}

// Its positions are counts between query and key, by position: every token at one position
// (the properties probe's counterfactual) puts every key in the span, so the term is constant
// along each query's row, which the softmax ignores; at the true positions it is not.
TEST(Cope, ConstantPositionsLeaveARowConstant) {
    auto c = zoo_config("cope");
    auto m = random_model<BertModel>(c, 31, torch::kDouble);
    torch::NoGradGuard g;
    auto q = torch::randn({1, 4, 6, 8}, torch::kDouble),
         k = torch::randn({1, 4, 6, 8}, torch::kDouble);
    auto c2p = [&] { return m->position->forward(6).layers[0].terms(q, k)[1].second; };
    auto spread = [](const torch::Tensor& t) {  // the largest spread along a row
        return (std::get<0>(t.max(-1)) - std::get<0>(t.min(-1))).max().item<double>();
    };
    EXPECT_GT(spread(c2p()), 1e-3);
    m->position->set_constant_positions(true);
    EXPECT_LT(spread(c2p()), 1e-12);
}

// ---- the scheme table --------------------------------------------------------------------------

// Every preset's model registers exactly the parameters its rows list, with their shapes (the
// table is what export, `tupe info` and the docs read).
TEST(SchemeTable, EveryPresetRegistersTheParametersItsRowsList) {
    for (const auto& preset : model_presets()) {
        SCOPED_TRACE(preset);
        const ModelConfig c = zoo_config(preset);
        BertForMaskedLM model(c);
        std::map<std::string, std::vector<int64_t>> got, want;
        for (const auto& p : model->named_parameters())
            if (p.key().rfind("bert.position_bias.", 0) == 0 ||
                p.key() == "bert.embeddings.position_embeddings.weight")
                got[p.key()] = p.value().sizes().vec();
        const int64_t groups = c.shared_pos_term ? 1 : c.num_hidden_layers;
        for (Scheme id : active_schemes(c))
            for (const auto& param : scheme_row(id).parameters) {
                const auto shape = param.shape(c);
                if (!shape) continue;
                std::string name = param.name;
                const auto at = name.find("{g}");
                for (int64_t g = 0; g < (at == std::string::npos ? 1 : groups); ++g)
                    want[at == std::string::npos ? name
                                                 : name.substr(0, at) + std::to_string(g) +
                                                       name.substr(at + 3)] = *shape;
            }
        EXPECT_EQ(got, want);
    }
}

// Each name is text in one row only, found on its own axis; a config that names a row on the
// other axis, or none, is refused with every value listed.
TEST(SchemeTable, NamesAreFoundOnTheirOwnAxisAndUnknownOnesListTheRest) {
    for (const auto& row : scheme_table()) {
        if (row.axis == SchemeAxis::kModifier) continue;
        for (auto axis : {SchemeAxis::kAbsolute, SchemeAxis::kRelative}) {
            const bool on = row.axis == axis || row.axis == SchemeAxis::kBoth;
            EXPECT_EQ(find_scheme(axis, row.name).has_value(), on) << row.name;
        }
    }
    auto c = make_model_config("bert-a", "tiny");
    c.absolute_position = "rope";
    try {
        describe_position(c);
        FAIL() << "rope accepted as an absolute scheme";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("input, sinusoidal, untied, decoupled, none"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(relative_position_schemes().front(), "none");
    EXPECT_EQ(relative_position_schemes().back(), "cope");
    // Every named term of every preset says what it is (analysis writes it beside the map).
    for (const auto& preset : model_presets()) {
        const auto d = describe_position(make_model_config(preset, "tiny"));
        ASSERT_EQ(d.logit_term_meanings.size(), d.logit_terms.size()) << preset;
        for (const auto& meaning : d.logit_term_meanings) EXPECT_FALSE(meaning.empty()) << preset;
    }
}

// ---- randomized positions (Ruoss et al. 2023) ---------------------------------------------------

// Training draws a sorted random subset of position_offset + {0..M-1}; evaluation the plain
// range. A sequence longer than M is refused, naming the field.
TEST(RandomizedPositions, TrainingDrawsASortedSubsetEvaluationThePlainRange) {
    auto c = zoo_config("rope");
    c.randomized_positions_max = 40;
    c.position_offset = 3;
    PositionEncoding position(c);
    auto plain = position->positions(10, torch::kCPU);
    EXPECT_TRUE(torch::equal(plain, torch::arange(3, 13)));
    torch::manual_seed(24);
    auto a = position->positions(10, torch::kCPU, /*randomize=*/true);
    auto b = position->positions(10, torch::kCPU, /*randomize=*/true);
    for (const auto& p : {a, b}) {
        EXPECT_TRUE((p.slice(0, 1) > p.slice(0, 0, 9)).all().item<bool>());  // sorted, distinct
        EXPECT_GE(p.min().item<int64_t>(), 3);
        EXPECT_LT(p.max().item<int64_t>(), 43);
    }
    EXPECT_FALSE(torch::equal(a, b));
    EXPECT_GT(a.max().item<int64_t>(), 12);  // beyond the plain range (else p = 1 / C(40, 10))
    try {
        position->positions(41, torch::kCPU, true);
        FAIL() << "41 positions drawn from 40";
    } catch (const c10::Error& e) {
        EXPECT_NE(std::string(e.what()).find("randomized_positions_max"), std::string::npos);
    }
}

// A model in training computes every term at the drawn positions (learned and sinusoidal
// tables, RoPE, a relative bias: the same layer-0 logits as the formula there); in evaluation
// it is the model without the field. TUPE's untied term moves with the draw too.
TEST(RandomizedPositions, TrainingLogitsAreTheFormulaAtTheDrawnPositions) {
    for (const std::string preset : {"bert-a", "sinusoidal", "rope", "kerple-log", "tupe-a"}) {
        SCOPED_TRACE(preset);
        auto c = zoo_config(preset);
        c.max_position_embeddings = 32;
        c.randomized_positions_max = 32;
        auto m = random_model<BertModel>(c, 25, torch::kDouble);
        auto off = c;
        off.randomized_positions_max = 0;
        BertModel plain(off);
        plain->to(torch::kDouble);
        {
            torch::NoGradGuard g;
            auto src = m->named_parameters();
            for (auto& p : plain->named_parameters()) p.value().copy_(*src.find(p.key()));
        }
        plain->eval();
        auto x = ids(1, 7, 26);
        torch::NoGradGuard g;
        auto eval_logits = m->forward(x, {}, {}, true).attention_logits[0];
        EXPECT_TRUE(torch::equal(eval_logits, plain->forward(x, {}, {}, true).attention_logits[0]));
        m->train();  // dropout is 0: only the positions change
        torch::manual_seed(27);
        auto drawn = m->position->positions(7, torch::kCPU, true);
        torch::manual_seed(27);
        auto train_logits = m->forward(x, {}, {}, true).attention_logits[0];
        EXPECT_GT((train_logits - eval_logits).abs().max().item<double>(), 1e-3);
        if (preset == "tupe-a") continue;  // its formula: test_model.cpp
        ReferencePositions at;
        at.positions = std::vector<int64_t>(drawn.data_ptr<int64_t>(),
                                            drawn.data_ptr<int64_t>() + drawn.numel());
        auto want = reference_logits(m, c, x, at);
        EXPECT_TRUE(torch::allclose(train_logits, want, 1e-10, 1e-10))
            << "max |diff| " << (train_logits - want).abs().max().item<double>();
    }
}

TEST(RandomizedPositions, ALearnedTableMustHoldTheRange) {
    auto c = zoo_config("bert-a");  // 16 rows
    c.randomized_positions_max = 17;
    try {
        c.validate();
        FAIL() << "17 positions from a table of 16 accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()).rfind("model.randomized_positions_max", 0), 0u) << e.what();
    }
    c.randomized_positions_max = 16;
    EXPECT_NO_THROW(c.validate());
    c = zoo_config("rope");  // no table: any range
    c.randomized_positions_max = 1000;
    EXPECT_NO_THROW(c.validate());
    c.randomized_positions_max = -1;
    EXPECT_THROW(c.validate(), std::invalid_argument);
}

// Off by default, and then absent from the config text (checkpoints, the store), so every
// stored run keeps its text and identity; set, it enters and reads back.
TEST(RandomizedPositions, OffByDefaultAndOutOfTheConfigText) {
    PretrainConfig c;
    c.model = make_model_config("rope", "tiny");
    EXPECT_EQ(c.model.randomized_positions_max, 0);
    EXPECT_EQ(config_to_text(c).find("randomized_positions_max"), std::string::npos);
    c.model.randomized_positions_max = 512;
    const std::string text = config_to_text(c);
    EXPECT_NE(text.find("model.randomized_positions_max = 512\n"), std::string::npos);
    EXPECT_EQ(parse_config_text(text).model.randomized_positions_max, 512);
}

// ---- RoPE scaling at evaluation -----------------------------------------------------------------

// theta_i' against the papers' closed forms at r = 8, base 10^4, s = 4, L = 64.
TEST(RopeScaling, FrequenciesMatchTheirClosedForms) {
    const int64_t r = 8;
    const double base = 1e4, s = 4;
    auto theta = [&](int64_t i) { return std::pow(base, -2.0 * i / r); };
    auto at = [&](RopeScaling::Method m) {
        RopeScaling sc;
        sc.method = m, sc.factor = s, sc.original_length = 64;
        return rope_frequencies(r, base, sc);
    };
    const auto none = at(RopeScaling::Method::kNone), pi = at(RopeScaling::Method::kInterpolation);
    const auto ntk = at(RopeScaling::Method::kNtk), yarn = at(RopeScaling::Method::kYarn);
    ASSERT_EQ(none.size(0), 4);
    const double ntk_base = base * std::pow(s, 8.0 / 6.0);
    for (int64_t i = 0; i < 4; ++i) {
        EXPECT_DOUBLE_EQ(none[i].item<double>(), theta(i));
        EXPECT_DOUBLE_EQ(pi[i].item<double>(), theta(i) / s);  // Chen et al. 2023
        EXPECT_NEAR(ntk[i].item<double>(), std::pow(ntk_base, -2.0 * i / r), 1e-15);
        // YaRN sec. 3.2: rotations over L = 64 tokens, ramp from 1 to 32.
        const double rho = 64 * theta(i) / (2 * std::acos(-1.0));
        const double gamma = std::clamp((rho - 1) / 31, 0.0, 1.0);
        EXPECT_NEAR(yarn[i].item<double>(), (1 - gamma) * theta(i) / s + gamma * theta(i), 1e-15);
    }
    // NTK-aware keeps the highest frequency and divides the lowest by exactly s.
    EXPECT_DOUBLE_EQ(ntk[0].item<double>(), 1.0);
    EXPECT_NEAR(ntk[3].item<double>(), theta(3) / s, 1e-15);
    // YaRN at L = 64: pair 0 turns 10 times (ramp), pair 3 0.01 times (interpolated).
    EXPECT_GT(yarn[0].item<double>(), theta(0) / s);
    EXPECT_LT(yarn[0].item<double>(), theta(0));
    EXPECT_DOUBLE_EQ(yarn[3].item<double>(), theta(3) / s);
    RopeScaling y;
    y.method = RopeScaling::Method::kYarn, y.factor = s, y.original_length = 64;
    EXPECT_DOUBLE_EQ(rope_logit_scale(y), std::pow(0.1 * std::log(4.0) + 1, 2));
    y.factor = 1;
    EXPECT_TRUE(torch::allclose(rope_frequencies(r, base, y), none, 0, 0));  // s = 1: plain
    EXPECT_EQ(rope_logit_scale(y), 1.0);
}

// The model's logits under a scaling are RoPE's formula with the scaled frequencies (and YaRN's
// temperature); NTK-aware equals plain RoPE's formula at the larger base. Reset, they are plain
// again.
TEST(RopeScaling, ModelLogitsUseTheScaledFrequencies) {
    auto c = zoo_config("rope");
    auto m = random_model<BertModel>(c, 28, torch::kDouble);
    auto x = ids(1, 9, 29);
    torch::NoGradGuard g;
    const auto plain = m->forward(x, {}, {}, true).attention_logits[0];
    for (auto method : {RopeScaling::Method::kInterpolation, RopeScaling::Method::kNtk,
                        RopeScaling::Method::kYarn}) {
        SCOPED_TRACE(rope_scaling_name(method));
        RopeScaling sc;
        sc.method = method, sc.factor = 3, sc.original_length = 4;
        m->position->set_rope_scaling(sc);
        auto got = m->forward(x, {}, {}, true).attention_logits[0];
        ReferencePositions at;
        auto theta = rope_frequencies(8, c.rope_base, sc);
        at.rope_theta = std::vector<double>(theta.data_ptr<double>(), theta.data_ptr<double>() + 4);
        at.logit_scale = rope_logit_scale(sc);
        auto want = reference_logits(m, c, x, at);
        EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10))
            << "max |diff| " << (got - want).abs().max().item<double>();
        EXPECT_GT((got - plain).abs().max().item<double>(), 1e-3);
        if (method == RopeScaling::Method::kNtk) {
            auto wider = c;
            wider.rope_base = c.rope_base * std::pow(3.0, 8.0 / 6.0);
            EXPECT_TRUE(torch::allclose(got, reference_logits(m, wider, x), 1e-10, 1e-10));
        }
    }
    m->position->set_rope_scaling({});
    EXPECT_TRUE(torch::equal(m->forward(x, {}, {}, true).attention_logits[0], plain));
}

TEST(RopeScaling, RefusedWhereItHasNoMeaning) {
    RopeScaling pi;
    pi.method = RopeScaling::Method::kInterpolation, pi.factor = 2;
    BertModel alibi(zoo_config("alibi"));
    EXPECT_THROW(alibi->position->set_rope_scaling(pi), std::invalid_argument);
    EXPECT_NO_THROW(alibi->position->set_rope_scaling({}));
    BertModel rope(zoo_config("rope"));
    pi.factor = 0.5;
    EXPECT_THROW(rope->position->set_rope_scaling(pi), std::invalid_argument);
    RopeScaling yarn;
    yarn.method = RopeScaling::Method::kYarn, yarn.factor = 2;  // no training length
    EXPECT_THROW(rope->position->set_rope_scaling(yarn), std::invalid_argument);
    RopeScaling ntk;
    ntk.method = RopeScaling::Method::kNtk, ntk.factor = 2;
    EXPECT_THROW(rope_frequencies(2, 1e4, ntk), std::invalid_argument);  // r / (r - 2)
    EXPECT_EQ(parse_rope_scaling("yarn"), RopeScaling::Method::kYarn);
    EXPECT_EQ(rope_scaling_name(RopeScaling::Method::kInterpolation), "pi");
    EXPECT_THROW(parse_rope_scaling("linear"), std::invalid_argument);
}
