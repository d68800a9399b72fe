// Synthetic word-order tasks built from held-out corpus sentences, written in the exact GLUE
// layouts of CoLA / MRPC / STS-B / RTE (shared/GLUE_FORMAT.md) so read_glue_tsv loads them.
// In every task both classes (or all scores) use the same multiset of words, so a model that
// ignores word order scores at chance: what is left to learn is position and order, the part
// of the input that TUPE's positional encoding changes. Words are space-separated tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace experiments {

/// What write_synthetic_tasks generates and from which sentences.
/// The generators' version: part of every built-in task's identity (job_identity.h), so a
/// fine-tuning stored from tasks generated differently is never taken for one of the current
/// tasks. Bump it whenever the files written for the same options change.
/// Version 2 gives dev at least half of the sentences when train_size > dev_size (version 1
/// split them in proportion to the sizes: 10,000 train and 1,000 dev examples left dev 9% of
/// the sentences, each used ~3 times, so dev's 1,000 examples were not 1,000 independent
/// ones). For train_size <= dev_size both versions write the same files, and identities keep
/// naming version 1 there (synthetic_tasks_version).
inline constexpr int kSyntheticTasksVersion = 2;

/// The version a built-in task set of these sizes is identified by: 1 where versions 1 and 2
/// write the same files (train_size <= dev_size), else kSyntheticTasksVersion.
inline int synthetic_tasks_version(int64_t train_size, int64_t dev_size) {
    return train_size <= dev_size ? 1 : kSyntheticTasksVersion;
}

struct SyntheticOptions {
    int64_t train_size = 2000;  ///< Examples per task in train.tsv.
    int64_t dev_size = 400;     ///< Examples per task in dev.tsv.
    uint64_t seed = 1234;       ///< Everything written depends only on the input and this.
    int min_words = 6;          ///< Sentences with fewer words are not used.
    int max_words = 30;         ///< Sentences with more words are not used.
    /// Corpus documents used: every k-th one, the pretraining validation split of
    /// engine::make_blocks (k = round(1 / validation_fraction), at least 2, the document
    /// count when that is larger; document d is held out when d % k == k - 1), so the tasks
    /// never show a sentence the model was pretrained on. Keep it equal to the pretraining
    /// run's data.validation_fraction.
    double validation_fraction = 0.02;
    bool all_documents = false;  ///< Use every document instead (the model may have seen them).
};

/// What was written.
struct SyntheticSummary {
    int64_t documents = 0;        ///< Documents in the corpus (0 when given sentences).
    int64_t used_documents = 0;   ///< Documents whose sentences were taken.
    int64_t sentences = 0;        ///< Distinct sentences within [min_words, max_words].
    int64_t train_sentences = 0;  ///< Of those, the ones train examples are made from;
    int64_t dev_sentences = 0;    ///< the rest make the dev examples (disjoint, no leak).
};

/// The sentences write_synthetic_tasks uses from a corpus file (one sentence a line, blank
/// lines between documents): those of the held-out documents (see SyntheticOptions), or of
/// all documents. A corpus of one document gives its last validation_fraction of lines (at
/// least one). Lines are returned as they are (without '\r'). Throws engine::InputError when
/// the file cannot be read, std::invalid_argument for a fraction outside (0, 1).
std::vector<std::string> corpus_sentences(const std::string& corpus_path,
                                          const SyntheticOptions& options,
                                          SyntheticSummary* summary = nullptr);

/// Writes out_dir/{SYN-CoLA,SYN-MRPC,SYN-STS-B,SYN-RTE,SYN-BSHIFT,SYN-MOVE,SYN-SPAN,
/// SYN-REV}/{train,dev}.tsv from the given
/// sentences (split into words on spaces and tabs; kept when min_words <= words <= max_words;
/// duplicates dropped). The distinct sentences are split between train and dev in proportion
/// to the sizes, train counted as at most dev_size (so dev gets at least half, and dev.tsv is
/// the same for every train_size >= dev_size); no dev sentence occurs in train; each is
/// reused, with fresh random edits, as often as the sizes need. Tasks (labels balanced to within
/// one example):
///  - SYN-CoLA (CoLA layout, MCC): a sentence (1) or the same sentence after 1-3 swaps of
///    adjacent words (0). Measures sensitivity to local word order in one sequence.
///  - SYN-MRPC (MRPC layout, F1/accuracy): a sentence paired with itself minus one word, in
///    order (1), or minus one word with the rest shuffled within windows of 4 (0). Both
///    classes drop a word, so word overlap cannot decide; measures comparing the order of
///    two sequences across the [SEP].
///  - SYN-STS-B (STS-B layout, Pearson/Spearman): a sentence and a permutation of it, scored
///    5 * (1 - normalized Kendall tau distance) rounded to 0.2 (sts_order_score); the number
///    of inversions is drawn uniformly, so scores spread over 0..5. Measures how graded the
///    model's sense of global order is.
///  - SYN-RTE (RTE layout, accuracy): premise = the sentence; hypothesis = a contiguous span
///    of 3-8 of its words (entailment) or that span reordered so that it occurs nowhere in
///    the premise (not_entailment). Measures matching an ordered sub-sequence (relative
///    positions) across the pair.
/// The zero-shot minimal-pair tasks (analysis::TaskInfo::zero_shot; scored by the pretrained
/// MLM's pseudo-log-likelihood, experiments/zero_shot.h, never trained on): each row is
/// `index, sentence1, sentence2, label`, one sentence as written and one reordering of it,
/// label = the index (0/1) of the one as written, balanced. Only plain words (letters and
/// digits, inner ' or -) move, so punctuation stays put and cannot give the order away; a
/// reordering equal to the original once lower-cased is never used. Chance is 50% accuracy; a model
/// blind to order scores both sentences alike (a tie predicts 0: exactly chance).
///  - SYN-BSHIFT: two adjacent words swapped (SentEval's bigram shift, Conneau et al. 2018).
///    Local order.
///  - SYN-MOVE: one word moved 3 to 6 places left or right. Where a word belongs.
///  - SYN-SPAN: two adjacent spans of 2-3 words exchanged. Phrase order.
///  - SYN-REV: a span of 3-5 words reversed. Direction within a phrase.
/// Deterministic under options.seed (own generator, no std distributions). Throws
/// std::invalid_argument for bad options or fewer than 2 usable sentences, and
/// engine::InputError when a file cannot be written.
SyntheticSummary write_synthetic_tasks_from_sentences(const std::vector<std::string>& sentences,
                                                      const std::string& out_dir,
                                                      const SyntheticOptions& options);

/// corpus_sentences followed by write_synthetic_tasks_from_sentences.
SyntheticSummary write_synthetic_tasks(const std::string& corpus_path, const std::string& out_dir,
                                       const SyntheticOptions& options);

/// SYN-STS-B's score of `permuted` against `original` (the same words in another order):
/// 5 * (1 - inversions / (n (n - 1) / 2)), rounded to the nearest 0.2. Repeated words are
/// matched in order of occurrence, which gives the fewest inversions. 5 for the identity,
/// 0 for the reversal of distinct words; 5 when n < 2. Throws std::invalid_argument when the
/// two are not permutations of each other.
double sts_order_score(const std::vector<std::string>& original,
                       const std::vector<std::string>& permuted);

/// The bag-of-words control (finetune.shuffle_words): the words of `text` (split on spaces
/// and tabs, joined by one space) in an order that depends only on (text, seed). The same
/// multiset of words; the order is gone.
std::string shuffle_words(const std::string& text, uint64_t seed);

}  // namespace experiments
