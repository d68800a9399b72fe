// Head types from attention maps (head_types.h).
#include "analysis/head_types.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "analysis/text_format.h"

namespace analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double mean_or_nan(double sum, int64_t n) { return n > 0 ? sum / static_cast<double>(n) : kNaN; }

// A rule holds only for a finite score at or above its threshold.
bool at_least(double score, double threshold) { return std::isfinite(score) && score >= threshold; }

}  // namespace

const std::vector<HeadType>& head_types() {
    static const std::vector<HeadType> all = {
        HeadType::kClsSink,   HeadType::kSepSink, HeadType::kPrevious, HeadType::kNext,
        HeadType::kDuplicate, HeadType::kLocal,   HeadType::kBroad,    HeadType::kMixed};
    return all;
}

const char* head_type_name(HeadType type) {
    switch (type) {
        case HeadType::kClsSink: return "cls_sink";
        case HeadType::kSepSink: return "sep_sink";
        case HeadType::kPrevious: return "previous";
        case HeadType::kNext: return "next";
        case HeadType::kDuplicate: return "duplicate";
        case HeadType::kLocal: return "local";
        case HeadType::kBroad: return "broad";
        case HeadType::kMixed: return "mixed";
    }
    return "mixed";
}

std::string describe(const HeadTypeThresholds& t) {
    return "cls_sink / sep_sink if a word's mean attention on [CLS] / [SEP] >= " +
           exact_number(t.sink_min) +
           ", previous / next if on the previous / next word >= " + exact_number(t.adjacent_min) +
           ", duplicate if on the other occurrences of its token >= " +
           exact_number(t.duplicate_min) + " (over >= " + std::to_string(t.duplicate_min_rows) +
           " rows), local if on the words within +-" + std::to_string(t.local_window) +
           " >= " + exact_number(t.local_min) +
           ", broad if row entropy >= " + exact_number(t.broad_min_entropy) +
           " ln n, mixed otherwise (first rule that holds)";
}

template <typename T>
void HeadTypeAccumulator::add_map(const T* probs, int64_t n, const int64_t* tokens) {
    if (n < 3) throw std::invalid_argument("head types: a map needs [CLS], a word and [SEP]");
    const int64_t first = 1, last = n - 2;  // the words
    const double log_n = std::log(static_cast<double>(n));
    // Where each word's token occurs among the words: for the duplicate-token score.
    std::unordered_map<int64_t, int64_t> count;
    for (int64_t j = first; j <= last; ++j) ++count[tokens[j]];
    for (int64_t i = first; i <= last; ++i) {
        const T* row = probs + i * n;
        ++rows_;
        cls_ += row[0];
        sep_ += row[n - 1];
        self_ += row[i];
        if (i - 1 >= first) prev_ += row[i - 1], ++prev_rows_;
        if (i + 1 <= last) next_ += row[i + 1], ++next_rows_;
        double local = 0, entropy = 0;
        for (int64_t j = 0; j < n; ++j) {
            const double a = row[j];
            if (a > 0) entropy -= a * std::log(a);
            if (j >= first && j <= last && std::llabs(i - j) <= local_window_) local += a;
        }
        local_ += local;
        entropy_ += log_n > 0 ? entropy / log_n : 0;
        const int64_t others = count[tokens[i]] - 1;
        if (others > 0) {
            double on = 0, earlier = 0;
            for (int64_t j = first; j <= last; ++j)
                if (j != i && tokens[j] == tokens[i]) {
                    on += row[j];
                    if (j < i) earlier += row[j];
                }
            dup_ += on;
            dup_earlier_ += earlier;
            dup_chance_ += static_cast<double>(others) / static_cast<double>(n);
            ++dup_rows_;
        }
    }
}

void HeadTypeAccumulator::add(const float* probs, int64_t n, const int64_t* tokens) {
    add_map(probs, n, tokens);
}

void HeadTypeAccumulator::add(const std::vector<double>& probs,
                              const std::vector<int64_t>& tokens) {
    const auto n = static_cast<int64_t>(tokens.size());
    if (static_cast<int64_t>(probs.size()) != n * n)
        throw std::invalid_argument("head types: the map has " + std::to_string(probs.size()) +
                                    " values, not " + std::to_string(n * n) + " for " +
                                    std::to_string(n) + " tokens");
    add_map(probs.data(), n, tokens.data());
}

HeadTypeScores HeadTypeAccumulator::scores() const {
    HeadTypeScores s;
    s.cls_sink = mean_or_nan(cls_, rows_);
    s.sep_sink = mean_or_nan(sep_, rows_);
    s.previous = mean_or_nan(prev_, prev_rows_);
    s.next = mean_or_nan(next_, next_rows_);
    s.self = mean_or_nan(self_, rows_);
    s.duplicate = mean_or_nan(dup_, dup_rows_);
    s.duplicate_earlier = mean_or_nan(dup_earlier_, dup_rows_);
    s.duplicate_chance = mean_or_nan(dup_chance_, dup_rows_);
    s.local = mean_or_nan(local_, rows_);
    s.entropy = mean_or_nan(entropy_, rows_);
    s.rows = rows_;
    s.duplicate_rows = dup_rows_;
    return s;
}

HeadType classify_head_type(const HeadTypeScores& s, const HeadTypeThresholds& t) {
    if (at_least(s.cls_sink, t.sink_min)) return HeadType::kClsSink;
    if (at_least(s.sep_sink, t.sink_min)) return HeadType::kSepSink;
    const bool previous = at_least(s.previous, t.adjacent_min);
    const bool next = at_least(s.next, t.adjacent_min);
    if (previous && (!next || s.previous >= s.next)) return HeadType::kPrevious;
    if (next) return HeadType::kNext;
    if (s.duplicate_rows >= t.duplicate_min_rows && at_least(s.duplicate, t.duplicate_min))
        return HeadType::kDuplicate;
    if (at_least(s.local, t.local_min)) return HeadType::kLocal;
    if (at_least(s.entropy, t.broad_min_entropy)) return HeadType::kBroad;
    return HeadType::kMixed;
}

double head_type_score(const HeadTypeScores& s, HeadType type) {
    switch (type) {
        case HeadType::kClsSink: return s.cls_sink;
        case HeadType::kSepSink: return s.sep_sink;
        case HeadType::kPrevious: return s.previous;
        case HeadType::kNext: return s.next;
        case HeadType::kDuplicate: return s.duplicate;
        case HeadType::kLocal: return s.local;
        case HeadType::kBroad: return s.entropy;
        case HeadType::kMixed: return kNaN;
    }
    return kNaN;
}

}  // namespace analysis
