// KERPLE (Chi et al., NeurIPS 2022, and their GPT-NeoX code), symmetric for an encoder: with
// d = |p_i - p_j| and two learned scalars per head and layer group, the log kernel
// -r1 ln(1 + r2 d) or the power kernel -r1 d^r2 (0 < r2 <= 2), r1, r2 >= 0.01; with the [CLS]
// reset, d = 0 on [CLS]'s row and column. Shapes: kerple_r1, kerple_r2 (G, H); (T) -> (H, T, T).
#include "scheme_module.h"

namespace engine::schemes {

namespace {

// KERPLE's floor on r1 and r2 (their code's eps), and the power kernel's ceiling on r2.
constexpr double kKerpleEps = 1e-2;
constexpr double kKerpleMaxPower = 2.0;

class KerpleBias final : public SchemeModule {
  public:
    KerpleBias(PositionEncodingImpl& owner, bool power)
        : power_(power), untie_cls_(owner.config().untie_cls) {
        // Chi et al., KERPLE, NeurIPS 2022, and their GPT-NeoX code: per head r1, r2 drawn as
        // bias_p ~ U(0, 2) and bias_a ~ U(0, 1) there, kept >= 1e-2. Log kernel
        // -bias_p ln(1 + bias_a d): r1 = bias_p, r2 = bias_a; power kernel -bias_a d^bias_p:
        // r1 = bias_a, r2 = bias_p (the exponent, <= 2).
        const int64_t G = owner.layer_groups(), H = owner.config().num_attention_heads;
        auto r1 = torch::rand({G, H}) * (power ? 1.0 : 2.0);
        auto r2 = torch::rand({G, H}) * (power ? 2.0 : 1.0);
        r1_ = owner.register_parameter("kerple_r1", r1.clamp_min(kKerpleEps));
        r2_ = owner.register_parameter("kerple_r2", r2.clamp_min(kKerpleEps));
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        if (in.training) project();
        for (size_t g = 0; g < terms.layers.size(); ++g)
            add_bias(terms.layers[g], bias(in.positions, static_cast<int64_t>(g)));
    }

  private:
    torch::Tensor bias(const torch::Tensor& positions, int64_t group) const {
        // KERPLE (Chi et al., NeurIPS 2022), symmetric: d = |p_i - p_j|,
        //   log:   -r1 ln(1 + r2 d)     power: -r1 d^r2, 0 < r2 <= 2.
        // In training contribute() has projected r1 and r2 onto their range (project); the
        // clamp here keeps the function defined for any weights at evaluation.
        const int64_t T = positions.size(0), H = r1_.size(1);
        // The clamped value with the parameter's own gradient: LibTorch 2.x's clamp passes no
        // gradient at the bound itself (1.13's did), so a parameter project() put on the floor
        // would stay there for good.
        auto in_range = [](const torch::Tensor& x, const torch::Tensor& clamped) {
            return x + (clamped - x).detach();
        };
        const auto& x1 = r1_[group];
        const auto& x2 = r2_[group];
        auto r1 = in_range(x1, x1.clamp_min(kKerpleEps)).view({H, 1, 1});
        auto r2 =
            in_range(x2, power_ ? x2.clamp(kKerpleEps, kKerpleMaxPower) : x2.clamp_min(kKerpleEps))
                .view({H, 1, 1});
        auto p = positions.to(r1_.device(), r1_.scalar_type());
        auto dist = (p.view({1, T}) - p.view({T, 1})).abs();  // (T, T)
        if (untie_cls_) {
            dist.select(0, 0).zero_();  // [CLS]'s row and column carry no distance, as ALiBi's
            dist.select(1, 0).zero_();
        }
        if (!power_) return -r1 * torch::log1p(r2 * dist.unsqueeze(0));
        // d^r2 as exp(r2 ln d) where d > 0 (d is a whole number, so d >= 1 there), 0 at d = 0:
        // no 0 * ln 0 in the gradient of r2.
        auto d = dist.unsqueeze(0);
        auto pow = torch::exp(r2 * torch::log(d.clamp_min(1.0)));
        return -r1 * torch::where(d > 0, pow, torch::zeros_like(pow));
    }

    void project() {
        // KERPLE's code clamps the parameters' data in place before each use in training, a
        // projected gradient step: a parameter pushed below the floor is put back on it and
        // keeps its gradient (a clamp in the formula alone would leave it there with none).
        // Once per forward pass, before any group uses them (an in-place change after a use
        // would break that use's backward).
        torch::NoGradGuard no_grad;
        r1_.clamp_min_(kKerpleEps);
        if (power_)
            r2_.clamp_(kKerpleEps, kKerpleMaxPower);
        else
            r2_.clamp_min_(kKerpleEps);
    }

    bool power_, untie_cls_;
    torch::Tensor r1_, r2_;
};

}  // namespace

std::unique_ptr<SchemeModule> make_kerple(PositionEncodingImpl& owner, bool power) {
    return std::make_unique<KerpleBias>(owner, power);
}

}  // namespace engine::schemes
