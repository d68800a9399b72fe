// FIRE (Li et al., ICLR 2024, and their PyTorch listing), made two-sided for an encoder: the bias
// f_h(x_ij) of an MLP 1 -> 32 -> H per layer group on x_ij = sign(p_i - p_j) psi(|p_i - p_j|) /
// (psi(max(L, p_i, p_j)) + 1e-6), psi(d) = ln(|c| d + 1), c and the threshold L learned
// (fire_input, docs/zoo.md "FIRE, made two-sided"); with the [CLS] reset, x = 0 on [CLS]'s row
// and column. Shapes: (T) -> x (T, T) -> (H, T, T) per group.
#include <algorithm>

#include "scheme_module.h"

namespace engine {

torch::Tensor fire_input(const torch::Tensor& positions, const torch::Tensor& c,
                         const torch::Tensor& threshold) {
    // FIRE (Li et al., ICLR 2024), progressive interpolation with a threshold, and their listing:
    // psi(d) = log(|c d| + 1), normalised by psi(max(L, i)) + 1e-6 for query position i and keys j
    // <= i. Two-sided here: the normaliser is the later of the two positions, max(L, p_i, p_j), and
    // the sign of p_i - p_j tells left from right, so one MLP sees [-1, 1] at any length.
    const int64_t T = positions.size(0);
    auto p = positions.to(c.device(), c.scalar_type());
    auto psi = [&](const torch::Tensor& d) { return torch::log(torch::abs(c * d) + 1.0); };
    auto diff = p.view({T, 1}) - p.view({1, T});                  // [i][j] = p_i - p_j
    auto later = torch::maximum(p.view({T, 1}), p.view({1, T}));  // max(p_i, p_j)
    auto normaliser = psi(torch::maximum(later, threshold)) + 1e-6;
    return torch::sign(diff) * psi(diff.abs()) / normaliser;
}

double fire_init_threshold(const ModelConfig& config) {
    return std::max(1.0, static_cast<double>(config.max_position_embeddings) / 4.0);
}

FireBiasImpl::FireBiasImpl(int64_t num_heads, double init_threshold_)
    : init_threshold(init_threshold_) {
    // Li et al. 2024, their listing: mlp_width 32, init_c 0.1, L_multiplier 1 (init_L is fixed).
    constexpr int64_t kFireMlpWidth = 32;
    mlp = register_module(
        "mlp", torch::nn::Sequential(torch::nn::Linear(1, kFireMlpWidth), torch::nn::ReLU(),
                                     torch::nn::Linear(kFireMlpWidth, num_heads)));
    c = register_parameter("c", torch::full({}, 0.1));
    L_multiplier = register_parameter("L_multiplier", torch::ones({}));
}

torch::Tensor FireBiasImpl::threshold() const { return L_multiplier.abs() * init_threshold; }

torch::Tensor FireBiasImpl::forward(const torch::Tensor& positions, bool cls_free) {
    auto x = fire_input(positions, c, threshold());  // (T, T)
    if (cls_free) {
        // [CLS] reset: its row and column carry no distance (f(0) for every pair).
        const int64_t T = x.size(0);
        auto keep = torch::ones({T, T}, x.options());
        keep.select(0, 0).zero_();
        keep.select(1, 0).zero_();
        x = x * keep;
    }
    // (T, T) -> (T, T, 1) -> MLP -> (T, T, H) -> (H, T, T)
    return mlp->forward(x.unsqueeze(-1)).permute({2, 0, 1});
}

namespace schemes {

namespace {

class FireBiasModule final : public SchemeModule {
  public:
    explicit FireBiasModule(PositionEncodingImpl& owner) : untie_cls_(owner.config().untie_cls) {
        groups_ = owner.register_module("fire", torch::nn::ModuleList());
        for (int64_t g = 0; g < owner.layer_groups(); ++g)
            groups_->push_back(
                FireBias(owner.config().num_attention_heads, fire_init_threshold(owner.config())));
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        for (size_t g = 0; g < terms.layers.size(); ++g)
            add_bias(terms.layers[g],
                     groups_->ptr<FireBiasImpl>(g)->forward(in.positions, untie_cls_));
    }

  private:
    bool untie_cls_;
    torch::nn::ModuleList groups_{nullptr};
};

}  // namespace

std::unique_ptr<SchemeModule> make_fire(PositionEncodingImpl& owner) {
    return std::make_unique<FireBiasModule>(owner);
}

}  // namespace schemes
}  // namespace engine
