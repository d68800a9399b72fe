// Where attention gathers from across layers, and how much each key actually contributes:
// attention rollout and attention flow (Abnar & Zuidema, "Quantifying Attention Flow in
// Transformers", ACL 2020) and value-weighted attention norms ||alpha_ij f(x_j)|| (Kobayashi,
// Kuribayashi, Yokoi & Inui, "Attention is Not Only a Weight: Analyzing Transformers with Vector
// Norms", EMNLP 2020). Plain float64 arithmetic on CPU copies, no model: analyze.cpp feeds them
// one sentence (rollout, flow) or one batch (norms) at a time. Shapes: L layers, H heads,
// T tokens (0 = [CLS]), B batch, C hidden.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/representations.h"
#include "engine/bert.h"

namespace analysis {

/// Abnar & Zuidema's residual-aware attention: A_hat = 0.5 A + 0.5 I, i.e. (A + I) with rows
/// renormalised, for a row-stochastic A (..., T, T). Float64 CPU.
torch::Tensor residual_attention(const torch::Tensor& attention);

/// Attention rollout: R_1 = A_hat_1, R_l = A_hat_l R_{l-1}, where A_hat_l is layer l's
/// head-mean attention (L, T, T) through residual_attention (or A_l itself when `residual` is
/// false). Returns every R_l, (L, T, T) float64: R_l[i, j] is how much of layer l's output
/// token i comes from input token j when attention mixes linearly. Rows sum to 1.
torch::Tensor attention_rollout(const torch::Tensor& attention, bool residual = true);

/// Attention flow: the layered graph whose nodes are the tokens at every layer boundary
/// (0 = the input, l = the output of layer l), with an edge from input token j of layer l to
/// its output token i of capacity A_hat_l[i, j]; the flow of input token j to output `query` of
/// the last layer is the maximum flow from node (0, j) to node (L, query) (Edmonds-Karp's
/// successor, Dinic's algorithm, exact up to float64 rounding). Returns the T raw flow values,
/// float64; each is at most 1 (the query's row sum). `attention` (L, T, T) as attention_rollout.
/// One max-flow per input token: T max-flows on (L + 1) T nodes and L T^2 edges.
torch::Tensor attention_flow_row(const torch::Tensor& attention, int64_t query,
                                 bool residual = true);

/// Value-weighted attention norms of one layer, per batch. f_h(x_j) = (x_j W^V_h + b^V_h) W^O_h
/// is what token j sends through head h (W^O_h the columns of the output projection that head
/// h's context multiplies); the layer's attention output before b^O is
/// sum_h sum_j alpha^h_ij f_h(x_j).
struct ValueNorms {
    torch::Tensor head;        ///< (B, H, T, T): alpha^h_ij ||f_h(x_j)||
    torch::Tensor layer;       ///< (B, T, T): ||sum_h alpha^h_ij f_h(x_j)||
    torch::Tensor value_norm;  ///< (B, H, T): ||f_h(x_j)||
};

/// Norms from the attention probabilities (B, H, T, T) and the transformed values
/// f = (B, H, T, C) (transformed_values). The layer norm comes from the heads' Gram matrix,
/// ||sum_h a_h f_h||^2 = sum_{h,k} a_h a_k <f_h, f_k>, so no (B, T, T, C) tensor is built.
/// Float64 CPU. Throws std::invalid_argument on shapes.
ValueNorms value_weighted_norms(const torch::Tensor& probs, const torch::Tensor& transformed);

/// f_h(x_j) of one layer for its attention input x (B, T, C) (the layer input, or its
/// LayerNorm in a pre-LN model: EncoderTrace::attention_inputs): (B, H, T, C), float64 CPU.
torch::Tensor transformed_values(engine::BertLayerImpl& layer, const torch::Tensor& x);

// ---- over a batch of sentences (tupe analyze) --------------------------------------------------

/// Where a [CLS] row's mass comes from, one sentence of n tokens at a time (row normalised to
/// sum 1 over the sentence's tokens), mean over sentences of at least 3 tokens.
struct ClsSources {
    std::string measure;  ///< "attention", "value_norm", "rollout" or "flow"
    int64_t layer = 0;
    int64_t head = -1;  ///< -1: the layer (head mean for attention, ||sum_h ...|| for norms)
    double cls = 0;     ///< share on [CLS] itself (position 0)
    double words = 0;   ///< share on the tokens between [CLS] and [SEP]
    double sep = 0;     ///< share on the closing [SEP] (position n - 1)
    int64_t sentences = 0;
};

/// Rollout, flow and value-weighted norms over the sentences of `tupe analyze`. Position maps
/// are means over the sentences with a token at both the query and the key (or at the key for
/// the [CLS] rows), as the other maps of analyze.h. float32 CPU.
struct FlowMaps {
    torch::Tensor rollout;       ///< (L, T, T): attention_rollout through layer l, residual-aware
    torch::Tensor flow_cls;      ///< (L, T): attention flow from each input to [CLS] after layer l,
                                 ///< the row normalised to sum 1 over the sentence's tokens
    int64_t flow_sentences = 0;  ///< sentences whose flow was computed (the first ones)
    torch::Tensor norm_head;     ///< (L, H, T, T): alpha^h_ij ||f_h(x_j)||
    torch::Tensor norm_layer;    ///< (L, T, T): ||sum_h alpha^h_ij f_h(x_j)||
    torch::Tensor value_norm;    ///< (L, H, T): ||f_h(x_j)||, mean over the tokens at j
    /// (L, T) and (L, H, T): the [CLS] row of norm_layer / norm_head, each sentence's row
    /// normalised to sum 1 (the share of what [CLS] gathers that comes from key j).
    torch::Tensor cls_norm_share, cls_norm_share_head;
    /// (L, T) and (L, H, T): the [CLS] row of the attention itself, for comparison.
    torch::Tensor cls_attention, cls_attention_head;
    std::vector<ClsSources> sources;  ///< per measure, layer (and head for the first two)
};

/// Sums of FlowMaps over batches.
class FlowAccumulator {
  public:
    /// `flow_sentences`: how many sentences, first come first served, get the attention flow
    /// (L T max-flows each; the rest only the closed forms).
    explicit FlowAccumulator(int64_t flow_sentences) : flow_budget_(flow_sentences) {}
    /// One batch: the traced pass over its ids and its mask (B, T), 1 = token.
    void add(engine::BertModel& model, const EncoderTrace& trace, const torch::Tensor& mask);
    FlowMaps finish() const;

  private:
    /// Adds one sentence's [CLS] row (n) to the sources of (measure, layer, head).
    void add_sources(int measure, int64_t layer, int64_t head, const torch::Tensor& row);

    int64_t flow_budget_, flow_done_ = 0;
    torch::Tensor rollout_, pair_count_, flow_, flow_count_;
    torch::Tensor norm_head_, norm_layer_, value_norm_, token_count_;
    torch::Tensor share_, share_head_, attention_, attention_head_;
    /// (measure, layer, head) -> cls, words, sep sums and the sentence count
    std::map<std::tuple<int, int64_t, int64_t>, std::pair<std::array<double, 3>, int64_t>> sources_;
};

}  // namespace analysis
