// Fused attention softmax (engine/fused_ops.h) against the unfused LibTorch composition
// softmax(scores + bias + mask): values and gradients in fp32 and bf16, odd shapes, padding and
// fully padded rows, non-contiguous inputs, autocast dtypes, the double fallback, and a tiny
// BertForMaskedLM whose loss and gradients agree with the fused kernel on and off.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/fused_ops.h"
#include "support/test_support.h"
#include "support/torch_support.h"

using namespace engine;

namespace {

struct Inputs {
    torch::Tensor scores, bias, mask;  // (B, H, Tq, Tk), (H, Tq, Tk) or {}, (B, 1, 1, Tk) or {}
};

// Additive padding mask as BertModel builds it: 0 for tokens, -1e9 for padding.
torch::Tensor mask_bias_from(const torch::Tensor& attention_mask, torch::ScalarType type) {
    const int64_t B = attention_mask.size(0), T = attention_mask.size(1);
    return (1.0 - attention_mask.to(type)).view({B, 1, 1, T}) * -1e9;
}

// Random scores and bias (spread 2, so the softmax is far from uniform); the mask pads the
// last `pad` keys of batch row 0 (if any rows).
Inputs make_inputs(int64_t B, int64_t H, int64_t Tq, int64_t Tk, bool bias, bool mask,
                   int64_t pad = 2, torch::ScalarType type = torch::kFloat) {
    torch::manual_seed(11);
    Inputs in;
    in.scores = (torch::randn({B, H, Tq, Tk}) * 2).to(type).requires_grad_(true);
    if (bias) in.bias = (torch::randn({H, Tq, Tk}) * 2).to(type).requires_grad_(true);
    if (mask) {
        auto am = torch::ones({B, Tk}, torch::kLong);
        if (pad > 0 && pad < Tk) am[0].slice(0, Tk - pad) = 0;
        in.mask = mask_bias_from(am, torch::kFloat);
    }
    return in;
}

// Leaves with the same values, for the second path.
Inputs fresh_copy(const Inputs& in) {
    Inputs c;
    c.scores = in.scores.detach().clone().requires_grad_(in.scores.requires_grad());
    if (in.bias.defined())
        c.bias = in.bias.detach().clone().requires_grad_(in.bias.requires_grad());
    c.mask = in.mask;
    return c;
}

double max_abs(const torch::Tensor& t) {
    return t.numel() ? t.abs().max().to(torch::kDouble).item<double>() : 0.0;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
    return max_abs(a.to(torch::kDouble) - b.to(torch::kDouble));
}

struct Outcome {
    torch::Tensor probs, grad_scores, grad_bias;
};

// Forward, then backward with a fixed random upstream gradient.
Outcome run(const Inputs& in, bool fused) {
    Outcome r;
    r.probs = fused ? fused_attention_softmax(in.scores, in.bias, in.mask)
                    : unfused_attention_softmax(in.scores, in.bias, in.mask);
    torch::manual_seed(5);
    auto g = torch::randn(r.probs.sizes()).to(r.probs.scalar_type());
    r.probs.backward(g);
    r.grad_scores = in.scores.grad();
    if (in.bias.defined()) r.grad_bias = in.bias.grad();
    return r;
}

// Whether the autograd graph behind `t` holds the fused kernel's node.
bool graph_has_fused_node(const torch::Tensor& t) {
    std::vector<torch::autograd::Node*> todo{t.grad_fn().get()};
    std::vector<torch::autograd::Node*> seen;
    while (!todo.empty()) {
        auto* node = todo.back();
        todo.pop_back();
        if (!node || std::find(seen.begin(), seen.end(), node) != seen.end()) continue;
        seen.push_back(node);
        if (node->name().find("FusedAttentionSoftmax") != std::string::npos) return true;
        for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
    }
    return false;
}

void expect_fused_matches_unfused(const Inputs& in, double tol, const std::string& what) {
    auto a = fresh_copy(in), b = fresh_copy(in);
    const Outcome f = run(a, true), u = run(b, false);
    EXPECT_TRUE(graph_has_fused_node(f.probs)) << what;
    EXPECT_EQ(f.probs.scalar_type(), u.probs.scalar_type()) << what;
    EXPECT_LE(max_diff(f.probs, u.probs), tol) << what;
    ASSERT_TRUE(f.grad_scores.defined()) << what;
    EXPECT_EQ(f.grad_scores.scalar_type(), in.scores.scalar_type()) << what;
    EXPECT_LE(max_diff(f.grad_scores, u.grad_scores), tol) << what;
    if (in.bias.defined()) {
        ASSERT_TRUE(f.grad_bias.defined()) << what;
        EXPECT_EQ(f.grad_bias.sizes(), in.bias.sizes()) << what;
        EXPECT_LE(max_diff(f.grad_bias, u.grad_bias), tol) << what;
    }
}

// CPU autocast to bf16 for the guard's lifetime (the API was renamed in LibTorch 2.4).
struct CpuAutocast {
    CpuAutocast() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
        at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
        at::autocast::set_autocast_enabled(at::kCPU, true);
#else
        at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
        at::autocast::set_cpu_enabled(true);
#endif
    }
    ~CpuAutocast() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
        at::autocast::set_autocast_enabled(at::kCPU, false);
#else
        at::autocast::set_cpu_enabled(false);
#endif
        at::autocast::clear_cache();
    }
};

// Turns the fused kernel off for the guard's lifetime.
struct FusedOff {
    FusedOff() { set_fused_attention_enabled(false); }
    ~FusedOff() { set_fused_attention_enabled(true); }
};

}  // namespace

TEST(FusedAttentionSoftmax, MatchesUnfusedInFp32) {
    // T = 7 is all tail (8 or 16 lanes), 19 two full vectors and a tail, 64 full vectors only.
    for (int64_t T : {7, 19, 64})
        expect_fused_matches_unfused(make_inputs(3, 2, T, T, true, true), 1e-5,
                                     "T = " + std::to_string(T));
}

TEST(FusedAttentionSoftmax, SingleToken) {
    auto in = make_inputs(3, 2, 1, 1, true, true);
    expect_fused_matches_unfused(in, 1e-5, "T = 1");
    auto p = fused_attention_softmax(in.scores, in.bias, in.mask);
    EXPECT_TRUE(torch::equal(p.detach(), torch::ones({3, 2, 1, 1})));
}

TEST(FusedAttentionSoftmax, QueriesAndKeysOfDifferentLengths) {
    expect_fused_matches_unfused(make_inputs(2, 3, 5, 9, true, true), 1e-5, "Tq = 5, Tk = 9");
}

TEST(FusedAttentionSoftmax, WithoutBiasOrMask) {
    expect_fused_matches_unfused(make_inputs(3, 2, 7, 7, false, true), 1e-5, "no bias");
    expect_fused_matches_unfused(make_inputs(3, 2, 7, 7, true, false), 1e-5, "no mask");
    expect_fused_matches_unfused(make_inputs(3, 2, 7, 7, false, false), 1e-5, "neither");
}

TEST(FusedAttentionSoftmax, PaddedKeysGetZeroProbability) {
    auto in = make_inputs(3, 2, 9, 9, true, true, /*pad=*/3);
    expect_fused_matches_unfused(in, 1e-5, "3 padded keys");
    auto p = fused_attention_softmax(in.scores, in.bias, in.mask).detach();
    EXPECT_EQ(max_abs(p[0].slice(-1, 6)), 0.0);
    EXPECT_LE(max_abs(p.sum(-1) - 1), 1e-6);
}

TEST(FusedAttentionSoftmax, FullyPaddedRowsMatchTorchSoftmax) {
    // Batch row 1 is all padding: every entry is s + b - 1e9, which rounds alike in fp32, so
    // torch::softmax gives the uniform row; the fused kernel must give the same.
    for (int64_t T : {5, 20}) {
        auto in = make_inputs(2, 2, T, T, true, false);
        auto am = torch::ones({2, T}, torch::kLong);
        am[1] = 0;
        in.mask = mask_bias_from(am, torch::kFloat);
        expect_fused_matches_unfused(in, 1e-5, "T = " + std::to_string(T));
        auto f = fused_attention_softmax(in.scores, in.bias, in.mask).detach();
        auto u = unfused_attention_softmax(in.scores, in.bias, in.mask).detach();
        EXPECT_TRUE(torch::equal(f[1], u[1]));
        EXPECT_LE(max_abs(f[1] - 1.0 / double(T)), 1e-7);
    }
}

TEST(FusedAttentionSoftmax, NanScoreGivesANanRowAsTorchSoftmax) {
    auto in = make_inputs(2, 2, 11, 11, true, true);
    torch::Tensor scores = in.scores.detach().clone();
    scores[1][0][3][4] = std::numeric_limits<float>::quiet_NaN();
    auto f = fused_attention_softmax(scores, in.bias.detach(), in.mask);
    auto u = unfused_attention_softmax(scores, in.bias.detach(), in.mask);
    EXPECT_TRUE(torch::equal(f.isnan(), u.isnan()));
    EXPECT_TRUE(f[1][0][3].isnan().all().item<bool>());
    EXPECT_EQ(f.isnan().sum().item<int64_t>(), 11);
}

TEST(FusedAttentionSoftmax, NonContiguousInputs) {
    torch::manual_seed(3);
    Inputs in;
    // (B, H, Tk, Tq) transposed to (B, H, Tq, Tk); the bias a transposed (H, Tk, Tq); the mask a
    // strided slice of a wider one.
    in.scores = (torch::randn({3, 2, 11, 11}) * 2).requires_grad_(true);
    in.bias = (torch::randn({2, 11, 11}) * 2).requires_grad_(true);
    auto am = torch::ones({3, 22}, torch::kLong);
    am[2].slice(0, 14) = 0;
    auto wide = mask_bias_from(am, torch::kFloat);
    in.mask = wide.slice(-1, 0, 22, 2);  // (B, 1, 1, 11), stride 2
    ASSERT_FALSE(in.mask.is_contiguous());
    auto a = fresh_copy(in), b = fresh_copy(in);
    auto pf = fused_attention_softmax(a.scores.transpose(-2, -1), a.bias.transpose(-2, -1), a.mask);
    auto pu =
        unfused_attention_softmax(b.scores.transpose(-2, -1), b.bias.transpose(-2, -1), b.mask);
    EXPECT_TRUE(graph_has_fused_node(pf));
    EXPECT_LE(max_diff(pf, pu), 1e-5);
    // An expanded upstream gradient (from a weighted sum) is not contiguous either.
    auto w = torch::randn({11});
    (pf * w).sum().backward();
    (pu * w).sum().backward();
    EXPECT_LE(max_diff(a.scores.grad(), b.scores.grad()), 1e-5);
    EXPECT_LE(max_diff(a.bias.grad(), b.bias.grad()), 1e-5);
}

TEST(FusedAttentionSoftmax, GradientOnlyWhereRequired) {
    auto in = make_inputs(2, 2, 7, 7, true, true);
    {
        auto c = fresh_copy(in);
        c.bias.requires_grad_(false);
        auto p = fused_attention_softmax(c.scores, c.bias, c.mask);
        p.sum().backward();
        EXPECT_TRUE(c.scores.grad().defined());
        EXPECT_FALSE(c.bias.grad().defined());
    }
    {
        auto c = fresh_copy(in), u = fresh_copy(in);
        c.scores.requires_grad_(false);
        u.scores.requires_grad_(false);
        auto g = torch::randn({2, 2, 7, 7});
        fused_attention_softmax(c.scores, c.bias, c.mask).backward(g);
        unfused_attention_softmax(u.scores, u.bias, u.mask).backward(g);
        EXPECT_FALSE(c.scores.grad().defined());
        EXPECT_LE(max_diff(c.bias.grad(), u.bias.grad()), 1e-5);
    }
    {
        c10::InferenceMode inference;
        auto p = fused_attention_softmax(in.scores, in.bias, in.mask);
        EXPECT_LE(max_diff(p, unfused_attention_softmax(in.scores, in.bias, in.mask)), 1e-5);
    }
    {
        // Empty batch: the composition's answer (an empty tensor).
        auto e = torch::zeros({0, 2, 7, 7});
        EXPECT_EQ(fused_attention_softmax(e, in.bias, {}).sizes(), e.sizes());
    }
    {
        // No input requires grad: a plain forward.
        torch::NoGradGuard no_grad;
        auto p = fused_attention_softmax(in.scores, in.bias, in.mask);
        EXPECT_FALSE(p.requires_grad());
        EXPECT_LE(max_diff(p, unfused_attention_softmax(in.scores, in.bias, in.mask)), 1e-5);
    }
}

TEST(FusedAttentionSoftmax, SecondDerivativeThroughCreateGraph) {
    auto in = make_inputs(2, 2, 7, 7, true, true);
    std::vector<torch::Tensor> second;
    for (bool fused : {true, false}) {
        auto c = fresh_copy(in);
        auto p = fused ? fused_attention_softmax(c.scores, c.bias, c.mask)
                       : unfused_attention_softmax(c.scores, c.bias, c.mask);
        torch::manual_seed(8);
        auto w = torch::randn(p.sizes());
        auto g = torch::autograd::grad({(p * w).sum()}, {c.scores}, {}, true, true)[0];
        (g * g).sum().backward();
        second.push_back(c.bias.grad());
    }
    EXPECT_LE(max_diff(second[0], second[1]), 1e-5);
}

TEST(FusedAttentionSoftmax, Bf16WithinRoundingOfTheFp32Result) {
    // All-bf16 inputs give bf16 out, computed in fp32: within bf16 rounding (half an ulp: 2^-8
    // relative) of the fp32 softmax of the same (bf16) values; the unfused bf16 composition, which
    // also rounds s + b to bf16, lies within 1e-2 of both.
    auto in = make_inputs(3, 2, 19, 19, true, true, 2, torch::kBFloat16);
    in.mask = in.mask.to(torch::kBFloat16);
    auto ref_in = fresh_copy(in);
    ref_in.scores = in.scores.detach().to(torch::kFloat).requires_grad_(true);
    ref_in.bias = in.bias.detach().to(torch::kFloat).requires_grad_(true);
    ref_in.mask = in.mask.to(torch::kFloat);
    auto a = fresh_copy(in), b = fresh_copy(in);
    const Outcome f = run(a, true), u = run(b, false), ref = run(ref_in, false);
    EXPECT_TRUE(graph_has_fused_node(f.probs));
    ASSERT_EQ(f.probs.scalar_type(), torch::kBFloat16);
    ASSERT_EQ(u.probs.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(f.grad_scores.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(f.grad_bias.scalar_type(), torch::kBFloat16);
    const auto fp = f.probs.to(torch::kFloat), rp = ref.probs;
    const auto excess = (fp - rp).abs() - rp.abs() * (1.0 / 256) - 1e-7;  // <= 0 everywhere
    EXPECT_LE(excess.max().item<double>(), 0.0);
    EXPECT_LE(max_diff(f.probs, u.probs), 1e-2);
    // Gradients: bf16 probabilities and upstream gradient in, one bf16 rounding out, relative
    // to the largest entry (the upstream gradient itself is bf16 in all three runs).
    const double gs_scale = max_abs(ref.grad_scores), gb_scale = max_abs(ref.grad_bias);
    EXPECT_LE(max_diff(f.grad_scores, ref.grad_scores), 1e-2 * gs_scale);
    EXPECT_LE(max_diff(f.grad_bias, ref.grad_bias), 1e-2 * gb_scale);
    EXPECT_LE(max_diff(f.grad_scores, u.grad_scores), 2e-2 * gs_scale);
    EXPECT_LE(max_diff(f.grad_bias, u.grad_bias), 2e-2 * gb_scale);
    if (std::getenv("TUPE_PRINT_TOLERANCES"))
        std::printf(
            "bf16: probs vs fp32 %.3g, vs unfused %.3g; grad_scores %.3g / %.3g (scale %.3g); "
            "grad_bias %.3g / %.3g (scale %.3g)\n",
            max_diff(f.probs, ref.probs), max_diff(f.probs, u.probs),
            max_diff(f.grad_scores, ref.grad_scores), max_diff(f.grad_scores, u.grad_scores),
            gs_scale, max_diff(f.grad_bias, ref.grad_bias), max_diff(f.grad_bias, u.grad_bias),
            gb_scale);
}

TEST(FusedAttentionSoftmax, Bf16ScoresWithFp32BiasComputeInFp32) {
    // Mixed types promote to fp32, as the unfused composition does; the sum is then formed in
    // fp32 both ways, so the two agree to fp32 tolerance.
    auto in = make_inputs(3, 2, 19, 19, true, true);
    in.scores = in.scores.detach().to(torch::kBFloat16).requires_grad_(true);
    expect_fused_matches_unfused(in, 1e-5, "bf16 scores, fp32 bias and mask");
    auto p = fused_attention_softmax(in.scores, in.bias, in.mask);
    EXPECT_EQ(p.scalar_type(), torch::kFloat);
}

TEST(FusedAttentionSoftmax, AutocastGivesTheUnfusedDtype) {
    // Under CPU autocast (bf16) the scores come from a bf16 matmul; the bias and the mask may be
    // fp32 or bf16. Whatever the unfused composition yields under the same autocast, so must
    // the fused kernel (LibTorch 1.13: softmax is not on the CPU autocast lists, so this is
    // plain type promotion: any fp32 input gives fp32).
    CpuAutocast autocast;
    for (auto bias_type : {torch::kFloat, torch::kBFloat16}) {
        for (auto mask_type : {torch::kFloat, torch::kBFloat16}) {
            for (bool with_bias : {true, false}) {
                auto in = make_inputs(2, 2, 7, 7, with_bias, true);
                in.scores = in.scores.detach().to(torch::kBFloat16).requires_grad_(true);
                if (with_bias) in.bias = in.bias.detach().to(bias_type).requires_grad_(true);
                in.mask = in.mask.to(mask_type);
                auto f = fused_attention_softmax(in.scores, in.bias, in.mask);
                auto u = unfused_attention_softmax(in.scores, in.bias, in.mask);
                EXPECT_TRUE(graph_has_fused_node(f));
                EXPECT_EQ(f.scalar_type(), u.scalar_type())
                    << "bias " << (with_bias ? c10::toString(bias_type) : "none") << ", mask "
                    << c10::toString(mask_type);
                EXPECT_LE(max_diff(f, u), 1e-2);
                f.sum().backward();
                EXPECT_EQ(in.scores.grad().scalar_type(), torch::kBFloat16);
                if (with_bias) {
                    EXPECT_EQ(in.bias.grad().scalar_type(), bias_type);
                }
            }
        }
    }
}

TEST(FusedAttentionSoftmax, DoubleTakesTheFallbackExactly) {
    auto in = make_inputs(2, 2, 7, 7, true, true);
    Inputs d;
    d.scores = in.scores.detach().to(torch::kDouble).requires_grad_(true);
    d.bias = in.bias.detach().to(torch::kDouble).requires_grad_(true);
    d.mask = in.mask.to(torch::kDouble);
    auto a = fresh_copy(d), b = fresh_copy(d);
    const Outcome f = run(a, true), u = run(b, false);
    EXPECT_FALSE(graph_has_fused_node(f.probs));
    EXPECT_EQ(f.probs.scalar_type(), torch::kDouble);
    EXPECT_TRUE(torch::equal(f.probs, u.probs));
    EXPECT_TRUE(torch::equal(f.grad_scores, u.grad_scores));
    EXPECT_TRUE(torch::equal(f.grad_bias, u.grad_bias));
}

TEST(FusedAttentionSoftmax, OtherMaskShapesAndTheToggleTakeTheFallback) {
    auto in = make_inputs(2, 2, 7, 7, true, true);
    // A (B, 1, T, T) mask (e.g. causal) is not the padding layout: the composition handles it.
    auto causal = torch::triu(torch::full({7, 7}, -1e9), 1).expand({2, 1, 7, 7});
    auto p = fused_attention_softmax(in.scores, in.bias, causal);
    EXPECT_FALSE(graph_has_fused_node(p));
    EXPECT_TRUE(torch::equal(p, unfused_attention_softmax(in.scores, in.bias, causal)));
    {
        FusedOff off;
        EXPECT_FALSE(fused_attention_enabled());
        EXPECT_FALSE(graph_has_fused_node(fused_attention_softmax(in.scores, in.bias, in.mask)));
    }
    EXPECT_TRUE(fused_attention_enabled());
    EXPECT_TRUE(graph_has_fused_node(fused_attention_softmax(in.scores, in.bias, in.mask)));
}

TEST(FusedAttentionSoftmax, TinyMaskedLmSameLossAndGradients) {
    // Hidden 16, 2 heads, 2 layers, no dropout; TUPE-R (a per-layer (H, T, T) bias) and BERT-A
    // (no bias); a padded batch with one fully padded row. Fused on vs off: same loss and every
    // parameter gradient to 1e-5.
    for (const std::string preset : {"tupe-r", "bert-a"}) {
        auto c = test_support::tiny16_config(preset, 40, 24, /*dropout=*/false);
        BertForMaskedLM m(c);
        test_support::randomize_parameters(*m, 21, 0.3, /*unit_layer_norm_gains=*/true);
        torch::manual_seed(4);
        const int64_t B = 3, T = 13;
        auto ids = torch::randint(5, 40, {B, T}, torch::kLong);
        auto mask = torch::ones({B, T}, torch::kLong);
        mask[1].slice(0, 9) = 0;
        mask[2] = 0;
        auto labels = torch::full({B, T}, -100, torch::kLong);
        labels[0][2] = 7;
        labels[0][11] = 9;
        labels[1][4] = 12;
        test_support::expect_switch_keeps_loss_and_gradients(
            m, ids, mask, labels, [](bool on) { set_fused_attention_enabled(on); },
            [] { set_fused_attention_enabled(true); },
            [&](const torch::Tensor& loss, bool fused) {
                EXPECT_EQ(graph_has_fused_node(loss), fused) << preset;
            },
            preset);
    }
}
