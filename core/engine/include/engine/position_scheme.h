// The scheme table, without LibTorch: one row per positional scheme (its name, the slots it
// fills, its parameters and their shapes, its HF export mapping, its cost-model terms, the
// config fields it reads and their checks), the only place a scheme's name is text; and the
// description of a config's scheme built from its rows, which analysis, export, the CLI, the
// store and the app ask instead of switching on names. engine/src/schemes/ holds one module
// per row (engine/position.h computes the terms). Shapes: T tokens, C hidden, H heads, d = C/H.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config.h"

namespace engine {

/// Every positional scheme: one row each in the scheme table (position_scheme.cpp).
enum class Scheme : uint8_t {
    kNone,          ///< no positions on that axis (both fields' "none")
    kInput,         ///< BERT-A's learned table at the input (HF "absolute")
    kSinusoidal,    ///< Vaswani et al.'s fixed table at the input
    kUntied,        ///< TUPE's untied positional correlation
    kDecoupled,     ///< BERT-Ad's p'U^Q, p'U^K added to q and k
    kT5,            ///< T5's bucketed relative bias
    kShaw,          ///< Shaw et al.'s relative keys (HF relative_key)
    kShawKeyQuery,  ///< ... and relative queries (HF relative_key_query)
    kRope,          ///< RoFormer's rotation of q and k
    kAlibi,         ///< ALiBi's linear distance penalty
    kDeberta,       ///< DeBERTa's disentangled c2p and p2c
    kFire,          ///< FIRE's MLP of the normalised log distance, two-sided
    kKerpleLog,     ///< KERPLE's logarithmic kernel
    kKerplePower,   ///< KERPLE's power kernel
    kCope,          ///< CoPE's counted positions, two-sided
    kClsReset,      ///< TUPE's [CLS] reset on a scheme without its own (model.untie_cls)
};

/// Which config field names a row: model.absolute_position, model.relative_position, both
/// ("none"), or a modifier switched on by a field of its own (model.untie_cls).
enum class SchemeAxis : uint8_t { kAbsolute, kRelative, kBoth, kModifier };

/// A parameter a scheme's module registers, by its checkpoint name under the model (bert.*),
/// "{g}" standing for the layer group (0 only with shared_pos_term).
struct SchemeParameter {
    const char* name;
    /// Its shape under `config`, or nullopt where that config does not register it (a norm's
    /// bias with model.bias false, RMSNorm's).
    std::optional<std::vector<int64_t>> (*shape)(const ModelConfig& config);
};

/// A named logit term of a scheme (LayerPosition::terms) and what it is, for analysis' files.
struct SchemeTerm {
    const char* name;     ///< "rotation", "c2p", "p2c"
    const char* meaning;  ///< one line: what the term is for this scheme
};

/// What the cost model's per-scheme terms read (cost_model.h's legend): the config, B, T, N =
/// B * T, C, H, d, L, G (layer groups: 1 with shared_pos_term, else L), e (bytes per
/// activation: 4, or 2 under bf16) and 2k (relative rows: 2 * relative_distance_clip).
struct CostShape {
    const ModelConfig& config;
    double B, T, N, C, H, d, L, G, e, k2;
    bool bf16;
};

/// One scheme. Every flag describes the scheme alone; describe_position combines a config's
/// rows (absolute, relative, then the [CLS] reset).
struct SchemeRow {
    Scheme id;
    SchemeAxis axis;
    const char* name;     ///< the config value ("rope"): the only place the name is text
    const char* summary;  ///< its part of `tupe info`'s one line ("rotary q/k"); "" for none
    const char* source;   ///< the paper or reference it follows
    // The slots it fills (engine::LayerPosition).
    bool input_slot = false;     ///< added to the word embeddings
    bool learned_input = false;  ///< ... as bert.embeddings.position_embeddings
    bool qk_offsets = false;     ///< BERT-Ad's offsets added to q and k
    bool rotary = false;         ///< RoPE's rotation of q and k
    bool static_bias = false;    ///< an (H, T, T) bias
    bool content_bias = false;   ///< (B, H, T, T) terms from q and k
    bool untied = false;         ///< TUPE's correlation (PositionEncodingImpl::untied_correlation)
    /// Its named logit terms after "content", in LayerPosition::terms' order ("bias" is added
    /// once for every scheme with a static bias).
    std::vector<SchemeTerm> logit_terms;
    /// Positions index a learned table: the sequence must fit max_position_embeddings.
    bool learned_table = false;
    /// The logits read the positions themselves, not only their order or difference.
    bool reads_absolute_positions = false;
    /// One set of parameters per layer group (model.shared_pos_term).
    bool per_layer_group = false;
    /// model.untie_cls is defined on it (false: its relative embeddings have no [CLS] row).
    bool takes_cls_reset = true;
    /// The config fields it reads besides the two scheme fields; describe_position lists them.
    std::vector<const char*> fields;
    /// The checks of those fields; throws std::invalid_argument("model.KEY ...").
    void (*validate)(const ModelConfig& config) = nullptr;
    /// Its parameters, in the order its module registers them (the learned input table: under
    /// bert.embeddings).
    std::vector<SchemeParameter> parameters;
    /// HF BertConfig's position_embedding_type where transformers computes the same function
    /// (alone on BERT's backbone, with unclipped per-layer tables where it has tables), or null.
    const char* hf_position_type = nullptr;
    /// A per-group parameter HF keeps in each layer's attention: bert.position_bias.NAME.{g}.*
    /// is bert.encoder.layer.{g}.attention.self.NAME.* there (Shaw's distance_embedding).
    const char* hf_layer_parameter = nullptr;
    /// Forward FLOPs of its own matmuls per step, and the bytes of its own tensors a training
    /// step keeps at its peak (cost_model.h); null: none.
    double (*flops)(const CostShape& shape) = nullptr;
    double (*memory)(const CostShape& shape) = nullptr;
};

/// Every row, in display order: absolute schemes, relative schemes, then the modifier.
const std::vector<SchemeRow>& scheme_table();
/// The row of `id`.
const SchemeRow& scheme_row(Scheme id);
/// The row named `name` on `axis` (kAbsolute or kRelative); nullopt for an unknown name.
std::optional<Scheme> find_scheme(SchemeAxis axis, const std::string& name);
/// The rows a config runs, in the order their modules run: its absolute scheme unless none,
/// its relative scheme unless none, then the [CLS] reset where untie_cls asks for it on a
/// scheme without its own (TUPE's). Throws std::invalid_argument for an unknown name.
std::vector<Scheme> active_schemes(const ModelConfig& config);

/// The clip k of the rows that read model.max_relative_distance: the field, or for 0
/// max_position_embeddings - 1 (HF's table for Shaw).
int64_t relative_distance_clip(const ModelConfig& config);

/// What a scheme is, for analysis, export and the CLI (so nothing else switches on names).
struct PositionDescription {
    std::string absolute;  ///< the absolute row's name (input, sinusoidal, untied, ...)
    std::string relative;  ///< the relative row's name (none, t5, shaw, rope, ...)
    Scheme absolute_id = Scheme::kNone;
    Scheme relative_id = Scheme::kNone;
    bool input_slot = false;     ///< something is added to the word embeddings
    bool learned_input = false;  ///< ... a learned table (bert.embeddings.position_embeddings)
    bool qk_slot = false;        ///< q/k offsets (BERT-Ad) or rotation (RoPE)
    bool qk_offsets = false;     ///< ... BERT-Ad's p'U^Q, p'U^K added to q and k
    bool rotary = false;         ///< ... RoPE's rotation
    bool static_bias = false;    ///< an (H, T, T) bias
    bool content_bias = false;   ///< terms from q and k (Shaw, DeBERTa, ...)
    bool untied = false;         ///< TUPE's untied positional correlation (untied_correlation)
    bool untie_cls = false;      ///< [CLS] reset
    bool extrapolates = false;   ///< sequences longer than max_position_embeddings allowed
    /// The logits depend on positions only through their differences or order: a shift of
    /// every position leaves them (not the tables, TUPE, BERT-Ad, nor FIRE, whose normaliser
    /// reads the query's position).
    bool shift_invariant = false;
    bool order_blind = false;  ///< no positional information at all (NoPE)
    /// The named terms LayerPosition::terms returns for this scheme, and what each is.
    std::vector<std::string> logit_terms;
    std::vector<std::string> logit_term_meanings;
    /// The config fields the scheme reads besides the two scheme fields (rows' `fields`).
    std::vector<std::string> fields;
    /// The papers or references its rows follow (rows' `source`), for `tupe info`.
    std::vector<std::string> sources;
    /// One line for `tupe info`: e.g. "untied positions + [CLS] reset, scale 1/sqrt(2d)".
    std::string summary;
};

/// Describes a config's scheme (also validates the combination: std::invalid_argument).
PositionDescription describe_position(const ModelConfig& config);

/// Values of ModelConfig::absolute_position and ::relative_position, in display order.
const std::vector<std::string>& absolute_position_schemes();
const std::vector<std::string>& relative_position_schemes();

}  // namespace engine
