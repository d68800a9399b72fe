// Typed configuration for the model family, the data pipeline and pretraining.
// Field names follow HF BertConfig; TUPE fields follow the reference (guolinke/TUPE).
// Defaults live here; YAML files (read by experiments/) hold only overrides.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace engine {

/// The encoder's hyper-parameters. The preset helpers below fill every field.
struct ModelConfig {
    std::string preset = "bert-a";  ///< Variant name this config was made from (informative).
    std::string size = "tiny";      ///< Size name this config was made from (informative).

    int64_t vocab_size = 30522;
    int64_t hidden_size = 32;
    int64_t num_hidden_layers = 2;
    int64_t num_attention_heads = 2;
    int64_t intermediate_size = 64;
    int64_t max_position_embeddings = 64;  ///< Longest sequence (tokens incl. [CLS]/[SEP]).
    int64_t type_vocab_size = 2;           ///< Segment embeddings for sentence pairs (0 = none).
    double hidden_dropout_prob = 0.1;
    double attention_probs_dropout_prob = 0.1;
    double layer_norm_eps = 1e-12;
    double initializer_range = 0.02;  ///< N(0, 0.02) for every Linear/Embedding, as the reference.
    int64_t pad_token_id = 0;

    // The positional scheme (engine/position.h; TUPE_NOTES.md, "The variants";
    // docs/zoo.md). Validated by describe_position().
    /// How absolute positions enter: the name of an absolute row of the scheme table
    /// (engine/position_scheme.h: absolute_position_schemes()), BERT-A's learned input table by
    /// default.
    std::string absolute_position = "input";
    /// Relative or rotary positions: the name of a relative row of the scheme table
    /// (relative_position_schemes()), none by default.
    std::string relative_position = "none";
    int64_t rel_pos_bins = 32;  ///< T5 buckets; the table has rel_pos_bins + 1 rows.
    int64_t max_rel_pos = 128;  ///< T5 max distance.
    /// The clip k of the schemes that read it (Shaw's and DeBERTa's distances, ...); 0 =
    /// max_position_embeddings - 1 (relative_distance_clip).
    int64_t max_relative_distance = 0;
    double rope_fraction = 1.0;   ///< Share of each head's dimensions RoPE rotates.
    double rope_base = 10000.0;   ///< RoPE's theta_i = base^(-2i/r).
    int64_t position_offset = 0;  ///< Token t sits at position offset + t (shift tests).
    bool untie_cls = false;       ///< [CLS] reset: row 0 / column 0 position-free (TUPE).
    bool shared_pos_term = true;  ///< One positional term for all layers (TUPE) or per layer.
    double attention_scale_factor = 1.0;  ///< Logits scaled by 1/sqrt(d * factor).
    bool pre_layernorm = false;           ///< Post-LN (BERT, reference) by default.
    /// Randomized positions (Ruoss et al. 2023), a training modifier for every scheme that takes
    /// positions: 0 = off; M > 0: in training the T positions are a sorted uniform random subset
    /// of position_offset + {0, ..., M-1} (one draw per forward pass), at evaluation the plain
    /// 0..T-1. A learned table needs position_offset + M <= max_position_embeddings; ignored
    /// by NoPE, which has no positions.
    int64_t randomized_positions_max = 0;
    /// The input slot's table (learned or sinusoidal) times 1/sqrt(hidden_size) before it is
    /// added to the words. Under the embedding LayerNorm this is fairseq's sqrt(d) word scale
    /// (Vaswani et al. 2017, sec. 3.4) and Cramming's scaled sinusoidal table at its init
    /// (Geiping & Goldstein 2023, after FLASH): without it the unit-amplitude sinusoids (row
    /// norm sqrt(d/2)) outweigh N(0, 0.02) word rows 35-fold at d = 64 (docs/zoo.md).
    bool scale_input_positions = false;

    // The backbone (docs/zoo.md, "A modern backbone"). The defaults are BERT's; the modern-*
    // presets set ModernBERT's (Warner et al. 2024). Each works with every positional scheme.
    /// layernorm, or rmsnorm: x / sqrt(mean(x^2) + eps) * g, a learned scale and no bias
    /// (Zhang & Sennrich 2019), eps = layer_norm_eps. Every norm of the model, TUPE's pos_ln
    /// included.
    std::string norm = "layernorm";
    /// false: no bias in any Linear layer or norm (ModernBERT); the MLM decoder's bias is kept.
    bool bias = true;
    /// gelu (BERT), geglu or swiglu: GELU(xW) * xV or SiLU(xW) * xV (Shazeer 2020), with
    /// intermediate_size the gated width: intermediate.dense is (2 * intermediate_size, C).
    std::string ffn = "gelu";
    /// Pre-LN only: layer 0 attends over its input unnormalised, since the embedding norm has
    /// just normalised it (ModernBERT's first attn_norm is an Identity).
    bool skip_first_attention_norm = false;
    /// Local attention: in a local layer query i attends to keys j with |i - j| <= local_window
    /// (tokens each side; ModernBERT's 128-token window is 64). 0 = every layer global.
    int64_t local_window = 0;
    /// With local_window > 0, layer l is global when l % global_every == 0 (ModernBERT: 3).
    int64_t global_every = 3;
    /// RoPE's base in the local layers (ModernBERT: 10k local, 160k global); 0 = rope_base.
    /// Like rope_base, ignored without RoPE or without local layers.
    double rope_base_local = 0;

    int64_t head_dim() const { return hidden_size / num_attention_heads; }
    /// Whether layer `layer` attends through the local window.
    bool local_layer(int64_t layer) const { return local_window > 0 && layer % global_every != 0; }
    /// Whether layer `layer` normalises its attention input (pre-LN, bar ModernBERT's layer 0).
    bool attention_input_norm(int64_t layer) const {
        return pre_layernorm && !(skip_first_attention_norm && layer == 0);
    }
    /// Throws std::invalid_argument naming the field when the config is inconsistent.
    void validate() const;
};

/// Variant names, one per line of the preset table (config.cpp): the paper's six (bert-a ...
/// bert-ad), the zoo's schemes on BERT's backbone, then the modern-* presets on ModernBERT's.
const std::vector<std::string>& model_presets();
/// Size names: tiny, small, base.
const std::vector<std::string>& model_sizes();
/// Full config for a variant at a size. Throws std::invalid_argument for an unknown name.
ModelConfig make_model_config(const std::string& preset, const std::string& size);

/// One line for `tupe info`: the backbone beside the positional scheme, e.g. "post-LN,
/// LayerNorm, biases, GELU FFN, global attention".
std::string describe_backbone(const ModelConfig& config);

/// Corpus, vocabulary and masking.
struct DataConfig {
    std::string corpus;  ///< Plain text: a sentence per line, blank line = new doc.
    std::string vocab;   ///< Standard BERT vocab.txt.
    std::string cache_dir = "data/cache";  ///< Binary token caches, keyed by corpus+vocab hash.
    int64_t max_seq_len = 128;             ///< Block length incl. [CLS] and [SEP].
    double validation_fraction = 0.02;     ///< Share of documents held out (at least one).
    double mask_prob = 0.15;
    /// Masking rate of the validation batches; 0 = mask_prob. ModernBERT trains at 30% and
    /// evaluates at BERT's 15% (Warner et al. 2024, sec. 2.2.3): mask_prob 0.3 with 0.15 here.
    double eval_mask_prob = 0;
    bool whole_word_masking = false;
    bool lower_case = true;
};

/// Optimisation and run control for MLM pretraining.
struct TrainConfig {
    int64_t steps = 1000;
    int64_t batch_size = 32;  ///< Sequences per optimizer step (before accumulation split).
    int64_t grad_accum = 1;   ///< Micro-batches per step; batch_size must divide by it.
    double lr = 5e-4;
    int64_t warmup_steps = 100;  ///< Linear warm-up over these steps, then `schedule`.
    /// After the warm-up: "linear" (decay to 0 at `steps`, BERT's), or warmup-stable-decay
    /// (Hu et al. 2024, MiniCPM; Hägele et al. 2024; ModernBERT's recipe): the peak lr held
    /// until the last decay_fraction of `steps`, then to 0 at `steps`, linearly ("wsd") or as
    /// 1 - sqrt ("wsd-sqrt", Hägele et al.'s cooldown). Under WSD a checkpoint of the stable
    /// phase can continue with a larger train.steps: what it computed so far is the same.
    std::string schedule = "linear";
    double decay_fraction = 0.2;  ///< WSD: share of `steps` spent decaying, in (0, 1].
    double weight_decay = 0.01;   ///< Not applied to LayerNorm weights and biases.
    double adam_beta1 = 0.9;
    double adam_beta2 = 0.98;
    double adam_eps = 1e-6;
    double clip_norm = 1.0;       ///< 0 disables clipping.
    int64_t eval_interval = 100;  ///< Validation every N steps (and at the end).
    int64_t eval_batches = 0;     ///< 0 = the whole validation split.
    int64_t checkpoint_interval = 500;
    int64_t log_interval = 10;
    uint64_t seed = 1;
    std::string device = "auto";  ///< cpu, cuda, cuda:N or auto.
    std::string dtype = "fp32";   ///< fp32, bf16 (autocast), auto (precision.h); fp16: CUDA.
    int64_t threads = 0;          ///< Intra-op threads, 0 = the CPUs available (threads.h).
    /// metrics.tsv's scalars also as TensorBoard events in out_dir (engine/tensorboard.h).
    bool tensorboard = true;
    /// Throws std::invalid_argument starting with the key ("train.warmup_steps must be >= 0
    /// ...") for a value outside its range. The batch split is checked where the ranks are known.
    void validate() const;
};

/// Everything `tupe pretrain` needs.
struct PretrainConfig {
    ModelConfig model;
    DataConfig data;
    TrainConfig train;
    std::string out_dir = "runs/pretrain";
};

/// Flat "section.key = value" text of a config: stored in checkpoints and in the results
/// store, parsed back by `parse_config_text` (the engine cannot read YAML). A field of
/// config_keys_omitted_at_default() appears only away from its default.
std::string config_to_text(const PretrainConfig& config);
/// Inverse of config_to_text. Throws std::invalid_argument naming the line on bad input.
PretrainConfig parse_config_text(const std::string& text);
/// The same config as YAML in the schema `tupe pretrain --config` reads (experiments/
/// config_loader.h): `model:`, `data:`, `train:` mappings and `out_dir:`, every key at its
/// value (strings double-quoted, numbers in the shortest form that reads back exactly), so
/// loading it gives `config` again. Written beside each run as out_dir/config.yaml.
std::string config_to_yaml(const PretrainConfig& config);

/// The shortest decimal text that reads back as exactly `d` ("0.1", not "0.10000000000000001";
/// "10000", not "1e+04"; "1e-6"): how config_to_text, config_to_yaml and get_config_value
/// write doubles.
std::string format_double(double d);

/// Fields added after config texts were stored (checkpoints, the results store), each with the
/// text of the default that reproduces the models from before it. config_to_text leaves such
/// a field out at that value, so a default config's text is what it was before the field
/// existed; experiments/job_identity.cpp keeps the same fields out of run identities.
const std::map<std::string, std::string>& config_keys_omitted_at_default();
/// Every settable key, "section.field" (e.g. "train.lr"), in a stable order.
std::vector<std::string> config_keys();
/// One field of a ModelConfig, by pointer, at its own type.
using ModelFieldRef = std::variant<std::string*, bool*, int64_t*, double*>;
/// Calls `visit(name, field)` for every model.* field of `config`, in config_keys() order,
/// with the name after "model." ("rope_base"): the same table as config_keys(),
/// set_config_value and config_to_text, so a typed writer (index.json, an HF config.json)
/// cannot miss a field. `visit` may write through the pointer.
void visit_model_fields(ModelConfig& config,
                        const std::function<void(const char* name, ModelFieldRef field)>& visit);
/// Keys still accepted from files written before the positional zoo, but never written:
/// "model.rel_pos" (true = relative_position t5).
const std::vector<std::string>& legacy_config_keys();
/// The pre-zoo flag model.rel_pos, in checkpoints, YAML files, index.json and HF blocks of
/// then: true is relative_position t5; false turns t5 off (any other scheme stays).
void set_legacy_rel_pos(ModelConfig& config, bool on);
/// Whether `config` is what rel_pos: true meant (relative_position t5).
bool legacy_rel_pos(const ModelConfig& config);
/// Sets one field from its text form. Throws std::out_of_range for an unknown key and
/// std::invalid_argument (message without the key) for a value of the wrong type.
void set_config_value(PretrainConfig& config, const std::string& key, const std::string& value);
/// The text form of one field; throws std::out_of_range for an unknown key.
std::string get_config_value(const PretrainConfig& config, const std::string& key);

}  // namespace engine
