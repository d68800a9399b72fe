// Post-LN's residual add + LayerNorm as one autograd function (engine/fused_train_ops.h): one
// pass per row forward (the sum, its mean and variance, the normalised row kept for the
// backward) and one backward (grad_u per row; the gain and bias gradients summed over fixed
// blocks of rows), on 8-lane fp32 vectors (engine/src/simd_lanes.h).
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/fused_train_ops.h"
#include "fused_train_rows.h"

namespace engine {

namespace {

#ifdef TUPE_SIMD_LANES

using namespace lanes;
using namespace fused_rows;

// Forward per row: u = x + r in fp32, mean and biased variance (two passes over the row),
// xhat = (u - mean) * rstd kept for the backward, out = xhat * w + b.
template <typename X, typename R>
struct ResidualNormForward {
    const X* x;
    const R* res;
    const float *w, *b;
    float* xhat;  // (N, C)
    float* rstd;  // (N)
    float* out;   // (N, C)
    int64_t C;
    float eps;

    TUPE_INLINE void run(int64_t r0, int64_t r1) const {
        for (int64_t r = r0; r < r1; ++r) {
            const X* xr = x + r * C;
            const R* rr = res + r * C;
            float* h = xhat + r * C;
            F8 vsum = splat(0.0f);
            for (int64_t j = 0; j < C; j += kLanes) {
                const int64_t c = std::min(kLanes, C - j);
                const F8 u =
                    c == kLanes ? load(xr + j) + load(rr + j) : load(xr + j, c) + load(rr + j, c);
                if (c == kLanes)
                    store(u, h + j);
                else
                    store(u, h + j, c);
                vsum += u;  // zero-padded lanes add nothing
            }
            const float mean = sum_lanes(vsum) / static_cast<float>(C);
            const F8 vmean = splat(mean);
            F8 vvar = splat(0.0f);
            int64_t j = 0;
            for (; j + kLanes <= C; j += kLanes) {
                const F8 d = load(h + j) - vmean;
                vvar += d * d;
            }
            float var = sum_lanes(vvar);
            for (; j < C; ++j) var += (h[j] - mean) * (h[j] - mean);
            const float rs = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
            rstd[r] = rs;
            const F8 vrs = splat(rs);
            float* o = out + r * C;
            for (j = 0; j + kLanes <= C; j += kLanes) {
                const F8 xh = (load(h + j) - vmean) * vrs;
                store(xh, h + j);
                store(xh * load(w + j) + load(b + j), o + j);
            }
            for (; j < C; ++j) {
                const float xh = (h[j] - mean) * rs;
                h[j] = xh;
                o[j] = xh * w[j] + b[j];
            }
        }
    }
};

// Backward over blocks of rows: gw = g * w; grad_u = rstd * (gw - mean(gw) - xhat *
// mean(gw * xhat)); the block's sums of g * xhat and g into partial (blocks, 2C).
struct ResidualNormBackward {
    const float* g;
    const float* xhat;
    const float* rstd;
    const float* w;
    float* gu;
    float* partial;  // (blocks, 2C) or null
    int64_t N, C;

    TUPE_INLINE void run(int64_t b0, int64_t b1) const {
        for (int64_t blk = b0; blk < b1; ++blk) {
            float* acc = partial ? partial + blk * 2 * C : nullptr;
            if (acc) std::fill(acc, acc + 2 * C, 0.0f);
            const int64_t r_end = std::min(N, (blk + 1) * kTrainRowBlock);
            for (int64_t r = blk * kTrainRowBlock; r < r_end; ++r) {
                const float *gr = g + r * C, *h = xhat + r * C;
                float* o = gu + r * C;
                F8 vs = splat(0.0f), vd = splat(0.0f);
                int64_t j = 0;
                for (; j + kLanes <= C; j += kLanes) {
                    const F8 gv = load(gr + j), hv = load(h + j), gw = gv * load(w + j);
                    vs += gw;
                    vd += gw * hv;
                    if (acc) {
                        store(load(acc + j) + gv * hv, acc + j);
                        store(load(acc + C + j) + gv, acc + C + j);
                    }
                }
                float s = sum_lanes(vs), d = sum_lanes(vd);
                for (int64_t k = j; k < C; ++k) {
                    const float gw = gr[k] * w[k];
                    s += gw;
                    d += gw * h[k];
                    if (acc) {
                        acc[k] += gr[k] * h[k];
                        acc[C + k] += gr[k];
                    }
                }
                const float inv_c = 1.0f / static_cast<float>(C), rs = rstd[r];
                const F8 vms = splat(s * inv_c), vmd = splat(d * inv_c), vrs = splat(rs);
                for (j = 0; j + kLanes <= C; j += kLanes)
                    store(vrs * (load(gr + j) * load(w + j) - vms - load(h + j) * vmd), o + j);
                for (; j < C; ++j) o[j] = rs * (gr[j] * w[j] - s * inv_c - h[j] * d * inv_c);
            }
        }
    }
};

struct ResidualNormFunction : public torch::autograd::Function<ResidualNormFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                                 const torch::Tensor& res_in, const torch::Tensor& weight,
                                 const torch::Tensor& bias, double eps) {
        const auto x = x_in.contiguous(), res = res_in.contiguous();
        const auto w = weight.contiguous(), b = bias.contiguous();
        const int64_t C = x.size(-1), N = x.numel() / C;
        auto out = torch::empty(x.sizes(), x.options().dtype(torch::kFloat));
        auto xhat = torch::empty({N, C}, x.options().dtype(torch::kFloat));
        auto rstd = torch::empty({N}, x.options().dtype(torch::kFloat));
        auto rows = [&](auto* xp, auto* rp) {
            using X = std::remove_cv_t<std::remove_pointer_t<decltype(xp)>>;
            using R = std::remove_cv_t<std::remove_pointer_t<decltype(rp)>>;
            const ResidualNormForward<X, R> k{xp,
                                              rp,
                                              w.data_ptr<float>(),
                                              b.data_ptr<float>(),
                                              xhat.data_ptr<float>(),
                                              rstd.data_ptr<float>(),
                                              out.data_ptr<float>(),
                                              C,
                                              static_cast<float>(eps)};
            train_items(k, N, train_grain(C));
        };
        const bool xb = x.scalar_type() == torch::kBFloat16;
        const bool rb = res.scalar_type() == torch::kBFloat16;
        if (xb && rb)
            rows(x.data_ptr<c10::BFloat16>(), res.data_ptr<c10::BFloat16>());
        else if (xb)
            rows(x.data_ptr<c10::BFloat16>(), res.data_ptr<float>());
        else if (rb)
            rows(x.data_ptr<float>(), res.data_ptr<c10::BFloat16>());
        else
            rows(x.data_ptr<float>(), res.data_ptr<float>());
        ctx->save_for_backward({xhat, rstd, w});
        ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
        ctx->saved_data["res_type"] = static_cast<int64_t>(res.scalar_type());
        return out;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const auto &xhat = saved[0], &rstd = saved[1], &w = saved[2];
        const auto x_type = static_cast<torch::ScalarType>(ctx->saved_data["x_type"].toInt());
        const auto res_type = static_cast<torch::ScalarType>(ctx->saved_data["res_type"].toInt());
        const bool need_u = ctx->needs_input_grad(0) || ctx->needs_input_grad(1);
        const bool need_wb = ctx->needs_input_grad(2) || ctx->needs_input_grad(3);
        torch::Tensor gx, gr, gw, gb;
        if (!need_u && !need_wb) return {gx, gr, gw, gb, {}};
        const int64_t N = xhat.size(0), C = xhat.size(1);
        const auto shape = grads[0].sizes().vec();
        torch::Tensor gu;
        if (torch::GradMode::is_enabled()) {
            // create_graph: differentiable ops.
            auto g = grads[0].reshape({N, C}).to(torch::kFloat);
            auto gwx = g * w;
            auto rs = rstd.unsqueeze(1);
            gu = rs * (gwx - gwx.mean(1, true) - xhat * (gwx * xhat).mean(1, true));
            gw = (g * xhat).sum(0);
            gb = g.sum(0);
        } else {
            const auto g = grads[0].to(torch::kFloat).contiguous();
            gu = torch::empty({N, C}, g.options());
            const int64_t blocks = (N + kTrainRowBlock - 1) / kTrainRowBlock;
            std::vector<float> partial(need_wb ? blocks * 2 * C : 0);
            const ResidualNormBackward k{g.data_ptr<float>(),
                                         xhat.data_ptr<float>(),
                                         rstd.data_ptr<float>(),
                                         w.data_ptr<float>(),
                                         gu.data_ptr<float>(),
                                         need_wb ? partial.data() : nullptr,
                                         N,
                                         C};
            train_items(k, blocks, train_grain(kTrainRowBlock * C));
            if (need_wb) {
                auto both = torch::empty({2 * C}, g.options());
                sum_partials(partial.data(), blocks, 2 * C, both.data_ptr<float>());
                gw = both.slice(0, 0, C);
                gb = both.slice(0, C);
            }
        }
        gu = gu.view(shape);
        if (ctx->needs_input_grad(0)) gx = gu.to(x_type);
        if (ctx->needs_input_grad(1)) gr = gu.to(res_type);
        if (!ctx->needs_input_grad(2)) gw = torch::Tensor();
        if (!ctx->needs_input_grad(3)) gb = torch::Tensor();
        return {gx, gr, gw, gb, {}};
    }
};

#endif  // TUPE_SIMD_LANES

}  // namespace

torch::Tensor unfused_residual_layer_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                          const torch::Tensor& weight, const torch::Tensor& bias,
                                          double eps) {
    auto u = x + residual;
    if (u.scalar_type() != weight.scalar_type()) u = u.to(weight.scalar_type());
    return torch::layer_norm(u, {weight.size(0)}, weight, bias, eps);
}

torch::Tensor fused_residual_layer_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                        const torch::Tensor& weight, const torch::Tensor& bias,
                                        double eps) {
#ifdef TUPE_SIMD_LANES
    if (fused_training_enabled() && fused_rows::fusable_cpu(x) &&
        fused_rows::fusable_cpu(residual) && x.sizes() == residual.sizes() && x.dim() >= 1 &&
        x.numel() > 0 && weight.defined() && bias.defined() &&
        weight.scalar_type() == torch::kFloat && bias.scalar_type() == torch::kFloat &&
        weight.device().is_cpu() && weight.dim() == 1 && weight.size(0) == x.size(-1) &&
        bias.sizes() == weight.sizes())
        return ResidualNormFunction::apply(x, residual, weight, bias, eps);
#endif
    return unfused_residual_layer_norm(x, residual, weight, bias, eps);
}

}  // namespace engine
