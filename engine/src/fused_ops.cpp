// Fused CPU attention softmax (engine/fused_ops.h): one pass computes (s + bias) + mask, its
// row max, exp and the normalisation; the backward is the softmax Jacobian-vector product with
// the bias gradient reduced over the batch in the same pass. Rows are split by at::parallel_for;
// each row runs on 8-lane fp32 vectors (bf16 is read and written as bf16, computed in fp32).
#include "engine/fused_ops.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "simd_lanes.h"

#ifdef TUPE_SIMD_LANES
#define TUPE_FUSED_SOFTMAX 1
#endif

namespace engine {

namespace {

std::atomic<bool> g_fused_enabled{true};

#ifdef TUPE_FUSED_SOFTMAX

using namespace lanes;

// ---- rows ---------------------------------------------------------------------------------------

// out = softmax((s + bias) + mask) over one row of n keys; bias and mask may be null. The sum
// is formed in the unfused composition's order, in fp32, so a fully padded row (every entry
// s + b - 1e9, rounded alike) comes out as torch::softmax gives it. `buf` holds n floats.
template <typename S, typename O>
TUPE_INLINE void softmax_row(const S* s, const float* bias, const float* mask, O* out, float* buf,
                             int64_t n) {
    F8 vmax = splat(-std::numeric_limits<float>::infinity());
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes) {
        F8 x = load(s + j);
        if (bias) x = x + load(bias + j);
        if (mask) x = x + load(mask + j);
        store(x, buf + j);
        vmax = max8(x, vmax);
    }
    float mx = max_lanes(vmax);
    for (; j < n; ++j) {
        float x = static_cast<float>(s[j]);
        if (bias) x += bias[j];
        if (mask) x += mask[j];
        buf[j] = x;
        mx = x > mx ? x : mx;
    }
    const F8 vmx = splat(mx);
    F8 vsum = splat(0.0f);
    for (j = 0; j + kLanes <= n; j += kLanes) {
        const F8 e = exp8(load(buf + j) - vmx);
        store(e, buf + j);
        vsum += e;
    }
    float sum = 0.0f;
    if (j < n) {
        store(exp8(load(buf + j, n - j) - vmx), buf + j, n - j);
        for (int64_t k = j; k < n; ++k) sum += buf[k];
    }
    sum += sum_lanes(vsum);
    // Multiply by the reciprocal, as ATen's softmax kernel does.
    const F8 inv = splat(1.0f / sum);
    for (j = 0; j + kLanes <= n; j += kLanes) store(load(buf + j) * inv, out + j);
    if (j < n) store(load(buf + j, n - j) * inv, out + j, n - j);
}

// One row of the softmax backward: v = p * (g - sum_j g_j p_j), written to gs (if not null) and
// added to acc (the bias gradient row, if not null).
template <typename P, typename G>
TUPE_INLINE void softmax_backward_row(const P* p, const P* g, G* gs, float* acc, int64_t n) {
    F8 vdot = splat(0.0f);
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes) vdot += load(p + j) * load(g + j);
    if (j < n) vdot += load(p + j, n - j) * load(g + j, n - j);  // zero-padded lanes
    const F8 dot = splat(sum_lanes(vdot));
    for (j = 0; j + kLanes <= n; j += kLanes) {
        const F8 v = load(p + j) * (load(g + j) - dot);
        if (gs) store(v, gs + j);
        if (acc) store(load(acc + j) + v, acc + j);
    }
    if (j < n) {
        const int64_t c = n - j;
        const F8 v = load(p + j, c) * (load(g + j, c) - dot);
        if (gs) store(v, gs + j, c);
        if (acc) store(load(acc + j, c) + v, acc + j, c);
    }
}

template <typename S, typename O>
struct ForwardRows {
    const S* s;
    const float* bias;  // (H * Tq, Tk) or null
    const float* mask;  // (B, Tk) or null
    O* out;
    int64_t per_batch, n;  // H * Tq rows per batch element, Tk keys per row

    TUPE_INLINE void run(int64_t r0, int64_t r1, float* buf) const {
        for (int64_t r = r0; r < r1; ++r) {
            // Row r = (b, h, i): the bias row (h, i) is shared by every b; the mask row is b's.
            const float* brow = bias ? bias + (r % per_batch) * n : nullptr;
            const float* mrow = mask ? mask + (r / per_batch) * n : nullptr;
            softmax_row(s + r * n, brow, mrow, out + r * n, buf, n);
        }
    }
};

template <typename P, typename G>
struct BackwardRows {
    const P* p;
    const P* g;
    G* gs;         // or null
    float* gbias;  // (H * Tq, Tk) or null
    int64_t B, per_batch, n;

    // Rows r0..r1 of the whole (B * H * Tq) batch, without a bias gradient.
    TUPE_INLINE void run(int64_t r0, int64_t r1) const {
        for (int64_t r = r0; r < r1; ++r)
            softmax_backward_row(p + r * n, g + r * n, gs ? gs + r * n : nullptr, nullptr, n);
    }
    // Bias rows hi0..hi1 (h, i) of every batch element: the (H, Tq, Tk) sum is formed in fp32
    // in this task's block of gbias, without a (B, H, Tq, Tk) temporary or any atomics. The
    // batch is the outer loop, so each element's rows hi0..hi1 are read as one contiguous run.
    TUPE_INLINE void run_with_bias(int64_t hi0, int64_t hi1) const {
        std::fill(gbias + hi0 * n, gbias + hi1 * n, 0.0f);
        for (int64_t b = 0; b < B; ++b) {
            for (int64_t hi = hi0; hi < hi1; ++hi) {
                const int64_t r = b * per_batch + hi;
                softmax_backward_row(p + r * n, g + r * n, gs ? gs + r * n : nullptr,
                                     gbias + hi * n, n);
            }
        }
    }
};

// ---- the row loops, compiled twice ------------------------------------------------------------

template <typename S, typename O>
void forward_rows_baseline(const ForwardRows<S, O>& k, int64_t r0, int64_t r1, float* buf) {
    k.run(r0, r1, buf);
}
template <typename P, typename G>
void backward_rows_baseline(const BackwardRows<P, G>& k, int64_t r0, int64_t r1, bool bias) {
    bias ? k.run_with_bias(r0, r1) : k.run(r0, r1);
}

#if defined(__x86_64__) || defined(__i386__)
// The same loops with AVX2 enabled for these functions alone, chosen at run time
// (lanes::use_avx2). No FMA in either copy, so both round alike, bit for bit.
#define TUPE_AVX2_ROWS 1
template <typename S, typename O>
__attribute__((target("avx2"))) void forward_rows_avx2(const ForwardRows<S, O>& k, int64_t r0,
                                                       int64_t r1, float* buf) {
    k.run(r0, r1, buf);
}
template <typename P, typename G>
__attribute__((target("avx2"))) void backward_rows_avx2(const BackwardRows<P, G>& k, int64_t r0,
                                                        int64_t r1, bool bias) {
    bias ? k.run_with_bias(r0, r1) : k.run(r0, r1);
}
#endif

bool use_avx2_rows() { return use_avx2(); }

// Rows per parallel_for task: about 32k elements each, so small inputs stay on one thread.
int64_t grain_rows(int64_t row_elements) { return std::max<int64_t>(1, 32768 / row_elements); }

// ---- whole tensors ------------------------------------------------------------------------------

struct Dims {
    int64_t B, H, Tq, Tk;
};

Dims dims_of(const torch::Tensor& scores) {
    return {scores.size(0), scores.size(1), scores.size(2), scores.size(3)};
}

template <typename S, typename O>
void forward_impl(const torch::Tensor& s, const torch::Tensor& bias, const torch::Tensor& mask,
                  torch::Tensor& out, const Dims& d) {
    const ForwardRows<S, O> k{s.data_ptr<S>(),
                              bias.defined() ? bias.data_ptr<float>() : nullptr,
                              mask.defined() ? mask.data_ptr<float>() : nullptr,
                              out.data_ptr<O>(),
                              d.H * d.Tq,
                              d.Tk};
    const bool avx2 = use_avx2_rows();
    at::parallel_for(0, d.B * d.H * d.Tq, grain_rows(d.Tk), [&](int64_t r0, int64_t r1) {
        std::vector<float> buf(d.Tk);
#ifdef TUPE_AVX2_ROWS
        if (avx2) return forward_rows_avx2(k, r0, r1, buf.data());
#endif
        forward_rows_baseline(k, r0, r1, buf.data());
    });
}

template <typename P, typename G>
void backward_impl(const torch::Tensor& probs, const torch::Tensor& grad, torch::Tensor& gs,
                   torch::Tensor& gbias, const Dims& d) {
    const BackwardRows<P, G> k{probs.data_ptr<P>(),
                               grad.data_ptr<P>(),
                               gs.defined() ? gs.data_ptr<G>() : nullptr,
                               gbias.defined() ? gbias.data_ptr<float>() : nullptr,
                               d.B,
                               d.H * d.Tq,
                               d.Tk};
    const bool avx2 = use_avx2_rows(), with_bias = gbias.defined();
    // With a bias gradient, tasks own blocks of bias rows (h, i) and walk the batch.
    const int64_t rows = with_bias ? d.H * d.Tq : d.B * d.H * d.Tq;
    const int64_t grain = grain_rows(with_bias ? d.Tk * d.B : d.Tk);
    at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
#ifdef TUPE_AVX2_ROWS
        if (avx2) return backward_rows_avx2(k, r0, r1, with_bias);
#endif
        backward_rows_baseline(k, r0, r1, with_bias);
    });
}

torch::Tensor fused_forward(const torch::Tensor& scores, const torch::Tensor& position_bias,
                            const torch::Tensor& mask_bias, torch::ScalarType out_type) {
    const Dims d = dims_of(scores);
    auto s = scores.contiguous();
    // The bias (H, Tq, Tk) and the mask (B, Tk) are small: read as fp32.
    torch::Tensor bias, mask;
    if (position_bias.defined()) bias = position_bias.to(torch::kFloat).contiguous();
    if (mask_bias.defined()) mask = mask_bias.reshape({d.B, d.Tk}).to(torch::kFloat).contiguous();
    auto out = torch::empty(s.sizes(), s.options().dtype(out_type));
    const bool s_bf16 = s.scalar_type() == torch::kBFloat16;
    if (out_type == torch::kFloat) {
        if (s_bf16)
            forward_impl<c10::BFloat16, float>(s, bias, mask, out, d);
        else
            forward_impl<float, float>(s, bias, mask, out, d);
    } else {
        // The result type is at least the scores' type, so bf16 out means bf16 scores.
        forward_impl<c10::BFloat16, c10::BFloat16>(s, bias, mask, out, d);
    }
    return out;
}

bool is_fused_dtype(const torch::Tensor& t) {
    return t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16;
}

bool is_plain_cpu(const torch::Tensor& t) {
    return t.device().is_cpu() && t.layout() == torch::kStrided && is_fused_dtype(t);
}

// Whether the fused kernel takes these inputs, and the result type it then produces.
bool takes_fused(const torch::Tensor& scores, const torch::Tensor& bias, const torch::Tensor& mask,
                 torch::ScalarType* out_type) {
    if (!g_fused_enabled.load(std::memory_order_relaxed)) return false;
    if (!scores.defined() || scores.dim() != 4 || !is_plain_cpu(scores) || scores.numel() == 0)
        return false;
    const int64_t B = scores.size(0), H = scores.size(1), Tq = scores.size(2), Tk = scores.size(3);
    auto type = scores.scalar_type();
    if (bias.defined()) {
        if (!is_plain_cpu(bias) || bias.sizes() != torch::IntArrayRef{H, Tq, Tk}) return false;
        type = torch::promote_types(type, bias.scalar_type());
    }
    if (mask.defined()) {
        if (!is_plain_cpu(mask) || mask.requires_grad() ||
            mask.sizes() != torch::IntArrayRef{B, 1, 1, Tk})
            return false;
        type = torch::promote_types(type, mask.scalar_type());
    }
    *out_type = type;
    return true;
}

// ---- autograd -----------------------------------------------------------------------------------

struct FusedAttentionSoftmaxFunction
    : public torch::autograd::Function<FusedAttentionSoftmaxFunction> {
    // The bias and the mask are optional inputs: an absent one is no autograd input at all.
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& scores,
                                 const c10::optional<torch::Tensor>& position_bias,
                                 const c10::optional<torch::Tensor>& mask_bias, int64_t out_type) {
        const auto bias = position_bias.value_or(torch::Tensor());
        auto probs = fused_forward(scores, bias, mask_bias.value_or(torch::Tensor()),
                                   static_cast<torch::ScalarType>(out_type));
        ctx->saved_data["scores_type"] = static_cast<int64_t>(scores.scalar_type());
        ctx->saved_data["bias_type"] =
            static_cast<int64_t>(bias.defined() ? bias.scalar_type() : torch::kFloat);
        ctx->saved_data["has_bias"] = bias.defined();
        ctx->save_for_backward({probs});
        return probs;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto probs = ctx->get_saved_variables()[0];
        const auto scores_type =
            static_cast<torch::ScalarType>(ctx->saved_data["scores_type"].toInt());
        const auto bias_type = static_cast<torch::ScalarType>(ctx->saved_data["bias_type"].toInt());
        // Autograd input 0 is the scores; input 1 the bias when one was given.
        const bool has_bias = ctx->saved_data["has_bias"].toBool();
        const bool need_scores = ctx->needs_input_grad(0);
        const bool need_bias = has_bias && ctx->needs_input_grad(1);
        torch::Tensor grad_scores, grad_bias;
        if (!need_scores && !need_bias) return {grad_scores, grad_bias, {}, {}};
        const auto& g = grads[0];
        if (torch::GradMode::is_enabled()) {
            // create_graph: the same formula in differentiable ops, for a second derivative.
            auto gx = probs * (g - (g * probs).sum(-1, true));  // (B, H, Tq, Tk)
            if (need_scores) grad_scores = gx.to(scores_type);
            if (need_bias) grad_bias = gx.sum(0).to(bias_type);  // (H, Tq, Tk)
            return {grad_scores, grad_bias, {}, {}};
        }
        const Dims d = dims_of(probs);
        // g may be expanded (e.g. from a sum) or strided: one contiguous copy, in probs' type.
        const auto gc = g.to(probs.scalar_type()).contiguous();
        if (need_scores)
            grad_scores = torch::empty(probs.sizes(), probs.options().dtype(scores_type));
        if (need_bias)
            grad_bias = torch::empty({d.H, d.Tq, d.Tk}, probs.options().dtype(torch::kFloat));
        const bool p_bf16 = probs.scalar_type() == torch::kBFloat16;
        const bool s_bf16 = scores_type == torch::kBFloat16;
        if (!p_bf16 && !s_bf16)
            backward_impl<float, float>(probs, gc, grad_scores, grad_bias, d);
        else if (!p_bf16)
            backward_impl<float, c10::BFloat16>(probs, gc, grad_scores, grad_bias, d);
        else
            backward_impl<c10::BFloat16, c10::BFloat16>(probs, gc, grad_scores, grad_bias, d);
        if (need_bias && bias_type != torch::kFloat) grad_bias = grad_bias.to(bias_type);
        return {grad_scores, grad_bias, {}, {}};
    }
};

#endif  // TUPE_FUSED_SOFTMAX

}  // namespace

torch::Tensor unfused_attention_softmax(const torch::Tensor& scores,
                                        const torch::Tensor& position_bias,
                                        const torch::Tensor& mask_bias) {
    auto x = scores;                                                  // (B, H, T, T)
    if (position_bias.defined()) x = x + position_bias.unsqueeze(0);  // (H, T, T) broadcast over B
    if (mask_bias.defined()) x = x + mask_bias;                       // (B, 1, 1, T)
    return torch::softmax(x, -1);
}

torch::Tensor fused_attention_softmax(const torch::Tensor& scores,
                                      const torch::Tensor& position_bias,
                                      const torch::Tensor& mask_bias) {
#ifdef TUPE_FUSED_SOFTMAX
    torch::ScalarType out_type = torch::kFloat;
    if (takes_fused(scores, position_bias, mask_bias, &out_type)) {
        c10::optional<torch::Tensor> bias, mask;
        if (position_bias.defined()) bias = position_bias;
        if (mask_bias.defined()) mask = mask_bias;
        return FusedAttentionSoftmaxFunction::apply(scores, bias, mask,
                                                    static_cast<int64_t>(out_type));
    }
#endif
    return unfused_attention_softmax(scores, position_bias, mask_bias);
}

void set_fused_attention_enabled(bool enabled) { g_fused_enabled.store(enabled); }

bool fused_attention_enabled() { return g_fused_enabled.load(); }

}  // namespace engine
