// The encoder family: one BERT encoder (HF modeling_bert names, so checkpoints map across)
// whose positional scheme is one PositionEncoding module (engine/position.h: BERT-A/R,
// TUPE-A/R, tie-cls, BERT-Ad and the zoo's sinusoidal, NoPE, T5, Shaw, RoPE, ALiBi, DeBERTa),
// and the MLM head with logits only at masked positions. Shapes: B batch, T tokens, C hidden,
// H heads, d = C / H, V vocabulary.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/norm.h"
#include "engine/position.h"

namespace engine {

/// Inverted dropout as torch::dropout (keep with probability 1 - p, scale by 1 / (1 - p)); on
/// CPU the mask is drawn in parallel from Philox seeded by torch's default generator (see
/// bert.cpp), so it is reproducible under torch::manual_seed and independent of the thread
/// count. Identity when !training or p == 0.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

/// What the encoder returns. Attention maps are filled only when asked for.
struct EncoderOutput {
    torch::Tensor last_hidden_state;  ///< (B, T, C)
    /// Per layer, (B, H, T, T): pre-softmax logits with every positional term included,
    /// before the padding mask.
    std::vector<torch::Tensor> attention_logits;
    std::vector<torch::Tensor> attention_probs;  ///< Per layer, (B, H, T, T), after softmax.
};

struct BertEmbeddingsImpl : torch::nn::Module {
    explicit BertEmbeddingsImpl(const ModelConfig& config);
    /// input_ids (B, T), token_type_ids (B, T) or undefined, the positional input slot
    /// (T, C) or undefined (PositionTerms::input) -> (B, T, C)
    torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                          const torch::Tensor& position_input = {});

    torch::nn::Embedding word_embeddings{nullptr};
    /// absolute_position = input only (HF's name); PositionEncoding reads it.
    torch::nn::Embedding position_embeddings{nullptr};
    torch::nn::Embedding token_type_embeddings{nullptr};  ///< when type_vocab_size > 0
    Norm LayerNorm{nullptr};
    torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(BertEmbeddings);

struct BertSelfAttentionImpl : torch::nn::Module {
    explicit BertSelfAttentionImpl(const ModelConfig& config);
    /// x (B, T, C), additive padding mask (B, 1, 1, T), this layer's positional slots (and its
    /// local window, LayerPosition::window) -> context (B, T, C). The logits (before the padding
    /// mask and the window) and probabilities come out when asked for (analysis).
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask_bias,
                          const LayerPosition& position, torch::Tensor* logits_out = nullptr,
                          torch::Tensor* probs_out = nullptr);

    torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
    torch::nn::Dropout dropout{nullptr};
    int64_t num_heads, head_dim;
    double scaling;  ///< 1 / sqrt(d * attention_scale_factor), as LayerPosition::scaling
};
TORCH_MODULE(BertSelfAttention);

/// dense -> dropout -> LayerNorm(h + residual) (post-LN) or h + residual (pre-LN, where
/// LayerNorm normalises the sub-layer's input instead; absent with `with_norm` false).
struct BertOutputImpl : torch::nn::Module {
    BertOutputImpl(int64_t in, int64_t out, const ModelConfig& config, bool with_norm = true);
    torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& residual);

    torch::nn::Linear dense{nullptr};
    Norm LayerNorm{nullptr};
    torch::nn::Dropout dropout{nullptr};
    bool pre_layernorm;
};
TORCH_MODULE(BertOutput);

struct BertAttentionImpl : torch::nn::Module {
    /// `layer`: the layer's index (ModernBERT's layer 0 has no attention input norm).
    explicit BertAttentionImpl(const ModelConfig& config, int64_t layer = 0);
    BertSelfAttention self{nullptr};
    BertOutput output{nullptr};  // HF: attention.output.{dense,LayerNorm}
};
TORCH_MODULE(BertAttention);

/// HF: intermediate.dense, then GELU (erf form); for model.ffn geglu / swiglu dense is
/// (2F, C) and its two halves [a, b] give GELU(a) * b / SiLU(a) * b (Shazeer 2020, as
/// ModernBERT's Wi). (.., C) -> (.., F).
struct BertIntermediateImpl : torch::nn::Module {
    explicit BertIntermediateImpl(const ModelConfig& config);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Linear dense{nullptr};
    std::string ffn;  ///< gelu, geglu or swiglu
};
TORCH_MODULE(BertIntermediate);

struct BertLayerImpl : torch::nn::Module {
    /// `layer`: the layer's index in the encoder.
    explicit BertLayerImpl(const ModelConfig& config, int64_t layer = 0);
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask_bias,
                          const LayerPosition& position, torch::Tensor* logits_out = nullptr,
                          torch::Tensor* probs_out = nullptr);

    BertAttention attention{nullptr};
    BertIntermediate intermediate{nullptr};
    BertOutput output{nullptr};
    bool pre_layernorm;
    /// Pre-LN: attention.output.LayerNorm normalises attention's input (false in ModernBERT's
    /// layer 0, which has no such norm: ModelConfig::attention_input_norm).
    bool attention_norm;
};
TORCH_MODULE(BertLayer);

/// HF: encoder.layer.N (and, pre-LN only, encoder.final_layer_norm).
struct BertEncoderImpl : torch::nn::Module {
    explicit BertEncoderImpl(const ModelConfig& config);
    torch::nn::ModuleList layer{nullptr};
    Norm final_layer_norm{nullptr};
};
TORCH_MODULE(BertEncoder);

/// BertModel: embeddings, the positional terms (computed once per forward), the layers.
class BertModelImpl : public torch::nn::Module {
  public:
    explicit BertModelImpl(const ModelConfig& config);

    /// input_ids (B, T); attention_mask (B, T) 1 = token, 0 = padding (undefined = all 1);
    /// token_type_ids (B, T) or undefined. T may exceed max_position_embeddings only for the
    /// schemes that extrapolate (PositionDescription::extrapolates).
    EncoderOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                          const torch::Tensor& token_type_ids = {}, bool output_attentions = false);

    const ModelConfig& config() const { return config_; }

    BertEmbeddings embeddings{nullptr};
    /// Always set; registered as "position_bias" only when it has parameters (so bert-a's
    /// checkpoints, from before the zoo too, hold no bert.position_bias.* entries).
    PositionEncoding position{nullptr};
    BertEncoder encoder{nullptr};

  private:
    ModelConfig config_;
};
TORCH_MODULE(BertModel);

/// Result of an MLM forward pass: loss over masked positions and their accuracy.
struct MlmOutput {
    torch::Tensor loss;    ///< scalar, mean over masked positions
    torch::Tensor logits;  ///< (M, V) for the M masked positions
    int64_t num_masked = 0;
    int64_t num_correct = 0;  ///< computed only when requested
    EncoderOutput encoder;
};

/// HF: cls.predictions.transform.{dense,LayerNorm} and cls.predictions.bias; the decoder
/// weight is the word embedding matrix.
struct BertPredictionHeadTransformImpl : torch::nn::Module {
    explicit BertPredictionHeadTransformImpl(const ModelConfig& config);
    torch::Tensor forward(const torch::Tensor& h);  // (M, C) -> (M, C)
    torch::nn::Linear dense{nullptr};
    Norm LayerNorm{nullptr};
};
TORCH_MODULE(BertPredictionHeadTransform);

struct BertLMPredictionHeadImpl : torch::nn::Module {
    explicit BertLMPredictionHeadImpl(const ModelConfig& config);
    BertPredictionHeadTransform transform{nullptr};
    torch::Tensor bias;  // (V)
};
TORCH_MODULE(BertLMPredictionHead);

struct BertOnlyMLMHeadImpl : torch::nn::Module {
    explicit BertOnlyMLMHeadImpl(const ModelConfig& config);
    BertLMPredictionHead predictions{nullptr};
};
TORCH_MODULE(BertOnlyMLMHead);

/// BertForMaskedLM with the decoder tied to the word embeddings (HF names: bert.*, cls.*).
class BertForMaskedLMImpl : public torch::nn::Module {
  public:
    explicit BertForMaskedLMImpl(const ModelConfig& config);

    /// labels (B, T): target id at masked positions, -100 elsewhere. Logits are computed only
    /// at the masked positions.
    MlmOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                      const torch::Tensor& labels, bool count_correct = false,
                      bool output_attentions = false);

    const ModelConfig& config() const { return bert->config(); }

    BertModel bert{nullptr};
    BertOnlyMLMHead cls{nullptr};
};
TORCH_MODULE(BertForMaskedLM);

/// N(0, initializer_range) for every Linear and Embedding (and TUPE's tables), zero biases,
/// unit norms, zero [PAD] row: the reference's init_bert_params.
void init_bert_weights(torch::nn::Module& module, const ModelConfig& config);

/// Parameter counts by group (embeddings, positional, encoder, mlm_head, total), counting the
/// tied decoder once.
std::map<std::string, int64_t> parameter_groups(torch::nn::Module& module);

}  // namespace engine
