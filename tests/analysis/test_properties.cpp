// Tests of the positional properties (analysis/properties.h) and the order probe
// (analysis/order_probe.h): each map property on hand-made matrices with known answers (a pure
// Toeplitz map has translation invariance 1, a symmetric band symmetry 1, a row-constant map
// monotonicity 0, ...), then the probe on tiny randomised models, where the schemes' own
// structure is the answer: NoPE has no positional part, T5's and TUPE's layer-0 Delta_pos is
// exactly their static bias, ALiBi's is a symmetric, monotone Toeplitz map; and the order
// probe leaves a NoPE model's loss unchanged while it moves BERT-A's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "analysis/analyze.h"
#include "analysis/order_probe.h"
#include "analysis/properties.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "engine/position.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"
#include "support/torch_support.h"

namespace {

constexpr int64_t kPropertiesMaxPositions = 64;
constexpr int64_t kLength = 24;

torch::Tensor index_grid(int64_t n, bool rows) {
    auto idx = torch::arange(n, torch::kDouble);
    return rows ? idx.view({n, 1}).expand({n, n}) : idx.view({1, n}).expand({n, n});
}

// (n, n) maps with known properties.
torch::Tensor toeplitz_map(int64_t n) {  // phi(i, j) = g(j - i), g neither even nor monotone
    auto k = index_grid(n, false) - index_grid(n, true);
    return torch::sin(0.7 * k) + 0.1 * k;
}
torch::Tensor symmetric_band(int64_t n) {  // phi(i, j) = -|i - j|
    return -(index_grid(n, false) - index_grid(n, true)).abs();
}
torch::Tensor row_constant(int64_t n) {  // phi(i, j) = c_i
    return torch::cos(index_grid(n, true));
}

std::vector<int64_t> properties_stream(int64_t n = 400) {
    return test_support::word_stream(n, 11, false);
}

engine::BertForMaskedLM properties_model(const std::string& preset, uint64_t seed = 3) {
    return test_support::randomized_word_model(preset, kPropertiesMaxPositions, seed);
}

analysis::PropertiesReport probe(engine::BertForMaskedLM& model, int64_t windows = 6) {
    analysis::PropertiesOptions o;
    o.length = kLength;
    o.windows = windows;
    o.batch_size = 4;  // two batches
    o.source = "test-stream";
    return analysis::measure_properties(model, properties_stream(), test_support::word_vocab(), o);
}

}  // namespace

// ---- map properties
// -------------------------------------------------------------------------------

TEST(MapProperties, ToeplitzMapIsTranslationInvariantWithNoResidual) {
    const auto phi = toeplitz_map(12);
    EXPECT_NEAR(analysis::translation_invariance(phi), 1.0, 1e-12);
    EXPECT_NEAR(analysis::toeplitz_residual(phi), 0.0, 1e-12);
    EXPECT_TRUE(torch::allclose(analysis::toeplitz_fit(phi), phi, 0, 1e-12));
    const auto s = analysis::toeplitz_spectrum(phi);
    ASSERT_EQ(s.sizes(), (std::vector<int64_t>{3, 12}));
    EXPECT_LT(s[2].max().item<double>(), 1e-10);  // the residual is zero
    EXPECT_TRUE(torch::allclose(s[0], s[1], 0, 1e-10));
}

TEST(MapProperties, ToeplitzFitIsTheMeanOfEachDiagonal) {
    auto phi = torch::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}, {7.0, 8.0, 9.0}}, torch::kDouble);
    auto fit = analysis::toeplitz_fit(phi);
    // Main diagonal (1 + 5 + 9) / 3 = 5; j - i = 1: (2 + 6) / 2 = 4; j - i = -1: (4 + 8) / 2 = 6.
    EXPECT_DOUBLE_EQ(fit[0][0].item<double>(), 5.0);
    EXPECT_DOUBLE_EQ(fit[1][2].item<double>(), 4.0);
    EXPECT_DOUBLE_EQ(fit[2][1].item<double>(), 6.0);
    EXPECT_DOUBLE_EQ(fit[0][2].item<double>(), 3.0);
    EXPECT_DOUBLE_EQ(fit[2][0].item<double>(), 7.0);
    // Outer product u v^T: not Toeplitz, so some variance is left.
    auto u = torch::arange(1, 7, torch::kDouble);
    auto outer = torch::outer(u, u.pow(2));
    const double ti = analysis::translation_invariance(outer);
    EXPECT_GT(ti, 0.0);
    EXPECT_LT(ti, 1.0);
    EXPECT_EQ(analysis::energy_rank(torch::linalg_svdvals(outer)), 1);  // rank one
    EXPECT_TRUE(std::isnan(analysis::translation_invariance(torch::ones({5, 5}))));
}

TEST(MapProperties, SymmetricBandHasSymmetryOneAndMonotonicityOne) {
    const auto band = symmetric_band(10);
    EXPECT_NEAR(analysis::mirror_symmetry(band), 1.0, 1e-12);
    const auto m = analysis::monotonicity(band, 4);
    EXPECT_NEAR(m.left, 1.0, 1e-12);
    EXPECT_NEAR(m.right, 1.0, 1e-12);
    // Its negation prefers far keys: -1 on both sides, still symmetric.
    const auto far = analysis::monotonicity(-band, 4);
    EXPECT_NEAR(far.left, -1.0, 1e-12);
    EXPECT_NEAR(far.right, -1.0, 1e-12);
    // phi(i, j) = j - i: the right side rises with the offset, the left falls: symmetry -1.
    auto skew = index_grid(10, false) - index_grid(10, true);
    EXPECT_NEAR(analysis::mirror_symmetry(skew), -1.0, 1e-12);
    const auto ms = analysis::monotonicity(skew, 4);
    EXPECT_NEAR(ms.left, 1.0, 1e-12);    // keys to the left: nearer = larger (less negative)
    EXPECT_NEAR(ms.right, -1.0, 1e-12);  // keys to the right: nearer = smaller
}

TEST(MapProperties, RowConstantMapHasMonotonicityZeroAndNoPositionalShare) {
    const auto flat = row_constant(9);
    const auto m = analysis::monotonicity(flat, 8);
    EXPECT_EQ(m.left, 0.0);
    EXPECT_EQ(m.right, 0.0);
    // Softmax ignores a per-row constant: its share of any logit's variance is 0.
    const auto total = toeplitz_map(9);
    EXPECT_NEAR(analysis::variance_share(flat, total + flat), 0.0, 1e-20);
    EXPECT_NEAR(analysis::variance_share(total, total), 1.0, 1e-12);
    EXPECT_NEAR(analysis::variance_share(0.5 * total, total), 0.25, 1e-12);
    EXPECT_TRUE(std::isnan(analysis::variance_share(flat, flat)));
    // No side has 3 keys within a window of 2.
    EXPECT_TRUE(std::isnan(analysis::monotonicity(flat, 2).left));
}

TEST(MapProperties, LocalityOfIdentityIsOneAndOfUniformRowsIsKnown) {
    EXPECT_NEAR(analysis::locality(torch::eye(7, torch::kDouble)), 1.0, 1e-12);
    // Uniform rows of n = 3: rows sum 2^-|i-j| / 3: (1 + .5 + .25), (.5 + 1 + .5), (.25 + .5 + 1).
    const double expected = (1.75 + 2.0 + 1.75) / 9.0;
    EXPECT_NEAR(analysis::locality(torch::full({3, 3}, 1.0 / 3, torch::kDouble)), expected, 1e-12);
    // The previous token only: 2^-1 in every row but the first (itself).
    auto previous = torch::zeros({4, 4}, torch::kDouble);
    previous[0][0] = 1;
    for (int i = 1; i < 4; ++i) previous[i][i - 1] = 1;
    EXPECT_NEAR(analysis::locality(previous), (1.0 + 3 * 0.5) / 4, 1e-12);
}

TEST(MapProperties, EnergyRankCountsSingularValues) {
    EXPECT_EQ(analysis::energy_rank(torch::tensor({3.0, 1.0, 0.0}, torch::kDouble), 0.9), 1);
    EXPECT_EQ(analysis::energy_rank(torch::tensor({1.0, 1.0, 1.0, 1.0}, torch::kDouble), 0.9), 4);
    EXPECT_EQ(analysis::energy_rank(torch::zeros({3}, torch::kDouble)), 0);
}

TEST(MapProperties, RejectsNonSquareMaps) {
    EXPECT_THROW(analysis::translation_invariance(torch::zeros({3, 4})), std::invalid_argument);
    EXPECT_THROW(analysis::monotonicity(torch::zeros({3, 3}), 0), std::invalid_argument);
}

// ---- the probe on models
// ----------------------------------------------------------------------------

TEST(PropertiesProbe, NopeHasNoPositionalPart) {
    auto model = properties_model("nope");
    const auto r = probe(model);
    EXPECT_EQ(r.windows, 6);
    EXPECT_EQ(r.static_source, "");
    ASSERT_EQ(r.layers.size(), 2u);
    for (const auto& layer : r.layers) {
        EXPECT_EQ(layer.delta.abs().max().item<double>(), 0.0);
        for (const auto& h : layer.heads) {
            EXPECT_EQ(h.positional_share, 0.0);
            EXPECT_TRUE(std::isnan(h.static_share));
            EXPECT_EQ(h.rank90, 0.0);
            EXPECT_GT(h.locality, 0.0);
        }
    }
}

TEST(PropertiesProbe, StaticBiasSchemesHaveLayerZeroDeltaEqualToTheirBias) {
    // T5, ALiBi and TUPE add positions only through the static bias: at layer 0, Delta_pos is
    // exactly that bias (what the constant-position pass leaves is the bias at distance 0, a
    // per-row constant for T5/ALiBi and the [CLS] reset for TUPE, which the maps leave out).
    for (const std::string preset : {"t5", "alibi", "tupe-a"}) {
        SCOPED_TRACE(preset);
        auto model = properties_model(preset);
        const auto r = probe(model);
        EXPECT_EQ(r.static_source, "bias");
        const auto& l0 = r.layers[0];
        ASSERT_TRUE(l0.static_term.defined());
        ASSERT_EQ(l0.delta.sizes(), l0.static_term.sizes());
        // Delta at the true positions minus a constant: the same up to a per-row constant.
        auto d = l0.delta.to(torch::kDouble), s = l0.static_term.to(torch::kDouble);
        auto dc = d - d.mean(-1, true), sc = s - s.mean(-1, true);
        EXPECT_LT((dc - sc).abs().max().item<double>(), 1e-5);
        for (const auto& h : l0.heads) {
            EXPECT_NEAR(h.positional_share, h.static_share, 1e-6);
            EXPECT_GT(h.positional_share, 0.0);
        }
        if (preset != "tupe-a") {  // T5 and ALiBi depend on j - i only
            for (const auto& h : l0.heads) EXPECT_NEAR(h.translation_invariance, 1.0, 1e-9);
        }
        if (preset == "alibi") {  // -m |i - j|: symmetric and monotone
            for (const auto& h : l0.heads) {
                EXPECT_NEAR(h.symmetry, 1.0, 1e-9);
                EXPECT_NEAR(h.monotonicity_left, 1.0, 1e-9);
                EXPECT_NEAR(h.monotonicity_right, 1.0, 1e-9);
                EXPECT_NEAR(h.toeplitz_residual, 0.0, 1e-9);
            }
        }
    }
}

TEST(PropertiesProbe, EveryPresetGivesFiniteNumbersAndRestoresTheModel) {
    for (const auto& preset : engine::model_presets()) {
        SCOPED_TRACE(preset);
        auto model = properties_model(preset);
        model->train();
        const auto r = probe(model, 3);
        EXPECT_TRUE(model->is_training());
        EXPECT_FALSE(model->bert->position->constant_positions());
        ASSERT_EQ(r.layers.size(), 2u);
        const auto overall = r.overall();
        ASSERT_EQ(overall.size(), analysis::property_names().size());
        for (const auto& layer : r.layers) {
            ASSERT_EQ(layer.heads.size(), 2u);
            EXPECT_EQ(layer.spectrum.sizes(), (std::vector<int64_t>{2, 3, kLength - 1}));
            for (const auto& h : layer.heads) {
                EXPECT_TRUE(std::isfinite(h.positional_share));
                EXPECT_GE(h.positional_share, 0.0);
                EXPECT_TRUE(std::isfinite(h.locality));
                EXPECT_TRUE(std::isfinite(h.entropy));
            }
        }
        if (preset != "nope") {
            double share = 0;
            for (const auto& layer : r.layers) share += layer.mean.positional_share;
            EXPECT_GT(share, 0.0) << "positions must change the logits";
        }
        if (preset == "bert-a" || preset == "sinusoidal") {
            EXPECT_EQ(r.static_source, "table");
            ASSERT_TRUE(r.table_similarity.defined());
            EXPECT_NEAR(r.table_similarity[0][0].item<double>(), 1.0, 1e-5);
        }
    }
}

TEST(PropertiesProbe, ShortStreamIsAnInputErrorNamingTheSource) {
    auto model = properties_model("bert-a");
    analysis::PropertiesOptions o;
    o.length = kLength;
    o.source = "short.txt";
    try {
        analysis::measure_properties(model, {5, 6, 7}, test_support::word_vocab(), o);
        FAIL() << "expected an InputError";
    } catch (const engine::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("short.txt"), std::string::npos) << e.what();
    }
}

// ---- the order probe ----------------------------------------------------------------------------

TEST(OrderProbe, PermutationsArePermutationsThatKeepNgramsIntact) {
    const auto p = analysis::ngram_shuffle(10, 3, 7);
    ASSERT_EQ(p.size(), 10u);
    EXPECT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), 10u);
    // Every n-gram (0-2, 3-5, 6-8, 9) appears as a consecutive run in order.
    for (size_t t = 0; t + 1 < p.size(); ++t)
        if (p[t] % 3 != 2 && p[t] != 9) EXPECT_EQ(p[t + 1], p[t] + 1) << "at " << t;
    EXPECT_NE(analysis::ngram_shuffle(40, 1, 7), analysis::ngram_shuffle(40, 1, 8));
    const auto same = analysis::adjacent_swaps(10, 0, 1);
    for (int64_t t = 0; t < 10; ++t) EXPECT_EQ(same[static_cast<size_t>(t)], t);
    const auto one = analysis::adjacent_swaps(10, 1, 1);
    int moved = 0;
    for (int64_t t = 0; t < 10; ++t) moved += one[static_cast<size_t>(t)] != t;
    EXPECT_EQ(moved, 2);
}

TEST(OrderProbe, NopeLossDoesNotChangeAndBertADoes) {
    analysis::OrderProbeOptions o;
    o.length = kLength;
    o.windows = 8;
    o.batch_size = 3;
    o.source = "test-stream";
    auto nope = properties_model("nope");
    const auto r = analysis::order_probe(nope, properties_stream(), test_support::word_vocab(), o);
    EXPECT_EQ(r.rows.size(), o.ngrams.size() + o.swaps.size());
    EXPECT_GT(r.masked, 0);
    for (const auto& row : r.rows) EXPECT_NEAR(row.change, 0.0, 1e-9) << row.kind << " " << row.n;
    auto bert = properties_model("bert-a");
    const auto b = analysis::order_probe(bert, properties_stream(), test_support::word_vocab(), o);
    EXPECT_EQ(b.masked, r.masked);                // the same masked tokens
    EXPECT_GT(std::abs(b.rows[0].change), 1e-6);  // a full shuffle moves a model with positions
}

TEST(OrderProbe, AnalyzeWritesPropertiesAndTheOrderProbe) {
    test_support::TempDir dir("tupe_properties_analyze");
    auto model = properties_model("tupe-a");
    const engine::WordPieceTokenizer tokenizer(test_support::word_vocab());
    std::vector<std::string> sentences(12,
                                       "the cat sat on the mat . a red dog ran near the old bird");
    analysis::AnalyzeOptions options;
    options.order_probe = true;
    options.property_options.length = kLength;
    const auto out = analysis::analyze_model(model, tokenizer, sentences, options);
    ASSERT_TRUE(out.properties.has_value());
    ASSERT_TRUE(out.order.has_value());
    const auto entries = analysis::write_analysis(out, dir.path().string());
    int property = 0, delta = 0, spectrum = 0, order = 0;
    for (const auto& e : entries) {
        property += e.what == "property";
        delta += e.what == "delta_pos";
        spectrum += e.what == "spectrum";
        order += e.what == "order_probe";
        if (e.what == "property") {
            EXPECT_EQ(e.statistics.size(), analysis::property_names().size());
        }
    }
    EXPECT_EQ(property, 2 * 3);  // 2 layers x (2 heads + their mean)
    EXPECT_EQ(delta, 2 * 2);
    EXPECT_EQ(spectrum, 2);
    EXPECT_EQ(order, 1);
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "properties" / "properties.csv"));
}
