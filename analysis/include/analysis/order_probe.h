// Order sensitivity of an MLM encoder (issue 15, sec. 3): how much the masked-token loss rises
// when the word order of its input is destroyed, after WordPiece so that subwords cannot give
// the order away. Two perturbations of each window's tokens ([CLS] and [SEP] stay in place):
//  - n-gram shuffle (Sinha et al., "Masked Language Modeling and the Distributional Hypothesis",
//    EMNLP 2021): the window cut into consecutive n-grams, whose order is shuffled, each n-gram
//    kept intact; n = 1 is a full token shuffle, larger n keeps more local order;
//  - k random adjacent swaps (positions t and t + 1 exchanged, k times).
// The masked set is drawn on the stream index (extrapolate.h's stream_masked), and a masked
// token travels with its label, so every row scores the same tokens. A model without positions
// (NoPE) is permutation-equivariant and must show no change at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

struct OrderProbeOptions {
    int64_t length = 128;  ///< T, tokens per window with [CLS] and [SEP] (>= 4)
    int64_t windows = 16;  ///< at most this many windows from the stream's start
    int64_t batch_size = 8;
    std::vector<int64_t> ngrams = {1, 2, 3, 4, 5, 6};
    std::vector<int64_t> swaps = {1, 4, 16};
    uint64_t seed = 1;  ///< of the masked set and of the shuffles
    double mask_prob = 0.15;
    std::string source = "stream";  ///< for errors
};

/// One perturbation: its loss and the change from the unperturbed loss (nats, mean over the
/// same masked tokens).
struct OrderProbeRow {
    std::string kind;  ///< "ngram_shuffle" or "adjacent_swaps"
    int64_t n = 0;     ///< n of the n-grams, or k swaps
    double loss = 0, change = 0;
};

struct OrderProbeReport {
    int64_t length = 0, windows = 0, masked = 0;
    double loss = 0;  ///< the unperturbed windows
    std::vector<OrderProbeRow> rows;
};

/// The permutation of 0..count-1 that shuffles n-grams (seeded): out[t] = source index of the
/// token placed at t. A trailing partial n-gram is one unit too.
std::vector<int64_t> ngram_shuffle(int64_t count, int64_t n, uint64_t seed);

/// The permutation after k random adjacent swaps (seeded), as ngram_shuffle.
std::vector<int64_t> adjacent_swaps(int64_t count, int64_t k, uint64_t seed);

/// Runs every row on min(windows, stream / (T - 2)) windows in eval mode without gradients.
/// Throws std::invalid_argument for bad options, engine::InputError(source, ...) for a stream
/// shorter than one window or one with no masked token.
OrderProbeReport order_probe(engine::BertForMaskedLM& model, const std::vector<int64_t>& stream,
                             const engine::Vocab& vocab, const OrderProbeOptions& options);

}  // namespace analysis
