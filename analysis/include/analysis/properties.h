// Properties of the positional part of attention, measured the same way for every scheme (issue
// 15, sec. 1): how much of each head is about position, whether it prefers near keys, whether
// it depends only on the offset j - i, whether it treats left and right alike, how local the
// attention is, and whether the positional term is low rank or Toeplitz (TUPE, Proposition 1).
//
// The ruler is the counterfactual Delta_pos(i, j) = logit at the true positions minus logit with
// every token at the same position (PositionEncoding::set_constant_positions), which exists for
// every scheme, RoPE, Shaw and DeBERTa included. Beside it, where a scheme has one, the exact
// input-independent positional logit (TUPE's untied term, T5, ALiBi, BERT-Ad's p'U^Q (p'U^K)^T)
// or, for a learned or sinusoidal table, the cosine similarity of its rows.
// Probe: windows of exactly T tokens ([CLS] + T - 2 stream tokens + [SEP], no padding, nothing
// masked) cut from one token stream. Every map property is computed without [CLS]'s row and
// column (the [CLS] reset makes them non-positional by design). Shapes: L layers, H heads.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/attention_analysis.h"
#include "analysis/property_names.h"
#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

// ---- properties of one (n, n) map; hand-checkable ---------------------------------------------

/// The best Toeplitz approximation of phi (n, n) in least squares: each diagonal j - i = k
/// replaced by its mean. float64.
torch::Tensor toeplitz_fit(const torch::Tensor& phi);

/// Translation invariance: the share of phi's variance (around its grand mean) that its best
/// Toeplitz fit explains, 1 - |phi - T(phi)|^2 / |phi - mean(phi)|^2. 1 for a pure Toeplitz map;
/// NaN for a constant map (no variance to explain).
double translation_invariance(const torch::Tensor& phi);

/// Monotonicity after Wang et al. ("On Position Embeddings in BERT", ICLR 2021): for each row i,
/// the Spearman correlation between -|j - i| and phi(i, j) over the keys j within `window` of i,
/// on the left (i - window <= j < i) and on the right (i < j <= i + window) separately; the mean
/// over rows with at least 3 such keys. 1: the nearer the key, the larger the logit. A row whose
/// values are all equal counts as 0 (no preference). NaN when no row has 3 keys on that side.
struct Monotonicity {
    double left = 0, right = 0;
};
Monotonicity monotonicity(const torch::Tensor& phi, int64_t window = 8);

/// Symmetry: the Pearson correlation of phi(i, i + k) with phi(i, i - k) over every i and
/// k >= 1 where both exist. 1 for a symmetric band phi(i, j) = f(|i - j|); NaN when either side
/// has no variance or n < 3.
double mirror_symmetry(const torch::Tensor& phi);

/// Locality of an attention map as Chen et al. ("A Simple and Effective Positional Encoding for
/// Transformers", EMNLP 2021) compute it: the mean over rows i of sum_j A_ij 2^(-|i - j|).
/// 1 when every row attends to itself only; about 3/n for uniform rows. probs (n, n).
double locality(const torch::Tensor& probs);

/// Singular values (descending) of phi, of its Toeplitz fit and of the residual phi - T(phi):
/// (3, n) float64. TUPE's Proposition 1: an absolute term (p U^Q)(p U^K)^T has rank <= d, a
/// relative (Toeplitz) term can be of full rank.
torch::Tensor toeplitz_spectrum(const torch::Tensor& phi);

/// The smallest k whose first k singular values hold at least `share` of sum s^2. 0 for a zero
/// matrix. singular_values (n) descending.
int64_t energy_rank(const torch::Tensor& singular_values, double share = 0.9);

/// |phi - T(phi)|_F / |phi|_F: how far phi is from Toeplitz, relative to its size (0 for a
/// Toeplitz map; NaN for a zero map).
double toeplitz_residual(const torch::Tensor& phi);

/// Positional share: the variance of the positional part divided by the variance of the whole
/// logit, both within rows (softmax ignores a per-row constant), pooled over rows:
/// sum_rows Var_j(positional) / sum_rows Var_j(total). positional, total (..., n, n). Can exceed
/// 1 when the positional and the rest cancel each other. NaN when total has no variance.
double variance_share(const torch::Tensor& positional, const torch::Tensor& total);

// ---- a model's properties ---------------------------------------------------------------------

/// One head's numbers (NaN where not defined for the scheme). The keys of property_names().
struct HeadProperties {
    double positional_share = 0;  ///< variance_share(Delta_pos, logits), over every window
    double static_share = 0;  ///< variance_share(static term, logits); NaN without a static term
    double monotonicity_left = 0, monotonicity_right = 0;  ///< of the mean Delta_pos map
    double translation_invariance = 0;                     ///< of the mean Delta_pos map
    double symmetry = 0;                                   ///< mirror_symmetry of mean Delta_pos
    double rank90 = 0;              ///< energy_rank(0.9) of the mean Delta_pos map
    double toeplitz_residual = 0;   ///< of the mean Delta_pos map
    double locality = 0;            ///< of the mean attention map (linear, so exact)
    double attention_symmetry = 0;  ///< mirror_symmetry of the mean attention map
    double mean_distance = 0;       ///< head_statistics (normalised by n), mean over windows
    double entropy = 0;             ///< head_statistics (normalised by ln n), mean over windows
    HeadPattern pattern = HeadPattern::kBroad;  ///< classify_head of the mean attention map
};

// property_names(): "positional_share", ..., "entropy" (analysis/property_names.h).
/// The property `name` of `p` (one of property_names()); throws std::invalid_argument otherwise.
double property_value(const HeadProperties& p, const std::string& name);

/// The numbers and maps of one layer. Maps have [CLS]'s row and column removed: (H, T-1, T-1).
struct LayerProperties {
    std::vector<HeadProperties> heads;
    HeadProperties mean;  ///< each number averaged over the heads (NaN-skipping); pattern unused
    torch::Tensor delta;  ///< mean Delta_pos over the windows, float32
    torch::Tensor static_term;  ///< the static positional logit (H, T-1, T-1); undefined if none
    torch::Tensor spectrum;     ///< (H, 3, T-1): toeplitz_spectrum of each head's delta
};

struct PropertiesOptions {
    /// T, tokens per window with [CLS] and [SEP] (>= 4); 0 = min(128, max_position_embeddings)
    int64_t length = 0;
    int64_t windows = 16;    ///< at most this many windows from the stream's start
    int64_t batch_size = 8;  ///< windows per forward pass
    int64_t window = 8;      ///< monotonicity's key window
    TaxonomyThresholds thresholds;
    std::string source = "stream";  ///< for errors
};

struct PropertiesReport {
    std::string summary;        ///< PositionDescription::summary
    std::string static_source;  ///< "bias" (static bias slot), "decoupled", "table", or ""
    int64_t length = 0;         ///< T
    int64_t windows = 0;        ///< windows run
    int64_t window = 8;
    std::vector<LayerProperties> layers;
    /// For a learned or sinusoidal input table: the cosine similarity of its rows 1..T-1
    /// ((T-1, T-1), float32), the same for every layer and head; else undefined.
    torch::Tensor table_similarity;
    /// Each property averaged over layers and heads (NaN-skipping), in property_names() order.
    std::vector<std::pair<std::string, double>> overall() const;
};

/// Runs the probe: min(options.windows, (stream size) / (T - 2)) windows, each through the
/// model twice with attention maps (true positions, then constant positions), in eval mode
/// without gradients; the training flag and the constant-positions switch are restored, also
/// when a pass throws. Throws std::invalid_argument for bad options, engine::InputError(source,
/// ...) when the stream holds fewer than T - 2 tokens or ids outside the vocabulary; a learned
/// table shorter than T fails with the model's own message.
PropertiesReport measure_properties(engine::BertForMaskedLM& model,
                                    const std::vector<int64_t>& stream, const engine::Vocab& vocab,
                                    const PropertiesOptions& options);

/// Sentences as one token stream (each tokenized, no special tokens, concatenated), at most
/// max_tokens (<= 0: all).
std::vector<int64_t> sentences_stream(const std::vector<std::string>& sentences,
                                      const engine::WordPieceTokenizer& tokenizer,
                                      int64_t max_tokens);

}  // namespace analysis
