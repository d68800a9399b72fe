// Fused CPU kernels of the training step (engine/fused_train_ops.h): the MLM loss and bias +
// GELU, each a custom autograd function whose forward and backward are one pass over their rows
// (residual + LayerNorm: fused_layer_norm.cpp), and the process-wide switch. Rows are split by
// at::parallel_for; the bias gradient is summed in fixed blocks of rows, so the result does not
// depend on the thread count. Each row runs on 8-lane fp32 vectors (engine/src/simd_lanes.h).
#include "engine/fused_train_ops.h"

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

#include "fused_train_rows.h"
#include "simd_lanes.h"

namespace engine {

namespace F = torch::nn::functional;

namespace {

std::atomic<bool> g_fused_training{[] {
    const char* env = std::getenv("TUPE_FUSED_TRAINING");
    return !(env && std::strcmp(env, "0") == 0);
}()};

#ifdef TUPE_SIMD_LANES

using namespace lanes;
using namespace fused_rows;

// ---- cross-entropy over the MLM rows ----------------------------------------------------------

// Forward: per row e = exp(x - max), kept for the backward (it replaces the logits, which
// nothing else keeps), its sum and the target's loss max + log(sum) - x[t].
template <typename T>
struct CrossEntropyForward {
    const T* x;        // (M, V)
    const int64_t* t;  // (M)
    float* e;          // (M, V)
    float* inv_sum;    // (M): 1 / sum of e
    double* row_loss;  // (M), 0 for an ignored row
    int64_t V, ignore;

    TUPE_INLINE void run(int64_t r0, int64_t r1) const {
        for (int64_t r = r0; r < r1; ++r) {
            const T* row = x + r * V;
            float* er = e + r * V;
            if (t[r] == ignore) {
                inv_sum[r] = 0.0f;
                row_loss[r] = 0.0;
                continue;
            }
            F8 vmax = splat(-std::numeric_limits<float>::infinity());
            int64_t j = 0;
            for (; j + kLanes <= V; j += kLanes) vmax = max8(load(row + j), vmax);
            float mx = max_lanes(vmax);
            for (; j < V; ++j) {
                const float v = static_cast<float>(row[j]);
                mx = v > mx ? v : mx;
            }
            const F8 vmx = splat(mx);
            F8 vsum = splat(0.0f);
            for (j = 0; j + kLanes <= V; j += kLanes) {
                const F8 ev = exp8(load(row + j) - vmx);
                store(ev, er + j);
                vsum += ev;
            }
            float sum = sum_lanes(vsum);
            if (j < V) {
                const F8 ev = exp8(load(row + j, V - j) - vmx);
                store(ev, er + j, V - j);
                for (int64_t k = 0; k < V - j; ++k) sum += ev[k];
            }
            inv_sum[r] = 1.0f / sum;
            row_loss[r] = static_cast<double>(mx) + std::log(static_cast<double>(sum)) -
                          static_cast<double>(static_cast<float>(row[t[r]]));
        }
    }
};

// Backward: grad = (e / sum - onehot(t)) * scale, one pass over e; 0 for an ignored row.
template <typename T>
struct CrossEntropyBackward {
    const float* e;
    const int64_t* t;
    const float* inv_sum;
    T* grad;
    int64_t V, ignore;
    float scale;

    TUPE_INLINE void run(int64_t r0, int64_t r1) const {
        for (int64_t r = r0; r < r1; ++r) {
            const float* er = e + r * V;
            T* out = grad + r * V;
            if (t[r] == ignore) {
                std::memset(static_cast<void*>(out), 0, V * sizeof(T));
                continue;
            }
            const float f = inv_sum[r] * scale;
            const F8 vf = splat(f);
            int64_t j = 0;
            for (; j + kLanes <= V; j += kLanes) store(load(er + j) * vf, out + j);
            if (j < V) store(load(er + j, V - j) * vf, out + j, V - j);
            const int64_t tj = t[r];
            out[tj] = static_cast<T>(er[tj] * f - scale);  // softmax - 1 at the target
        }
    }
};

struct CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                                 const torch::Tensor& targets, int64_t ignore_index) {
        const auto x = logits.contiguous();
        const auto t = targets.contiguous();
        const int64_t M = x.size(0), V = x.size(1);
        const int64_t* tp = t.data_ptr<int64_t>();
        int64_t count = 0;
        for (int64_t r = 0; r < M; ++r) {
            if (tp[r] == ignore_index) continue;
            TORCH_CHECK(tp[r] >= 0 && tp[r] < V, "cross_entropy: target ", tp[r],
                        " out of bounds for ", V, " classes");
            ++count;
        }
        auto e = torch::empty({M, V}, x.options().dtype(torch::kFloat));
        auto inv_sum = torch::empty({M}, x.options().dtype(torch::kFloat));
        std::vector<double> row_loss(M);
        auto forward_rows = [&](auto* xp) {
            using T = std::remove_cv_t<std::remove_pointer_t<decltype(xp)>>;
            const CrossEntropyForward<T> k{
                xp, tp,          e.data_ptr<float>(), inv_sum.data_ptr<float>(), row_loss.data(),
                V,  ignore_index};
            train_items(k, M, train_grain(V));
        };
        if (x.scalar_type() == torch::kBFloat16)
            forward_rows(x.data_ptr<c10::BFloat16>());
        else
            forward_rows(x.data_ptr<float>());
        double total = 0.0;
        for (double l : row_loss) total += l;
        // Mean over the rows that count; 0 / 0 = NaN when every row is ignored, as torch gives.
        const double mean =
            count ? total / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
        ctx->save_for_backward({e, t, inv_sum});
        ctx->saved_data["count"] = count;
        ctx->saved_data["ignore"] = ignore_index;
        ctx->saved_data["type"] = static_cast<int64_t>(x.scalar_type());
        return torch::full({}, mean, x.options().dtype(torch::kFloat));
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const auto &e = saved[0], &t = saved[1], &inv_sum = saved[2];
        const int64_t count = ctx->saved_data["count"].toInt();
        const int64_t ignore = ctx->saved_data["ignore"].toInt();
        const auto type = static_cast<torch::ScalarType>(ctx->saved_data["type"].toInt());
        if (!ctx->needs_input_grad(0)) return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
        const int64_t M = e.size(0), V = e.size(1);
        if (torch::GradMode::is_enabled()) {
            // create_graph: the same formula in LibTorch ops (e and the sums are constants).
            auto valid = (t != ignore).to(torch::kFloat).unsqueeze(1);  // (M, 1)
            auto onehot = F::one_hot(t.clamp(0, V - 1), V).to(torch::kFloat);
            auto g = grads[0] / static_cast<double>(std::max<int64_t>(count, 1));
            auto gx = (e * inv_sum.unsqueeze(1) - onehot) * valid * g;
            return {gx.to(type), torch::Tensor(), torch::Tensor()};
        }
        const float scale =
            count ? static_cast<float>(grads[0].item<double>() / static_cast<double>(count)) : 0.0f;
        auto grad = torch::empty({M, V}, e.options().dtype(type));
        auto backward_rows = [&](auto* gp) {
            using T = std::remove_cv_t<std::remove_pointer_t<decltype(gp)>>;
            const CrossEntropyBackward<T> k{e.data_ptr<float>(),
                                            t.data_ptr<int64_t>(),
                                            inv_sum.data_ptr<float>(),
                                            gp,
                                            V,
                                            ignore,
                                            scale};
            train_items(k, M, train_grain(V));
        };
        if (type == torch::kBFloat16)
            backward_rows(grad.data_ptr<c10::BFloat16>());
        else
            backward_rows(grad.data_ptr<float>());
        return {grad, torch::Tensor(), torch::Tensor()};
    }
};

// ---- bias + GELU ------------------------------------------------------------------------------

// erf(z) by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7; the formula of ATen's vectorised
// erf), given e = exp(-z^2), which GELU's derivative needs too.
TUPE_INLINE F8 erf8(const F8& z, const F8& e) {
    const I8 sign = (I8)z & (I8{} + std::numeric_limits<int32_t>::min());
    const F8 a = (F8)((I8)z & ~sign);  // |z|
    const F8 t = splat(1.0f) / (splat(1.0f) + splat(0.3275911f) * a);
    F8 p = splat(1.061405429f);
    p = p * t + splat(-1.453152027f);
    p = p * t + splat(1.421413741f);
    p = p * t + splat(-0.284496736f);
    p = p * t + splat(0.254829592f);
    const F8 r = splat(1.0f) - p * t * e;
    return (F8)((I8)r | sign);
}

constexpr float kSqrtHalf = 0.70710678118654752f;    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)

// u = x + b: cdf = Phi(u) = (1 + erf(u / sqrt 2)) / 2 and pdf = exp(-u^2 / 2) / sqrt(2 pi).
TUPE_INLINE void gelu_parts(const F8& u, F8* cdf, F8* pdf) {
    const F8 e = exp8(u * u * splat(-0.5f));
    *cdf = splat(0.5f) * (splat(1.0f) + erf8(u * splat(kSqrtHalf), e));
    *pdf = e * splat(kInvSqrt2Pi);
}

// Forward per row: u = x + b, y = u * Phi(u), and the derivative d = Phi(u) + u * pdf(u) kept
// for the backward (it replaces x, which nothing else keeps), so the backward needs no exp.
template <typename T>
struct BiasGeluForward {
    const T* x;      // (N, F)
    const float* b;  // (F) or null
    T* y;
    float* d;  // (N, F)
    int64_t F;

    TUPE_INLINE void run(int64_t r0, int64_t r1) const {
        for (int64_t r = r0; r < r1; ++r) {
            const T* xr = x + r * F;
            T* yr = y + r * F;
            float* dr = d + r * F;
            for (int64_t j = 0; j < F; j += kLanes) {
                const int64_t c = std::min(kLanes, F - j);
                const bool full = c == kLanes;
                F8 u = full ? load(xr + j) : load(xr + j, c);
                if (b) u += full ? load(b + j) : load(b + j, c);
                F8 cdf, pdf;
                gelu_parts(u, &cdf, &pdf);
                if (full) {
                    store(u * cdf, yr + j);
                    store(cdf + u * pdf, dr + j);
                } else {
                    store(u * cdf, yr + j, c);
                    store(cdf + u * pdf, dr + j, c);
                }
            }
        }
    }
};

// Blocks of kTrainRowBlock rows: grad_x = g * d, and the block's column sums of grad_x (in
// fp32, before any rounding to bf16) into its row of `partial`.
template <typename T>
struct BiasGeluBackward {
    const float* d;
    const T* g;
    T* gx;
    float* partial;  // (blocks, F) or null
    int64_t N, F;

    TUPE_INLINE void run(int64_t b0, int64_t b1) const {
        for (int64_t blk = b0; blk < b1; ++blk) {
            float* acc = partial ? partial + blk * F : nullptr;
            if (acc) std::fill(acc, acc + F, 0.0f);
            const int64_t r_end = std::min(N, (blk + 1) * kTrainRowBlock);
            for (int64_t r = blk * kTrainRowBlock; r < r_end; ++r) {
                const float* dr = d + r * F;
                const T* gr = g + r * F;
                T* out = gx + r * F;
                for (int64_t j = 0; j < F; j += kLanes) {
                    const int64_t c = std::min(kLanes, F - j);
                    if (c == kLanes) {
                        const F8 v = load(gr + j) * load(dr + j);
                        store(v, out + j);
                        if (acc) store(load(acc + j) + v, acc + j);
                    } else {
                        const F8 v = load(gr + j, c) * load(dr + j, c);
                        store(v, out + j, c);
                        if (acc) store(load(acc + j, c) + v, acc + j, c);
                    }
                }
            }
        }
    }
};

struct BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                                 const c10::optional<torch::Tensor>& bias_in) {
        const auto x = input.contiguous();
        const int64_t F = x.size(-1), N = x.numel() / F;
        torch::Tensor b;
        if (bias_in) b = bias_in->to(torch::kFloat).contiguous();
        auto y = torch::empty_like(x);
        auto d = torch::empty(x.sizes(), x.options().dtype(torch::kFloat));
        auto rows = [&](auto* xp, auto* yp) {
            using T = std::remove_cv_t<std::remove_pointer_t<decltype(xp)>>;
            const BiasGeluForward<T> k{xp, b.defined() ? b.data_ptr<float>() : nullptr, yp,
                                       d.data_ptr<float>(), F};
            train_items(k, N, train_grain(F));
        };
        if (x.scalar_type() == torch::kBFloat16)
            rows(x.data_ptr<c10::BFloat16>(), y.data_ptr<c10::BFloat16>());
        else
            rows(x.data_ptr<float>(), y.data_ptr<float>());
        ctx->save_for_backward({d});
        ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
        ctx->saved_data["bias_type"] =
            static_cast<int64_t>(bias_in ? bias_in->scalar_type() : torch::kFloat);
        ctx->saved_data["has_bias"] = bias_in.has_value();
        return y;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto d = ctx->get_saved_variables()[0];
        const bool has_bias = ctx->saved_data["has_bias"].toBool();
        const auto x_type = static_cast<torch::ScalarType>(ctx->saved_data["x_type"].toInt());
        const auto bias_type = static_cast<torch::ScalarType>(ctx->saved_data["bias_type"].toInt());
        const bool need_x = ctx->needs_input_grad(0);
        const bool need_b = has_bias && ctx->needs_input_grad(1);
        torch::Tensor gx, gb;
        if (!need_x && !need_b) return {gx, gb};
        const int64_t F = d.size(-1), N = d.numel() / F;
        if (torch::GradMode::is_enabled()) {
            // create_graph: the same formula in LibTorch ops (d is then a constant).
            auto v = grads[0].to(torch::kFloat) * d;
            if (need_x) gx = v.to(x_type);
            if (need_b) gb = v.reshape({N, F}).sum(0).to(bias_type);
            return {gx, gb};
        }
        const auto g = grads[0].to(x_type).contiguous();
        gx = torch::empty(d.sizes(), d.options().dtype(x_type));
        const int64_t blocks = (N + kTrainRowBlock - 1) / kTrainRowBlock;
        std::vector<float> partial(need_b ? blocks * F : 0);
        auto rows = [&](auto* gp, auto* gxp) {
            using T = std::remove_cv_t<std::remove_pointer_t<decltype(gp)>>;
            const BiasGeluBackward<T> k{
                d.data_ptr<float>(), gp, gxp, need_b ? partial.data() : nullptr, N, F};
            train_items(k, blocks, train_grain(kTrainRowBlock * F));
        };
        if (x_type == torch::kBFloat16)
            rows(g.data_ptr<c10::BFloat16>(), gx.data_ptr<c10::BFloat16>());
        else
            rows(g.data_ptr<float>(), gx.data_ptr<float>());
        if (need_b) {
            gb = torch::empty({F}, d.options());
            sum_partials(partial.data(), blocks, F, gb.data_ptr<float>());
            if (bias_type != torch::kFloat) gb = gb.to(bias_type);
        }
        if (!need_x) gx = torch::Tensor();
        return {gx, gb};
    }
};

#endif  // TUPE_SIMD_LANES

}  // namespace

// ---- entry points -------------------------------------------------------------------------------

torch::Tensor unfused_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                    int64_t ignore_index) {
    // Reduced-precision logits are upcast for the loss; fp32/fp64 stay as they are.
    const bool low =
        logits.scalar_type() != torch::kFloat && logits.scalar_type() != torch::kDouble;
    return F::cross_entropy(low ? logits.to(torch::kFloat) : logits, targets,
                            F::CrossEntropyFuncOptions().ignore_index(ignore_index));
}

torch::Tensor fused_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                  int64_t ignore_index) {
#ifdef TUPE_SIMD_LANES
    if (fused_training_enabled() && fused_rows::fusable_cpu(logits) && logits.dim() == 2 &&
        logits.size(1) > 0 && targets.defined() && targets.device().is_cpu() &&
        targets.scalar_type() == torch::kLong && targets.dim() == 1 &&
        targets.size(0) == logits.size(0))
        return CrossEntropyFunction::apply(logits, targets, ignore_index);
#endif
    return unfused_cross_entropy(logits, targets, ignore_index);
}

torch::Tensor unfused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias) {
    // The bias in x's dtype, as autocast's linear gives it.
    return torch::gelu(bias.defined() ? x + bias.to(x.scalar_type()) : x);
}

torch::Tensor fused_bias_gelu(const torch::Tensor& x, const torch::Tensor& bias) {
#ifdef TUPE_SIMD_LANES
    if (fused_training_enabled() && fused_rows::fusable_cpu(x) && x.dim() >= 1 && x.numel() > 0 &&
        (!bias.defined() ||
         (fused_rows::fusable_cpu(bias) && bias.dim() == 1 && bias.size(0) == x.size(-1)))) {
        c10::optional<torch::Tensor> b;
        if (bias.defined()) b = bias;
        return BiasGeluFunction::apply(x, b);
    }
#endif
    return unfused_bias_gelu(x, bias);
}

void set_fused_training_enabled(bool enabled) { g_fused_training.store(enabled); }

bool fused_training_enabled() { return g_fused_training.load(std::memory_order_relaxed); }

}  // namespace engine
