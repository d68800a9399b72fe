// Fused training kernels (engine/fused_train_ops.h) against their unfused LibTorch compositions:
// the MLM cross-entropy, bias + GELU and residual + LayerNorm; values and gradients in fp32 and
// bf16, odd widths (not a multiple of 8 lanes), a single row, T = 1, ignored targets, a tiny
// BertForMaskedLM whose loss and gradients agree with the kernels on and off; the vectorised
// AdamW step with the clip scale folded in against clip_grad_norm_ then torch's step, and the
// vectorised dropout draw against the scalar Philox stream.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "../../engine/src/optim_util.h"
#include "engine/bert.h"
#include "engine/fused_train_ops.h"
#include "support/test_support.h"
#include "support/torch_support.h"

using namespace engine;

namespace {

double max_abs_of(const torch::Tensor& t) {
    return t.numel() ? t.abs().max().to(torch::kDouble).item<double>() : 0.0;
}

double max_diff_of(const torch::Tensor& a, const torch::Tensor& b) {
    return max_abs_of(a.to(torch::kDouble) - b.to(torch::kDouble));
}

// A leaf with the same values.
torch::Tensor leaf(const torch::Tensor& t) { return t.detach().clone().requires_grad_(true); }

// Whether the autograd graph behind `t` holds a node whose name contains `name`.
bool graph_has_node(const torch::Tensor& t, const std::string& name) {
    std::vector<torch::autograd::Node*> todo{t.grad_fn().get()};
    std::vector<torch::autograd::Node*> seen;
    while (!todo.empty()) {
        auto* node = todo.back();
        todo.pop_back();
        if (!node || std::find(seen.begin(), seen.end(), node) != seen.end()) continue;
        seen.push_back(node);
        if (node->name().find(name) != std::string::npos) return true;
        for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
    }
    return false;
}

// Sets the fused-kernel switch for the guard's lifetime and restores it after, so these tests
// check the kernels also when the environment runs the suite with TUPE_FUSED_TRAINING=0.
struct FusedTrainingAs {
    explicit FusedTrainingAs(bool on) : before(fused_training_enabled()) {
        set_fused_training_enabled(on);
    }
    ~FusedTrainingAs() { set_fused_training_enabled(before); }
    FusedTrainingAs(const FusedTrainingAs&) = delete;
    FusedTrainingAs& operator=(const FusedTrainingAs&) = delete;
    bool before;
};

// ---- cross-entropy ----------------------------------------------------------------------------

// Logits spread 3 (a peaked softmax), targets in [0, V) with every third row ignored if asked.
struct CeCase {
    torch::Tensor logits, targets;
};

CeCase make_ce(int64_t M, int64_t V, bool ignore_some, torch::ScalarType type = torch::kFloat) {
    torch::manual_seed(17);
    CeCase c;
    c.logits = (torch::randn({M, V}) * 3).to(type);
    c.targets = torch::randint(0, V, {M}, torch::kLong);
    if (ignore_some)
        for (int64_t r = 1; r < M; r += 3) c.targets[r] = -100;
    return c;
}

struct CeOutcome {
    torch::Tensor loss, grad;
};

CeOutcome run_ce(const CeCase& c, bool fused) {
    auto x = leaf(c.logits);
    CeOutcome o;
    o.loss = fused ? fused_cross_entropy(x, c.targets) : unfused_cross_entropy(x, c.targets);
    (o.loss * 0.7).backward();
    o.grad = x.grad();
    return o;
}

TEST(FusedCrossEntropy, MatchesCompositionFp32) {
    FusedTrainingAs on(true);
    // (M, V): odd widths, a single row, a single class, the MLM head's width.
    for (auto [M, V] : std::vector<std::pair<int64_t, int64_t>>{
             {7, 37}, {1, 8}, {1, 1}, {5, 3}, {12, 800}, {3, 8000}}) {
        for (bool ignore : {false, true}) {
            const auto c = make_ce(M, V, ignore);
            const auto f = run_ce(c, true), u = run_ce(c, false);
            const std::string what = std::to_string(M) + "x" + std::to_string(V);
            EXPECT_TRUE(graph_has_node(f.loss, "CrossEntropyFunction")) << what;
            EXPECT_EQ(f.loss.scalar_type(), torch::kFloat) << what;
            EXPECT_EQ(f.loss.dim(), 0) << what;
            EXPECT_LE(max_diff_of(f.loss, u.loss), 1e-5) << what;
            EXPECT_LE(max_diff_of(f.grad, u.grad), 1e-5) << what;
        }
    }
}

TEST(FusedCrossEntropy, IgnoredRowsGetNoGradientAndAllIgnoredIsNan) {
    FusedTrainingAs on(true);
    auto c = make_ce(6, 19, true);
    const auto f = run_ce(c, true);
    for (int64_t r = 1; r < 6; r += 3) EXPECT_EQ(max_abs_of(f.grad[r]), 0.0) << r;
    EXPECT_GT(max_abs_of(f.grad[0]), 0.0);
    c.targets.fill_(-100);
    const auto all = run_ce(c, true), ref = run_ce(c, false);
    EXPECT_TRUE(std::isnan(all.loss.item<double>()));
    EXPECT_TRUE(std::isnan(ref.loss.item<double>()));
    EXPECT_EQ(max_abs_of(all.grad), 0.0);
}

TEST(FusedCrossEntropy, Bf16LogitsMatchTheUpcastComposition) {
    FusedTrainingAs on(true);
    // bf16 logits: both sides read the same bf16 values and compute in fp32, so the loss agrees
    // to fp32 rounding; the bf16 gradients differ by at most one bf16 rounding (2^-8 relative).
    const auto c = make_ce(9, 61, true, torch::kBFloat16);
    const auto f = run_ce(c, true), u = run_ce(c, false);
    EXPECT_EQ(f.grad.scalar_type(), torch::kBFloat16);
    EXPECT_LE(max_diff_of(f.loss, u.loss), 1e-5);
    EXPECT_LE(max_diff_of(f.grad, u.grad), max_abs_of(u.grad) / 128);
}

TEST(FusedCrossEntropy, OutOfRangeTargetThrowsAndOtherTypesFallBack) {
    FusedTrainingAs on(true);
    auto c = make_ce(3, 5, false);
    c.targets[1] = 5;
    EXPECT_THROW(fused_cross_entropy(c.logits, c.targets), c10::Error);
    const auto d = make_ce(3, 5, false, torch::kDouble);
    auto loss = fused_cross_entropy(leaf(d.logits), d.targets);
    EXPECT_FALSE(graph_has_node(loss, "CrossEntropyFunction"));
    EXPECT_EQ(loss.scalar_type(), torch::kDouble);
    const auto e = make_ce(3, 5, false);
    FusedTrainingAs off(false);
    EXPECT_FALSE(
        graph_has_node(fused_cross_entropy(leaf(e.logits), e.targets), "CrossEntropyFunction"));
}

// ---- bias + GELU ------------------------------------------------------------------------------

struct Grads {
    torch::Tensor y, gx, gb;
};

Grads run_bias_gelu(const torch::Tensor& x0, const torch::Tensor& b0, bool fused) {
    auto x = leaf(x0);
    torch::Tensor b = b0.defined() ? leaf(b0) : torch::Tensor();
    Grads g;
    g.y = fused ? fused_bias_gelu(x, b) : unfused_bias_gelu(x, b);
    torch::manual_seed(3);
    g.y.backward(torch::randn(g.y.sizes()).to(g.y.scalar_type()));
    g.gx = x.grad();
    if (b.defined()) g.gb = b.grad();
    return g;
}

TEST(FusedBiasGelu, MatchesCompositionFp32) {
    FusedTrainingAs on(true);
    // Widths 37 and 5 (lane tails), 256 (the quickstart's FFN), one row, T = 1, no bias.
    for (auto shape :
         std::vector<std::vector<int64_t>>{{3, 5, 37}, {1, 1, 8}, {2, 1, 5}, {4, 256}, {1, 3}}) {
        for (bool with_bias : {true, false}) {
            torch::manual_seed(9);
            auto x = torch::randn(shape) * 3;  // reaches GELU's tails on both sides
            auto b = with_bias ? torch::randn({shape.back()}) : torch::Tensor();
            const auto f = run_bias_gelu(x, b, true), u = run_bias_gelu(x, b, false);
            const std::string what = std::to_string(x.numel()) + (with_bias ? " bias" : "");
            EXPECT_TRUE(graph_has_node(f.y, "BiasGeluFunction")) << what;
            EXPECT_LE(max_diff_of(f.y, u.y), 1e-5) << what;
            EXPECT_LE(max_diff_of(f.gx, u.gx), 1e-5) << what;
            if (with_bias) EXPECT_LE(max_diff_of(f.gb, u.gb), 1e-5) << what;
        }
    }
}

TEST(FusedBiasGelu, Bf16InputWithFp32Bias) {
    FusedTrainingAs on(true);
    // As under autocast: a bf16 matmul result and the fp32 parameter. Output and grad_x bf16
    // (one bf16 rounding apart from the composition's); grad_bias fp32, summed in fp32 here and
    // from bf16 row gradients in the composition: within 1% of its largest entry.
    torch::manual_seed(10);
    auto x = (torch::randn({6, 40}) * 2).to(torch::kBFloat16);
    auto b = torch::randn({40});
    const auto f = run_bias_gelu(x, b, true), u = run_bias_gelu(x, b, false);
    EXPECT_EQ(f.y.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(f.gb.scalar_type(), torch::kFloat);
    EXPECT_LE(max_diff_of(f.y, u.y), max_abs_of(u.y) / 128);
    EXPECT_LE(max_diff_of(f.gx, u.gx), max_abs_of(u.gx) / 128);
    EXPECT_LE(max_diff_of(f.gb, u.gb), max_abs_of(u.gb) / 100);
}

// ---- residual + LayerNorm ---------------------------------------------------------------------

struct NormGrads {
    torch::Tensor y, gx, gr, gw, gb;
};

NormGrads run_residual_norm(const torch::Tensor& x0, const torch::Tensor& r0,
                            const torch::Tensor& w0, const torch::Tensor& b0, bool fused) {
    auto x = leaf(x0), r = leaf(r0), w = leaf(w0), b = leaf(b0);
    NormGrads g;
    g.y = fused ? fused_residual_layer_norm(x, r, w, b, 1e-12)
                : unfused_residual_layer_norm(x, r, w, b, 1e-12);
    torch::manual_seed(4);
    g.y.backward(torch::randn(g.y.sizes()));
    g.gx = x.grad();
    g.gr = r.grad();
    g.gw = w.grad();
    g.gb = b.grad();
    return g;
}

TEST(FusedResidualLayerNorm, MatchesCompositionFp32) {
    FusedTrainingAs on(true);
    // C = 64 (the quickstart's), 7 and 13 (lane tails), one row, T = 1.
    for (auto shape :
         std::vector<std::vector<int64_t>>{{2, 3, 64}, {1, 1, 7}, {5, 13}, {1, 64}, {40, 16}}) {
        torch::manual_seed(12);
        const int64_t C = shape.back();
        auto x = torch::randn(shape) * 2, r = torch::randn(shape) + 0.5;
        auto w = torch::randn({C}) + 1, b = torch::randn({C});
        const auto f = run_residual_norm(x, r, w, b, true);
        const auto u = run_residual_norm(x, r, w, b, false);
        const std::string what = std::to_string(x.numel()) + "/" + std::to_string(C);
        EXPECT_TRUE(graph_has_node(f.y, "ResidualNormFunction")) << what;
        EXPECT_LE(max_diff_of(f.y, u.y), 1e-5) << what;
        EXPECT_LE(max_diff_of(f.gx, u.gx), 1e-5) << what;
        EXPECT_LE(max_diff_of(f.gr, u.gr), 1e-5) << what;
        EXPECT_LE(max_diff_of(f.gw, u.gw), 1e-5) << what;
        EXPECT_LE(max_diff_of(f.gb, u.gb), 1e-5) << what;
    }
}

TEST(FusedResidualLayerNorm, Bf16SublayerOutputAndFp32Residual) {
    FusedTrainingAs on(true);
    // As under autocast: the dense output bf16, the residual fp32; the sum is exact in fp32 on
    // both sides, so values and the fp32 gradients agree to 1e-5; grad_x is rounded to bf16.
    torch::manual_seed(13);
    auto x = (torch::randn({4, 3, 24}) * 2).to(torch::kBFloat16), r = torch::randn({4, 3, 24});
    auto w = torch::randn({24}) + 1, b = torch::randn({24});
    const auto f = run_residual_norm(x, r, w, b, true);
    const auto u = run_residual_norm(x, r, w, b, false);
    EXPECT_EQ(f.y.scalar_type(), torch::kFloat);
    EXPECT_EQ(f.gx.scalar_type(), torch::kBFloat16);
    EXPECT_LE(max_diff_of(f.y, u.y), 1e-5);
    EXPECT_LE(max_diff_of(f.gr, u.gr), 1e-5);
    EXPECT_LE(max_diff_of(f.gw, u.gw), 1e-5);
    EXPECT_LE(max_diff_of(f.gb, u.gb), 1e-5);
    EXPECT_LE(max_diff_of(f.gx, u.gx), max_abs_of(u.gx) / 128);
}

// ---- the clipped AdamW step ------------------------------------------------------------------

TEST(FusedAdamWClip, FoldedScaleEqualsClipThenStep) {
    FusedTrainingAs on(true);
    // Parameters of odd sizes (lane tails), one over a parallel block of 16,384 elements, one
    // without a gradient: fused_adamw_step with clip_grad_norm_'s coefficient folded into the
    // update (as mlm_train_step calls it) gives the weights of clip_grad_norm_ then torch's
    // AdamW step to 1e-6.
    torch::manual_seed(14);
    std::vector<std::vector<int64_t>> shapes{{37}, {5, 7}, {130, 129}, {1}, {3, 4}};
    std::vector<torch::Tensor> a, b;
    for (const auto& s : shapes) {
        a.push_back(torch::randn(s).requires_grad_(true));
        b.push_back(a.back().detach().clone().requires_grad_(true));
    }
    for (size_t i = 0; i + 1 < shapes.size(); ++i) {
        auto g = torch::randn(shapes[i]) * 0.3;
        a[i].mutable_grad() = g.clone();
        b[i].mutable_grad() = g.clone();
    }
    torch::optim::AdamW opt_a(a, torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
    torch::optim::AdamW opt_b(b, torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
    const double max_norm = 1.0;
    for (int step = 0; step < 2; ++step) {
        const double norm = torch::nn::utils::clip_grad_norm_(b, max_norm);
        ASSERT_GT(norm, max_norm) << "the test should clip";
        ASSERT_TRUE(
            engine::detail::fused_adamw_step(opt_a, std::min(1.0, max_norm / (norm + 1e-6))));
        opt_b.step();
        for (size_t i = 0; i < a.size(); ++i)
            EXPECT_LE(max_diff_of(a[i], b[i]), 1e-6) << "step " << step << " parameter " << i;
        for (size_t i = 0; i + 1 < shapes.size(); ++i) b[i].mutable_grad() = a[i].grad().clone();
    }
}

// ---- dropout's keep mask ---------------------------------------------------------------------

TEST(DropoutDraw, VectorPhiloxGivesTheScalarStream) {
    FusedTrainingAs on(true);
    // engine::dropout draws 8 Philox counters at a time: the same keep mask, bit for bit, as
    // one at::Philox4_32(seed, block, 0) per block of 4,096 elements called once per element.
    for (int64_t n : {1, 31, 33, 4096, 4097, 10000}) {
        for (double p : {0.1, 0.5}) {
            torch::manual_seed(n);
            const auto y = engine::dropout(torch::ones({n}), p, true);
            torch::manual_seed(n);
            uint64_t seed = 0;
            {
                auto gen = at::detail::getDefaultCPUGenerator();
                std::lock_guard<std::mutex> lock(gen.mutex());
                seed = gen.get<at::CPUGeneratorImpl>()->random64();
            }
            const auto threshold = static_cast<uint32_t>(p * 4294967296.0);
            const float scale = static_cast<float>(1.0 / (1.0 - p));
            auto expected = torch::empty({n});
            float* e = expected.data_ptr<float>();
            for (int64_t b = 0; b * 4096 < n; ++b) {
                at::Philox4_32 rng(seed, static_cast<uint64_t>(b), 0);
                for (int64_t i = b * 4096; i < std::min(n, (b + 1) * 4096); ++i)
                    e[i] = rng() >= threshold ? scale : 0.0f;
            }
            EXPECT_TRUE(torch::equal(y, expected)) << n << " " << p;
            FusedTrainingAs off(false);  // the scalar loop
            torch::manual_seed(n);
            EXPECT_TRUE(torch::equal(engine::dropout(torch::ones({n}), p, true), expected));
        }
    }
}

// ---- a whole model ------------------------------------------------------------------------------

TEST(FusedTraining, TinyMaskedLmSameLossAndGradients) {
    FusedTrainingAs on(true);
    // Hidden 16, FFN 32, 2 heads, 2 layers, no dropout; a padded batch with ignored positions.
    // The three kernels on vs off: the same loss and every parameter gradient to 1e-5.
    for (const std::string preset : {"bert-a", "tupe-a"}) {
        auto c = test_support::tiny16_config(preset, 40, 24, /*dropout=*/false);
        BertForMaskedLM m(c);
        test_support::randomize_parameters(*m, 21, 0.3, /*unit_layer_norm_gains=*/true);
        torch::manual_seed(4);
        const int64_t B = 3, T = 11;
        auto ids = torch::randint(5, 40, {B, T}, torch::kLong);
        auto mask = torch::ones({B, T}, torch::kLong);
        mask[1].slice(0, 8) = 0;
        auto labels = torch::full({B, T}, -100, torch::kLong);
        labels[0][2] = 7;
        labels[0][10] = 9;
        labels[1][4] = 12;
        labels[2][0] = 3;
        test_support::expect_switch_keeps_loss_and_gradients(
            m, ids, mask, labels, [](bool on) { set_fused_training_enabled(on); },
            [] { set_fused_training_enabled(true); },
            [&](const torch::Tensor& loss, bool fused) {
                EXPECT_EQ(graph_has_node(loss, "CrossEntropyFunction"), fused) << preset;
                EXPECT_EQ(graph_has_node(loss, "BiasGeluFunction"), fused) << preset;
                EXPECT_EQ(graph_has_node(loss, "ResidualNormFunction"), fused) << preset;
            },
            preset);
    }
}

}  // namespace
