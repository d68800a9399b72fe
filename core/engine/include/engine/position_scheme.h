// What a positional scheme is, without LibTorch: the config's two scheme fields validated,
// the slots a scheme fills and the named logit terms it decomposes into (engine/position.h
// computes them). Analysis, export, the CLI, the store and the app ask this description
// instead of switching on scheme names.
#pragma once

#include <string>
#include <vector>

#include "engine/config.h"

namespace engine {

/// What a scheme is, for analysis, export and the CLI (so nothing else switches on names).
struct PositionDescription {
    std::string absolute;  ///< learned, sinusoidal, untied, decoupled or none
    /// none, t5, shaw, shaw_key_query, rope, alibi, deberta, fire, kerple_log or kerple_power
    std::string relative;
    bool input_slot = false;     ///< something is added to the word embeddings
    bool learned_input = false;  ///< ... a learned table (bert.embeddings.position_embeddings)
    bool qk_slot = false;        ///< q/k offsets (BERT-Ad) or rotation (RoPE)
    bool qk_offsets = false;     ///< ... BERT-Ad's p'U^Q, p'U^K added to q and k
    bool rotary = false;         ///< ... RoPE's rotation
    bool static_bias = false;    ///< an (H, T, T) bias
    bool content_bias = false;   ///< Shaw / DeBERTa terms from q and k
    bool untied = false;         ///< TUPE's untied positional correlation (untied_correlation)
    bool untie_cls = false;      ///< [CLS] reset
    bool extrapolates = false;   ///< sequences longer than max_position_embeddings allowed
    /// The logits depend on positions only through p_j - p_i: a shift of every position leaves
    /// them (not the tables, TUPE, BERT-Ad, nor FIRE, whose normaliser reads the query's
    /// position).
    bool shift_invariant = false;
    bool order_blind = false;  ///< no positional information at all (NoPE)
    /// The named terms LayerPosition::terms returns for this scheme.
    std::vector<std::string> logit_terms;
    /// One line for `tupe info`: e.g. "untied positions + [CLS] reset, scale 1/sqrt(2d)".
    std::string summary;
};

/// Describes a config's scheme (also validates the combination: std::invalid_argument).
PositionDescription describe_position(const ModelConfig& config);

/// Values of ModelConfig::absolute_position and ::relative_position, in display order.
const std::vector<std::string>& absolute_position_schemes();
const std::vector<std::string>& relative_position_schemes();

}  // namespace engine
