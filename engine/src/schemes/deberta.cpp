// DeBERTa's disentangled attention (He et al., ICLR 2021, Eq. 3-4): one table P of 2k relative
// positions for all layers (k = max_relative_distance, 0 = max_len - 1), projected per layer
// group to K_r = P W_{k,r} and Q_r = P W_{q,r}; logits += q_i . K_r[delta(i,j)] (c2p) +
// k_j . Q_r[delta(j,i)] (p2c), delta(i, j) = clamp(i - j + k, 0, 2k - 1), inside the scaling.
// Shapes: P (2k, C) -> K_r, Q_r (H, 2k, d); delta (T, T); terms (B, H, T, T).
#include "scheme_module.h"

namespace engine::schemes {

namespace {

class DebertaTerms final : public ContentTerm {
  public:
    DebertaTerms(torch::Tensor c2p_keys, torch::Tensor p2c_queries, torch::Tensor rel_index)
        : c2p_keys_(std::move(c2p_keys)),
          p2c_queries_(std::move(p2c_queries)),
          rel_index_(std::move(rel_index)) {}

    void add_terms(const torch::Tensor& qs, const torch::Tensor& k, const torch::Tensor&,
                   double scaling,
                   std::vector<std::pair<std::string, torch::Tensor>>& out) const override {
        // He et al., DeBERTa, Eq. 4: c2p = Q_c K_r[delta(i,j)]^T, p2c = K_c Q_r[delta(j,i)]^T.
        const int64_t B = qs.size(0), H = qs.size(1), T = qs.size(2);
        auto idx = rel_index_.view({1, 1, T, T}).expand({B, H, T, T});
        auto c2p_all = torch::matmul(qs, c2p_keys_.to(qs.scalar_type()).transpose(-2, -1));
        out.emplace_back("c2p", c2p_all.gather(-1, idx));  // [i][j] = q_i . K_r[delta(i,j)]
        auto p2c_all =
            torch::matmul(k * scaling, p2c_queries_.to(k.scalar_type()).transpose(-2, -1));
        // gather gives [j][i] = k_j . Q_r[delta(j,i)]; transposed to [i][j].
        out.emplace_back("p2c", p2c_all.gather(-1, idx).transpose(-2, -1));
    }
    const char* slot_name() const override { return "c2p/p2c terms"; }

  private:
    torch::Tensor c2p_keys_, p2c_queries_, rel_index_;
};

class DebertaRelative final : public SchemeModule {
  public:
    explicit DebertaRelative(PositionEncodingImpl& owner)
        : owner_(owner), clip_(relative_distance_clip(owner.config())) {
        register_projections(owner);
        // One table P of 2k relative positions for all layers, projected per layer.
        table_ = owner.register_module("rel_embeddings",
                                       torch::nn::Embedding(2 * clip_, owner.config().hidden_size));
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        const ModelConfig& c = owner_.config();
        const int64_t T = in.positions.size(0), H = c.num_attention_heads, d = c.head_dim();
        // DeBERTa Eq. 3: delta(i, j) = clamp(i - j + k, 0, 2k - 1).
        auto p = in.positions.view({-1});
        auto index = (p.view({T, 1}) - p.view({1, T}) + clip_).clamp(0, 2 * clip_ - 1);
        const torch::Tensor& P = table_->weight;  // (2k, C)
        const int64_t n = P.size(0);
        for (size_t g = 0; g < terms.layers.size(); ++g) {
            // Q_r = P W_{q,r}, K_r = P W_{k,r}: (2k, C) -> (2k, H, d) -> (H, 2k, d).
            auto proj = owner_.projection(static_cast<int64_t>(g));
            auto queries = proj->pos_q_linear(P).view({n, H, d}).transpose(0, 1);
            auto keys = proj->pos_k_linear(P).view({n, H, d}).transpose(0, 1);
            terms.layers[g].content.push_back(std::make_shared<DebertaTerms>(keys, queries, index));
        }
    }

  private:
    PositionEncodingImpl& owner_;
    int64_t clip_;
    torch::nn::Embedding table_{nullptr};
};

}  // namespace

std::unique_ptr<SchemeModule> make_deberta(PositionEncodingImpl& owner) {
    return std::make_unique<DebertaRelative>(owner);
}

}  // namespace engine::schemes
