// The interface every positional scheme's module implements (one file per scheme in this
// folder, one row per scheme in core's table, engine/position_scheme.h). PositionEncodingImpl
// builds the modules of a config's rows in its constructor, where each registers its
// parameters on it under their checkpoint names, and loops over them once per forward pass.
// Shapes: T tokens, C hidden, H heads, d = C / H, G layer groups (1 with shared_pos_term).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "engine/position.h"
#include "engine/position_scheme.h"

namespace engine::schemes {

/// What every module gets once per forward pass.
struct SchemeInputs {
    const torch::Tensor& positions;  ///< (T) long, token t's position
    torch::ScalarType dtype;         ///< of the tables without parameters (the word embeddings')
    bool training;                   ///< the position module is in training mode
};

/// One scheme: its parameters (registered on the position module, `owner`, in the
/// constructor) and its terms.
class SchemeModule {
  public:
    virtual ~SchemeModule() = default;
    /// Fills its slots: terms.input (T, C), and its part of each layer group's LayerPosition in
    /// terms.layers (G entries, their scaling set). Biases are added in the order the modules
    /// run (add_bias), so a combination sums as the rows are listed.
    virtual void contribute(const SchemeInputs& in, PositionTerms& terms) = 0;
    /// A local layer's (model.local_window) change to its slots; RoPE's local base.
    virtual void localize(LayerPosition& layer) const { (void)layer; }
};

/// The module of `id` for `owner`'s config (registers its parameters on `owner`).
std::unique_ptr<SchemeModule> make_scheme_module(Scheme id, PositionEncodingImpl& owner);

/// layer.bias += bias (or = bias where it has none): (H, T, T).
void add_bias(LayerPosition& layer, const torch::Tensor& bias);

/// TUPE's and BERT-Ad's table p (rows x C) and its norm, registered once on `owner` as
/// `pos` and `pos_ln` (engine/position.h's PositionEncodingImpl::pos).
void register_position_table(PositionEncodingImpl& owner, int64_t rows);
/// U^Q, U^K per layer group as `projections.N`, registered once (TUPE and DeBERTa together
/// share them, as they did before the schemes were modules).
void register_projections(PositionEncodingImpl& owner);

}  // namespace engine::schemes
