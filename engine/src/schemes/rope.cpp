// RoPE (Su et al., RoFormer, Eq. 14-16): each pair (2i, 2i+1) of the first r = rope_dims
// dimensions of q and k rotated by p_t * theta_i, theta_i = base^(-2i/r), so that q_i . k_j
// depends on the positions only through p_j - p_i; the rotation itself is the q/k slot's
// (LayerPosition::scores). Its scalings at evaluation (RopeScaling) and ModernBERT's local base.
// Shapes: (T) -> cos, sin (T, r/2), shared by every layer (local layers: their own base).
#include <cmath>

#include "scheme_module.h"

namespace engine {

std::string rope_scaling_name(RopeScaling::Method method) {
    switch (method) {
        case RopeScaling::Method::kNone: return "none";
        case RopeScaling::Method::kInterpolation: return "pi";
        case RopeScaling::Method::kNtk: return "ntk";
        case RopeScaling::Method::kYarn: return "yarn";
    }
    return "none";
}

RopeScaling::Method parse_rope_scaling(const std::string& name) {
    for (auto m : {RopeScaling::Method::kNone, RopeScaling::Method::kInterpolation,
                   RopeScaling::Method::kNtk, RopeScaling::Method::kYarn})
        if (rope_scaling_name(m) == name) return m;
    throw std::invalid_argument("unknown RoPE scaling '" + name + "' (none, pi, ntk or yarn)");
}

int64_t rope_dims(const ModelConfig& config) {
    return static_cast<int64_t>(static_cast<double>(config.head_dim()) * config.rope_fraction) / 2 *
           2;
}

torch::Tensor rope_frequencies(int64_t rope_dims, double base, const RopeScaling& scaling) {
    using Method = RopeScaling::Method;
    const double s = scaling.factor, r = static_cast<double>(rope_dims);
    if (scaling.method != Method::kNone && !(s >= 1 && std::isfinite(s)))
        throw std::invalid_argument("RoPE scaling factor must be a finite number >= 1, got " +
                                    std::to_string(s));
    // theta_i = base^(-2i / r), i = 0..r/2-1 (RoFormer Eq. 15 with r rotated dimensions).
    auto i2 = torch::arange(0, rope_dims, 2, torch::kDouble);
    switch (scaling.method) {
        case Method::kNone: return torch::pow(base, -i2 / r);
        case Method::kInterpolation:
            // Chen et al. 2023: position m rotated as m / s, i.e. every frequency divided by s.
            return torch::pow(base, -i2 / r) / s;
        case Method::kNtk:
            // NTK-aware (bloc97 2023; YaRN sec. 3.1): a larger base, so that the lowest
            // frequency (i = r/2 - 1) is divided by exactly s and the highest kept.
            if (rope_dims < 4)
                throw std::invalid_argument(
                    "NTK-aware RoPE scaling needs at least 4 rotated dimensions (its exponent is "
                    "r / (r - 2)), got " +
                    std::to_string(rope_dims));
            return torch::pow(base * std::pow(s, r / (r - 2)), -i2 / r);
        case Method::kYarn: {
            // YaRN (Peng et al., ICLR 2024), sec. 3.2 "NTK-by-parts": pairs that turn fewer than
            // alpha = 1 times over the training length L are interpolated, more than beta = 32
            // times kept, a linear ramp in between.
            if (scaling.original_length < 1)
                throw std::invalid_argument("YaRN needs the training length (original_length)");
            auto theta = torch::pow(base, -i2 / r);
            const double two_pi = 2.0 * std::acos(-1.0);
            auto rotations = static_cast<double>(scaling.original_length) * theta / two_pi;
            auto gamma = ((rotations - 1.0) / (32.0 - 1.0)).clamp(0.0, 1.0);
            return (1 - gamma) * theta / s + gamma * theta;
        }
    }
    return torch::pow(base, -i2 / r);
}

double rope_logit_scale(const RopeScaling& scaling) {
    // YaRN sec. 3.4: q and k both times sqrt(1/t) = 0.1 ln s + 1, so the logits times its square.
    if (scaling.method != RopeScaling::Method::kYarn || scaling.factor <= 1) return 1.0;
    const double m = 0.1 * std::log(scaling.factor) + 1.0;
    return m * m;
}

namespace schemes {

namespace {

class RotaryPositions final : public SchemeModule {
  public:
    explicit RotaryPositions(PositionEncodingImpl& owner)
        : owner_(owner), dims_(rope_dims(owner.config())) {}

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        const ModelConfig& c = owner_.config();
        auto angles = [&](double base, torch::Tensor& cos, torch::Tensor& sin) {
            // theta_i = base^(-2i / r), or scaled for evaluation beyond L (RopeScaling).
            auto theta = rope_frequencies(dims_, base, owner_.rope_scaling());
            auto angle =
                in.positions.to(torch::kCPU, torch::kDouble).view({-1, 1}) * theta.view({1, -1});
            cos = torch::cos(angle).to(in.positions.device(), in.dtype);
            sin = torch::sin(angle).to(in.positions.device(), in.dtype);
        };
        torch::Tensor cos, sin;
        angles(c.rope_base, cos, sin);
        // ModernBERT (Warner et al. 2024, sec. 2.1.2): local layers keep theta 10k, global
        // layers take 160k (localize, for this forward pass's local layers).
        cos_local_ = sin_local_ = torch::Tensor();
        if (c.rope_base_local > 0) angles(c.rope_base_local, cos_local_, sin_local_);
        const double temperature = rope_logit_scale(owner_.rope_scaling());  // YaRN's
        for (auto& layer : terms.layers) {
            layer.scaling *= temperature;
            layer.rope_cos = cos, layer.rope_sin = sin, layer.rope_dims = dims_;
            layer.rope_untie_cls = c.untie_cls;
        }
    }

    void localize(LayerPosition& layer) const override {
        if (cos_local_.defined()) layer.rope_cos = cos_local_, layer.rope_sin = sin_local_;
    }

  private:
    PositionEncodingImpl& owner_;
    int64_t dims_;
    torch::Tensor cos_local_, sin_local_;  // the last contribute()'s, for localize()
};

}  // namespace

std::unique_ptr<SchemeModule> make_rope(PositionEncodingImpl& owner) {
    return std::make_unique<RotaryPositions>(owner);
}

}  // namespace schemes
}  // namespace engine
