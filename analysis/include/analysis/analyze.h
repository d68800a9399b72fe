// `tupe analyze`'s data side: sentences through one model and every map the paper's figures
// need: layer 0's four terms averaged over the batch with their uniformity (Ke, He, Liu, ICLR
// 2021, Fig. 2), TUPE's positional correlation and head taxonomy (Fig. 6), [CLS] attention per
// layer and head, attention rollout/flow and value-weighted norms (attention_flow.h), the
// position vectors and the logit lens (representations.h), and their export (.npy/.csv +
// index.json). Plain tensors, no Qt. Shapes: N sentences, B batch, L layers, H heads, T tokens
// (0 = [CLS]), padded to the longest sentence.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/attention_analysis.h"
#include "analysis/attention_flow.h"
#include "analysis/order_probe.h"
#include "analysis/properties.h"
#include "analysis/representations.h"
#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

/// How analyze_model reads its sentences and what it computes.
struct AnalyzeOptions {
    int64_t batch_size = 32;  ///< sentences per forward pass
    int64_t cls_k = 5;        ///< ClsAttention::k (first-k mass of the [CLS] row)
    /// Longest sequence, [CLS]/[SEP] included: 0 = the model's max_position_embeddings; more
    /// than that is an std::invalid_argument naming the limit.
    int64_t max_tokens = 0;
    TaxonomyThresholds thresholds;
    /// A sentence longer than max_tokens (or the position table): truncated with a note, or
    /// refused with engine::InputError(source, ...) naming the limit (false, e.g. for --text).
    bool truncate = true;
    std::string source = "sentences";  ///< where the sentences came from, for notes and errors
    /// The properties probe (properties.h) on the sentences as one token stream: windows of
    /// property_options.length tokens (0, the default: min(128, max_position_embeddings);
    /// shortened, with a note, when the stream holds less). Off: not computed.
    bool properties = true;
    PropertiesOptions property_options;
    /// The order probe (order_probe.h) on the same stream, at the properties' length.
    bool order_probe = false;
    OrderProbeOptions order_options;
    /// Rollout, attention flow and value-weighted norms (attention_flow.h), from the same pass
    /// per batch (one that keeps every layer's input: trace_encoder). Off: not computed.
    bool flow = true;
    /// Sentences, the first ones, whose attention flow is computed (L max-flows per token each).
    int64_t flow_sentences = 16;
    /// The logit lens (representations.h) on lens_stream, or on the sentences as one stream
    /// when it is empty (lens_options.source names the text). lens_options.length 0: the
    /// properties' length (shortened, with a note, when the stream holds less). Off: not run.
    /// Token positions whose vectors positions/ describes (the cosine matrix and the PCA): 0 =
    /// the whole table; `tupe analyze` passes a checkpoint's training length, beyond which the
    /// rows were never trained.
    int64_t position_rows = 0;
    bool logit_lens = true;
    LogitLensOptions lens_options{0};
    std::vector<int64_t> lens_stream;
};

/// A map that was not computed, and why.
struct SkippedMap {
    std::string what, reason;
};

/// Layer 0's terms (FourTerms), each averaged over the batch where query and key are both
/// tokens: sum_b m_bi m_bj term_b[h, i, j] / sum_b m_bi m_bj. float32 CPU.
struct TermMaps {
    torch::Tensor word_word, word_pos, pos_word, pos_pos;  ///< (H, T, T)
    torch::Tensor bias;  ///< (H, T, T) the model's layer-0 logit bias; undefined when it has none
    torch::Tensor rest;  ///< (H, T, T) segment embedding, LayerNorm and Linear biases
    /// uniformity() per head over every sentence (per-sentence rows, not the averaged map),
    /// pooled across batches exactly: sqrt(sum_c u_c^2 rows_c / sum_c rows_c).
    TermStats stats;
};

/// Layer 0's logits split into the scheme's own named terms (engine::LayerPosition::terms, in
/// PositionDescription::logit_terms order), each averaged over the batch like TermMaps. Every
/// scheme has them, unlike TermMaps' four-term split, which needs positions outside attention:
/// DeBERTa's content/c2p/p2c, TUPE's content (word) and bias (positional), RoPE's content and
/// rotation. Per sentence they add up to layer 0's logits before the padding mask.
struct SchemeTerms {
    std::string summary;  ///< PositionDescription::summary, e.g. "rotary q/k, scale 1/sqrt(d)"
    /// (name, (H, T, T) float32 CPU): masked batch mean, as TermMaps.
    std::vector<std::pair<std::string, torch::Tensor>> terms;
    /// What each term is (PositionDescription::logit_term_meanings), in terms' order.
    std::vector<std::string> meanings;
};

/// TUPE's positional correlation at the batch's T, with the taxonomy of each head.
struct TupeMaps {
    PositionalCorrelation correlation;
    std::vector<std::vector<HeadPattern>> patterns;       ///< [group][head]
    std::vector<std::vector<HeadStatistics>> statistics;  ///< [group][head]
};

/// Everything analyze_model computed for one model.
struct AnalysisOutput {
    std::string model_name;  ///< shown in figures and index.json (e.g. the checkpoint path)
    engine::ModelConfig config;
    std::vector<std::vector<std::string>> tokens;  ///< per sentence, after truncation
    torch::Tensor input_ids;                       ///< (N, T) int64, [PAD] after each sentence
    torch::Tensor attention_mask;                  ///< (N, T) int64, 1 = token
    /// T tick labels: the wordpieces when there is one sentence, else empty (positions).
    std::vector<std::string> axis_labels;
    std::vector<std::string> notes;  ///< truncations and other things a reader should know
    std::vector<SkippedMap> skipped;
    int64_t forward_passes = 0;     ///< model forward passes run (one per batch)
    std::optional<TermMaps> terms;  ///< BERT-A/R (input positions) and BERT-Ad only
    std::optional<TupeMaps> tupe;   ///< untied (TUPE) models only
    SchemeTerms scheme_terms;       ///< every scheme
    ClsAttention cls;
    std::optional<PropertiesReport> properties;       ///< AnalyzeOptions::properties
    std::optional<OrderProbeReport> order;            ///< AnalyzeOptions::order_probe
    std::optional<FlowMaps> flow;                     ///< AnalyzeOptions::flow
    std::optional<PositionVectors> position_vectors;  ///< models with a learned absolute table
    std::optional<LogitLensReport> lens;              ///< AnalyzeOptions::logit_lens
    double seconds = 0;                               ///< wall time of analyze_model
};

/// The first `n` non-empty lines of a text file (n <= 0: all), whitespace-trimmed. Throws
/// engine::InputError naming the file when it is missing or has no non-empty line.
std::vector<std::string> read_sentences(const std::string& path, int64_t n);

/// Runs `sentences` through `model` in batches of options.batch_size ([CLS] s [SEP], padded to
/// the longest) and computes every map that fits the variant; the rest go to `skipped` with the
/// reason. Per batch: one forward pass with attention maps on (trace_encoder, which also keeps
/// every layer's input, when options.flow), which gives the [CLS] maps of every layer, rollout,
/// flow and value-weighted norms and, for input/decoupled positions, the logits that
/// decompose_first_layer's terms add up to (no second pass); and layer 0's q and k once more
/// (embeddings and one projection, not a model pass) for the scheme's named terms. Eval mode
/// without gradients; the training flag is restored. Throws std::invalid_argument for no sentences
/// and engine::InputError(options.source, ...) for a sentence that is too long when
/// options.truncate is false.
AnalysisOutput analyze_model(engine::BertForMaskedLM& model,
                             const engine::WordPieceTokenizer& tokenizer,
                             const std::vector<std::string>& sentences,
                             const AnalyzeOptions& options = {});

/// One file of an analysis directory, as index.json describes it.
struct IndexEntry {
    std::string file;            ///< relative to the directory, e.g. "terms/word_word_h0.csv"
    std::string what;            ///< kind: "word_word", "tupe_total", "from_cls", "figure", ...
    std::string description;     ///< one line for a human
    int64_t layer = -1;          ///< -1: not one layer (all layers, or shared by all)
    int64_t head = -1;           ///< -1: not one head (all heads, or their mean)
    std::vector<int64_t> shape;  ///< of the array in the file; empty for figures and text
    std::vector<std::pair<std::string, double>> statistics;  ///< named values (NaN -> null)
    std::string label;                                       ///< e.g. the head's taxonomy pattern
};

/// Writes every matrix of `output` under `dir` (created): input/, terms/, scheme_terms/, tupe/,
/// cls/, flow/, value_norms/, positions/, logit_lens/, properties/; per-head matrices as .npy and
/// .csv, stacked arrays as .npy; then dir/index.json (see write_analysis_index). Returns the
/// entries written. Throws engine::InputError naming the file on I/O failure.
std::vector<IndexEntry> write_analysis(const AnalysisOutput& output, const std::string& dir);

/// Writes dir/index.json: the model, its variant, the sentences, notes, skipped maps with
/// their reasons, and `entries` (write_analysis's plus e.g. figures). Atomic.
void write_analysis_index(const AnalysisOutput& output, const std::string& dir,
                          const std::vector<IndexEntry>& entries);

}  // namespace analysis
