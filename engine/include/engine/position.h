// Every positional scheme of the encoder family behind one module (the positional zoo).
// PositionEncoding owns every positional parameter outside the HF-named input table through one
// module per scheme (engine/src/schemes/, one row each in core's table, engine/position_scheme.h),
// computes what depends only on positions ONCE per forward pass, outside the layer loop, and
// hands each layer one LayerPosition. A layer never asks which scheme it runs: it applies the
// slots that are filled. Shapes: B batch, T tokens, C hidden, H heads, d = C / H; token 0 is [CLS].
//
// The slots (ModelConfig::absolute_position x ModelConfig::relative_position):
//   input       added to the word embeddings: learned table (BERT-A), sinusoidal table
//   q/k         BERT-Ad's p'U^Q, p'U^K offsets; RoPE's rotation of q and k
//   static bias (H, T, T), broadcast over the batch: TUPE's untied term, T5, ALiBi, FIRE,
//               KERPLE, [CLS] reset
//   content     (B, H, T, T) terms from q and k (ContentTerm): Shaw's relative keys, DeBERTa's
//               c2p and p2c, ...
//   scale       1/sqrt(d * attention_scale_factor): 1 BERT, 2 TUPE, 3 DeBERTa, 4 BERT-Ad
//   window      a local layer's (T, T) mask (model.local_window; ModernBERT's local attention)
// Modifiers of the positions themselves: randomized positions in training (Ruoss et al. 2023,
// model.randomized_positions_max) and RoPE's frequencies scaled at evaluation (RopeScaling).
// Sources are cited where each formula is computed (engine/src/schemes/).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/config.h"
#include "engine/norm.h"
#include "engine/position_scheme.h"

namespace engine {

namespace schemes {
class SchemeModule;
}

/// T5 bidirectional bucket of rel = key - query (n = -rel): 0..nb/2-1 for keys at or left of
/// the query, nb/2.. for keys to the right; half of each side exact, the rest log-spaced up
/// to max_distance. As relative_position_bucket in guolinke/TUPE.
int64_t t5_relative_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance);

/// (T, T) bucket ids, [i][j] for query i and key j. With cls_buckets (TUPE-R), column 0
/// (others -> [CLS]) uses the extra bucket num_buckets and row 0 ([CLS] -> others, [0,0]
/// included) uses bucket num_buckets / 2, which the T5 function never produces.
torch::Tensor relative_bucket_matrix(int64_t seq_len, int64_t num_buckets, int64_t max_distance,
                                     bool cls_buckets);

/// ALiBi's head slopes (Press et al. 2022, sec. 3 and their reference code): for H a power of
/// two, m_h = 2^(-8h/H), h = 1..H; otherwise the slopes of the nearest lower power of two n,
/// then every other slope of 2n (interleaved), H - n of them.
std::vector<double> alibi_slopes(int64_t num_heads);

/// Vaswani et al. 2017, sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/C)),
/// PE(pos, 2i+1) = cos(pos / 10000^(2i/C)); positions (T) long -> (T, C) float64.
torch::Tensor sinusoidal_table(const torch::Tensor& positions, int64_t hidden_size);

/// Analysis only (`tupe ablate`, analysis/ablation.h): one head's, one layer's or the whole
/// model's positional contribution removed or replaced, at run time (set_ablation). Per head,
/// the head's attention logits come from the same layer's terms with:
///   kZero     every positional slot emptied: no offsets, no rotation (RoPE attends with the
///             unrotated q and k), no content terms (Shaw, DeBERTa), no static bias; the
///             scheme's scaling is kept;
///   kMean     as kZero, but BERT-Ad's q/k offsets are their mean over the window's positions
///             (an additive logit term replaced by its mean is a constant per row, which the
///             softmax ignores: for every other slot mean and zero are the same ablation);
///   kShuffle  every positional slot computed at shuffled positions: [CLS]'s position kept,
///             positions 1..T-1 permuted (one permutation per length, drawn from `seed`).
///   kPatch    every positional slot taken from another model of the same scheme and shape
///             (set_patch_source; `tupe ablate --patch-from`): the donor's terms at the same
///             positions, so patching a model from itself changes nothing and from a copy
///             whose positional parameters are zero is kZero for the schemes whose slots are
///             all parameters (TUPE, T5, FIRE, KERPLE, Shaw, DeBERTa's relative table).
/// An input table (learned, sinusoidal) has no per-head contribution: it is ablated (removed,
/// its mean row, its rows shuffled) only when both layer and head are -1.
struct PositionAblation {
    enum class Mode { kOff, kZero, kMean, kShuffle, kPatch };
    Mode mode = Mode::kOff;
    int64_t layer = -1;  ///< -1: every layer
    int64_t head = -1;   ///< -1: every head
    uint64_t seed = 1;   ///< kShuffle's permutation
};

/// RoPE evaluated beyond its training length L at s = L_eval / L (PositionEncodingImpl::
/// set_rope_scaling; `tupe extrapolate --rope-scaling`). theta_i = base^(-2i/r) becomes:
///   kInterpolation  theta_i / s: positions squeezed into the trained range (Chen et al. 2023,
///                   "Extending Context Window of LLMs via Positional Interpolation")
///   kNtk            base' = base * s^(r / (r - 2)): the highest frequency kept, the lowest
///                   one interpolated by s ("NTK-aware" scaling, bloc97 2023, as Peng et al.,
///                   YaRN, ICLR 2024, sec. 3.1 write it)
///   kYarn           per pair, by the rotations rho_i = L theta_i / (2 pi) it makes over L:
///                   gamma = clamp((rho_i - 1) / (32 - 1), 0, 1), theta_i' = (1 - gamma) theta_i /
///                   s
///                   + gamma theta_i ("NTK-by-parts", alpha = 1, beta = 32, sec. 3.2), and the
///                   logits times 1/t = (0.1 ln s + 1)^2 (sec. 3.4). HF's yarn rounds the ramp's
///                   ends to whole dimensions; this is the paper's continuous ramp.
/// At s = 1 each is plain RoPE.
struct RopeScaling {
    enum class Method { kNone, kInterpolation, kNtk, kYarn };
    Method method = Method::kNone;
    double factor = 1.0;          ///< s >= 1
    int64_t original_length = 0;  ///< L, tokens; YaRN needs it (> 0)
};

/// "none" / "pi" / "ntk" / "yarn", and back; parse throws std::invalid_argument.
std::string rope_scaling_name(RopeScaling::Method method);
RopeScaling::Method parse_rope_scaling(const std::string& name);

/// The dimensions of each head RoPE rotates: head_dim * rope_fraction, rounded down to pairs.
int64_t rope_dims(const ModelConfig& config);

/// RoPE's frequencies theta_i, i = 0..r/2-1, (r/2) float64, for r = rope_dims rotated
/// dimensions at `base`, under `scaling` (see RopeScaling). Throws std::invalid_argument for a
/// factor < 1, YaRN without original_length, or NTK with r < 4 (its exponent r / (r - 2)).
torch::Tensor rope_frequencies(int64_t rope_dims, double base, const RopeScaling& scaling);

/// What the logits are multiplied by under `scaling`: YaRN's 1/t = (0.1 ln s + 1)^2, else 1.
double rope_logit_scale(const RopeScaling& scaling);

/// FIRE's MLP input made two-sided (Li et al., ICLR 2024, for an encoder), (T, T):
/// x_ij = sign(p_i - p_j) psi(|p_i - p_j|) / (psi(max(L, p_i, p_j)) + 1e-6), psi(d) = ln(|c| d +
/// 1). For keys left of the query (p_j <= p_i) it is the paper's input, normalised by the query's
/// position; for keys to the right, the mirror image, normalised by the key's position (the
/// later of the two in both cases), so |x| <= 1 at any length. c and L are 0-dim tensors (the
/// dtype and device of the result); positions (T) long, >= 0.
torch::Tensor fire_input(const torch::Tensor& positions, const torch::Tensor& c,
                         const torch::Tensor& threshold);

/// "zero" / "mean" / "shuffle" / "off", and back; parse throws std::invalid_argument.
std::string ablation_mode_name(PositionAblation::Mode mode);
PositionAblation::Mode parse_ablation_mode(const std::string& name);

/// A content-dependent positional term, (B, H, T, T) from q and k (the content slot): Shaw's
/// relative keys, DeBERTa's c2p and p2c, ... Each scheme's module makes its own
/// (engine/src/schemes/), so the layer's code is the same for every scheme.
struct ContentTerm {
    virtual ~ContentTerm() = default;
    /// Appends its named terms, (B, H, T, T) each, from qs = q * scaling and k (B, H, T, d);
    /// `content` is qs.k^T (unrotated) where the caller has it, else undefined.
    virtual void add_terms(const torch::Tensor& qs, const torch::Tensor& k,
                           const torch::Tensor& content, double scaling,
                           std::vector<std::pair<std::string, torch::Tensor>>& out) const = 0;
    /// What `tupe ablate` calls the slot: "relative keys", "c2p/p2c terms", ...
    virtual const char* slot_name() const = 0;
};

/// What a layer needs from the positions. Every tensor is optional (undefined when the scheme
/// does not use that slot); the layer's code is the same for every scheme.
struct LayerPosition {
    double scaling = 1.0;  ///< 1 / sqrt(d * attention_scale_factor)
    /// q/k slot, before the head split: BERT-Ad's p'U^Q, p'U^K, (T, C), added to q and k.
    torch::Tensor q_offset, k_offset;
    /// q/k slot, per head: RoPE's cos and sin of position x frequency, (T, r/2) for the first
    /// r = rope_dims dimensions of each head (pairs 2i, 2i+1 rotated together).
    torch::Tensor rope_cos, rope_sin;
    int64_t rope_dims = 0;
    /// With the [CLS] reset on RoPE: [CLS]'s row and column use the unrotated q and k.
    bool rope_untie_cls = false;
    /// Static bias slot, (H, T, T), added after scaling; broadcast over the batch.
    torch::Tensor bias;
    /// Content slot: the terms from q and k, added to the scaled logits in this order.
    std::vector<std::shared_ptr<const ContentTerm>> content;
    /// Local layers only (model.local_window, global_every): (T, T), 0 where |i - j| <=
    /// local_window and -inf elsewhere, added to the logits with the padding mask. Not a
    /// positional term: scores(), terms() and `bias` leave it out; ablations keep it.
    torch::Tensor window;
    /// Analysis only (PositionEncodingImpl::set_ablation): the heads where ablated_heads (H,
    /// bool) is true take their logits, static bias included, from *ablated: this layer's terms
    /// with the positional contribution removed, mean-replaced or shuffled. Null otherwise.
    std::shared_ptr<const LayerPosition> ablated;
    torch::Tensor ablated_heads;

    /// q and k (B, T, C) before the head split: adds the offsets.
    void offset_qk(torch::Tensor& q, torch::Tensor& k) const;
    /// The logits before the static bias, (B, H, T, T), from q and k (B, H, T, d): scaled
    /// q.k^T with RoPE's rotation and the content terms. q is NOT pre-scaled.
    torch::Tensor scores(const torch::Tensor& q, const torch::Tensor& k) const;
    /// The same logits split into the scheme's named terms, which add up to scores() + bias:
    /// "content" (q.k^T, unrotated for RoPE), "rotation" (RoPE: rotated minus unrotated),
    /// "c2p" / "p2c" (the content slot's), "bias" (every static bias). For analysis.
    std::vector<std::pair<std::string, torch::Tensor>> terms(const torch::Tensor& q,
                                                             const torch::Tensor& k) const;
};

/// TUPE's positional correlation before the [CLS] reset (PositionEncodingImpl::
/// untied_correlation), scaled by 1/sqrt(d * attention_scale_factor).
struct UntiedCorrelation {
    torch::Tensor theta1;  ///< (H): table row 0 with itself, [CLS] -> others
    torch::Tensor theta2;  ///< (H): table row 1 with itself, others -> [CLS]
    torch::Tensor body;    ///< (H, T, T): token i -> token j, rows p_i + 1 and p_j + 1
};

/// The positional terms for all layers: one entry shared by all layers, or one per layer
/// (per-layer terms, or local and global layers that differ in their window or RoPE base).
struct PositionTerms {
    std::vector<LayerPosition> layers;
    torch::Tensor input;  ///< (T, C) added to the word embeddings, or undefined
    const LayerPosition& for_layer(size_t layer) const {
        return layers.size() == 1 ? layers[0] : layers.at(layer);
    }
};

/// U^Q, U^K of one group of layers (TUPE, BERT-Ad; DeBERTa's W_{q,r}, W_{k,r}).
struct PositionProjectionImpl : torch::nn::Module {
    /// With biases, as the reference, unless `bias` is false (model.bias).
    explicit PositionProjectionImpl(int64_t hidden_size, bool bias = true);
    torch::nn::Linear pos_q_linear{nullptr}, pos_k_linear{nullptr};
};
TORCH_MODULE(PositionProjection);

/// FIRE's parameters for one group of layers (Li et al., ICLR 2024, and their PyTorch
/// listing): the MLP f: 1 -> 32 -> H with a ReLU (`mlp.0`, `mlp.2`), the log transform's c
/// (init 0.1) and the threshold L = |L_multiplier| * init_threshold (multiplier init 1).
struct FireBiasImpl : torch::nn::Module {
    FireBiasImpl(int64_t num_heads, double init_threshold);
    /// The bias (H, T, T) at positions (T); with cls_free, [CLS]'s row and column at x = 0.
    torch::Tensor forward(const torch::Tensor& positions, bool cls_free);
    /// L = |L_multiplier| * init_threshold, 0-dim.
    torch::Tensor threshold() const;
    torch::nn::Sequential mlp{nullptr};
    torch::Tensor c, L_multiplier;
    double init_threshold;
};
TORCH_MODULE(FireBias);

/// FIRE's fixed part of the threshold: a quarter of max_position_embeddings (the paper's 512 at
/// training length 2048), at least 1.
double fire_init_threshold(const ModelConfig& config);

/// The positional module: one SchemeModule per row a config runs (engine/position_scheme.h's
/// active_schemes), each registering its parameters here, under bert.position_bias, with the
/// names and shapes its row lists (SchemeRow::parameters; e.g. TUPE's `pos`, `pos_ln`,
/// `projections.N.pos_{q,k}_linear`, T5's `relative_attention_bias`). The learned input table
/// keeps HF's name, bert.embeddings.position_embeddings: attach_input_table() hands it in.
class PositionEncodingImpl : public torch::nn::Module {
  public:
    explicit PositionEncodingImpl(const ModelConfig& config);
    ~PositionEncodingImpl() override;

    /// position_offset() + 0..T-1 on `device` (T times position_offset() with constant positions).
    /// With `randomize` (the model in training) and model.randomized_positions_max = M > 0:
    /// position_offset() + a sorted uniform random subset of {0..M-1} of size T, drawn from
    /// torch's generator (Ruoss et al., ACL 2023; one draw for the whole batch, as the
    /// terms are shared by it). TORCH_CHECK names M when T > M.
    torch::Tensor positions(int64_t seq_len, const torch::Device& device,
                            bool randomize = false) const;
    /// Where token 0 sits: model.position_offset until set_position_offset changes it. The
    /// override exists for shift tests at run time (analysis/extrapolate.h): the same weights
    /// at other positions without building a second model. It leaves config() alone, so
    /// checkpoints and exports keep the trained offset; learned tables still refuse positions
    /// past max_position_embeddings. Throws std::invalid_argument for a negative offset.
    void set_position_offset(int64_t offset);
    int64_t position_offset() const { return position_offset_; }
    /// Every token at the same position (position_offset()) until turned off: the
    /// counterfactual "no position information" of the properties probe (analysis/properties.h),
    /// which subtracts these logits from those at the true positions. Relative schemes then see
    /// distance 0 everywhere, absolute ones the same row for every token. Runtime only, like
    /// set_position_offset.
    void set_constant_positions(bool constant) { constant_positions_ = constant; }
    bool constant_positions() const { return constant_positions_; }
    /// Removes or replaces positional contributions in every forward() until reset to a
    /// default PositionAblation (see PositionAblation). Runtime only, like
    /// set_position_offset. Throws std::invalid_argument for a layer or head out of range.
    void set_ablation(const PositionAblation& ablation);
    const PositionAblation& ablation() const { return ablation_; }
    /// The donor of PositionAblation::Mode::kPatch (null: none). Throws std::invalid_argument,
    /// one line naming what differs, unless `donor` has the same scheme (PositionDescription
    /// summary), layers, heads, hidden size and positions, and parameters (and input table) of
    /// the same names and shapes. Runtime only, like set_ablation.
    void set_patch_source(std::shared_ptr<PositionEncodingImpl> donor);
    /// RoPE's frequencies (and YaRN's logit scale) under `scaling` in every forward() until
    /// reset to a default RopeScaling. Runtime only, like set_position_offset. Throws
    /// std::invalid_argument for a model without RoPE (unless kNone) or a bad scaling.
    void set_rope_scaling(const RopeScaling& scaling);
    const RopeScaling& rope_scaling() const { return rope_scaling_; }
    /// Everything positional for a sequence at these positions (T) long, computed once;
    /// tables without parameters (sinusoidal, ALiBi, RoPE's angles) come in `dtype` (the word
    /// embeddings'). Throws c10::Error naming max_position_embeddings when a learned table is
    /// too short.
    PositionTerms forward(const torch::Tensor& positions, torch::ScalarType dtype = torch::kFloat);
    PositionTerms forward(int64_t seq_len);

    /// TUPE's raw correlation A = (p'U^Q / sqrt(d * factor))(p'U^K)^T before the [CLS] reset,
    /// over table rows [0, 1, positions + 1] (token t at position p_t uses row p_t + 1):
    /// theta1 = A[0,0] and theta2 = A[1,1] are the reset's values, free of the positions (Ke et
    /// al. 2021, Eq. 9 and App. B; guolinke/TUPE reads rows 0 and 1), body = A[2:, 2:].
    /// `group` picks the layer group. The seq_len form is at positions(seq_len), the positions
    /// forward(seq_len) uses, so an analysis reads what the layers receive.
    UntiedCorrelation untied_correlation(const torch::Tensor& positions, int64_t group = 0);
    UntiedCorrelation untied_correlation(int64_t seq_len, int64_t group = 0);
    /// The T5 relative bias alone, (H, T, T); undefined when the scheme has none.
    torch::Tensor relative_bias(int64_t seq_len);

    void attach_input_table(torch::nn::Embedding table) { input_table_ = std::move(table); }
    torch::nn::Embedding input_table() const { return input_table_; }
    /// The word embeddings, whose device and dtype forward(seq_len) follows (the module may
    /// have no parameters of its own).
    void attach_word_table(torch::nn::Embedding table) { word_table_ = std::move(table); }
    const ModelConfig& config() const { return config_; }
    const PositionDescription& description() const { return description_; }
    /// Whether the module has parameters of its own (else it is not registered: bert-a's
    /// checkpoints hold no bert.position_bias.* entries).
    bool has_parameters();
    /// How many times forward() ran (the terms must be computed once per model forward).
    int64_t forward_count() const { return forward_count_; }
    /// Layer groups of the per-group parameters: 1 with shared_pos_term, else one per layer.
    int64_t layer_groups() const;
    /// U^Q, U^K of one group (TUPE, BERT-Ad; DeBERTa's W_{q,r}, W_{k,r}).
    PositionProjection projection(int64_t group);

    /// The learned table p, its norm and its projections, which TUPE's, BERT-Ad's and
    /// DeBERTa's modules register (engine/src/schemes/scheme_module.h) and analysis reads;
    /// null for the other schemes.
    torch::nn::Embedding pos{nullptr};  ///< (max_len + 1, C) for TUPE, (max_len, C) for BERT-Ad
    Norm pos_ln{nullptr};               ///< model.norm and model.bias, as the encoder's norms
    torch::nn::ModuleList projections{nullptr};  ///< one PositionProjection, or one per layer

  private:
    PositionTerms compute(const torch::Tensor& positions, torch::ScalarType dtype);
    PositionTerms local_layers(PositionTerms terms, int64_t T, torch::ScalarType dtype,
                               const torch::Device& device) const;
    PositionTerms ablate(PositionTerms terms, const torch::Tensor& positions,
                         torch::ScalarType dtype);

    ModelConfig config_;
    PositionDescription description_;
    std::vector<std::unique_ptr<schemes::SchemeModule>> modules_;  ///< in active_schemes' order
    int64_t groups_ = 1;  ///< LayerPositions computed: layer_groups() if a module has groups
    torch::nn::Embedding input_table_{nullptr};
    torch::nn::Embedding word_table_{nullptr};
    int64_t position_offset_ = 0;
    bool constant_positions_ = false;
    PositionAblation ablation_;
    std::shared_ptr<PositionEncodingImpl> patch_source_;
    RopeScaling rope_scaling_;
    int64_t forward_count_ = 0;
};
TORCH_MODULE(PositionEncoding);

}  // namespace engine
