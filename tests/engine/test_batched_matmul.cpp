// engine::batched_matmul against torch::matmul: values and both gradients for the layouts
// attention produces (slices of a fused QKV projection, transposed views, the contiguous
// softmax output), 3-d and 4-d batches, degenerate sizes, and the switch that turns the direct
// sgemm path off.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "engine/batched_matmul.h"

namespace {

using engine::batched_matmul;

/// Values of batched_matmul(a, b) and of a.grad / b.grad after a weighted sum, against the
/// same through torch::matmul on independent copies.
void expect_matches_matmul(const torch::Tensor& a0, const torch::Tensor& b0, double tol = 1e-5) {
    auto a1 = a0.detach().clone().requires_grad_(true);
    auto b1 = b0.detach().clone().requires_grad_(true);
    auto a2 = a0.detach().clone().requires_grad_(true);
    auto b2 = b0.detach().clone().requires_grad_(true);
    // The layouts under test are views of the leaves: apply the same view to both copies.
    const auto out1 = batched_matmul(a1, b1);
    const auto out2 = torch::matmul(a2, b2);
    ASSERT_EQ(out1.sizes(), out2.sizes());
    EXPECT_TRUE(torch::allclose(out1, out2, tol, tol)) << (out1 - out2).abs().max().item<double>();
    const auto w = torch::randn(out1.sizes());
    (out1 * w).sum().backward();
    (out2 * w).sum().backward();
    EXPECT_TRUE(torch::allclose(a1.grad(), a2.grad(), tol, tol))
        << (a1.grad() - a2.grad()).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(b1.grad(), b2.grad(), tol, tol))
        << (b1.grad() - b2.grad()).abs().max().item<double>();
}

TEST(BatchedMatmul, ContiguousThreeAndFourDims) {
    torch::manual_seed(1);
    expect_matches_matmul(torch::randn({5, 7, 3}), torch::randn({5, 3, 4}));
    expect_matches_matmul(torch::randn({2, 3, 9, 4}), torch::randn({2, 3, 4, 9}));
}

TEST(BatchedMatmul, AttentionViewsOfAFusedProjection) {
    // qkv (B, T, 3C) -> q, k, v (B, H, T, d) views, as BertSelfAttention makes them.
    torch::manual_seed(2);
    const int64_t B = 3, T = 7, H = 2, d = 5, C = H * d;
    auto qkv = torch::randn({B, T, 3 * C}, torch::requires_grad());
    auto qkv_ref = qkv.detach().clone().requires_grad_(true);
    const auto heads = [&](const torch::Tensor& x) {
        auto parts = x.chunk(3, -1);
        auto q = parts[0].view({B, T, H, d}).transpose(1, 2);  // (B, H, T, d)
        auto k = parts[1].view({B, T, H, d}).transpose(1, 2);
        auto v = parts[2].view({B, T, H, d}).transpose(1, 2);
        return std::make_tuple(q, k, v);
    };
    auto [q, k, v] = heads(qkv);
    auto [qr, kr, vr] = heads(qkv_ref);
    auto scores = batched_matmul(q * 0.5, k.transpose(-2, -1));  // (B, H, T, T)
    auto scores_ref = torch::matmul(qr * 0.5, kr.transpose(-2, -1));
    EXPECT_TRUE(torch::allclose(scores, scores_ref, 1e-5, 1e-5));
    auto ctx = batched_matmul(torch::softmax(scores, -1), v);  // (B, H, T, d)
    auto ctx_ref = torch::matmul(torch::softmax(scores_ref, -1), vr);
    EXPECT_TRUE(torch::allclose(ctx, ctx_ref, 1e-5, 1e-5));
    const auto w = torch::randn(ctx.sizes());
    (ctx * w).sum().backward();
    (ctx_ref * w).sum().backward();
    EXPECT_TRUE(torch::allclose(qkv.grad(), qkv_ref.grad(), 1e-5, 1e-5))
        << (qkv.grad() - qkv_ref.grad()).abs().max().item<double>();
}

TEST(BatchedMatmul, TransposedAndNonContiguousOperands) {
    torch::manual_seed(3);
    // A column-major operand (a transposed view) and one with no unit stride at all.
    expect_matches_matmul(torch::randn({4, 6, 5}).transpose(-2, -1), torch::randn({4, 6, 3}));
    expect_matches_matmul(torch::randn({4, 5, 12}).slice(2, 0, 12, 2), torch::randn({4, 6, 2}));
}

TEST(BatchedMatmul, DegenerateSizes) {
    torch::manual_seed(4);
    expect_matches_matmul(torch::randn({3, 1, 4}), torch::randn({3, 4, 1}));  // T = 1
    expect_matches_matmul(torch::randn({3, 5, 1}), torch::randn({3, 1, 6}));  // K = 1
    expect_matches_matmul(torch::randn({1, 1, 1}), torch::randn({1, 1, 1}));
}

TEST(BatchedMatmul, DoubleAndDisabledPathsAreTorchMatmul) {
    torch::manual_seed(5);
    const auto a = torch::randn({2, 3, 4}, torch::kDouble),
               b = torch::randn({2, 4, 5}, torch::kDouble);
    EXPECT_TRUE(torch::equal(batched_matmul(a, b), torch::matmul(a, b)));
    engine::set_batched_matmul_enabled(false);
    EXPECT_FALSE(engine::batched_matmul_enabled());
    const auto x = torch::randn({2, 3, 4}), y = torch::randn({2, 4, 5});
    EXPECT_TRUE(torch::equal(batched_matmul(x, y), torch::matmul(x, y)));
    engine::set_batched_matmul_enabled(true);
    EXPECT_EQ(engine::batched_matmul_enabled(), engine::batched_matmul_available());
}

}  // namespace
