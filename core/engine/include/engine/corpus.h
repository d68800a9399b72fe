// The pretraining data pipeline: a plain-text corpus tokenized once into a compact binary
// cache, packed into blocks that always start with [CLS] (TUPE's untie relies on position 0
// being [CLS]) and end with [SEP], a held-out validation split, and MLM masking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/tokenizer.h"

namespace engine {

/// A tokenized corpus: documents of sentences of wordpiece ids (no special tokens).
struct TokenizedCorpus {
    std::vector<uint32_t> ids;             ///< All tokens of all sentences, concatenated.
    std::vector<uint64_t> sentence_begin;  ///< Start of sentence s in `ids`; size = n + 1.
    std::vector<uint64_t> doc_begin;       ///< First sentence of document d; size = docs + 1.
    std::vector<uint8_t> word_start;       ///< 1 where a token starts a word (not "##...").
    /// Utf8LineCheck::warning() of the text read (lines of invalid UTF-8); "" when all were
    /// valid or when read from the cache (the warning came when the cache was built).
    std::string warning;
    uint64_t num_documents() const { return doc_begin.empty() ? 0 : doc_begin.size() - 1; }
    uint64_t num_sentences() const {
        return sentence_begin.empty() ? 0 : sentence_begin.size() - 1;
    }
};

/// Reads `corpus_path` (one sentence or paragraph per line, a blank line between documents)
/// and tokenizes it. Throws InputError when missing or when it holds no tokens. Lines of
/// invalid UTF-8 lose their invalid bytes and are counted in `warning`.
TokenizedCorpus tokenize_corpus(const std::string& corpus_path, const WordPieceTokenizer& tok);

/// Path of the cache for (corpus bytes, vocab tokens, lower_case), under cache_dir.
std::string corpus_cache_path(const std::string& corpus_path, const WordPieceTokenizer& tok,
                              const std::string& cache_dir);
/// Loads the cache when present and valid, otherwise tokenizes and writes it atomically.
/// A corrupt cache file is rebuilt, never trusted.
TokenizedCorpus load_or_build_corpus(const std::string& corpus_path, const WordPieceTokenizer& tok,
                                     const std::string& cache_dir);

/// One training example: [CLS] tokens... [SEP], length <= max_seq_len.
struct Block {
    std::vector<int64_t> ids;
    std::vector<uint8_t> word_start;  ///< Per token, for whole-word masking (specials = 1).
};

/// Train/validation blocks. Sentences of one document are packed greedily into blocks of at
/// most max_seq_len - 2 tokens (a sentence longer than that is split); blocks never cross
/// documents. Validation holds every k-th document (k from validation_fraction, at least
/// one document), so the split is deterministic and independent of the seed.
struct BlockDataset {
    std::vector<Block> train;
    std::vector<Block> validation;
};
BlockDataset make_blocks(const TokenizedCorpus& corpus, const Vocab& vocab,
                         const DataConfig& config);

/// What a model that knows only token frequencies scores on the validation MLM targets: the
/// floor under every validation-loss curve. A run that ends near `unigram_nats` has learned
/// word frequencies and nothing else. Both numbers are cross-entropies (nats per token) of the
/// validation blocks' maskable tokens (the MLM targets' distribution: masking picks them
/// uniformly) under distributions estimated on the training blocks:
///  - unigram: add-1/2 smoothed token frequencies (every maskable vocabulary entry gets 1/2);
///  - bigram: p(w | previous token), Witten-Bell interpolated with that unigram. A
///    left-context reference only: MLM sees both sides, so a good model goes below it.
///  - context-free: the best loss of a model that sees only the token at the scored position
///    under BERT's 80/10/10 rule (mask_block): [MASK] -> the unigram distribution; a visible
///    token x -> the posterior of "kept" (target x) against "replaced at random" (target from
///    the unigram), p(t | x) = (q(x) [t = x] + q(t) / V') / (q(x) + 1 / V') over the V'
///    maskable types. Frequencies plus copying the visible tokens, no context: the floor under
///    the validation loss, which scores the kept and replaced tokens too (a model can go 0.5
///    nats below the unigram floor without reading any other token). 0 when not measured
///    (floor files written before it existed).
struct CorpusFloor {
    double unigram_nats = 0;
    double bigram_nats = 0;
    double context_free_nats = 0;
    int64_t validation_tokens = 0;  ///< Maskable validation tokens the floor is measured on.
    int64_t train_tokens = 0;       ///< Maskable training tokens the distributions come from.
};
/// Computes the floor of `data` (make_blocks of the run's corpus); about a second for 1M
/// tokens. Returns zeros (validation_tokens 0) when there are no validation blocks.
CorpusFloor corpus_floor(const BlockDataset& data, const Vocab& vocab);
/// out_dir/floor.txt: "unigram_nats = ..." lines beside the checkpoint, for `tupe info`,
/// `tupe curves` and the runner.
std::string floor_path(const std::string& out_dir);
void write_floor(const std::string& path, const CorpusFloor& floor);
/// The floor written by write_floor; false when the file is absent. Throws InputError (file
/// and line) for a malformed file.
bool read_floor(const std::string& path, CorpusFloor& floor);
/// How close to the unigram floor a final validation loss may be before floor_warning warns.
inline constexpr double kFloorMargin = 0.1;
/// One line, "warning: final validation loss ... below the unigram floor ...", when final_loss
/// is above unigram_nats - kFloorMargin; empty otherwise (or when the floor is unknown).
std::string floor_warning(double final_loss, const CorpusFloor& floor);

/// The document rule of make_blocks: document d of n (non-empty documents) is held out when
/// d % k == k - 1, k = max(2, round(1 / fraction)), or k = n when 1 / fraction >= n. Other
/// code that must stay off the pretraining data (the built-in GLUE-like tasks) uses it too.
bool is_validation_document(uint64_t d, uint64_t num_documents, double validation_fraction);

/// A padded batch for MLM. Plain vectors so the engine's data code stays tensor-free;
/// the trainer turns them into tensors.
struct MlmBatch {
    int64_t batch_size = 0;
    int64_t seq_len = 0;                  ///< Longest block in the batch.
    std::vector<int64_t> input_ids;       ///< (B, T) row-major, masked, padded with [PAD].
    std::vector<int64_t> labels;          ///< (B, T) original id at masked positions, else -100.
    std::vector<uint8_t> attention_mask;  ///< (B, T) 1 for real tokens, 0 for padding.
};

/// BERT masking: mask_prob of the maskable tokens (never [CLS]/[SEP]/[PAD] or other
/// specials) are chosen, at least one per block; 80% -> [MASK], 10% -> a random
/// non-special token, 10% unchanged. With whole_word, a chosen word masks all its pieces.
/// The choice depends only on (seed, epoch, block_index): fresh each epoch, identical
/// across runs, batch sizes and ranks.
void mask_block(const Block& block, const Vocab& vocab, const DataConfig& config, uint64_t seed,
                uint64_t epoch, uint64_t block_index, std::vector<int64_t>& input_ids,
                std::vector<int64_t>& labels);

/// Pads and masks blocks[indices[i]] into one batch.
MlmBatch make_mlm_batch(const std::vector<Block>& blocks, const std::vector<uint64_t>& indices,
                        const Vocab& vocab, const DataConfig& config, uint64_t seed,
                        uint64_t epoch);

/// As above, with each block masked with its own epoch (a batch may straddle two epochs).
MlmBatch make_mlm_batch(const std::vector<Block>& blocks, const std::vector<uint64_t>& indices,
                        const std::vector<uint64_t>& epochs, const Vocab& vocab,
                        const DataConfig& config, uint64_t seed);

/// The order in which an epoch visits the training blocks: a permutation that depends only
/// on (seed, epoch).
std::vector<uint64_t> epoch_order(uint64_t num_blocks, uint64_t seed, uint64_t epoch);

}  // namespace engine
