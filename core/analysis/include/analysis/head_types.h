// Head types of an encoder from its actual attention maps on text (issue 25, sec. 3): previous
// token, next token, [CLS] sink, [SEP] sink, duplicate token, local window, broad, as the head
// catalogues of Clark et al. ("What Does BERT Look At?", BlackboxNLP 2019) and Kovaleva et al.
// ("Revealing the Dark Secrets of BERT", EMNLP 2019) name them. Torch-free: scores are pooled
// from plain row-major maps, so hand-made maps test them (tests/core/test_head_types.cpp), and
// every head gets one primary type by a stated rule plus its score for every type. Shapes: one
// map is n x n over a window [CLS] w_1 .. w_(n-2) [SEP] (no padding), rows are queries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace analysis {

/// The primary types, in the order classify_head_type tries them; kMixed when none applies.
enum class HeadType { kClsSink, kSepSink, kPrevious, kNext, kDuplicate, kLocal, kBroad, kMixed };

/// Every HeadType in rule order (kMixed last): the order of every table of types.
const std::vector<HeadType>& head_types();

/// "cls_sink", "sep_sink", "previous", "next", "duplicate", "local", "broad", "mixed".
const char* head_type_name(HeadType type);

/// Thresholds of classify_head_type. Reference values on a map over n tokens: uniform
/// attention gives every adjacency and sink score 1/n, local (2w + 1)/n and entropy 1; a head
/// that always looks one token back gives previous 1, local 1 and entropy 0.
struct HeadTypeThresholds {
    /// Mean attention of a word on [CLS] (or on [SEP]) at or above which the head is a sink:
    /// half of every word's attention on one special token (Clark et al. find BERT's [SEP]
    /// heads above 0.5 in the middle layers).
    double sink_min = 0.5;
    /// Mean attention on the previous (next) word at or above which the head is previous
    /// (next): half of the row on one neighbour, 32x uniform at n = 64.
    double adjacent_min = 0.5;
    /// Mean attention, over the words that occur again in the window, on their other
    /// occurrences at or above which the head is duplicate-token (uniform attention gives the
    /// occurrences' share of the window, ~0.03 for a frequent word in 64 tokens).
    double duplicate_min = 0.3;
    /// A head is duplicate-token only over at least this many rows with a repeat (a score from
    /// a handful of rows is noise).
    int64_t duplicate_min_rows = 8;
    /// Mean attention on the words within +-local_window (the word itself included) at or above
    /// which the head is local.
    double local_min = 0.6;
    int64_t local_window = 2;
    /// Mean row entropy over all keys, relative to ln n, at or above which the head is broad
    /// (a uniform row is 1; spreading evenly over half the window gives ln(n/2)/ln n, 0.83 at
    /// n = 64).
    double broad_min_entropy = 0.8;
};

/// The rule in one line, with the values of `t`.
std::string describe(const HeadTypeThresholds& t);

/// A head's scores, pooled over every word row of every map it was given. Rows are the words
/// (queries 1..n-2); keys are every token. NaN when no row defines a score.
struct HeadTypeScores {
    double cls_sink = 0;   ///< mean A[i, 0]
    double sep_sink = 0;   ///< mean A[i, n-1]
    double previous = 0;   ///< mean A[i, i-1] over words i >= 2 (the previous token is a word)
    double next = 0;       ///< mean A[i, i+1] over words i <= n-3
    double self = 0;       ///< mean A[i, i] (reported, not a type: a self head counts as local)
    double duplicate = 0;  ///< mean over rows whose token recurs among the words of the
                           ///< attention on its other occurrences
    double duplicate_earlier = 0;  ///< the part of `duplicate` on earlier occurrences
    double duplicate_chance = 0;   ///< what uniform attention over the window would give
    double local = 0;              ///< mean attention on words with |i - j| <= local_window
    double entropy = 0;            ///< mean row entropy over all keys / ln n
    int64_t rows = 0;              ///< word rows pooled
    int64_t duplicate_rows = 0;    ///< rows that have another occurrence of their token
};

/// Pools maps of one head. Each add() is one window's map.
class HeadTypeAccumulator {
  public:
    explicit HeadTypeAccumulator(int64_t local_window = 2) : local_window_(local_window) {}

    /// probs: n x n row-major (rows sum to 1), tokens: n ids with [CLS] first and [SEP] last.
    /// Throws std::invalid_argument for n < 3.
    void add(const float* probs, int64_t n, const int64_t* tokens);
    void add(const std::vector<double>& probs, const std::vector<int64_t>& tokens);

    HeadTypeScores scores() const;

  private:
    template <typename T>
    void add_map(const T* probs, int64_t n, const int64_t* tokens);

    int64_t local_window_;
    double cls_ = 0, sep_ = 0, prev_ = 0, next_ = 0, self_ = 0, dup_ = 0, dup_earlier_ = 0,
           dup_chance_ = 0, local_ = 0, entropy_ = 0;
    int64_t rows_ = 0, prev_rows_ = 0, next_rows_ = 0, dup_rows_ = 0;
};

/// The primary type, the first rule that holds:
///  1. cls_sink if cls_sink >= sink_min; 2. sep_sink if sep_sink >= sink_min;
///  3. previous if previous >= adjacent_min and previous >= next; 4. next if next >= adjacent_min;
///  5. duplicate if duplicate >= duplicate_min over >= duplicate_min_rows rows;
///  6. local if local >= local_min; 7. broad if entropy >= broad_min_entropy; else mixed.
/// Sinks come first because a sink row is also narrow (low entropy) and, at [CLS] or [SEP]
/// next to a word, adjacent; adjacency before duplicate and local because it is the narrower
/// claim. NaN scores never satisfy a rule.
HeadType classify_head_type(const HeadTypeScores& scores, const HeadTypeThresholds& t = {});

/// The score that the rule of `type` tests (local for kLocal, entropy for kBroad, NaN for
/// kMixed), for tables that show "how much" beside "which".
double head_type_score(const HeadTypeScores& scores, HeadType type);

}  // namespace analysis
