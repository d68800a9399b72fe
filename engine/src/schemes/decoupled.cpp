// BERT-Ad's decoupled positions (Ke, He, Liu, ICLR 2021, Eq. 6): (xW^Q + p'U^Q)(xW^K + p'U^K)^T,
// the four word/position terms in attention, from a table of max_len rows (row p_t for token t,
// as BERT-A's), p' = LayerNorm(p), one U^Q, U^K per layer group. Shapes: (T) -> q/k offsets
// (T, C) per group, added before the head split.
#include "scheme_module.h"

namespace engine::schemes {

namespace {

class DecoupledPositions final : public SchemeModule {
  public:
    explicit DecoupledPositions(PositionEncodingImpl& owner) : owner_(owner) {
        register_position_table(owner, owner.config().max_position_embeddings);
        register_projections(owner);
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        auto p = owner_.pos_ln(owner_.pos->weight.index_select(0, in.positions));  // (T, C)
        for (size_t g = 0; g < terms.layers.size(); ++g) {
            auto proj = owner_.projection(static_cast<int64_t>(g));
            terms.layers[g].q_offset = proj->pos_q_linear(p);
            terms.layers[g].k_offset = proj->pos_k_linear(p);
        }
    }

  private:
    PositionEncodingImpl& owner_;
};

}  // namespace

std::unique_ptr<SchemeModule> make_decoupled(PositionEncodingImpl& owner) {
    return std::make_unique<DecoupledPositions>(owner);
}

}  // namespace engine::schemes
