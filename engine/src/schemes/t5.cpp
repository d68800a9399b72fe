// T5's relative bias (Raffel et al. 2020; TUPE's BERT-R and TUPE-R, Eq. 5 and 7): a learned
// scalar per head and bucket of p_j - p_i, half the buckets exact and half log-spaced up to
// max_rel_pos, as relative_position_bucket in guolinke/TUPE; with the [CLS] reset, [CLS]'s row
// and column take buckets of their own. Not scaled. Shapes: (T) -> (H, T, T), one table
// (rel_pos_bins + 1, H) for every layer.
#include <cmath>

#include "scheme_module.h"

namespace engine {

int64_t t5_relative_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance) {
    // T5 bucketing (Raffel et al. 2020), as relative_position_bucket in guolinke/TUPE
    // (bidirectional=True).
    int64_t ret = 0;
    int64_t n = -relative_position;
    num_buckets /= 2;
    if (n < 0) ret += num_buckets;  // key to the right of the query
    n = std::abs(n);
    const int64_t max_exact = num_buckets / 2;
    if (n < max_exact) return ret + n;
    // Same float arithmetic as the reference: log(n / max_exact) / log(max_distance / max_exact).
    const float ratio = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                        static_cast<float>(std::log(static_cast<double>(max_distance) /
                                                    static_cast<double>(max_exact)));
    int64_t large =
        max_exact + static_cast<int64_t>(ratio * static_cast<float>(num_buckets - max_exact));
    if (large > num_buckets - 1) large = num_buckets - 1;
    return ret + large;
}

torch::Tensor relative_bucket_matrix(int64_t seq_len, int64_t num_buckets, int64_t max_distance,
                                     bool cls_buckets) {
    auto buckets = torch::empty({seq_len, seq_len}, torch::kLong);
    auto acc = buckets.accessor<int64_t, 2>();
    for (int64_t i = 0; i < seq_len; ++i)
        for (int64_t j = 0; j < seq_len; ++j)
            acc[i][j] = t5_relative_bucket(j - i, num_buckets, max_distance);
    if (cls_buckets && seq_len > 0) {
        // Reference order: others -> [CLS] first, then [CLS] -> others (so [0,0] = nb / 2).
        buckets.select(1, 0).fill_(num_buckets);
        buckets.select(0, 0).fill_(num_buckets / 2);
    }
    return buckets;
}

namespace {

constexpr const char* kT5Table = "relative_attention_bias";

// The bias (H, T, T) of table `weight` (rel_pos_bins + 1, H) at `positions` (T).
torch::Tensor t5_bias(const torch::Tensor& weight, const torch::Tensor& positions,
                      const ModelConfig& c) {
    // Buckets of p_j - p_i through a lookup table over the distances that occur (the scalar
    // function keeps the reference's float arithmetic), [CLS] buckets for the reset.
    const int64_t T = positions.size(0);
    auto p = positions.to(torch::kCPU);
    const int64_t lo = p.min().item<int64_t>(), hi = p.max().item<int64_t>();
    const int64_t span = hi - lo;
    auto lut = torch::empty({2 * span + 1}, torch::kLong);
    auto l = lut.accessor<int64_t, 1>();
    for (int64_t r = -span; r <= span; ++r)
        l[r + span] = t5_relative_bucket(r, c.rel_pos_bins, c.max_rel_pos);
    auto relpos = p.view({1, T}) - p.view({T, 1});  // [i][j] = p_j - p_i
    auto buckets = lut.index_select(0, (relpos + span).reshape({-1})).view({T, T});
    if (c.untie_cls) {
        buckets.select(1, 0).fill_(c.rel_pos_bins);
        buckets.select(0, 0).fill_(c.rel_pos_bins / 2);
    }
    // (T, T) -> (T, T, H) -> (H, T, T). Not scaled, as the reference.
    return torch::nn::functional::embedding(buckets.to(weight.device()), weight).permute({2, 0, 1});
}

}  // namespace

torch::Tensor PositionEncodingImpl::relative_bias(int64_t seq_len) {
    const auto* table = named_children().find(kT5Table);
    if (!table) return {};
    const torch::Tensor& weight = (*table)->as<torch::nn::EmbeddingImpl>()->weight;
    return t5_bias(weight, positions(seq_len, weight.device()), config_);
}

namespace schemes {

namespace {

class T5RelativeBias final : public SchemeModule {
  public:
    explicit T5RelativeBias(PositionEncodingImpl& owner) : config_(owner.config()) {
        table_ = owner.register_module(
            kT5Table, torch::nn::Embedding(config_.rel_pos_bins + 1, config_.num_attention_heads));
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        auto bias = t5_bias(table_->weight, in.positions, config_);  // one for every layer
        for (auto& layer : terms.layers) add_bias(layer, bias);
    }

  private:
    const ModelConfig& config_;
    torch::nn::Embedding table_{nullptr};
};

}  // namespace

std::unique_ptr<SchemeModule> make_t5(PositionEncodingImpl& owner) {
    return std::make_unique<T5RelativeBias>(owner);
}

}  // namespace schemes
}  // namespace engine
