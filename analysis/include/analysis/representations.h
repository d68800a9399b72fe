// What the encoder's hidden states and position vectors hold, layer by layer: a forward pass
// that keeps every layer's input (EncoderTrace, the hook for value-weighted norms and the logit
// lens); the logit lens at [MASK] (the MLM head applied to each layer's hidden state,
// nostalgebraist 2020, "interpreting GPT: the logit lens", here for an encoder's masked tokens);
// and the learned absolute position vectors as Wang et al. ("On Position Embeddings in BERT", ICLR
// 2021) show them: their cosine similarities and a 2-D PCA projection. Shapes: B batch, T tokens,
// C hidden, L layers, P table positions.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

/// One forward pass with every layer's input kept.
struct EncoderTrace {
    /// What BertModel::forward(ids, mask, {}, output_attentions = true) returns: the same
    /// layers on the same positional terms (tested equal).
    engine::EncoderOutput encoded;
    /// L + 1 tensors (B, T, C): the embeddings' output, then each layer's output (before a
    /// pre-LN model's final norm).
    std::vector<torch::Tensor> hidden_states;
    /// L tensors (B, T, C): what each layer's attention reads (its input, or a pre-LN layer's
    /// LayerNorm of it).
    std::vector<torch::Tensor> attention_inputs;
};

/// Runs `model` on input_ids (B, T) with attention_mask (B, T) (undefined: all tokens), token
/// type 0, keeping the hidden states. The caller sets eval mode and no-grad.
EncoderTrace trace_encoder(engine::BertModel& model, const torch::Tensor& input_ids,
                           const torch::Tensor& attention_mask = {});

// ---- the logit lens at [MASK] -----------------------------------------------------------------

struct LogitLensOptions {
    int64_t length = 128;    ///< T, tokens per window with [CLS] and [SEP] (>= 4)
    int64_t windows = 256;   ///< at most this many windows from the stream's start
    int64_t batch_size = 8;  ///< windows per forward pass
    uint64_t seed = 1;       ///< of the masked set (extrapolate.h's stream_masked)
    double mask_prob = 0.15;
    std::string source = "stream";  ///< where the stream came from, for errors and the files
};

/// The MLM head on one layer's hidden state at the masked tokens.
struct LogitLensRow {
    /// -1 = the embeddings' output, l = the output of layer l (0-based; L - 1 = the model's own
    /// prediction)
    int64_t layer = -1;
    double loss = 0;  ///< mean cross-entropy, nats
    double accuracy = 0;
};

struct LogitLensReport {
    std::string source;
    int64_t length = 0, windows = 0, masked = 0;
    /// The pre-LN model's final norm is applied to every layer's state before the head (as
    /// the logit lens applies a decoder's final norm); post-LN states are normalised already.
    bool final_norm = false;
    /// Context-free floors on the same targets: the loss of predicting each with the unigram
    /// distribution of the whole stream (nats; every target occurs in it), and the accuracy of
    /// always guessing the stream's most frequent token.
    double unigram_loss = 0, majority_accuracy = 0;
    std::vector<LogitLensRow> rows;  ///< L + 1 rows: the embeddings, then layers 0..L - 1
};

/// Windows [CLS] + T - 2 stream tokens + [SEP], the masked tokens (stream_masked; no 80/10/10)
/// replaced by [MASK]; one traced pass per batch, the MLM head (transform, tied decoder, bias)
/// on every hidden state at the masked positions. The last row is the model's own prediction. Eval
/// mode without gradients, the training flag restored. Throws std::invalid_argument for bad
/// options, engine::InputError(options.source, ...) for a stream shorter than one window, ids
/// outside the vocabulary, or no masked token.
LogitLensReport logit_lens(engine::BertForMaskedLM& model, const std::vector<int64_t>& stream,
                           const engine::Vocab& vocab, const LogitLensOptions& options);

// ---- position vectors -------------------------------------------------------------------------

/// Position vectors, their cosine similarity and a 2-D PCA projection.
struct PositionVectors {
    std::string source;     ///< which table, in words
    torch::Tensor vectors;  ///< (P, C) float32: the vector of token position 0..P-1
    torch::Tensor cosine;   ///< (P, P) float32: cos(p_i, p_j)
    /// (P, 2) float32: the centred vectors on their first two principal axes (SVD), each axis'
    /// sign chosen so that the last position lies at or above the first.
    torch::Tensor pca;
    double explained[2] = {0, 0};  ///< share of the centred vectors' variance on each axis
};

/// Cosine similarity and PCA of the rows of `vectors` (P, C), P >= 2. Throws
/// std::invalid_argument on shapes.
PositionVectors describe_position_vectors(const torch::Tensor& vectors, const std::string& source);

/// The learned absolute position vectors of `model` for token positions 0..positions - 1
/// (0: the whole table, max_position_embeddings; rows a run never trained, past its
/// training length, hold their initialisation): BERT-A's input table
/// (bert.embeddings.position_embeddings, as added to the words); TUPE's shared table as its
/// attention reads it, p' = LayerNorm(p) (row t + 1 for token t; row 0, the [CLS]-to-others row,
/// left out); BERT-Ad's p' likewise (row t). nullopt for schemes without a learned absolute table.
/// Throws std::invalid_argument for positions outside 0..max_position_embeddings or 1.
std::optional<PositionVectors> position_vectors(engine::BertModel& model, int64_t positions = 0);

}  // namespace analysis
