// The one table of the pretraining config's fields (model.*, data.*, train.*, out_dir): each
// row names its key, its member and its documentation (and, for a closed set of text values,
// where the set comes from). The text form, config.yaml, config_keys(), --set, the typed field
// visitors and the forms of config_fields.h all walk it. Private to engine_core.
#pragma once

#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/position_scheme.h"

namespace engine::detail {

/// A row's documentation: one or two sentences, and the values a text field takes when they
/// form a closed set (nullptr: any value the field's own check accepts).
struct FieldDoc {
    const char* text;
    std::vector<std::string> (*choices)() = nullptr;
};

inline std::vector<std::string> preset_choices() { return model_presets(); }
inline std::vector<std::string> size_choices() { return model_sizes(); }
inline std::vector<std::string> absolute_choices() { return absolute_position_schemes(); }
inline std::vector<std::string> relative_choices() { return relative_position_schemes(); }
inline std::vector<std::string> norm_choices() { return {"layernorm", "rmsnorm"}; }
inline std::vector<std::string> ffn_choices() { return {"gelu", "geglu", "swiglu"}; }
inline std::vector<std::string> schedule_choices() { return {"linear", "wsd", "wsd-sqrt"}; }
inline std::vector<std::string> dtype_choices() { return {"fp32", "bf16", "fp16", "auto"}; }

/// Calls v(key, member, doc) for every model.* field, in config_keys() order.
template <typename Visitor>
void visit_model(ModelConfig& m, Visitor&& v) {
    v("model.preset", m.preset,
      {"The variant the model starts from (TUPE_NOTES.md); the other model keys apply on top.",
       preset_choices});
    v("model.size", m.size,
      {"The size the model starts from: tiny (2 layers, hidden 32), small (4, 256) or base "
       "(12, 768).",
       size_choices});
    v("model.vocab_size", m.vocab_size, {"Rows of the word table; set from data.vocab."});
    v("model.hidden_size", m.hidden_size,
      {"Width C of every token's vector; num_attention_heads must divide it."});
    v("model.num_hidden_layers", m.num_hidden_layers, {"Encoder layers L."});
    v("model.num_attention_heads", m.num_attention_heads,
      {"Heads H per layer; each head has d = hidden_size / H dimensions."});
    v("model.intermediate_size", m.intermediate_size,
      {"Width F of each layer's feed-forward block (the gated width for geglu and swiglu)."});
    v("model.max_position_embeddings", m.max_position_embeddings,
      {"Longest sequence in tokens, [CLS] and [SEP] included; the size of a learned position "
       "table."});
    v("model.type_vocab_size", m.type_vocab_size,
      {"Segment embeddings for sentence pairs (0 = none, as TUPE's reference)."});
    v("model.hidden_dropout_prob", m.hidden_dropout_prob,
      {"Dropout on embeddings and sublayer outputs, in [0, 1)."});
    v("model.attention_probs_dropout_prob", m.attention_probs_dropout_prob,
      {"Dropout on the attention probabilities, in [0, 1)."});
    v("model.layer_norm_eps", m.layer_norm_eps, {"Epsilon of every LayerNorm or RMSNorm."});
    v("model.initializer_range", m.initializer_range,
      {"Standard deviation of the N(0, s) init of every Linear and Embedding (0.02, as the "
       "reference)."});
    v("model.pad_token_id", m.pad_token_id, {"The [PAD] token's id, in [0, vocab_size)."});
    v("model.absolute_position", m.absolute_position,
      {"How absolute positions enter: input (BERT-A's learned table), sinusoidal, untied "
       "(TUPE's (p'U^Q)(p'U^K)^T on the logits), decoupled (BERT-Ad), none.",
       absolute_choices});
    v("model.relative_position", m.relative_position,
      {"Relative or rotary positions: none, t5 (the bias of BERT-R and TUPE-R), shaw, rope, "
       "alibi, deberta, fire, kerple, ... (docs/zoo.md).",
       relative_choices});
    v("model.rel_pos_bins", m.rel_pos_bins,
      {"T5 buckets (even, >= 4); the table has rel_pos_bins + 1 rows."});
    v("model.max_rel_pos", m.max_rel_pos, {"T5's largest distance told apart."});
    v("model.max_relative_distance", m.max_relative_distance,
      {"Shaw and DeBERTa's clip k; 0 = max_position_embeddings - 1."});
    v("model.rope_fraction", m.rope_fraction,
      {"Share of each head's dimensions RoPE rotates, in (0, 1]."});
    v("model.rope_base", m.rope_base, {"RoPE's base: theta_i = base^(-2i/r)."});
    v("model.position_offset", m.position_offset,
      {"Token t sits at position offset + t (shift tests)."});
    v("model.untie_cls", m.untie_cls,
      {"TUPE's [CLS] reset: [CLS]'s row and column of the positional term replaced by learned "
       "theta1 / theta2 (Ke et al. 2021, sec. 3.3)."});
    v("model.randomized_positions_max", m.randomized_positions_max,
      {"Randomized positions (Ruoss et al. 2023): 0 = off; M > 0 draws the training positions "
       "from 0..M-1."});
    v("model.shared_pos_term", m.shared_pos_term,
      {"One positional term for every layer (TUPE's reference) or one per layer."});
    v("model.attention_scale_factor", m.attention_scale_factor,
      {"Logits scaled by 1/sqrt(d * factor): 2 for TUPE, 4 for BERT-Ad."});
    v("model.pre_layernorm", m.pre_layernorm, {"Pre-LN layers instead of BERT's post-LN."});
    v("model.scale_input_positions", m.scale_input_positions,
      {"The input position table times 1/sqrt(hidden_size) before it is added to the words."});
    v("model.norm", m.norm, {"layernorm, or rmsnorm (no bias).", norm_choices});
    v("model.bias", m.bias, {"false: no bias in any Linear layer or norm (ModernBERT)."});
    v("model.ffn", m.ffn, {"gelu (BERT), geglu or swiglu.", ffn_choices});
    v("model.skip_first_attention_norm", m.skip_first_attention_norm,
      {"Pre-LN only: layer 0 attends over its input unnormalised (ModernBERT)."});
    v("model.local_window", m.local_window,
      {"Local attention: a local layer's query sees keys within this many tokens each side; 0 "
       "= every layer global."});
    v("model.global_every", m.global_every,
      {"With local_window > 0, layer l is global when l % global_every == 0."});
    v("model.rope_base_local", m.rope_base_local,
      {"RoPE's base in the local layers; 0 = rope_base."});
}

/// Calls v(key, member, doc) for every field, model.* first, in config_keys() order.
template <typename Visitor>
void visit_fields(PretrainConfig& c, Visitor&& v) {
    visit_model(c.model, v);
    DataConfig& d = c.data;
    v("data.corpus", d.corpus,
      {"Plain text, a sentence per line, a blank line between documents."});
    v("data.vocab", d.vocab, {"A BERT vocab.txt (one wordpiece per line)."});
    v("data.cache_dir", d.cache_dir, {"Binary token caches, keyed by the corpus and vocab."});
    v("data.max_seq_len", d.max_seq_len, {"Block length in tokens, [CLS] and [SEP] included."});
    v("data.validation_fraction", d.validation_fraction,
      {"Share of documents held out for validation and the built-in tasks (at least one)."});
    v("data.mask_prob", d.mask_prob, {"Share of tokens masked for MLM (BERT: 0.15)."});
    v("data.eval_mask_prob", d.eval_mask_prob,
      {"Masking rate of the validation batches; 0 = mask_prob."});
    v("data.whole_word_masking", d.whole_word_masking,
      {"Mask every wordpiece of a chosen word together."});
    v("data.lower_case", d.lower_case, {"Lower-case the text before tokenizing."});
    TrainConfig& t = c.train;
    v("train.steps", t.steps, {"Optimizer steps of pretraining."});
    v("train.batch_size", t.batch_size, {"Sequences per optimizer step."});
    v("train.grad_accum", t.grad_accum, {"Micro-batches per step; batch_size must divide by it."});
    v("train.lr", t.lr, {"Peak learning rate of AdamW, after the warm-up."});
    v("train.warmup_steps", t.warmup_steps, {"Linear warm-up over these steps."});
    v("train.schedule", t.schedule,
      {"After the warm-up: linear decay to 0, or warmup-stable-decay (wsd, wsd-sqrt).",
       schedule_choices});
    v("train.decay_fraction", t.decay_fraction, {"WSD: share of the steps spent decaying."});
    v("train.weight_decay", t.weight_decay,
      {"AdamW's decoupled weight decay (not on norms and biases)."});
    v("train.adam_beta1", t.adam_beta1, {"AdamW's beta1."});
    v("train.adam_beta2", t.adam_beta2, {"AdamW's beta2 (0.98, as RoBERTa and TUPE)."});
    v("train.adam_eps", t.adam_eps, {"AdamW's epsilon."});
    v("train.clip_norm", t.clip_norm, {"Gradient-norm clip; 0 = none."});
    v("train.eval_interval", t.eval_interval, {"Validation every N steps and at the end."});
    v("train.eval_batches", t.eval_batches,
      {"Validation batches per evaluation; 0 = the whole validation split."});
    v("train.checkpoint_interval", t.checkpoint_interval, {"A checkpoint every N steps."});
    v("train.log_interval", t.log_interval, {"train/loss logged every N steps."});
    v("train.seed", t.seed, {"Seed of the init, the data order and the masking."});
    v("train.device", t.device, {"cpu, cuda, cuda:N or auto."});
    v("train.dtype", t.dtype, {"fp32, bf16 (autocast), fp16 (CUDA) or auto.", dtype_choices});
    v("train.threads", t.threads, {"Intra-op threads; 0 = the CPUs available."});
    v("train.tensorboard", t.tensorboard, {"Also write TensorBoard event files."});
    v("out_dir", c.out_dir, {"Where the run's checkpoints and logs go."});
}

}  // namespace engine::detail
