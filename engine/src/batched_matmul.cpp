// Batched sgemm for attention (engine/batched_matmul.h). Each matrix of a (..., M, K) tensor
// is read in place: a row-major view (last stride 1, rows `ld` apart) or a column-major one
// (second-last stride 1: a transposed view, passed to sgemm as CblasTrans). Matrices are
// spread over ATen's thread pool; inside it OpenBLAS (the OpenMP build, cmake/TupeRuntime)
// runs each sgemm on the calling thread.
#include "engine/batched_matmul.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <atomic>

#if TUPE_WITH_CBLAS
extern "C" {
#include <cblas.h>
}
#endif

namespace engine {

namespace {

std::atomic<bool> g_enabled{true};

#if TUPE_WITH_CBLAS

bool cpu_autocast_on() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    return at::autocast::is_autocast_enabled(at::kCPU);
#else
    return at::autocast::is_cpu_enabled();
#endif
}

/// How one operand's matrices lie in memory.
struct Operand {
    const float* data = nullptr;
    std::vector<int64_t> batch_strides;  // of the flattened leading dims, in elements
    std::vector<int64_t> batch_sizes;
    CBLAS_TRANSPOSE trans = CblasNoTrans;
    int64_t ld = 0;
};

/// The operand as sgemm sees it, or false when neither of its last two strides is 1 (or the
/// other stride is too small for BLAS), in which case the caller makes it contiguous.
bool describe(const torch::Tensor& t, Operand& op) {
    const int64_t r = t.dim();
    const int64_t rows = t.size(r - 2), cols = t.size(r - 1);
    const int64_t s_row = t.stride(r - 2), s_col = t.stride(r - 1);
    if (s_col == 1 && s_row >= std::max<int64_t>(1, cols)) {
        op.trans = CblasNoTrans;
        op.ld = s_row;
    } else if (s_row == 1 && s_col >= std::max<int64_t>(1, rows)) {
        op.trans = CblasTrans;  // the memory holds the transpose, row-major
        op.ld = s_col;
    } else if (rows == 1 || cols == 1) {
        if (t.is_contiguous()) {
            op.trans = CblasNoTrans;
            op.ld = std::max<int64_t>(1, cols);
        } else {
            return false;
        }
    } else {
        return false;
    }
    op.data = t.data_ptr<float>();
    op.batch_sizes.assign(t.sizes().begin(), t.sizes().end() - 2);
    op.batch_strides.assign(t.strides().begin(), t.strides().end() - 2);
    return true;
}

/// Element offset of matrix n (row-major over the batch dims).
int64_t offset(const Operand& op, int64_t n) {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(op.batch_sizes.size()) - 1; d >= 0; --d) {
        const int64_t i = n % op.batch_sizes[d];
        n /= op.batch_sizes[d];
        off += i * op.batch_strides[d];
    }
    return off;
}

torch::Tensor sgemm_batched(torch::Tensor a, torch::Tensor b) {
    Operand A, B;
    if (!describe(a, A)) {
        a = a.contiguous();
        describe(a, A);
    }
    if (!describe(b, B)) {
        b = b.contiguous();
        describe(b, B);
    }
    const int64_t r = a.dim();
    const int64_t M = a.size(r - 2), K = a.size(r - 1), N = b.size(r - 1);
    std::vector<int64_t> out_sizes(a.sizes().begin(), a.sizes().end() - 2);
    out_sizes.push_back(M);
    out_sizes.push_back(N);
    auto out = torch::empty(out_sizes, a.options().memory_format(at::MemoryFormat::Contiguous));
    const int64_t count = out.numel() / std::max<int64_t>(1, M * N);
    float* C = out.data_ptr<float>();
    if (K == 0) return out.zero_();
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n)
            cblas_sgemm(CblasRowMajor, A.trans, B.trans, static_cast<int>(M), static_cast<int>(N),
                        static_cast<int>(K), 1.0f, A.data + offset(A, n), static_cast<int>(A.ld),
                        B.data + offset(B, n), static_cast<int>(B.ld), 0.0f, C + n * M * N,
                        static_cast<int>(N));
    });
    return out;
}

/// C = A B with the backward dA = dC B^T, dB = A^T dC, each a batched sgemm on views.
class BatchedMatmulFunction : public torch::autograd::Function<BatchedMatmulFunction> {
  public:
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                                 const torch::Tensor& b) {
        ctx->save_for_backward({a, b});
        return sgemm_batched(a, b);
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::tensor_list grads) {
        const auto saved = ctx->get_saved_variables();
        const auto& a = saved[0];
        const auto& b = saved[1];
        const auto& g = grads[0];
        torch::Tensor ga, gb;
        if (ctx->needs_input_grad(0)) ga = sgemm_batched(g, b.transpose(-2, -1));
        if (ctx->needs_input_grad(1)) gb = sgemm_batched(a.transpose(-2, -1), g);
        return {ga, gb};
    }
};

#endif  // TUPE_WITH_CBLAS

}  // namespace

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
#if TUPE_WITH_CBLAS
    const bool direct = g_enabled.load(std::memory_order_relaxed) && a.device().is_cpu() &&
                        b.device().is_cpu() && a.scalar_type() == torch::kFloat &&
                        b.scalar_type() == torch::kFloat && a.dim() >= 3 && a.dim() == b.dim() &&
                        a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2) &&
                        a.size(-1) == b.size(-2) && a.numel() > 0 && b.numel() > 0 &&
                        // Under autocast the product would be bf16: leave that to LibTorch.
                        !cpu_autocast_on();
    if (direct) return BatchedMatmulFunction::apply(a, b);
#endif
    return torch::matmul(a, b);
}

void set_batched_matmul_enabled(bool enabled) { g_enabled.store(enabled); }

bool batched_matmul_enabled() { return g_enabled.load() && batched_matmul_available(); }

bool batched_matmul_available() {
#if TUPE_WITH_CBLAS
    return true;
#else
    return false;
#endif
}

}  // namespace engine
