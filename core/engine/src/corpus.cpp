// The pretraining data pipeline: corpus tokenization, the binary token cache, packing into
// [CLS] ... [SEP] blocks with a document-level validation split, and BERT MLM masking.
// Every random choice comes from std::mt19937_64 (fully specified by the standard) through our
// own bounded draws, so masks and epoch orders are identical across platforms and libraries.
#include "engine/corpus.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "engine/errors.h"

#ifdef _WIN32
#include <process.h>
#define TUPE_GETPID _getpid
#else
#include <unistd.h>
#define TUPE_GETPID getpid
#endif

namespace engine {
namespace {

namespace fs = std::filesystem;

// ---- hashing and random numbers -------------------------------------------------------------

/// Streaming 64-bit FNV-1a: the cache key and the cache checksum.
class Fnv1a64 {
  public:
    void update(const void* data, size_t size) {
        const auto* p = static_cast<const unsigned char*>(data);
        uint64_t h = h_;
        for (size_t i = 0; i < size; ++i) {
            h ^= p[i];
            h *= 0x100000001b3ULL;
        }
        h_ = h;
    }
    void update_u64(uint64_t v) { update(&v, sizeof v); }
    uint64_t digest() const { return h_; }

  private:
    uint64_t h_ = 0xcbf29ce484222325ULL;
};

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Distinct streams for masking and shuffling, so that (seed, epoch, i) never collide.
constexpr uint64_t kMaskStream = 0x6d61736b5f726e67ULL;     // "mask_rng"
constexpr uint64_t kShuffleStream = 0x73687566666c6521ULL;  // "shuffle!"

uint64_t mix_seed(uint64_t stream, uint64_t seed, uint64_t epoch, uint64_t index) {
    uint64_t h = splitmix64(stream);
    h = splitmix64(h ^ seed);
    h = splitmix64(h ^ epoch);
    return splitmix64(h ^ index);
}

/// Uniform integer in [0, n), n > 0, without modulo bias. Unlike
/// std::uniform_int_distribution its output is the same with every standard library.
uint64_t draw_below(std::mt19937_64& rng, uint64_t n) {
    // Reject the lowest (2^64 mod n) values so the rest splits into n equal classes.
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
        const uint64_t x = rng();
        if (x >= threshold) return x % n;
    }
}

// ---- tokenization ---------------------------------------------------------------------------

bool is_blank(const std::string& line) {
    return std::all_of(line.begin(), line.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
    });
}

void require_readable_file(const std::string& path) {
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status)) throw InputError(path, "corpus file not found");
    if (fs::is_directory(status)) throw InputError(path, "corpus path is a directory, not a file");
}

// ---- cache format ---------------------------------------------------------------------------
// Host byte order; the byte-order mark makes a file from another endianness invalid (rebuilt).
//   char[8]  magic "TUPECORP"
//   u32      version, u32 byte-order mark 0x01020304
//   u64      cache key (the hash in the file name), u64 n_ids, u64 n_sentence_begin,
//            u64 n_doc_begin
//   u32[n_ids] ids, u64[n_sentence_begin] sentence_begin, u64[n_doc_begin] doc_begin,
//   u8[n_ids] word_start
//   u64      FNV-1a of everything before it

constexpr char kMagic[8] = {'T', 'U', 'P', 'E', 'C', 'O', 'R', 'P'};
constexpr uint32_t kCacheVersion = 1;
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr uint64_t kHeaderBytes = 8 + 4 + 4 + 8 * 4;

struct CacheHeader {
    char magic[8];
    uint32_t version;
    uint32_t byte_order;
    uint64_t key;
    uint64_t n_ids;
    uint64_t n_sentence_begin;
    uint64_t n_doc_begin;
};

/// Hash of everything the cached tokens depend on. Any change to the tokenizer's behaviour
/// or to this file's layout must bump kCacheVersion.
uint64_t cache_key(const std::string& corpus_path, const WordPieceTokenizer& tok) {
    require_readable_file(corpus_path);
    std::ifstream in(corpus_path, std::ios::binary);
    if (!in) throw InputError(corpus_path, "cannot open corpus file");
    Fnv1a64 h;
    const std::string tag = "tupe-corpus-cache";
    h.update(tag.data(), tag.size());
    h.update_u64(kCacheVersion);
    std::vector<char> buf(1 << 20);
    uint64_t total = 0;
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto got = static_cast<size_t>(in.gcount());
        h.update(buf.data(), got);
        total += got;
    }
    if (in.bad()) throw InputError(corpus_path, "read error while hashing the corpus");
    h.update_u64(total);
    const auto& tokens = tok.vocab().tokens();
    h.update_u64(tokens.size());
    for (const auto& t : tokens) {
        h.update(t.data(), t.size());
        h.update("\n", 1);
    }
    h.update_u64(tok.lower_case() ? 1 : 0);
    return h.digest();
}

std::string hex16(uint64_t v) {
    static const char* digits = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 0xf];
    return s;
}

/// The file stem keeps cache names readable; the key makes them unique.
std::string cache_file_for(const std::string& corpus_path, const std::string& cache_dir,
                           uint64_t key) {
    std::string stem = fs::path(corpus_path).stem().string();
    for (char& ch : stem) {
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                        (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
        if (!ok) ch = '_';
    }
    if (stem.size() > 40) stem.resize(40);
    if (stem.empty()) stem = "corpus";
    return (fs::path(cache_dir) / (stem + "-" + hex16(key) + ".tokens")).string();
}

template <typename T>
void write_array(std::ofstream& out, Fnv1a64& h, const std::vector<T>& v) {
    const auto bytes = v.size() * sizeof(T);
    h.update(v.data(), bytes);
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(bytes));
}

template <typename T>
bool read_array(std::ifstream& in, Fnv1a64& h, std::vector<T>& v, uint64_t n) {
    v.resize(static_cast<size_t>(n));
    const auto bytes = static_cast<std::streamsize>(n * sizeof(T));
    in.read(reinterpret_cast<char*>(v.data()), bytes);
    if (in.gcount() != bytes) return false;
    h.update(v.data(), static_cast<size_t>(bytes));
    return true;
}

/// Begin offsets must start at 0, never decrease and end at `last`.
bool valid_offsets(const std::vector<uint64_t>& begin, uint64_t last) {
    if (begin.empty() || begin.front() != 0 || begin.back() != last) return false;
    return std::is_sorted(begin.begin(), begin.end());
}

/// Reads and fully validates a cache file; false (and `out` unspecified) when it is absent,
/// truncated, corrupt, from another version or key, or inconsistent with the vocabulary.
bool read_cache(const std::string& path, uint64_t key, int64_t vocab_size, TokenizedCorpus& out) {
    std::error_code ec;
    const uint64_t file_size = fs::file_size(path, ec);
    if (ec || file_size < kHeaderBytes + 8) return false;
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;

    CacheHeader hd{};
    in.read(hd.magic, 8);
    in.read(reinterpret_cast<char*>(&hd.version), 4);
    in.read(reinterpret_cast<char*>(&hd.byte_order), 4);
    in.read(reinterpret_cast<char*>(&hd.key), 8);
    in.read(reinterpret_cast<char*>(&hd.n_ids), 8);
    in.read(reinterpret_cast<char*>(&hd.n_sentence_begin), 8);
    in.read(reinterpret_cast<char*>(&hd.n_doc_begin), 8);
    if (!in) return false;
    if (std::memcmp(hd.magic, kMagic, 8) != 0 || hd.version != kCacheVersion ||
        hd.byte_order != kByteOrderMark || hd.key != key) {
        return false;
    }
    // Bound the counts by the file size before multiplying, so a corrupt count can neither
    // overflow the size check nor trigger a huge allocation.
    if (hd.n_ids > file_size || hd.n_sentence_begin > file_size / 8 ||
        hd.n_doc_begin > file_size / 8) {
        return false;
    }
    const uint64_t expected =
        kHeaderBytes + 5 * hd.n_ids + 8 * hd.n_sentence_begin + 8 * hd.n_doc_begin + 8;
    if (expected != file_size || hd.n_ids == 0 || hd.n_sentence_begin < 2 || hd.n_doc_begin < 2) {
        return false;
    }

    Fnv1a64 h;
    h.update(hd.magic, 8);
    h.update(&hd.version, 4);
    h.update(&hd.byte_order, 4);
    h.update(&hd.key, 8);
    h.update(&hd.n_ids, 8);
    h.update(&hd.n_sentence_begin, 8);
    h.update(&hd.n_doc_begin, 8);
    TokenizedCorpus c;
    if (!read_array(in, h, c.ids, hd.n_ids) ||
        !read_array(in, h, c.sentence_begin, hd.n_sentence_begin) ||
        !read_array(in, h, c.doc_begin, hd.n_doc_begin) ||
        !read_array(in, h, c.word_start, hd.n_ids)) {
        return false;
    }
    uint64_t checksum = 0;
    in.read(reinterpret_cast<char*>(&checksum), 8);
    if (in.gcount() != 8 || checksum != h.digest()) return false;

    // The checksum catches damage; these catch a file that was written wrong.
    if (!valid_offsets(c.sentence_begin, c.ids.size()) ||
        !valid_offsets(c.doc_begin, c.num_sentences())) {
        return false;
    }
    const auto vs = static_cast<uint64_t>(vocab_size);
    if (std::any_of(c.ids.begin(), c.ids.end(), [vs](uint32_t id) { return id >= vs; }))
        return false;
    if (std::any_of(c.word_start.begin(), c.word_start.end(), [](uint8_t w) { return w > 1; }))
        return false;
    out = std::move(c);
    return true;
}

/// Writes path + ".tmp.<pid>" then renames it over `path`, so a reader never sees a partial
/// file and concurrent writers (several ranks) each leave a complete one.
void write_cache(const std::string& path, uint64_t key, const TokenizedCorpus& c) {
    const std::string tmp = path + ".tmp." + std::to_string(TUPE_GETPID());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw InputError(tmp, "cannot create corpus cache file");
        CacheHeader hd{};
        std::memcpy(hd.magic, kMagic, 8);
        hd.version = kCacheVersion;
        hd.byte_order = kByteOrderMark;
        hd.key = key;
        hd.n_ids = c.ids.size();
        hd.n_sentence_begin = c.sentence_begin.size();
        hd.n_doc_begin = c.doc_begin.size();
        Fnv1a64 h;
        auto put = [&](const void* p, size_t n) {
            h.update(p, n);
            out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
        };
        put(hd.magic, 8);
        put(&hd.version, 4);
        put(&hd.byte_order, 4);
        put(&hd.key, 8);
        put(&hd.n_ids, 8);
        put(&hd.n_sentence_begin, 8);
        put(&hd.n_doc_begin, 8);
        write_array(out, h, c.ids);
        write_array(out, h, c.sentence_begin);
        write_array(out, h, c.doc_begin);
        write_array(out, h, c.word_start);
        const uint64_t checksum = h.digest();
        out.write(reinterpret_cast<const char*>(&checksum), 8);
        out.close();
        if (out.fail()) {
            std::error_code ignored;
            fs::remove(tmp, ignored);
            throw InputError(tmp, "cannot write corpus cache file (disk full?)");
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        throw InputError(path, "cannot move corpus cache into place: " + ec.message());
    }
}

// ---- blocks ---------------------------------------------------------------------------------

/// Packs one document's sentences into blocks of at most `room` tokens (plus [CLS]/[SEP]).
void pack_document(const TokenizedCorpus& c, uint64_t doc, uint64_t room, int64_t cls, int64_t sep,
                   std::vector<Block>& out) {
    Block cur;
    auto start = [&] {
        cur.ids.assign(1, cls);
        cur.word_start.assign(1, 1);
    };
    auto flush = [&] {
        if (cur.ids.size() > 1) {
            cur.ids.push_back(sep);
            cur.word_start.push_back(1);
            out.push_back(std::move(cur));
        }
        start();
    };
    auto append = [&](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
            cur.ids.push_back(static_cast<int64_t>(c.ids[i]));
            cur.word_start.push_back(c.word_start[i]);
        }
    };
    start();
    for (uint64_t s = c.doc_begin[doc]; s < c.doc_begin[doc + 1]; ++s) {
        const uint64_t begin = c.sentence_begin[s], end = c.sentence_begin[s + 1];
        const uint64_t len = end - begin;
        if (len == 0) continue;
        const uint64_t used = cur.ids.size() - 1;
        if (len <= room) {
            if (used + len > room) flush();
            append(begin, end);
            continue;
        }
        // Too long for any block: full chunks of `room` tokens, the remainder opens the next
        // block so the following sentences can pack after it. Chunks keep the original
        // word_start flags, so one may begin with a "##" piece (flag 0).
        flush();
        for (uint64_t off = begin; off < end; off += room) {
            append(off, std::min(end, off + room));
            if (cur.ids.size() - 1 == room) flush();
        }
    }
    flush();
}

}  // namespace

TokenizedCorpus tokenize_corpus(const std::string& corpus_path, const WordPieceTokenizer& tok) {
    require_readable_file(corpus_path);
    std::ifstream in(corpus_path, std::ios::binary);
    if (!in) throw InputError(corpus_path, "cannot open corpus file");

    // "##" pieces continue a word; everything else starts one. One lookup table per call.
    const Vocab& vocab = tok.vocab();
    std::vector<uint8_t> starts_word(static_cast<size_t>(vocab.size()), 1);
    for (int64_t id = 0; id < vocab.size(); ++id)
        if (vocab.token(id).compare(0, 2, "##") == 0) starts_word[static_cast<size_t>(id)] = 0;

    TokenizedCorpus c;
    c.sentence_begin.push_back(0);
    c.doc_begin.push_back(0);
    std::string line;
    long line_no = 0;
    Utf8LineCheck utf8(corpus_path);
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        utf8.check(line, line_no);
        if (is_blank(line)) {
            if (c.doc_begin.back() != c.num_sentences()) c.doc_begin.push_back(c.num_sentences());
            continue;
        }
        std::vector<int64_t> ids;
        try {
            ids = tok.token_ids(line);
        } catch (const InputError&) {
            throw;
        } catch (const std::exception& e) {
            throw InputError(corpus_path, std::string("cannot tokenize: ") + e.what(), line_no);
        }
        if (ids.empty()) continue;  // e.g. a line of control characters only
        for (int64_t id : ids) {
            if (id < 0 || id >= vocab.size())
                throw InputError(
                    corpus_path,
                    "tokenizer returned id " + std::to_string(id) + " outside the vocabulary",
                    line_no);
            c.ids.push_back(static_cast<uint32_t>(id));
            c.word_start.push_back(starts_word[static_cast<size_t>(id)]);
        }
        c.sentence_begin.push_back(c.ids.size());
    }
    if (in.bad()) throw InputError(corpus_path, "read error", line_no);
    if (c.doc_begin.back() != c.num_sentences()) c.doc_begin.push_back(c.num_sentences());
    if (c.ids.empty()) throw InputError(corpus_path, "corpus holds no tokens (empty file?)");
    c.warning = utf8.warning();
    return c;
}

std::string corpus_cache_path(const std::string& corpus_path, const WordPieceTokenizer& tok,
                              const std::string& cache_dir) {
    return cache_file_for(corpus_path, cache_dir, cache_key(corpus_path, tok));
}

TokenizedCorpus load_or_build_corpus(const std::string& corpus_path, const WordPieceTokenizer& tok,
                                     const std::string& cache_dir) {
    const uint64_t key = cache_key(corpus_path, tok);
    const std::string path = cache_file_for(corpus_path, cache_dir, key);
    TokenizedCorpus c;
    if (read_cache(path, key, tok.vocab().size(), c)) return c;

    c = tokenize_corpus(corpus_path, tok);
    std::error_code ec;
    if (!cache_dir.empty()) fs::create_directories(cache_dir, ec);
    if (ec) throw InputError(cache_dir, "cannot create cache directory: " + ec.message());
    write_cache(path, key, c);
    return c;
}

BlockDataset make_blocks(const TokenizedCorpus& corpus, const Vocab& vocab,
                         const DataConfig& config) {
    if (config.max_seq_len < 3)
        throw std::invalid_argument("data.max_seq_len must be >= 3 ([CLS] x [SEP]), got " +
                                    std::to_string(config.max_seq_len));
    const double fraction = config.validation_fraction;
    if (!(fraction > 0.0 && fraction < 1.0))
        throw std::invalid_argument("data.validation_fraction must be in (0, 1), got " +
                                    std::to_string(fraction));
    const auto room = static_cast<uint64_t>(config.max_seq_len - 2);

    // Blocks per document; documents without tokens (possible in hand-built corpora, never
    // from tokenize_corpus) are skipped and do not count in the every-k-th rule.
    std::vector<std::vector<Block>> docs;
    for (uint64_t d = 0; d < corpus.num_documents(); ++d) {
        std::vector<Block> blocks;
        pack_document(corpus, d, room, vocab.cls_id(), vocab.sep_id(), blocks);
        if (!blocks.empty()) docs.push_back(std::move(blocks));
    }
    if (docs.empty()) throw std::invalid_argument("make_blocks: the corpus holds no tokens");

    BlockDataset out;
    const auto n_docs = static_cast<uint64_t>(docs.size());
    if (n_docs == 1) {
        // A single document cannot be split by documents: hold out its last blocks instead
        // (about `fraction` of them, at least one, leaving at least one for training). With a
        // single block there is nothing to split; it serves as both train and validation.
        auto& blocks = docs.front();
        const auto n = static_cast<uint64_t>(blocks.size());
        if (n == 1) {
            out.validation = blocks;
            out.train = std::move(blocks);
            return out;
        }
        auto n_val = static_cast<uint64_t>(std::llround(fraction * static_cast<double>(n)));
        n_val = std::min(std::max<uint64_t>(n_val, 1), n - 1);
        for (uint64_t i = 0; i < n; ++i)
            (i < n - n_val ? out.train : out.validation).push_back(std::move(blocks[i]));
        return out;
    }

    for (uint64_t d = 0; d < n_docs; ++d) {
        auto& dst = is_validation_document(d, n_docs, fraction) ? out.validation : out.train;
        for (auto& b : docs[d]) dst.push_back(std::move(b));
    }
    if (out.validation.empty()) {
        // Unreachable by construction (k <= n_docs), kept as a guard for future edits.
        throw std::logic_error("make_blocks: empty validation split");
    }
    return out;
}

bool is_validation_document(uint64_t d, uint64_t num_documents, double validation_fraction) {
    // Every k-th document, k >= 2 so document 0 always trains; when k exceeds the number of
    // documents nothing matches and the last document is held out instead.
    const double inv = 1.0 / validation_fraction;
    const uint64_t k = inv >= static_cast<double>(num_documents)
                           ? num_documents
                           : std::max<uint64_t>(2, static_cast<uint64_t>(std::llround(inv)));
    return d % k == k - 1;
}

void mask_block(const Block& block, const Vocab& vocab, const DataConfig& config, uint64_t seed,
                uint64_t epoch, uint64_t block_index, std::vector<int64_t>& input_ids,
                std::vector<int64_t>& labels) {
    const double p = config.mask_prob;
    if (!(p >= 0.0 && p <= 1.0))
        throw std::invalid_argument("data.mask_prob must be in [0, 1], got " + std::to_string(p));
    const size_t n = block.ids.size();
    input_ids = block.ids;
    labels.assign(n, -100);

    // Maskable positions, grouped into words: a group starts at a word-initial piece or right
    // after a special token (a chunk of a split sentence may start with a "##" piece).
    std::vector<size_t> positions;
    std::vector<size_t> word_begin;  // index into `positions` where each word starts
    bool prev_maskable = false;
    for (size_t i = 0; i < n; ++i) {
        const bool maskable = !vocab.is_special(block.ids[i]);
        if (maskable) {
            const bool starts = i >= block.word_start.size() || block.word_start[i] != 0;
            if (!prev_maskable || starts) word_begin.push_back(positions.size());
            positions.push_back(i);
        }
        prev_maskable = maskable;
    }
    if (positions.empty()) return;

    std::mt19937_64 rng(mix_seed(kMaskStream, seed, epoch, block_index));
    const auto n_maskable = static_cast<uint64_t>(positions.size());
    const uint64_t target = std::min<uint64_t>(
        n_maskable, std::max<uint64_t>(1, static_cast<uint64_t>(
                                              std::llround(p * static_cast<double>(n_maskable)))));

    std::vector<size_t> chosen;
    chosen.reserve(static_cast<size_t>(target));
    if (!config.whole_word_masking) {
        // Partial Fisher-Yates: the first `target` entries become a uniform random subset.
        for (uint64_t i = 0; i < target; ++i) {
            const uint64_t j = i + draw_below(rng, n_maskable - i);
            std::swap(positions[i], positions[j]);
            chosen.push_back(positions[i]);
        }
    } else {
        // Words in random order; as in Google's create_pretraining_data.py, a word that would
        // push the count past the target is skipped (except the first, so at least one word
        // is masked even when it is longer than the target).
        word_begin.push_back(positions.size());
        const uint64_t n_words = word_begin.size() - 1;
        std::vector<uint64_t> order(n_words);
        for (uint64_t w = 0; w < n_words; ++w) order[w] = w;
        for (uint64_t i = n_words - 1; i > 0; --i)
            std::swap(order[i], order[draw_below(rng, i + 1)]);
        for (uint64_t w : order) {
            if (chosen.size() >= target) break;
            const size_t b = word_begin[w], e = word_begin[w + 1];
            if (!chosen.empty() && chosen.size() + (e - b) > target) continue;
            for (size_t k = b; k < e; ++k) chosen.push_back(positions[k]);
        }
    }

    // 80% [MASK], 10% a random non-special token, 10% unchanged (BERT). Drawn in position
    // order so the outcome does not depend on the order in which positions were chosen.
    std::sort(chosen.begin(), chosen.end());
    const auto vocab_size = static_cast<uint64_t>(vocab.size());
    for (size_t i : chosen) {
        labels[i] = block.ids[i];
        const uint64_t r = draw_below(rng, 10);
        if (r < 8) {
            input_ids[i] = vocab.mask_id();
        } else if (r == 8) {
            // Rejection keeps the draw uniform over non-special ids; one exists (this one).
            int64_t id;
            do {
                id = static_cast<int64_t>(draw_below(rng, vocab_size));
            } while (vocab.is_special(id));
            input_ids[i] = id;
        }
    }
}

MlmBatch make_mlm_batch(const std::vector<Block>& blocks, const std::vector<uint64_t>& indices,
                        const Vocab& vocab, const DataConfig& config, uint64_t seed,
                        uint64_t epoch) {
    return make_mlm_batch(blocks, indices, std::vector<uint64_t>(indices.size(), epoch), vocab,
                          config, seed);
}

MlmBatch make_mlm_batch(const std::vector<Block>& blocks, const std::vector<uint64_t>& indices,
                        const std::vector<uint64_t>& epochs, const Vocab& vocab,
                        const DataConfig& config, uint64_t seed) {
    if (epochs.size() != indices.size())
        throw std::invalid_argument("make_mlm_batch: " + std::to_string(epochs.size()) +
                                    " epochs for " + std::to_string(indices.size()) + " blocks");
    MlmBatch batch;
    batch.batch_size = static_cast<int64_t>(indices.size());
    for (uint64_t idx : indices) {
        if (idx >= blocks.size())
            throw std::out_of_range("make_mlm_batch: block index " + std::to_string(idx) +
                                    " out of range (" + std::to_string(blocks.size()) + " blocks)");
        batch.seq_len = std::max(batch.seq_len, static_cast<int64_t>(blocks[idx].ids.size()));
    }
    const auto cells = static_cast<size_t>(batch.batch_size * batch.seq_len);
    batch.input_ids.assign(cells, vocab.pad_id());
    batch.labels.assign(cells, -100);
    batch.attention_mask.assign(cells, 0);
    std::vector<int64_t> ids, labels;
    for (size_t b = 0; b < indices.size(); ++b) {
        // Masks are keyed by the block's index in `blocks`, not its slot in the batch, so
        // they do not depend on batch size, order or rank.
        mask_block(blocks[indices[b]], vocab, config, seed, epochs[b], indices[b], ids, labels);
        const size_t row = b * static_cast<size_t>(batch.seq_len);
        std::copy(ids.begin(), ids.end(),
                  batch.input_ids.begin() + static_cast<std::ptrdiff_t>(row));
        std::copy(labels.begin(), labels.end(),
                  batch.labels.begin() + static_cast<std::ptrdiff_t>(row));
        std::fill_n(batch.attention_mask.begin() + static_cast<std::ptrdiff_t>(row), ids.size(), 1);
    }
    return batch;
}

std::vector<uint64_t> epoch_order(uint64_t num_blocks, uint64_t seed, uint64_t epoch) {
    std::vector<uint64_t> order(num_blocks);
    for (uint64_t i = 0; i < num_blocks; ++i) order[i] = i;
    if (num_blocks < 2) return order;
    std::mt19937_64 rng(mix_seed(kShuffleStream, seed, epoch, 0));
    for (uint64_t i = num_blocks - 1; i > 0; --i)
        std::swap(order[i], order[draw_below(rng, i + 1)]);
    return order;
}

}  // namespace engine
