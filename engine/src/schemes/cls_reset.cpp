// TUPE's [CLS] reset (Ke, He, Liu, ICLR 2021, Eq. 9 and App. B) on a scheme without TUPE's own
// table (model.untie_cls with anything but absolute_position untied): learned theta1 per head
// on [CLS]'s row ([CLS] -> others) and theta2 on its column (others -> [CLS]), the row winning
// at [0, 0], added to a bias whose [CLS] row and column carry no position (T5's [CLS] buckets,
// ALiBi's, FIRE's and KERPLE's zero distance, RoPE's unrotated row). Shapes: (2, H) ->
// (H, T, T).
#include "scheme_module.h"

namespace engine::schemes {

namespace {

class ClsReset final : public SchemeModule {
  public:
    explicit ClsReset(PositionEncodingImpl& owner) {
        theta_ = owner.register_parameter("cls_theta",
                                          torch::zeros({2, owner.config().num_attention_heads}));
    }

    void contribute(const SchemeInputs& in, PositionTerms& terms) override {
        const int64_t T = in.positions.size(0), H = theta_.size(1);
        auto zeros = torch::zeros({H, T - 1, T - 1}, theta_.options());
        auto col = theta_[1].view({H, 1, 1}).expand({H, T - 1, 1});
        auto body = torch::cat({col, zeros}, 2);  // (H, T-1, T)
        auto row = theta_[0].view({H, 1, 1}).expand({H, 1, T});
        auto cls = torch::cat({row, body}, 1);  // (H, T, T)
        for (auto& layer : terms.layers) add_bias(layer, cls);
    }

  private:
    torch::Tensor theta_;  ///< (2, H): theta1 (row 0), theta2 (column 0)
};

}  // namespace

std::unique_ptr<SchemeModule> make_cls_reset(PositionEncodingImpl& owner) {
    return std::make_unique<ClsReset>(owner);
}

}  // namespace engine::schemes
