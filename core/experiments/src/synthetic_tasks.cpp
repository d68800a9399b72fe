// Synthetic word-order tasks (SYN-CoLA, SYN-MRPC, SYN-STS-B, SYN-RTE) from held-out corpus
// sentences, written in the GLUE layouts. Randomness comes from a SplitMix64 generator with
// our own bounded draws and shuffles, so the files are identical with every standard library.
#include "experiments/synthetic_tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "engine/corpus.h"
#include "engine/errors.h"

namespace experiments {

namespace fs = std::filesystem;

namespace {

using Words = std::vector<std::string>;

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// SplitMix64 stream; below() and shuffle() are defined here, not by the standard library.
class Rng {
  public:
    Rng(uint64_t seed, uint64_t stream) : state_(splitmix64(splitmix64(stream) ^ seed)) {}
    uint64_t next() {
        state_ += 0x9e3779b97f4a7c15ULL;
        uint64_t z = state_;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, n), n > 0; rejection removes the modulo bias.
    uint64_t below(uint64_t n) {
        const uint64_t threshold = (0 - n) % n;
        for (;;) {
            const uint64_t x = next();
            if (x >= threshold) return x % n;
        }
    }
    /// Fisher-Yates over [first, last).
    template <typename It>
    void shuffle(It first, It last) {
        const auto n = static_cast<uint64_t>(last - first);
        for (uint64_t i = n; i > 1; --i) std::swap(first[i - 1], first[below(i)]);
    }

  private:
    uint64_t state_;
};

// Stream ids: one per use, so changing one split's size leaves the others unchanged.
constexpr uint64_t kPoolStream = 0x706f6f6c;  // "pool"
uint64_t task_stream(int task, int split) { return 0x73796e00ULL + 16 * task + split; }

Words split_words(const std::string& s) {
    Words words;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
        size_t j = i;
        while (j < s.size() && s[j] != ' ' && s[j] != '\t' && s[j] != '\r') ++j;
        if (j > i) words.push_back(s.substr(i, j - i));
        i = j;
    }
    return words;
}

std::string join(const Words& words) {
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) out += (i ? " " : "") + words[i];
    return out;
}

bool is_blank(const std::string& line) {
    return line.find_first_not_of(" \t\r\f\v") == std::string::npos;
}

// True when `needle` occurs as a contiguous run of words in `hay`.
bool contains_run(const Words& hay, const Words& needle) {
    return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

// N/2 ones and N - N/2 zeros in random order.
std::vector<int> balanced_labels(int64_t n, Rng& rng) {
    std::vector<int> labels(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n / 2; ++i) labels[static_cast<size_t>(i)] = 1;
    rng.shuffle(labels.begin(), labels.end());
    return labels;
}

// Cycles through a set of sentences, reshuffled on every pass.
class SentenceCycle {
  public:
    SentenceCycle(const std::vector<Words>& sentences, Rng& rng)
        : sentences_(sentences), rng_(rng), order_(sentences.size()) {
        for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
        pos_ = order_.size();
    }
    const Words& next() {
        if (pos_ == order_.size()) {
            rng_.shuffle(order_.begin(), order_.end());
            pos_ = 0;
        }
        return sentences_[order_[pos_++]];
    }
    size_t size() const { return order_.size(); }

  private:
    const std::vector<Words>& sentences_;
    Rng& rng_;
    std::vector<size_t> order_;
    size_t pos_;
};

// One generated row: its TSV fields.
using Row = std::vector<std::string>;
// Builds example i with class `label` from a sentence; nullopt when this sentence cannot
// give that class (e.g. all its words equal), and the next sentence is tried.
using MakeRow = std::optional<Row> (*)(const Words&, int label, int64_t index, Rng&);

std::optional<Row> make_cola(const Words& s, int label, int64_t index, Rng& rng) {
    Words w = s;
    if (label == 0) {
        for (int attempt = 0; attempt < 10 && w == s; ++attempt) {
            w = s;
            const uint64_t swaps = 1 + rng.below(3);
            for (uint64_t k = 0; k < swaps; ++k) {
                const auto i = static_cast<size_t>(rng.below(s.size() - 1));
                std::swap(w[i], w[i + 1]);
            }
        }
        if (w == s) return std::nullopt;
    }
    // CoLA: source, label, original mark ("*" for unacceptable), sentence.
    return Row{"syn", label ? "1" : "0", label ? "" : "*", join(w)};
}

std::optional<Row> make_mrpc(const Words& s, int label, int64_t index, Rng& rng) {
    Words dropped = s;
    dropped.erase(dropped.begin() + static_cast<long>(rng.below(s.size())));
    Words w = dropped;
    if (label == 0) {
        for (int attempt = 0; attempt < 10 && w == dropped; ++attempt) {
            w = dropped;
            // Windows of 4 from a random offset: [0, o), [o, o + 4), ...
            size_t start = 0;
            size_t end = static_cast<size_t>(rng.below(4));
            if (end == 0) end = 4;
            while (start < w.size()) {
                end = std::min(end, w.size());
                rng.shuffle(w.begin() + static_cast<long>(start),
                            w.begin() + static_cast<long>(end));
                start = end;
                end = start + 4;
            }
        }
        if (w == dropped) return std::nullopt;
    }
    // MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String.
    return Row{label ? "1" : "0", std::to_string(2 * index + 1), std::to_string(2 * index + 2),
               join(s), join(w)};
}

std::optional<Row> make_stsb(const Words& s, int label, int64_t index, Rng& rng) {
    // A permutation with K inversions, K uniform in [0, n(n-1)/2]: a random Lehmer code
    // (c_i <= n-1-i, sum c_i = K), filled one unit at a time, then decoded.
    const size_t n = s.size();
    const uint64_t max_inv = n * (n - 1) / 2;
    uint64_t k = rng.below(max_inv + 1);
    std::vector<size_t> code(n, 0);
    while (k > 0) {
        std::vector<size_t> open;
        for (size_t i = 0; i < n; ++i)
            if (code[i] < n - 1 - i) open.push_back(i);
        ++code[open[static_cast<size_t>(rng.below(open.size()))]];
        --k;
    }
    std::vector<size_t> remaining(n);
    for (size_t i = 0; i < n; ++i) remaining[i] = i;
    Words w;
    for (size_t i = 0; i < n; ++i) {
        w.push_back(s[remaining[code[i]]]);
        remaining.erase(remaining.begin() + static_cast<long>(code[i]));
    }
    char score[16];
    std::snprintf(score, sizeof score, "%.1f", sts_order_score(s, w));
    const std::string id = std::to_string(index);
    // STS-B: index, genre, filename, year, old_index, source1, source2, sentence1, sentence2,
    // score.
    return Row{id, "syn", "syn", "-", id, "syn", "syn", join(s), join(w), score};
}

std::optional<Row> make_rte(const Words& s, int label, int64_t index, Rng& rng) {
    const size_t len = std::min<size_t>(s.size(), 3 + static_cast<size_t>(rng.below(6)));
    const auto start = static_cast<long>(rng.below(s.size() - len + 1));
    const Words span(s.begin() + start, s.begin() + start + static_cast<long>(len));
    Words w = span;
    if (label == 0) {
        // The reordered span must not occur anywhere in the premise, or it would be entailed.
        for (int attempt = 0; attempt < 10 && contains_run(s, w); ++attempt) {
            w = span;
            rng.shuffle(w.begin(), w.end());
        }
        if (contains_run(s, w)) return std::nullopt;
    }
    // RTE: index, sentence1, sentence2, label.
    return Row{std::to_string(index), join(s), join(w), label ? "entailment" : "not_entailment"};
}

// ---- Zero-shot minimal pairs: the attested sentence and one reordering of its words. ----

// A word of letters and digits with inner apostrophes or hyphens ("don't", "well-known",
// "1961"): the only words the pair tasks move, so punctuation stays where it was and cannot
// give the order away.
bool is_plain_word(const std::string& w) {
    bool letter = false;
    for (size_t i = 0; i < w.size(); ++i) {
        const char c = w[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            letter = true;
        } else if ((c == '\'' || c == '-') && i > 0 && i + 1 < w.size()) {
            continue;
        } else {
            return false;
        }
    }
    return letter;
}

bool plain_run(const Words& s, size_t first, size_t last) {  // [first, last) all plain
    for (size_t i = first; i < last; ++i)
        if (!is_plain_word(s[i])) return false;
    return true;
}

std::string folded_text(const Words& w) {  // what an uncased model sees
    std::string t = join(w);
    for (char& c : t)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return t;
}

// An edit of `s` that reorders plain words; nullopt when none was found in a few tries.
using PairEdit = std::optional<Words> (*)(const Words&, Rng&);

std::optional<Words> edit_bshift(const Words& s, Rng& rng) {  // two adjacent words swapped
    for (int attempt = 0; attempt < 20; ++attempt) {
        const auto i = static_cast<size_t>(rng.below(s.size() - 1));
        if (!plain_run(s, i, i + 2)) continue;
        Words w = s;
        std::swap(w[i], w[i + 1]);
        if (folded_text(w) != folded_text(s)) return w;
    }
    return std::nullopt;
}

std::optional<Words> edit_move(const Words& s, Rng& rng) {  // one word moved 3-6 places
    for (int attempt = 0; attempt < 20; ++attempt) {
        const auto i = static_cast<size_t>(rng.below(s.size()));
        const auto d = static_cast<size_t>(3 + rng.below(4));
        const bool right = rng.below(2) == 1;
        if (right ? i + d >= s.size() : i < d) continue;
        const size_t j = right ? i + d : i - d;
        // The moved word and every word it passes are plain.
        if (!plain_run(s, std::min(i, j), std::max(i, j) + 1)) continue;
        Words w = s;
        const std::string moved = w[i];
        w.erase(w.begin() + static_cast<long>(i));
        w.insert(w.begin() + static_cast<long>(j), moved);
        if (folded_text(w) != folded_text(s)) return w;
    }
    return std::nullopt;
}

std::optional<Words> edit_span(const Words& s, Rng& rng) {  // adjacent 2-3 word spans exchanged
    for (int attempt = 0; attempt < 20; ++attempt) {
        const auto a = static_cast<size_t>(2 + rng.below(2));
        const auto b = static_cast<size_t>(2 + rng.below(2));
        if (a + b > s.size()) continue;
        const auto i = static_cast<size_t>(rng.below(s.size() - a - b + 1));
        if (!plain_run(s, i, i + a + b)) continue;
        Words w(s.begin(), s.begin() + static_cast<long>(i));
        w.insert(w.end(), s.begin() + static_cast<long>(i + a),
                 s.begin() + static_cast<long>(i + a + b));
        w.insert(w.end(), s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(i + a));
        w.insert(w.end(), s.begin() + static_cast<long>(i + a + b), s.end());
        if (folded_text(w) != folded_text(s)) return w;
    }
    return std::nullopt;
}

std::optional<Words> edit_rev(const Words& s, Rng& rng) {  // a 3-5 word span reversed
    for (int attempt = 0; attempt < 20; ++attempt) {
        const auto len = static_cast<size_t>(3 + rng.below(3));
        if (len > s.size()) continue;
        const auto i = static_cast<size_t>(rng.below(s.size() - len + 1));
        if (!plain_run(s, i, i + len)) continue;
        Words w = s;
        std::reverse(w.begin() + static_cast<long>(i), w.begin() + static_cast<long>(i + len));
        if (folded_text(w) != folded_text(s)) return w;
    }
    return std::nullopt;
}

// index, sentence1, sentence2, label: label = the index (0 or 1) of the attested sentence.
template <PairEdit edit>
std::optional<Row> make_pair(const Words& s, int label, int64_t index, Rng& rng) {
    const auto w = edit(s, rng);
    if (!w) return std::nullopt;
    return Row{std::to_string(index), join(label == 0 ? s : *w), join(label == 0 ? *w : s),
               label ? "1" : "0"};
}

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw engine::InputError(path.string(), "cannot open for writing");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out.flush()) throw engine::InputError(path.string(), "write failed");
}

// Generates `n` rows from `sentences` and writes them (after `header`, if any) to `path`.
void write_split(const fs::path& path, const std::string& header, const std::vector<Words>& pool,
                 int64_t n, MakeRow make, Rng& rng) {
    std::string text = header.empty() ? "" : header + "\n";
    SentenceCycle cycle(pool, rng);
    const auto labels = balanced_labels(n, rng);
    for (int64_t i = 0; i < n; ++i) {
        std::optional<Row> row;
        // A sentence that cannot give this class is passed over; give up after a full pass.
        for (size_t tries = 0; !row && tries <= cycle.size(); ++tries)
            row = make(cycle.next(), labels[static_cast<size_t>(i)], i, rng);
        if (!row)
            throw std::invalid_argument("synthetic tasks: no sentence can make an example for " +
                                        path.string());
        for (size_t f = 0; f < row->size(); ++f) text += (f ? "\t" : "") + (*row)[f];
        text += "\n";
    }
    write_file(path, text);
}

}  // namespace

double sts_order_score(const Words& original, const Words& permuted) {
    if (original.size() != permuted.size())
        throw std::invalid_argument("sts_order_score: " + std::to_string(original.size()) +
                                    " words vs " + std::to_string(permuted.size()));
    const size_t n = original.size();
    if (n < 2) return 5.0;
    // Each word of `permuted` maps to the next unused occurrence of it in `original`.
    std::map<std::string, std::vector<size_t>> positions;
    for (size_t i = n; i-- > 0;) positions[original[i]].push_back(i);  // reversed: pop_back
    std::vector<size_t> rank(n);
    for (size_t i = 0; i < n; ++i) {
        auto it = positions.find(permuted[i]);
        if (it == positions.end() || it->second.empty())
            throw std::invalid_argument("sts_order_score: \"" + permuted[i] +
                                        "\" is not a word of the original (or repeated more)");
        rank[i] = it->second.back();
        it->second.pop_back();
    }
    uint64_t inversions = 0;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j) inversions += rank[i] > rank[j];
    const double distance = static_cast<double>(inversions) / (n * (n - 1) / 2.0);
    // 5 * (1 - d) to the nearest 0.2: 25 * (1 - d) steps of 0.2.
    return static_cast<double>(std::llround(25.0 * (1.0 - distance))) / 5.0;
}

std::vector<std::string> corpus_sentences(const std::string& corpus_path,
                                          const SyntheticOptions& options,
                                          SyntheticSummary* summary) {
    const double fraction = options.validation_fraction;
    if (!(fraction > 0.0 && fraction < 1.0))
        throw std::invalid_argument("synthetic tasks: validation_fraction must be in (0, 1), got " +
                                    std::to_string(fraction));
    std::ifstream in(corpus_path, std::ios::binary);
    if (!in) throw engine::InputError(corpus_path, "cannot open corpus file");
    std::vector<std::vector<std::string>> docs;
    bool in_doc = false;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (is_blank(line)) {
            in_doc = false;
            continue;
        }
        if (!in_doc) docs.emplace_back();
        in_doc = true;
        docs.back().push_back(line);
    }
    if (in.bad()) throw engine::InputError(corpus_path, "cannot read corpus file");

    std::vector<std::string> out;
    int64_t used = 0;
    const auto n_docs = static_cast<uint64_t>(docs.size());
    if (options.all_documents) {
        for (const auto& d : docs) out.insert(out.end(), d.begin(), d.end());
        used = static_cast<int64_t>(n_docs);
    } else if (n_docs == 1) {
        // One document cannot be split by documents: its last lines, as make_blocks holds
        // out its last blocks.
        const auto& d = docs.front();
        auto n_val = static_cast<size_t>(std::llround(fraction * static_cast<double>(d.size())));
        n_val = std::min(std::max<size_t>(n_val, 1), d.size());
        out.assign(d.end() - static_cast<long>(n_val), d.end());
        used = 1;
    } else if (n_docs > 1) {
        // The pretraining validation documents, by engine::make_blocks's own rule.
        for (uint64_t d = 0; d < n_docs; ++d) {
            if (!engine::is_validation_document(d, n_docs, fraction)) continue;
            out.insert(out.end(), docs[d].begin(), docs[d].end());
            ++used;
        }
    }
    if (summary) {
        summary->documents = static_cast<int64_t>(n_docs);
        summary->used_documents = used;
    }
    return out;
}

SyntheticSummary write_synthetic_tasks_from_sentences(const std::vector<std::string>& sentences,
                                                      const std::string& out_dir,
                                                      const SyntheticOptions& options) {
    if (options.train_size < 1 || options.dev_size < 1)
        throw std::invalid_argument("synthetic tasks: train_size and dev_size must be >= 1, got " +
                                    std::to_string(options.train_size) + " and " +
                                    std::to_string(options.dev_size));
    // Every task needs at least 4 words (CoLA swaps and a 3-word RTE span plus a drop).
    if (options.min_words < 4 || options.max_words < options.min_words)
        throw std::invalid_argument("synthetic tasks: need 4 <= min_words <= max_words, got " +
                                    std::to_string(options.min_words) + ".." +
                                    std::to_string(options.max_words));

    // Distinct sentences of the right length, in input order, as words.
    std::vector<Words> pool;
    std::set<std::string> seen;
    for (const auto& s : sentences) {
        Words w = split_words(s);
        const auto n = static_cast<int64_t>(w.size());
        if (n < options.min_words || n > options.max_words) continue;
        if (!seen.insert(join(w)).second) continue;
        pool.push_back(std::move(w));
    }
    if (pool.size() < 2)
        throw std::invalid_argument("synthetic tasks: " + std::to_string(pool.size()) +
                                    " distinct sentences of " + std::to_string(options.min_words) +
                                    ".." + std::to_string(options.max_words) +
                                    " words; at least 2 are needed (one for train, one for dev)");

    // Disjoint train/dev sentences, in proportion to the split sizes, with train counted as no
    // larger than dev: a train split larger than dev reuses its sentences (fresh edits) instead
    // of taking sentences from dev, so dev keeps at least half of them and its files are the
    // same for every train_size >= dev_size (what the zero-shot tasks read stays put).
    Rng pool_rng(options.seed, kPoolStream);
    pool_rng.shuffle(pool.begin(), pool.end());
    const int64_t train_share = std::min(options.train_size, options.dev_size);
    const double dev_share =
        static_cast<double>(options.dev_size) / static_cast<double>(train_share + options.dev_size);
    auto n_dev = static_cast<size_t>(std::llround(dev_share * static_cast<double>(pool.size())));
    n_dev = std::min(std::max<size_t>(n_dev, 1), pool.size() - 1);
    const std::vector<Words> dev_pool(pool.begin(), pool.begin() + static_cast<long>(n_dev));
    const std::vector<Words> train_pool(pool.begin() + static_cast<long>(n_dev), pool.end());

    struct Task {
        const char* name;
        const char* header;
        MakeRow make;
    };
    const Task tasks[] = {
        {"SYN-CoLA", "", make_cola},
        {"SYN-MRPC", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", make_mrpc},
        {"SYN-STS-B",
         "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
         make_stsb},
        {"SYN-RTE", "index\tsentence1\tsentence2\tlabel", make_rte},
        {"SYN-BSHIFT", "index\tsentence1\tsentence2\tlabel", make_pair<edit_bshift>},
        {"SYN-MOVE", "index\tsentence1\tsentence2\tlabel", make_pair<edit_move>},
        {"SYN-SPAN", "index\tsentence1\tsentence2\tlabel", make_pair<edit_span>},
        {"SYN-REV", "index\tsentence1\tsentence2\tlabel", make_pair<edit_rev>},
    };
    for (int t = 0; t < 8; ++t) {
        const fs::path dir = fs::path(out_dir) / tasks[t].name;
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec) throw engine::InputError(dir.string(), "cannot create directory: " + ec.message());
        Rng train_rng(options.seed, task_stream(t, 0));
        write_split(dir / "train.tsv", tasks[t].header, train_pool, options.train_size,
                    tasks[t].make, train_rng);
        Rng dev_rng(options.seed, task_stream(t, 1));
        write_split(dir / "dev.tsv", tasks[t].header, dev_pool, options.dev_size, tasks[t].make,
                    dev_rng);
    }

    SyntheticSummary summary;
    summary.sentences = static_cast<int64_t>(pool.size());
    summary.train_sentences = static_cast<int64_t>(train_pool.size());
    summary.dev_sentences = static_cast<int64_t>(dev_pool.size());
    return summary;
}

SyntheticSummary write_synthetic_tasks(const std::string& corpus_path, const std::string& out_dir,
                                       const SyntheticOptions& options) {
    SyntheticSummary corpus;
    const auto sentences = corpus_sentences(corpus_path, options, &corpus);
    SyntheticSummary summary = write_synthetic_tasks_from_sentences(sentences, out_dir, options);
    summary.documents = corpus.documents;
    summary.used_documents = corpus.used_documents;
    return summary;
}

std::string shuffle_words(const std::string& text, uint64_t seed) {
    std::vector<std::string> words;
    std::string word;
    for (char c : text) {
        if (c == ' ' || c == '\t') {
            if (!word.empty()) words.push_back(word), word.clear();
        } else {
            word += c;
        }
    }
    if (!word.empty()) words.push_back(word);
    // The stream mixes in the text, so two examples of one seed get different orders.
    uint64_t h = 1469598103934665603ULL;
    for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    Rng rng(seed, h);
    rng.shuffle(words.begin(), words.end());
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
    return out;
}

}  // namespace experiments
