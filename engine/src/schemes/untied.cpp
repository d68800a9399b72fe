// TUPE's untied positional correlation with the [CLS] reset (Ke, He, Liu, ICLR 2021, Eq. 6-9
// and App. B; guolinke/TUPE, transformer_sentence_encoder.py: get_abs_pos_bias): the bias
// (p'_i U^Q)(p'_j U^K)^T / sqrt(d * factor), p' = LayerNorm(p), from its own table of
// max_len + 1 rows (row 0 "[CLS] to others", row 1 "others to [CLS]", token t at position p_t
// uses row p_t + 1), one U^Q, U^K per layer group. Shapes: (T) -> (H, T, T) per group.
#include <cmath>

#include "scheme_module.h"

namespace engine {

namespace {

// A = (p'U^Q / sqrt(d * factor))(p'U^K)^T over the table rows `rows` (n), per head: (H, n, n).
torch::Tensor untied_rows(PositionEncodingImpl& owner, const torch::Tensor& rows, int64_t group) {
    const ModelConfig& c = owner.config();
    const int64_t H = c.num_attention_heads, d = c.head_dim(), n = rows.size(0);
    auto proj = owner.projection(group);
    auto weight = owner.pos_ln(owner.pos->weight.index_select(0, rows));  // p' (n, C)
    // (n, C) -> (n, H, d) -> (H, n, d); the query side carries 1/sqrt(d * factor).
    auto pos_q = proj->pos_q_linear(weight).view({n, H, d}).transpose(0, 1) *
                 (1.0 / std::sqrt(static_cast<double>(d) * c.attention_scale_factor));
    auto pos_k = proj->pos_k_linear(weight).view({n, H, d}).transpose(0, 1);
    return torch::bmm(pos_q, pos_k.transpose(1, 2));  // (H, n, n)
}

}  // namespace

UntiedCorrelation PositionEncodingImpl::untied_correlation(const torch::Tensor& positions,
                                                           int64_t group) {
    TORCH_CHECK(description_.untied, "untied_correlation needs absolute_position = untied, got ",
                description_.absolute);
    TORCH_CHECK(positions.dim() == 1 && positions.size(0) >= 1, "positions must be (T), got ",
                positions.sizes());
    const int64_t last = positions.max().item<int64_t>();
    TORCH_CHECK(last < config_.max_position_embeddings, "last position ", last,
                " does not fit max_position_embeddings = ", config_.max_position_embeddings);
    // Rows 0 and 1 are the reset's own (guolinke/TUPE: theta1 from row 0, theta2 from row 1),
    // whatever the positions; token t uses row p_t + 1. Both are always asked for on their own,
    // so the product has T + 2 rows for any positions: with a shape that depended on p_0 (the
    // reference's T + 1 rows when p_0 = 0), a BLAS that blocks by shape (MKL, in LibTorch 2.x)
    // rounds theta1 and theta2 differently at another first position.
    auto p = positions.to(torch::kLong).to(pos->weight.device());
    auto a = untied_rows(*this, torch::cat({torch::arange(2, p.options()), p + 1}),
                         group);  // (H, T+2, T+2)
    const int64_t skip = 2;
    UntiedCorrelation out;
    out.theta1 = a.select(1, 0).select(1, 0);    // (H): A[h, 0, 0]
    out.theta2 = a.select(1, 1).select(1, 1);    // (H): A[h, 1, 1]
    out.body = a.slice(1, skip).slice(2, skip);  // (H, T, T)
    return out;
}

UntiedCorrelation PositionEncodingImpl::untied_correlation(int64_t seq_len, int64_t group) {
    return untied_correlation(positions(seq_len, pos->weight.device()), group);
}

namespace schemes {

namespace {

class UntiedPositions final : public SchemeModule {
  public:
    explicit UntiedPositions(PositionEncodingImpl& owner) : owner_(owner) {
        // TUPE keeps one extra row: row 0 is "[CLS] to others", row 1 "others to [CLS]", and
        // token t >= 1 uses row t + 1.
        register_position_table(owner, owner.config().max_position_embeddings + 1);
        register_projections(owner);
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        const int64_t T = in.positions.size(0), H = owner_.config().num_attention_heads;
        for (size_t g = 0; g < terms.layers.size(); ++g) {
            auto a = owner_.untied_correlation(in.positions, static_cast<int64_t>(g));
            auto bias = a.body;  // (H, T, T)
            if (owner_.config().untie_cls) {
                // [CLS] reset: column 0 <- theta2, then row 0 <- theta1 (row wins at [0,0]).
                auto col = a.theta2.view({H, 1, 1}).expand({H, T, 1});
                bias = torch::cat({col, bias.slice(2, 1)}, 2);
                auto row = a.theta1.view({H, 1, 1}).expand({H, 1, T});
                bias = torch::cat({row, bias.slice(1, 1)}, 1);
            }
            add_bias(terms.layers[g], bias);
        }
    }

  private:
    PositionEncodingImpl& owner_;
};

}  // namespace

std::unique_ptr<SchemeModule> make_untied(PositionEncodingImpl& owner) {
    return std::make_unique<UntiedPositions>(owner);
}

}  // namespace schemes
}  // namespace engine
