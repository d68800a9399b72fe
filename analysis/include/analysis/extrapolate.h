// Length extrapolation and position shift of an MLM encoder (issue 15, sec. 2): the masked-token
// loss of one held-out token stream cut into windows longer than the training length L, split
// by where the token sits (position < L, seen in training, or >= L, never seen), and at L with
// every position shifted (offsets 0, L/2, L), and for a RoPE model at each length beyond L with
// its frequencies scaled (position interpolation, NTK-aware, YaRN; engine::RopeScaling). The
// masked set is a function of the stream index alone, so every length, shift and scaling scores
// the same tokens against the same floor.
// Shapes: L training length, L_eval evaluated length, both with [CLS] and [SEP] included.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

/// A loss that was not measured (no masked token there, or the row is not available).
inline constexpr double kNoLoss = std::numeric_limits<double>::quiet_NaN();

/// What evaluate_extrapolation measures.
struct ExtrapolationOptions {
    /// L: the length the model was trained at (the checkpoint's data.max_seq_len), [CLS] and
    /// [SEP] included. Required (>= 3).
    int64_t train_length = 0;
    /// L_eval = round(f * L) for each factor f (window_length); each must give >= 3 tokens.
    std::vector<double> factors = {1.0, 1.5, 2.0, 4.0};
    int64_t max_tokens = 60000;  ///< first stream tokens used (the same span for every length)
    uint64_t seed = 1;           ///< of the masked set (stream_masked)
    double mask_prob = 0.15;
    /// Tokens per forward pass: max(1, batch_tokens / L_eval) windows, so that the longest
    /// windows come a few at a time (attention is B x H x L_eval x L_eval).
    int64_t batch_tokens = 4096;
    std::string source = "stream";  ///< where the stream came from, for errors (a corpus path)
    /// RoPE scalings run at every length L_eval > L with s = L_eval / L, for a model with RoPE
    /// (ignored for the others); kNone entries are skipped.
    std::vector<engine::RopeScaling::Method> rope_scalings;
};

/// One evaluated length (or shift). Losses are mean cross-entropies in nats over the masked
/// tokens, NaN where there are none (e.g. beyond L at f <= 1) or the row is not available.
struct ExtrapolationRow {
    double factor = 1.0;  ///< L_eval / L as asked for; 1 for the shift rows
    int64_t length = 0;   ///< L_eval, tokens per window
    int64_t offset = 0;   ///< position of [CLS] (position_offset during the row)
    /// "" for plain rows; "pi", "ntk" or "yarn" for a row with RoPE scaled by s = factor.
    std::string rope_scaling;
    bool available = true;
    std::string note;     ///< why not available: "n/a: table of N positions", ...
    int64_t windows = 0;  ///< sequences run: ceil(S / (L_eval - 2)), see evaluate_extrapolation
    double loss = kNoLoss, loss_within = kNoLoss, loss_beyond = kNoLoss;
    int64_t masked = 0;         ///< scored masked tokens (the same for every available row)
    int64_t masked_within = 0;  ///< ... at window positions 0..L-1 ([CLS] is 0)
    int64_t masked_beyond = 0;  ///< ... at window positions >= L
    /// Attention drift: per layer and head ([l * H + h]), over every query of every window,
    /// the mean of sum_j p_ij |i - j| (tokens) and of -sum_j p_ij ln p_ij (nats). Empty when
    /// the row is not available.
    std::vector<double> distance, entropy;
    int64_t heads = 0;  ///< H, the stride of distance and entropy
    /// distance / entropy averaged over every layer and head (NaN when empty).
    double mean_distance() const;
    double mean_entropy() const;
};

/// Everything evaluate_extrapolation measured for one model.
struct ExtrapolationReport {
    int64_t train_length = 0;   ///< L
    int64_t max_positions = 0;  ///< the model's max_position_embeddings
    bool extrapolates = false;  ///< PositionDescription::extrapolates (no learned table)
    std::string summary;        ///< PositionDescription::summary
    int64_t base_offset = 0;    ///< the model's position offset, used by the length rows
    int64_t stream_tokens = 0;  ///< S, the span scored at every length
    int64_t masked_tokens = 0;  ///< masked tokens of the span
    uint64_t seed = 1;
    double mask_prob = 0.15;
    /// Cross-entropy (nats) of the masked targets under the span's own unigram distribution,
    /// add-1/2 smoothed over the maskable vocabulary (as engine::corpus_floor): what knowing
    /// token frequencies alone scores. Estimated on the scored tokens, so slightly optimistic.
    double unigram_floor = kNoLoss;
    std::vector<ExtrapolationRow> lengths;  ///< one per factor, in the order given
    std::vector<ExtrapolationRow> shifts;   ///< L_eval = L at offsets 0, L/2, L
    bool rotary = false;                    ///< PositionDescription::rotary (RoPE)
    /// With rope_scalings and RoPE: for each available length row with L_eval > L, in order,
    /// one row per scaling (rope_scaling names it) on the same windows; empty otherwise.
    std::vector<ExtrapolationRow> scaled;
};

/// "1,1.5,2,4" -> {1, 1.5, 2, 4}. Throws std::invalid_argument (message without the flag name)
/// for an empty list, an empty item, a non-number, or a factor that is not finite and > 0.
std::vector<double> parse_length_factors(const std::string& text);

/// round(factor * train_length), the evaluated length L_eval.
int64_t window_length(double factor, int64_t train_length);

/// The draw of the masked set: whether a hash of (seed, index) falls below mask_prob. Stream
/// token `index` is masked when this holds and it is not a special token ([UNK] included, as
/// pretraining's masking); windows and lengths play no part.
bool stream_masked(uint64_t seed, uint64_t index, double mask_prob);

/// The corpus as one token stream (documents and lines concatenated, no special tokens), the
/// first max_tokens of it; reading stops there. Throws engine::InputError naming the file when
/// it is missing, unreadable or holds no tokens.
std::vector<int64_t> read_token_stream(const std::string& path,
                                       const engine::WordPieceTokenizer& tokenizer,
                                       int64_t max_tokens);

/// Runs the length rows, the shift rows and the scaled rows on the first min(stream size,
/// max_tokens) tokens in eval mode without gradients (the training flag, the position offset and
/// the RoPE scaling are restored, also when a forward pass throws). Each window is [CLS] + L_eval -
/// 2 stream tokens + [SEP], masked tokens replaced by [MASK]; the windows tile the span, and a tail
/// shorter than a window gets one more window aligned to the span's end that scores only the tail
/// (so every window has length L_eval and every masked token is scored once at every length). A row
/// the model cannot run is not available, never truncated: a learned table
/// (PositionDescription::extrapolates false) shorter than offset + L_eval ("n/a: table of N
/// positions"), or a span shorter than one window. Throws std::invalid_argument for bad options or
/// a vocabulary that does not fit the model, engine::InputError(source, ...) for an empty stream,
/// ids outside the vocabulary, or a span with no masked token.
ExtrapolationReport evaluate_extrapolation(engine::BertForMaskedLM& model,
                                           const std::vector<int64_t>& stream,
                                           const engine::Vocab& vocab,
                                           const ExtrapolationOptions& options);

}  // namespace analysis
