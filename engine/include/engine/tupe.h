// The positional terms of the model family, computed ONCE per forward pass, outside the layer
// loop, and handed to every layer (Ke, He, Liu, ICLR 2021; reference: guolinke/TUPE,
// fairseq/modules/transformer_sentence_encoder.py). Shapes: H heads, T tokens, C hidden,
// d = C / H; position 0 is always [CLS].
#pragma once

#include <torch/torch.h>

#include <vector>

#include "engine/config.h"

namespace engine {

/// T5 bidirectional bucket of rel = key - query (n = -rel): 0..nb/2-1 for keys at or left of
/// the query, nb/2.. for keys to the right; half of each side exact, the rest log-spaced up
/// to max_distance. As relative_position_bucket in guolinke/TUPE.
int64_t t5_relative_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance);

/// (T, T) bucket ids, [i][j] for query i and key j. With cls_buckets (TUPE-R), column 0
/// (others -> [CLS]) uses the extra bucket num_buckets and row 0 ([CLS] -> others, [0,0]
/// included) uses bucket num_buckets / 2, which the T5 function never produces.
torch::Tensor relative_bucket_matrix(int64_t seq_len, int64_t num_buckets, int64_t max_distance,
                                     bool cls_buckets);

/// What the encoder passes to its layers. Every tensor is optional (undefined when the
/// variant does not use it).
struct PositionTerms {
    /// Additive logit bias, (H, T, T): one entry shared by all layers, or one per layer.
    std::vector<torch::Tensor> bias;
    /// BERT-Ad: p'U^Q and p'U^K, (T, C), added to the query and key projections of each layer
    /// (one shared entry, or one per layer). (xW^Q + pU^Q)(xW^K + pU^K)^T expands to exactly
    /// the paper's four terms.
    std::vector<torch::Tensor> q_offset, k_offset;

    torch::Tensor bias_for(size_t layer) const;
    torch::Tensor q_offset_for(size_t layer) const;
    torch::Tensor k_offset_for(size_t layer) const;
};

/// U^Q, U^K of one group of layers (one shared group by default).
struct PositionProjectionImpl : torch::nn::Module {
    explicit PositionProjectionImpl(int64_t hidden_size);
    torch::nn::Linear pos_q_linear{nullptr}, pos_k_linear{nullptr};  // with bias, as the reference
};
TORCH_MODULE(PositionProjection);

/// Every positional parameter outside the input embeddings: TUPE's untied term (`pos`,
/// `pos_ln`, `pos_q_linear`, `pos_k_linear`), BERT-Ad's projections, the T5 relative bias
/// (`relative_attention_bias`) and, for BERT-A with untie_cls, a per-head `cls_theta`.
class UntiedPositionBiasImpl : public torch::nn::Module {
  public:
    explicit UntiedPositionBiasImpl(const ModelConfig& config);

    /// The terms for a sequence of seq_len tokens (position 0 = [CLS]).
    PositionTerms forward(int64_t seq_len);

    /// TUPE's raw correlation A = (p'U^Q / sqrt(d * factor))(p'U^K)^T over position rows
    /// 0..T, (H, T+1, T+1), before the [CLS] reset; for analysis. `group` picks the layer group.
    torch::Tensor untied_correlation(int64_t seq_len, int64_t group = 0);
    /// The relative bias alone, (H, T, T); undefined when rel_pos is off.
    torch::Tensor relative_bias(int64_t seq_len);

    /// How many times forward() ran (the term must be computed once per model forward).
    int64_t forward_count() const { return forward_count_; }
    bool has_terms() const;

    torch::nn::Embedding pos{nullptr};  ///< (max_len + 1, C) for TUPE, (max_len, C) for BERT-Ad
    torch::nn::LayerNorm pos_ln{nullptr};
    torch::nn::ModuleList projections{nullptr};  ///< one PositionProjection, or one per layer
    torch::nn::Embedding relative_attention_bias{nullptr};  ///< (rel_pos_bins + 1, H)
    torch::Tensor cls_theta;                                ///< (2, H): BERT-A + [CLS] reset

  private:
    PositionProjection projection(int64_t group);
    ModelConfig config_;
    torch::Tensor buckets_;  // (max_len, max_len), long; sliced per forward
    int64_t forward_count_ = 0;
};
TORCH_MODULE(UntiedPositionBias);

}  // namespace engine
