// Shaw et al.'s relative keys (NAACL 2018; HF modeling_bert "relative_key") and Huang et al.'s
// relative keys and queries (2020; "relative_key_query"): per layer a table r of 2k + 1 rows for
// the distances p_i - p_j clipped to [-k, k] (k = max_relative_distance, 0 = max_len - 1, HF's
// table exactly); logits += q_i . r_ij (and k_j . r_ij), inside the 1/sqrt(d) scaling.
// Shapes: (T) -> r_ij (T, T, d) per group; terms (B, H, T, T).
#include "scheme_module.h"

namespace engine::schemes {

namespace {

// The content slot's terms from r_ij (T, T, d).
class ShawTerms final : public ContentTerm {
  public:
    ShawTerms(torch::Tensor rel_keys, bool key_query)
        : rel_keys_(std::move(rel_keys)), key_query_(key_query) {}

    void add_terms(const torch::Tensor& qs, const torch::Tensor& k, const torch::Tensor&,
                   double scaling,
                   std::vector<std::pair<std::string, torch::Tensor>>& out) const override {
        // Shaw et al. 2018 / HF modeling_bert relative_key: q_i . r_ij, and for
        // relative_key_query also k_j . r_ij, both inside the 1/sqrt(d) scaling.
        auto r = rel_keys_.to(qs.scalar_type());
        out.emplace_back("c2p", torch::einsum("bhld,lrd->bhlr", {qs, r}));
        if (key_query_) out.emplace_back("p2c", torch::einsum("bhrd,lrd->bhlr", {k * scaling, r}));
    }
    const char* slot_name() const override { return "relative keys"; }

  private:
    torch::Tensor rel_keys_;
    bool key_query_;
};

class ShawRelativeKeys final : public SchemeModule {
  public:
    ShawRelativeKeys(PositionEncodingImpl& owner, bool key_query)
        : clip_(relative_distance_clip(owner.config())), key_query_(key_query) {
        // HF: distance_embedding = Embedding(2 * max_position_embeddings - 1, d) per layer;
        // here 2k + 1 rows for distances clipped to [-k, k].
        tables_ = owner.register_module("distance_embedding", torch::nn::ModuleList());
        for (int64_t g = 0; g < owner.layer_groups(); ++g)
            tables_->push_back(torch::nn::Embedding(2 * clip_ + 1, owner.config().head_dim()));
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        // HF: distance = p_i - p_j, row distance + (max_position_embeddings - 1); clipped here.
        const int64_t T = in.positions.size(0);
        auto p = in.positions.view({-1});
        auto index = (p.view({T, 1}) - p.view({1, T})).clamp(-clip_, clip_) + clip_;  // (T, T)
        for (size_t g = 0; g < terms.layers.size(); ++g) {
            auto table = tables_->ptr<torch::nn::EmbeddingImpl>(g);
            terms.layers[g].content.push_back(
                std::make_shared<ShawTerms>(table->forward(index), key_query_));  // (T, T, d)
        }
    }

  private:
    int64_t clip_;
    bool key_query_;
    torch::nn::ModuleList tables_{nullptr};
};

}  // namespace

std::unique_ptr<SchemeModule> make_shaw(PositionEncodingImpl& owner, bool key_query) {
    return std::make_unique<ShawRelativeKeys>(owner, key_query);
}

}  // namespace engine::schemes
