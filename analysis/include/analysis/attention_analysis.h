// The microscope: the paper's first-layer decomposition of attention logits into word/position
// terms (Ke, He, Liu, ICLR 2021, Eq. 6 and Fig. 2), how uniform each term looks, TUPE's learned
// positional correlation with its [CLS] reset (Fig. 6), [CLS] attention statistics, and a
// taxonomy of positional heads (global, local, broad, previous, next); and the import of HF
// BertForMaskedLM checkpoints, so the microscope can look at published BERT weights.
// Shapes: B batch, H heads, T tokens (position 0 = [CLS]), L layers, C hidden, d = C / H.
#pragma once

#include <torch/torch.h>

#include <array>
#include <string>
#include <vector>

#include "analysis/head_taxonomy.h"
#include "analysis/safetensors.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/tokenizer.h"

namespace analysis {

// ---- Eq. (6) / Fig. 2: the four terms of layer 0 ----------------------------------------------

/// Layer-0 attention logits split into the paper's terms, each (B, H, T, T), float32 on the CPU,
/// scaled as the model scales its logits (1 / sqrt(d * attention_scale_factor)), before the
/// padding mask (like EncoderOutput::attention_logits).
///
/// The attention input x of layer 0 is split into three streams, x = x_w + x_p + x_r, and every
/// projection is split the same way: q = x_w W^Q + x_p W^Q (+ p'U^Q for BERT-Ad) + q_r, so
///   logits = (q_w + q_p + q_r)(k_w + k_p + k_r)^T * scale + model bias
/// expands exactly into the fields below.
///  - x_w, the word stream: the word embedding's share of the embedding LayerNorm.
///  - x_p, the position stream: the position embedding's share (BERT-A/R); for BERT-Ad the
///    position query/key are (p - mean(p)) / sigma_p * g_pos_ln U^Q (x_p itself is 0).
///  - x_r, the rest: the segment embedding (token type 0), every LayerNorm bias, and the Linear
///    biases b^Q, b^K (and, for BERT-Ad, pos_ln's bias through U^Q/U^K and U's own bias).
/// LayerNorm treatment (BERT-A mixes w and p nonlinearly): with mu, sigma the per-token mean
/// and standard deviation of the SUM s = w + p + seg, LN(s) = (s - mu) / sigma * g + b is split
/// as (w - mean(w)) / sigma * g  +  (p - mean(p)) / sigma * g  +  ((seg - mean(seg)) / sigma *
/// g + b): the three parts share the same per-token sigma, so they add up to LN(s) exactly and
/// the nonlinearity lives only in sigma. A pre-LN model's extra LayerNorm before layer 0's
/// attention is split the same way.
/// TUPE (untied): word_pos = pos_word = 0; pos_pos is the untied term after the [CLS] reset;
/// bias is the relative bias (TUPE-R). No absolute positions (kNone): the position terms are 0.
struct FourTerms {
    torch::Tensor word_word;  ///< (x_w W^Q)(x_w W^K)^T * scale
    torch::Tensor word_pos;   ///< (x_w W^Q)(x_p W^K)^T * scale: word query -> key position
    torch::Tensor pos_word;   ///< (x_p W^Q)(x_w W^K)^T * scale: query position -> key word
    torch::Tensor pos_pos;    ///< (x_p W^Q)(x_p W^K)^T * scale
    /// The model's additive logit bias of layer 0, broadcast to (B, H, T, T): T5 relative bias
    /// (BERT-R, TUPE-R), cls_theta (BERT-A + untie_cls); 0 when the variant has none.
    torch::Tensor bias;
    /// Every product with the rest stream: (q_w + q_p) k_r^T + q_r (k_w + k_p)^T + q_r k_r^T,
    /// times scale (segment embedding, LayerNorm biases, Linear biases).
    torch::Tensor rest;
    torch::Tensor remainder;  ///< bias + rest
    /// The model's own layer-0 logits (BertModel::forward with output_attentions), for checking:
    /// word_word + word_pos + pos_word + pos_pos + remainder == logits up to float error.
    torch::Tensor logits;
    torch::Tensor attention_mask;  ///< (B, T), 1 = token; all ones when none was given
    double scale = 1.0;            ///< 1 / sqrt(d * attention_scale_factor)

    /// word_word + word_pos + pos_word + pos_pos + remainder, (B, H, T, T).
    torch::Tensor sum() const;
};

/// Decomposes layer 0 of `model` on a batch (eval mode and no gradients during the call; the
/// training flag is restored). Token type 0 everywhere. Supports the schemes whose positions
/// enter at the input or as q/k offsets (learned, sinusoidal, decoupled; with or without a
/// static bias), TUPE (untied) and no absolute positions, post- and pre-LN; refuses RoPE and
/// the content-dependent schemes (Shaw, DeBERTa), where the split is not exact.
/// input_ids (B, T) int64; attention_mask (B, T) or undefined (all tokens).
/// Runs one forward pass of its own for FourTerms::logits; when the caller already has that
/// pass (e.g. for the [CLS] maps), the overload below avoids the second one.
FourTerms decompose_first_layer(engine::BertModel& model, const torch::Tensor& input_ids,
                                const torch::Tensor& attention_mask = {});

/// As above, with FourTerms::logits taken from `encoded`, the model's forward pass over the
/// same input_ids and attention_mask in eval mode with output_attentions = true (the terms
/// are computed from the parameters, so no further pass runs). Throws std::invalid_argument
/// when `encoded` has no attention logits or its layer-0 logits are not (B, H, T, T).
FourTerms decompose_first_layer(engine::BertModel& model, const torch::Tensor& input_ids,
                                const torch::Tensor& attention_mask,
                                const engine::EncoderOutput& encoded);

// ---- how uniform a term looks -----------------------------------------------------------------

/// Spread of a term across keys: sqrt of the mean, over batch rows b and query rows i, of the
/// population variance across keys j of term[b, i, j] (padding keys and queries excluded when
/// attention_mask (B, T) is given). Logit units. 0 for a constant map, and also for a map that
/// is constant along each row: softmax ignores a per-row constant, so such a term cannot move
/// attention; the statistic measures what can. term: (T, T) or (B, T, T).
double uniformity(const torch::Tensor& term, const torch::Tensor& attention_mask = {});

/// uniformity() of each term of one head.
struct TermSpread {
    double word_word = 0, word_pos = 0, pos_word = 0, pos_pos = 0, bias = 0, rest = 0;
};

/// One of the six parts of FourTerms and its TermSpread field, for code that loops over them.
struct TermField {
    const char* name;                  ///< "word_word", "word_pos", ..., "bias", "rest"
    torch::Tensor FourTerms::*tensor;  ///< e.g. &FourTerms::word_pos
    double TermSpread::*spread;        ///< e.g. &TermSpread::word_pos
};

/// word_word, word_pos, pos_word, pos_pos, bias, rest: the order of every table of terms.
const std::array<TermField, 6>& term_fields();

/// Each field of `spread` divided by spread.word_word (NaN for all when word_word is 0).
TermSpread relative_to_word_word(const TermSpread& spread);

/// Per head, the spread of each term, absolute and relative to the word->word term. The paper's
/// Fig. 2 claim ("the cross terms look uniform") reads as relative.word_pos and
/// relative.pos_word much smaller than 1.
struct TermStats {
    std::vector<TermSpread> spread;    ///< per head, logit units
    std::vector<TermSpread> relative;  ///< per head, spread / spread.word_word (NaN when 0)
};

/// term_statistics over the valid tokens of terms.attention_mask.
TermStats term_statistics(const FourTerms& terms);

// ---- TUPE's positional correlation (Fig. 6) ---------------------------------------------------

/// The untied term of one group of layers (one group when shared_pos_term, else one per layer).
struct PositionalCorrelationGroup {
    torch::Tensor raw;     ///< (H, T, T): A = (p'U^Q)(p'U^K)^T * scale, table rows p_t + 1
    torch::Tensor reset;   ///< (H, T, T): raw with row 0 <- theta1, column 0 <- theta2
                           ///< (== raw for tupe-a-tie-cls)
    torch::Tensor total;   ///< (H, T, T): the bias the model adds to the logits (reset + relative)
    torch::Tensor probs;   ///< (H, T, T): row-softmax of total over keys; rows sum to 1
    torch::Tensor theta1;  ///< (H): A[h, 0, 0], [CLS] -> others (position row 0)
    torch::Tensor theta2;  ///< (H): A[h, 1, 1], others -> [CLS] (position row 1)
};

/// TUPE's positional terms for a sequence of T tokens, float32 on the CPU.
struct PositionalCorrelation {
    bool cls_reset = false;  ///< untie_cls: theta1/theta2 are used by the model
    torch::Tensor relative;  ///< (H, T, T) T5 relative bias (TUPE-R); undefined otherwise
    std::vector<PositionalCorrelationGroup> groups;  ///< 1, or num_hidden_layers
};

/// Reads the untied correlation of a TUPE model (absolute_position = untied) through
/// UntiedPositionBiasImpl (untied_correlation, relative_bias, forward), without gradients.
/// Throws std::invalid_argument for another variant or T outside 1..max_position_embeddings.
PositionalCorrelation tupe_positional_correlation(engine::BertModel& model, int64_t T);

// ---- [CLS] attention --------------------------------------------------------------------------

/// Attention from and to [CLS] per layer and head, over the batch, ignoring padding. float32 CPU.
struct ClsAttention {
    torch::Tensor from_cls;  ///< (L, H, T): mean over examples of p[b, h, 0, j] where j is a token
    torch::Tensor to_cls;    ///< (L, H, T): mean over examples of p[b, h, i, 0] where i is a token
    torch::Tensor entropy;   ///< (L, H): mean over examples of -sum_j p_0j ln p_0j (nats)
    torch::Tensor mean_distance;  ///< (L, H): mean over examples of sum_j p_0j * j (tokens)
    torch::Tensor first_k_mass;   ///< (L, H): mean over examples of sum_{j < k} p_0j
    torch::Tensor token_count;    ///< (T): examples with a token at position j (0 -> map value 0)
    int64_t k = 5;
};

/// probs: per layer (B, H, T, T) (or (H, T, T), one example) row-stochastic attention, e.g.
/// EncoderOutput::attention_probs or Inspection::probs; attention_mask (B, T) or undefined.
/// Keys that are padding are dropped from the [CLS] row (their probability is ~0 anyway);
/// examples whose position 0 is padding are skipped. Throws std::invalid_argument on shapes.
ClsAttention cls_attention(const std::vector<torch::Tensor>& probs,
                           const torch::Tensor& attention_mask = {}, int64_t k = 5);

// ---- head taxonomy (Fig. 6) -------------------------------------------------------------------

/// The five patterns of the paper's Fig. 6.
enum class HeadPattern {
    kGlobal,    ///< about uniform over all positions
    kLocal,     ///< a narrow band around the diagonal
    kBroad,     ///< a wide band: neither uniform nor narrow
    kPrevious,  ///< mass on keys left of the query (j < i)
    kNext,      ///< mass on keys right of the query (j > i)
};
const char* to_string(HeadPattern pattern);

/// Numbers behind the taxonomy, over the rows of a (T, T) row-stochastic map.
struct HeadStatistics {
    double mean_distance = 0;  ///< mean_i sum_j p_ij |i - j|, divided by the number of keys
    double entropy = 0;        ///< mean_i of -sum_j p_ij ln p_ij, divided by ln(number of keys)
    double previous_mass = 0;  ///< mean_i sum_{j < i} p_ij
    double next_mass = 0;      ///< mean_i sum_{j > i} p_ij
    double self_mass = 0;      ///< mean_i p_ii
    int64_t positions = 0;     ///< rows/keys used (T, or T - 1 without [CLS])
};

/// Statistics of a (T, T) row-stochastic map (with skip_cls: rows/columns 1.. renormalised).
/// Throws std::invalid_argument when fewer than 2 positions remain.
HeadStatistics head_statistics(const torch::Tensor& probs, bool skip_cls = true);

/// Classifies a (T, T) row-stochastic map, e.g. one head of PositionalCorrelationGroup::probs.
HeadPattern classify_head(const torch::Tensor& probs, const TaxonomyThresholds& thresholds = {});

/// classify_head for every head of an (H, T, T) map.
std::vector<HeadPattern> classify_heads(const torch::Tensor& probs,
                                        const TaxonomyThresholds& thresholds = {});

/// mean over rows of sum_j p_ij |i - j|, in tokens (not normalised); probs (..., T, T), every
/// leading dimension averaged.
double mean_attention_distance(const torch::Tensor& probs);

// ---- HF import --------------------------------------------------------------------------------

/// Reads an HF BertConfig config.json into a BERT-A ModelConfig (preset "bert-a", size "hf"),
/// or, with model_type "tupe" or a "tupe_workbench" block (see hf_config_for), into the
/// variant that block describes (model_type "bert" with a block of a non-BERT variant is
/// refused).
/// Required keys: vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
/// intermediate_size, max_position_embeddings; optional: type_vocab_size (2), layer_norm_eps
/// (1e-12), hidden_act ("gelu", the erf form; anything else is refused), hidden/attention
/// dropout, initializer_range, pad_token_id, position_embedding_type ("absolute" only),
/// model_type ("bert" only). Other keys are ignored. Throws engine::CheckpointError(path, ...).
engine::ModelConfig read_hf_bert_config(const std::string& path);

/// The state dict of an HF directory: model.safetensors when present, else pytorch_model.bin
/// (read_torch_state_dict), else the shards that model.safetensors.index.json (or
/// pytorch_model.bin.index.json) lists in its "weight_map" {tensor: shard file}: every shard is
/// read, and every tensor of the weight map must be in the shard it names. Tensors as stored
/// (any float dtype). Throws engine::CheckpointError naming the file: the index for a malformed
/// index or a missing shard file (the shard named in the message), the shard for a tensor it
/// lacks, the .bin for a legacy (pre-1.6, non-zip) torch.save file, with the command to convert.
NamedTensors read_hf_state_dict(const std::string& dir);

/// Imports an HF BERT directory into engine::BertForMaskedLM (eval mode, float32). Accepted:
/// - BertForMaskedLM: HF names map one to one (bert.embeddings.*, bert.encoder.layer.N.*,
///   cls.predictions.*); cls.predictions.decoder.weight must equal the word embeddings (the
///   engine ties them).
/// - BertForSequenceClassification: bert.* as above; classifier.{weight,bias} are ignored.
/// - A bare BertModel: the same names without the "bert." prefix (embeddings.*, encoder.*).
/// Without any cls.predictions.* tensor (the last two kinds) the MLM head keeps its fresh
/// initialisation, its decoder tied to the imported word embeddings: the encoder (hidden
/// states, attention logits) is the checkpoint's, MLM logits are not. A partial head is an
/// error. Old LayerNorm.gamma/beta names are accepted; the pooler, seq_relationship and
/// position_ids are ignored. When `notes` is given, one line per such decision is appended
/// (file: what was ignored or initialised); `has_mlm_head` receives whether the folder
/// had one. Throws engine::CheckpointError naming the file for
/// a missing, unexpected or mis-shaped tensor and for a config the engine cannot represent.
engine::BertForMaskedLM import_hf_bert(const std::string& dir,
                                       std::vector<std::string>* notes = nullptr,
                                       bool* has_mlm_head = nullptr);

/// The config.json text that export_hf_bert writes for `config`: HF BertConfig keys, plus a
/// "tupe_workbench" block with the variant's positional fields (preset, size,
/// absolute_position, relative_position, rel_pos_bins, max_rel_pos, max_relative_distance,
/// rope_fraction, rope_base, position_offset, untie_cls, shared_pos_term,
/// attention_scale_factor, pre_layernorm). model_type is "bert" when transformers 5's
/// BertForMaskedLM computes the same function: BERT-A (position_embedding_type "absolute"),
/// post-LN, no [CLS] reset, scale 1; else "tupe" with an "auto_map" naming python/tupe_hf/'s
/// TupeConfig, TupeModel and TupeForMaskedLM, which export_hf_bert writes beside it
/// (transformers runs them with trust_remote_code=True; read_hf_bert_config reads both). A
/// model without segment embeddings (type_vocab_size 0) is written with type_vocab_size 2,
/// whose rows export_hf_bert stores as zeros: BertEmbeddings needs the table, and adding a
/// zero row for either segment is the same function.
std::string hf_config_for(const engine::ModelConfig& config);

/// Writes `model` as an HF folder that import_hf_bert reads back to the same function:
/// dir/config.json (hf_config_for), dir/model.safetensors (every parameter under its HF name,
/// float32; the tied decoder is not stored twice), dir/vocab.txt (the tokens of vocab_path),
/// dir/tokenizer_config.json (do_lower_case = lower_case) and, for model_type "tupe", the files
/// of python/tupe_hf/ (embedded at build time). Creates dir; each file is written
/// atomically. Throws engine::CheckpointError / engine::InputError naming the file, e.g. for a
/// vocabulary larger than config.vocab_size (checked before anything is written). What the
/// export had to change in form (a zero token_type_embeddings table for type_vocab_size 0) is
/// added to `notes`, one line each, when given.
void export_hf_bert(engine::BertForMaskedLM& model, const std::string& vocab_path, bool lower_case,
                    const std::string& dir, std::vector<std::string>* notes = nullptr);

/// dir/tokenizer_config.json's do_lower_case, or `fallback` when the file or key is absent.
/// Throws engine::CheckpointError naming the file for malformed JSON or a non-boolean value.
bool read_hf_lower_case(const std::string& dir, bool fallback);

/// dir/vocab.txt, checked against the model: more tokens than config.vocab_size would produce
/// ids outside the embedding table. Throws engine::InputError / engine::CheckpointError.
engine::Vocab import_hf_vocab(const std::string& dir, const engine::ModelConfig& config);

}  // namespace analysis
