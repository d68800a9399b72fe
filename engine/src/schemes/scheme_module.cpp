// The factory of the scheme modules (scheme_module.h) and what several of them share.
#include "scheme_module.h"

#include <stdexcept>
#include <string>

namespace engine::schemes {

// Each defined in its scheme's file.
std::unique_ptr<SchemeModule> make_learned_input(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_sinusoidal(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_untied(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_decoupled(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_t5(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_shaw(PositionEncodingImpl& owner, bool key_query);
std::unique_ptr<SchemeModule> make_rope(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_alibi(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_deberta(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_fire(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_kerple(PositionEncodingImpl& owner, bool power);
std::unique_ptr<SchemeModule> make_cope(PositionEncodingImpl& owner);
std::unique_ptr<SchemeModule> make_cls_reset(PositionEncodingImpl& owner);

std::unique_ptr<SchemeModule> make_scheme_module(Scheme id, PositionEncodingImpl& owner) {
    switch (id) {
        case Scheme::kInput: return make_learned_input(owner);
        case Scheme::kSinusoidal: return make_sinusoidal(owner);
        case Scheme::kUntied: return make_untied(owner);
        case Scheme::kDecoupled: return make_decoupled(owner);
        case Scheme::kT5: return make_t5(owner);
        case Scheme::kShaw: return make_shaw(owner, /*key_query=*/false);
        case Scheme::kShawKeyQuery: return make_shaw(owner, /*key_query=*/true);
        case Scheme::kRope: return make_rope(owner);
        case Scheme::kAlibi: return make_alibi(owner);
        case Scheme::kDeberta: return make_deberta(owner);
        case Scheme::kFire: return make_fire(owner);
        case Scheme::kKerpleLog: return make_kerple(owner, /*power=*/false);
        case Scheme::kKerplePower: return make_kerple(owner, /*power=*/true);
        case Scheme::kCope: return make_cope(owner);
        case Scheme::kClsReset: return make_cls_reset(owner);
        case Scheme::kNone: break;
    }
    throw std::logic_error("make_scheme_module: no module for scheme " +
                           std::string(scheme_row(id).name));
}

void add_bias(LayerPosition& layer, const torch::Tensor& bias) {
    layer.bias = layer.bias.defined() ? layer.bias + bias : bias;
}

void register_position_table(PositionEncodingImpl& owner, int64_t rows) {
    const ModelConfig& c = owner.config();
    owner.pos = owner.register_module("pos", torch::nn::Embedding(rows, c.hidden_size));
    owner.pos_ln = owner.register_module("pos_ln", Norm(c.hidden_size, c));
}

void register_projections(PositionEncodingImpl& owner) {
    if (!owner.projections.is_empty()) return;
    const ModelConfig& c = owner.config();
    owner.projections = owner.register_module("projections", torch::nn::ModuleList());
    for (int64_t g = 0; g < owner.layer_groups(); ++g)
        owner.projections->push_back(PositionProjection(c.hidden_size, c.bias));
}

}  // namespace engine::schemes
