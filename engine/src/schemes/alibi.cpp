// ALiBi (Press, Smith, Lewis, ICLR 2022, sec. 3), symmetric for an encoder: -m_h |p_i - p_j|,
// not scaled, m_h = 2^(-8h/H) (interleaved for H not a power of two, as their reference code);
// with the [CLS] reset, [CLS]'s row and column carry no distance. Shapes: (T) -> (H, T, T),
// the same for every layer.
#include <cmath>

#include "scheme_module.h"

namespace engine {

std::vector<double> alibi_slopes(int64_t num_heads) {
    // Press, Smith, Lewis, ICLR 2022, sec. 3: for n heads a geometric sequence starting at
    // 2^(-8/n) with that ratio; non-powers of two as in their reference code (get_slopes).
    auto power_of_2 = [](int64_t n) {
        std::vector<double> s;
        const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
        for (int64_t h = 0; h < n; ++h) s.push_back(std::pow(start, static_cast<double>(h + 1)));
        return s;
    };
    TORCH_CHECK(num_heads >= 1, "alibi_slopes: num_heads must be >= 1");
    int64_t closest = 1;
    while (closest * 2 <= num_heads) closest *= 2;
    auto slopes = power_of_2(closest);
    if (closest != num_heads) {
        const auto extra = power_of_2(2 * closest);
        for (int64_t i = 0; i < num_heads - closest; ++i)
            slopes.push_back(extra[static_cast<size_t>(2 * i)]);
    }
    return slopes;
}

namespace schemes {

namespace {

class AlibiBias final : public SchemeModule {
  public:
    explicit AlibiBias(PositionEncodingImpl& owner) : config_(owner.config()) {}

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        // Symmetric (bidirectional) ALiBi: -m_h |p_i - p_j|, not scaled.
        const int64_t T = in.positions.size(0), H = config_.num_attention_heads;
        auto p = in.positions.to(in.dtype);
        auto dist = (p.view({1, T}) - p.view({T, 1})).abs();  // (T, T)
        if (config_.untie_cls) {
            dist.select(0, 0).zero_();  // [CLS]'s row and column carry no distance
            dist.select(1, 0).zero_();
        }
        const auto slopes = alibi_slopes(H);
        auto m = torch::tensor(slopes, torch::kDouble).to(in.positions.device(), in.dtype);
        auto bias = -m.view({H, 1, 1}) * dist.unsqueeze(0);  // (H, T, T)
        for (auto& layer : terms.layers) add_bias(layer, bias);
    }

  private:
    const ModelConfig& config_;
};

}  // namespace

std::unique_ptr<SchemeModule> make_alibi(PositionEncodingImpl& owner) {
    return std::make_unique<AlibiBias>(owner);
}

}  // namespace schemes
}  // namespace engine
