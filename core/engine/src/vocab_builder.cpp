// WordPiece vocabulary builder: the merge loop of HF tokenizers' BpeTrainer as its
// WordPieceTrainer runs it (continuing_subword_prefix "##"), over words counted with BERT's
// BasicTokenizer. Pair counts are updated incrementally and kept in a lazy max-heap, so a
// merge costs only the words that contain the pair.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/errors.h"
#include "engine/tokenizer.h"

namespace engine {
namespace {

constexpr const char* kPrefix = "##";

using PairKey = uint64_t;  // (left id << 32) | right id: ordering keys orders pairs as tuples.

PairKey pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
}
int32_t pair_left(PairKey key) { return static_cast<int32_t>(key >> 32); }
int32_t pair_right(PairKey key) { return static_cast<int32_t>(key & 0xffffffffu); }

struct PairStats {
    int64_t count = 0;
    std::vector<int32_t> words;  // Words that contained the pair at some point (may be stale).
};

// Heap entry; entries go stale when counts change and are re-checked when popped.
struct Candidate {
    int64_t count;
    PairKey key;
};

// Most frequent first; ties go to the smallest (left, right) ids, as HF's Merge ordering.
struct CandidateOrder {
    bool operator()(const Candidate& x, const Candidate& y) const {
        if (x.count != y.count) return x.count < y.count;
        return x.key > y.key;
    }
};

struct Word {
    std::vector<int32_t> symbols;
    int64_t count;
};

// Splits a UTF-8 word into its code points (as UTF-8 strings).
std::vector<std::string> split_chars(const std::string& word) {
    std::vector<std::string> chars;
    for (size_t i = 0; i < word.size();) {
        size_t next = i + 1;
        while (next < word.size() && (static_cast<unsigned char>(word[next]) & 0xC0) == 0x80) {
            ++next;
        }
        chars.emplace_back(word, i, next - i);
        i = next;
    }
    return chars;
}

// Decodes one UTF-8 character to its code point, for ordering the alphabet.
uint32_t code_point(const std::string& ch) {
    const auto* s = reinterpret_cast<const unsigned char*>(ch.data());
    if (ch.size() == 1) return s[0];
    uint32_t cp = s[0] & (0xFFu >> (ch.size() + 1));
    for (size_t i = 1; i < ch.size(); ++i) cp = (cp << 6) | (s[i] & 0x3Fu);
    return cp;
}

// Adjacent pairs of a word, sorted, so two words' pair multisets can be diffed.
void sorted_pairs(const std::vector<int32_t>& symbols, std::vector<PairKey>& out) {
    out.clear();
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        out.push_back(pair_key(symbols[i], symbols[i + 1]));
    }
    std::sort(out.begin(), out.end());
}

class Trainer {
  public:
    Trainer(const std::unordered_map<std::string, int64_t>& word_counts,
            const VocabBuilderOptions& options)
        : options_(options) {
        for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) add(special);
        init_alphabet_and_words(word_counts);
        init_pairs();
    }

    std::vector<std::string> run() {
        const size_t target = static_cast<size_t>(std::max<int64_t>(options_.vocab_size, 0));
        while (tokens_.size() < target && !heap_.empty()) {
            const Candidate top = heap_.top();
            heap_.pop();
            const auto it = pairs_.find(top.key);
            const int64_t current = it == pairs_.end() ? 0 : it->second.count;
            if (current != top.count) {  // Stale: re-queue with the live count.
                if (current > 0) heap_.push({current, top.key});
                continue;
            }
            if (top.count < std::max<int64_t>(options_.min_frequency, 1)) break;
            merge(top.key, it->second);
        }
        return std::move(tokens_);
    }

  private:
    int32_t add(const std::string& token) {
        const auto [it, inserted] = ids_.emplace(token, static_cast<int32_t>(tokens_.size()));
        if (inserted) tokens_.push_back(token);
        return it->second;
    }

    // Words in sorted order (for determinism); every character plain, sorted by code point,
    // then "##" + every character seen after the first position, as HF's trainer does.
    void init_alphabet_and_words(const std::unordered_map<std::string, int64_t>& word_counts) {
        std::vector<std::pair<std::string, int64_t>> sorted(word_counts.begin(), word_counts.end());
        std::sort(sorted.begin(), sorted.end());
        std::vector<std::vector<std::string>> chars;
        chars.reserve(sorted.size());
        auto by_code_point = [](const std::string& x, const std::string& y) {
            return code_point(x) < code_point(y);
        };
        std::set<std::string, decltype(by_code_point)> all(by_code_point), inner(by_code_point);
        for (const auto& entry : sorted) {
            chars.push_back(split_chars(entry.first));
            const auto& cs = chars.back();
            for (size_t i = 0; i < cs.size(); ++i) {
                all.insert(cs[i]);
                if (i > 0) inner.insert(cs[i]);
            }
        }
        for (const std::string& ch : all) add(ch);
        for (const std::string& ch : inner) add(kPrefix + ch);

        words_.reserve(sorted.size());
        for (size_t w = 0; w < sorted.size(); ++w) {
            Word word{{}, sorted[w].second};
            for (size_t i = 0; i < chars[w].size(); ++i) {
                word.symbols.push_back(ids_.at(i == 0 ? chars[w][i] : kPrefix + chars[w][i]));
            }
            words_.push_back(std::move(word));
        }
    }

    void init_pairs() {
        for (size_t w = 0; w < words_.size(); ++w) {
            const Word& word = words_[w];
            for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
                PairStats& stats = pairs_[pair_key(word.symbols[i], word.symbols[i + 1])];
                stats.count += word.count;
                if (stats.words.empty() || stats.words.back() != static_cast<int32_t>(w)) {
                    stats.words.push_back(static_cast<int32_t>(w));
                }
            }
        }
        for (const auto& [key, stats] : pairs_) heap_.push({stats.count, key});
    }

    // Replaces every (left, right) by the joined token in the words that hold it, and moves
    // the pair counts by each word's before/after difference times its frequency.
    void merge(PairKey key, PairStats& stats) {
        const int32_t left = pair_left(key), right = pair_right(key);
        std::string joined = tokens_[static_cast<size_t>(left)];
        const std::string& second = tokens_[static_cast<size_t>(right)];
        joined += second.compare(0, 2, kPrefix) == 0 ? second.substr(2) : second;
        const int32_t merged = add(joined);  // May already exist from another merge.

        const std::vector<int32_t> where = std::move(stats.words);
        stats.words.clear();
        std::vector<PairKey> grown;  // Pairs whose count rose: they need a fresh heap entry.
        std::vector<int32_t> symbols;
        for (const int32_t w : where) {
            Word& word = words_[static_cast<size_t>(w)];
            symbols.clear();
            bool changed = false;
            for (size_t i = 0; i < word.symbols.size(); ++i) {
                if (i + 1 < word.symbols.size() && word.symbols[i] == left &&
                    word.symbols[i + 1] == right) {
                    symbols.push_back(merged);
                    ++i;
                    changed = true;
                } else {
                    symbols.push_back(word.symbols[i]);
                }
            }
            if (!changed) continue;  // A stale entry: the pair left this word earlier.
            sorted_pairs(word.symbols, before_);
            sorted_pairs(symbols, after_);
            word.symbols.swap(symbols);
            apply_diff(w, word.count, grown);
        }
        std::sort(grown.begin(), grown.end());
        grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
        for (const PairKey g : grown) {
            const auto it = pairs_.find(g);
            if (it != pairs_.end() && it->second.count > 0) heap_.push({it->second.count, g});
        }
    }

    // Walks the sorted before_/after_ pair lists of one word and applies the difference.
    void apply_diff(int32_t w, int64_t count, std::vector<PairKey>& grown) {
        size_t i = 0, j = 0;
        while (i < before_.size() || j < after_.size()) {
            PairKey key;
            int64_t delta = 0;
            if (j == after_.size() || (i < before_.size() && before_[i] < after_[j])) {
                key = before_[i];
            } else {
                key = after_[j];
            }
            for (; i < before_.size() && before_[i] == key; ++i) --delta;
            for (; j < after_.size() && after_[j] == key; ++j) ++delta;
            if (delta == 0) continue;
            PairStats& stats = pairs_[key];
            stats.count += delta * count;
            if (delta > 0) {
                if (stats.words.empty() || stats.words.back() != w) stats.words.push_back(w);
                grown.push_back(key);
            } else if (stats.count <= 0) {
                pairs_.erase(key);
            }
        }
    }

    VocabBuilderOptions options_;
    std::vector<std::string> tokens_;
    std::unordered_map<std::string, int32_t> ids_;
    std::vector<Word> words_;
    std::unordered_map<PairKey, PairStats> pairs_;
    std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> heap_;
    std::vector<PairKey> before_, after_;
};

}  // namespace

Vocab build_wordpiece_vocab(const std::string& corpus_path, const VocabBuilderOptions& options) {
    std::error_code ec;
    if (std::filesystem::is_directory(corpus_path, ec)) {
        throw InputError(corpus_path, "is a directory, expected a text corpus file");
    }
    std::ifstream in(corpus_path, std::ios::binary);
    if (!in) throw InputError(corpus_path, "cannot open corpus file");

    // Only the BasicTokenizer half is used, so the vocabulary can be empty.
    const WordPieceTokenizer basic(Vocab::from_tokens({}), options.lower_case);
    std::unordered_map<std::string, int64_t> word_counts;
    std::string line;
    int64_t lines = 0;
    Utf8LineCheck utf8(corpus_path);
    while ((options.max_lines <= 0 || lines < options.max_lines) && std::getline(in, line)) {
        ++lines;
        utf8.check(line, lines);
        for (std::string& word : basic.basic_tokenize(line)) ++word_counts[std::move(word)];
    }
    if (in.bad()) throw InputError(corpus_path, "read error in corpus file", lines);
    if (utf8.bad_lines() > 0 && options.on_warning) options.on_warning(utf8.warning());
    if (word_counts.empty()) throw InputError(corpus_path, "corpus has no text to learn from");

    return Vocab::from_tokens(Trainer(word_counts, options).run());
}

}  // namespace engine
