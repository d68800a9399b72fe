// BERT WordPiece tokenizer, byte-for-byte the behaviour of Google's original
// tokenization.py (BasicTokenizer + WordpieceTokenizer) for uncased vocabularies.
// Unicode normalisation and character classes come from ICU, not hand-made tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace engine {

/// A standard vocab.txt: one token per line, the line number (0-based) is the id.
class Vocab {
  public:
    /// Throws InputError naming the file (and line) when missing, empty, or when a
    /// required special token ([PAD], [UNK], [CLS], [SEP], [MASK]) is absent.
    static Vocab load(const std::string& path);
    /// Builds from a list (used by tests and the vocabulary builder).
    static Vocab from_tokens(std::vector<std::string> tokens);

    int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
    /// -1 when absent.
    int64_t id(const std::string& token) const;
    bool contains(const std::string& token) const { return id(token) >= 0; }
    const std::string& token(int64_t id) const { return tokens_.at(static_cast<size_t>(id)); }
    const std::vector<std::string>& tokens() const { return tokens_; }

    int64_t pad_id() const { return pad_id_; }
    int64_t unk_id() const { return unk_id_; }
    int64_t cls_id() const { return cls_id_; }
    int64_t sep_id() const { return sep_id_; }
    int64_t mask_id() const { return mask_id_; }
    /// True for [PAD], [UNK], [CLS], [SEP], [MASK] and [unusedN].
    bool is_special(int64_t id) const;

    /// Writes one token per line.
    void save(const std::string& path) const;

  private:
    void index();
    std::vector<std::string> tokens_;
    std::unordered_map<std::string, int64_t> ids_;
    int64_t pad_id_ = -1, unk_id_ = -1, cls_id_ = -1, sep_id_ = -1, mask_id_ = -1;
};

/// One encoded sequence (or pair) ready for the model.
struct Encoding {
    std::vector<int64_t> input_ids;       ///< [CLS] a [SEP] (b [SEP])
    std::vector<int64_t> token_type_ids;  ///< 0 for [CLS] a [SEP], 1 for b [SEP]
    std::vector<std::string> tokens;      ///< The wordpieces, specials included.
};

class WordPieceTokenizer {
  public:
    explicit WordPieceTokenizer(Vocab vocab, bool lower_case = true,
                                int max_input_chars_per_word = 100);

    /// BasicTokenizer: clean text, lower-case + strip accents (NFD, drop Mn) when uncased,
    /// split on whitespace and punctuation, space out CJK ideographs.
    std::vector<std::string> basic_tokenize(const std::string& text) const;
    /// Greedy longest-match-first WordPiece of one basic token; {"[UNK]"} when impossible.
    std::vector<std::string> wordpiece(const std::string& word) const;
    /// basic_tokenize then wordpiece on every word.
    std::vector<std::string> tokenize(const std::string& text) const;
    /// tokenize, mapped to ids.
    std::vector<int64_t> token_ids(const std::string& text) const;

    /// [CLS] a [SEP] (b [SEP]), truncated to max_len by removing tokens from the end of the
    /// longer side first (BERT's _truncate_seq_pair). max_len counts the special tokens.
    Encoding encode(const std::string& text_a, const std::string& text_b = {},
                    int64_t max_len = 512, bool has_pair = false) const;

    const Vocab& vocab() const { return vocab_; }
    bool lower_case() const { return lower_case_; }

  private:
    /// Basic tokens, then their pieces appended to ids and/or tokens (either may be null).
    void tokenize_into(const std::string& text, std::vector<int64_t>* ids,
                       std::vector<std::string>* tokens) const;

    Vocab vocab_;
    bool lower_case_;
    int max_input_chars_per_word_;
    std::size_t max_token_bytes_ = 0;  // Longest vocab entry: no longer candidate can match.
};

/// Counts the lines of a text file that are not valid UTF-8, as the file is read. The tokenizer
/// drops invalid bytes (as tokenization.py's decode("utf-8", "ignore") does); this makes the
/// loss visible: one warning per file instead of silence.
class Utf8LineCheck {
  public:
    explicit Utf8LineCheck(std::string path) : path_(std::move(path)) {}
    /// Records `line` (1-based `line_no`) as bad when it is not valid UTF-8.
    void check(const std::string& line, int64_t line_no);
    int64_t bad_lines() const { return bad_lines_; }
    int64_t first_bad_line() const { return first_bad_line_; }
    /// "warning: FILE:LINE: invalid UTF-8 (N lines in all; their invalid bytes were dropped)",
    /// or "" when every line was valid.
    std::string warning() const;

  private:
    std::string path_;
    int64_t bad_lines_ = 0;
    int64_t first_bad_line_ = 0;
};

/// True when `text` is well-formed UTF-8 (no stray continuation byte, overlong form, surrogate
/// or truncated sequence).
bool is_valid_utf8(const std::string& text);

/// Options for building a WordPiece vocabulary from a corpus.
struct VocabBuilderOptions {
    int64_t vocab_size = 8000;  ///< Target size, special tokens included.
    int64_t min_frequency = 2;  ///< Pairs seen fewer times are never merged.
    bool lower_case = true;
    int64_t max_lines = 0;  ///< 0 = read the whole corpus.
    /// Called once with Utf8LineCheck::warning() when the corpus has lines of invalid UTF-8.
    std::function<void(const std::string&)> on_warning;
};

/// Learns a WordPiece vocabulary (BPE-style merges over the basic tokens, word-initial
/// pieces plain and continuations with "##", as HF tokenizers' WordPieceTrainer) and
/// returns it with [PAD], [UNK], [CLS], [SEP], [MASK] first. Throws InputError when the
/// corpus is missing or has no text.
Vocab build_wordpiece_vocab(const std::string& corpus_path, const VocabBuilderOptions& options);

}  // namespace engine
