// The fixed sinusoidal table at the input (Vaswani et al. 2017, sec. 3.5): PE(pos, 2i) =
// sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(pos / 10000^(2i/C)), computed in float64 and
// rounded once. Shapes: positions (T) -> (T, C).
#include "scheme_module.h"

namespace engine {

torch::Tensor sinusoidal_table(const torch::Tensor& positions, int64_t hidden_size) {
    // Vaswani et al. 2017, sec. 3.5, computed in float64 and rounded once.
    auto pos = positions.to(torch::kCPU, torch::kDouble).view({-1, 1});  // (T, 1)
    auto i = torch::arange(0, hidden_size, 2, torch::kDouble);           // 2i
    auto inv = torch::pow(10000.0, -i / static_cast<double>(hidden_size)).view({1, -1});
    auto angle = pos * inv;  // (T, ceil(C/2))
    auto table = torch::empty({pos.size(0), hidden_size}, torch::kDouble);
    table.slice(1, 0, hidden_size, 2).copy_(torch::sin(angle));
    const int64_t odd = hidden_size / 2;
    if (odd > 0) table.slice(1, 1, hidden_size, 2).copy_(torch::cos(angle.slice(1, 0, odd)));
    return table.to(positions.device());
}

namespace schemes {

namespace {

class SinusoidalTable final : public SchemeModule {
  public:
    explicit SinusoidalTable(PositionEncodingImpl& owner) : hidden_(owner.config().hidden_size) {}

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        terms.input = sinusoidal_table(in.positions, hidden_).to(in.dtype);
    }

  private:
    int64_t hidden_;
};

}  // namespace

std::unique_ptr<SchemeModule> make_sinusoidal(PositionEncodingImpl& owner) {
    return std::make_unique<SinusoidalTable>(owner);
}

}  // namespace schemes
}  // namespace engine
