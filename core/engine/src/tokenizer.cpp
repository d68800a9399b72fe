// BERT vocabulary and WordPiece tokenizer: the behaviour of Google's original tokenization.py
// (google-research/bert: BasicTokenizer, WordpieceTokenizer, load_vocab) and of
// run_classifier.py's [CLS] a [SEP] b [SEP] packing with _truncate_seq_pair.
// Character classes, lower-casing and NFD come from ICU in place of Python's unicodedata.
#include "engine/tokenizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "engine/errors.h"

namespace engine {
namespace {

constexpr const char* kPad = "[PAD]";
constexpr const char* kUnk = "[UNK]";
constexpr const char* kCls = "[CLS]";
constexpr const char* kSep = "[SEP]";
constexpr const char* kMask = "[MASK]";

// _is_control: Cc or Cf, except \t \n \r which count as whitespace.
bool is_control(UChar32 c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    if (c < 0x80) return c < 0x20 || c == 0x7f;
    const int8_t type = u_charType(c);
    return type == U_CONTROL_CHAR || type == U_FORMAT_CHAR;
}

// _is_whitespace: space, \t, \n, \r or category Zs. _clean_text maps these to " ".
bool is_whitespace(UChar32 c) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
    if (c < 0x80) return false;
    return u_charType(c) == U_SPACE_SEPARATOR;
}

// Python's str.isspace (what whitespace_tokenize's text.split() splits on): category Zs or
// bidirectional class WS, B or S. After _clean_text this only adds U+2028 and U+2029.
bool is_python_space(UChar32 c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
    if (u_charType(c) == U_SPACE_SEPARATOR) return true;
    const UCharDirection dir = u_charDirection(c);
    return dir == U_WHITE_SPACE_NEUTRAL || dir == U_BLOCK_SEPARATOR || dir == U_SEGMENT_SEPARATOR;
}

// _is_punctuation: all non-alphanumeric printable ASCII, or any Unicode category P*.
bool is_punctuation(UChar32 c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126)) {
        return true;
    }
    if (c < 0x80) return false;
    return (U_GET_GC_MASK(c) & U_GC_P_MASK) != 0;
}

// _is_chinese_char: the CJK Unified Ideographs blocks exactly as the original lists them.
bool is_chinese_char(UChar32 c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_utf8(std::string& out, UChar32 c) {
    char buf[U8_MAX_LENGTH];
    int32_t len = 0;
    U8_APPEND_UNSAFE(buf, len, c);
    out.append(buf, static_cast<size_t>(len));
}

// token.lower() then _run_strip_accents (NFD, drop Mn), for a token with non-ASCII text.
// The root locale gives Python's full, language-neutral mappings (final sigma included).
std::string lower_and_strip_accents(const std::string& token) {
    icu::UnicodeString text = icu::UnicodeString::fromUTF8(
        icu::StringPiece(token.data(), static_cast<int32_t>(token.size())));
    text.toLower(icu::Locale::getRoot());
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
    icu::UnicodeString decomposed;
    if (U_SUCCESS(status)) decomposed = nfd->normalize(text, status);
    if (U_FAILURE(status)) {
        throw std::runtime_error(std::string("ICU NFD normalisation failed: ") +
                                 u_errorName(status));
    }
    icu::UnicodeString kept;
    for (int32_t i = 0; i < decomposed.length();) {
        const UChar32 c = decomposed.char32At(i);
        i += U16_LENGTH(c);
        if (u_charType(c) != U_NON_SPACING_MARK) kept.append(c);
    }
    std::string out;
    kept.toUTF8String(out);
    return out;
}

// The per-token part of BasicTokenizer.tokenize: lower-case and strip accents when asked, then
// _run_split_on_punc; the final whitespace_tokenize is folded in (split on spaces, drop empties).
void split_token(std::string& token, bool ascii, bool lower_case, std::vector<std::string>& out) {
    if (lower_case) {
        if (ascii) {
            for (char& ch : token) {
                if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
            }
        } else {
            token = lower_and_strip_accents(token);
        }
    }
    const auto* s = reinterpret_cast<const uint8_t*>(token.data());
    const size_t n = token.size();
    size_t piece_start = 0;
    for (size_t i = 0; i < n;) {
        const size_t char_start = i;
        UChar32 c;
        U8_NEXT(s, i, n, c);
        const bool punct = is_punctuation(c);
        if (!punct && !is_python_space(c)) continue;
        if (char_start > piece_start)
            out.emplace_back(token, piece_start, char_start - piece_start);
        if (punct) out.emplace_back(token, char_start, i - char_start);
        piece_start = i;
    }
    if (n > piece_start) out.emplace_back(token, piece_start, n - piece_start);
}

// BasicTokenizer.tokenize: _clean_text, _tokenize_chinese_chars and whitespace_tokenize in one
// pass over the code points, then split_token on every whitespace token. Invalid UTF-8 is
// dropped, as convert_to_unicode's decode("utf-8", "ignore") does.
void basic_tokenize_into(const std::string& text, bool lower_case, std::vector<std::string>& out) {
    std::string token;
    bool ascii = true;
    auto flush = [&] {
        if (!token.empty()) split_token(token, ascii, lower_case, out);
        token.clear();
        ascii = true;
    };
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        UChar32 c = s[i];
        if (c < 0x80) {
            ++i;
        } else {
            U8_NEXT(s, i, n, c);
            if (c < 0) continue;
        }
        if (c == 0 || c == 0xFFFD || is_control(c)) continue;
        if (is_whitespace(c) || is_python_space(c)) {
            flush();
        } else if (is_chinese_char(c)) {
            // Spaced out, so a token of its own (which still gets lower() and NFD: the
            // compatibility ideographs U+F900..U+FAFF decompose).
            flush();
            append_utf8(token, c);
            ascii = false;
            flush();
        } else {
            append_utf8(token, c);
            if (c >= 0x80) ascii = false;
        }
    }
    flush();
}

// Reused buffers for WordpieceTokenizer.tokenize, so the hot loop does not allocate.
struct WordpieceScratch {
    std::string candidate;
    std::vector<size_t> offsets;  // Byte offset of every code point, plus the end.
    std::vector<int64_t> piece_ids;
};

// WordpieceTokenizer.tokenize for one whitespace-free word: greedy longest-match-first, "##"
// on continuations, the whole word as [UNK] when it is too long or cannot be segmented.
void wordpiece_into(const std::string& word, const Vocab& vocab, int max_chars,
                    size_t max_token_bytes, WordpieceScratch& scratch, std::vector<int64_t>* ids,
                    std::vector<std::string>* tokens) {
    std::vector<size_t>& offsets = scratch.offsets;
    offsets.clear();
    for (size_t i = 0; i < word.size(); ++i) {
        if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) offsets.push_back(i);
    }
    const size_t num_chars = offsets.size();
    if (num_chars == 0) return;
    offsets.push_back(word.size());

    bool bad = num_chars > static_cast<size_t>(std::max(max_chars, 0));
    scratch.piece_ids.clear();
    for (size_t start = 0; !bad && start < num_chars;) {
        const size_t prefix = start > 0 ? 2 : 0;
        // Candidates longer than the longest vocab entry cannot match: start below them.
        size_t end = num_chars;
        while (end > start && prefix + offsets[end] - offsets[start] > max_token_bytes) --end;
        int64_t found = -1;
        for (; end > start; --end) {
            scratch.candidate.assign(start > 0 ? "##" : "");
            scratch.candidate.append(word, offsets[start], offsets[end] - offsets[start]);
            found = vocab.id(scratch.candidate);
            if (found >= 0) break;
        }
        if (found < 0) {
            bad = true;
        } else {
            scratch.piece_ids.push_back(found);
            start = end;
        }
    }
    if (bad) {
        if (ids) ids->push_back(vocab.unk_id());
        if (tokens) tokens->emplace_back(kUnk);
        return;
    }
    for (const int64_t id : scratch.piece_ids) {
        if (ids) ids->push_back(id);
        if (tokens) tokens->push_back(vocab.token(id));
    }
}

// Leading/trailing ASCII whitespace, as load_vocab's token.strip() removes (and so CRLF).
std::string strip_ascii_space(const std::string& line) {
    const char* space = " \t\r\n\v\f";
    const size_t first = line.find_first_not_of(space);
    if (first == std::string::npos) return {};
    return line.substr(first, line.find_last_not_of(space) - first + 1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Vocab

bool is_valid_utf8(const std::string& text) {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            ++i;
            continue;
        }
        UChar32 c;
        U8_NEXT(s, i, n, c);
        if (c < 0) return false;
    }
    return true;
}

void Utf8LineCheck::check(const std::string& line, int64_t line_no) {
    if (is_valid_utf8(line)) return;
    if (bad_lines_++ == 0) first_bad_line_ = line_no;
}

std::string Utf8LineCheck::warning() const {
    if (bad_lines_ == 0) return "";
    return "warning: " + path_ + ":" + std::to_string(first_bad_line_) + ": invalid UTF-8 (" +
           std::to_string(bad_lines_) + (bad_lines_ == 1 ? " line" : " lines") +
           " in all; their invalid bytes were dropped)";
}

Vocab Vocab::load(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        throw InputError(path, "is a directory, expected a vocab.txt file");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot open vocabulary file");

    Vocab vocab;
    std::unordered_map<std::string, long> first_line;
    std::string line;
    long line_no = 0;
    long pending_blank = 0;  // A blank line is only allowed when nothing follows it.
    while (std::getline(in, line)) {
        ++line_no;
        if (line_no == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
        std::string token = strip_ascii_space(line);
        if (token.empty()) {
            if (pending_blank == 0) pending_blank = line_no;
            continue;
        }
        if (pending_blank != 0) {
            throw InputError(path, "empty line inside the vocabulary (every later id would shift)",
                             pending_blank);
        }
        const auto [it, inserted] = first_line.emplace(token, line_no);
        if (!inserted) {
            throw InputError(path,
                             "duplicate token '" + token + "' (first on line " +
                                 std::to_string(it->second) + ")",
                             line_no);
        }
        vocab.tokens_.push_back(std::move(token));
    }
    if (in.bad()) throw InputError(path, "read error in vocabulary file", line_no);
    if (vocab.tokens_.empty()) throw InputError(path, "vocabulary file is empty");

    vocab.index();
    std::string missing;
    for (const char* special : {kPad, kUnk, kCls, kSep, kMask}) {
        if (!vocab.contains(special)) missing += std::string(missing.empty() ? "" : ", ") + special;
    }
    if (!missing.empty()) {
        throw InputError(path, "missing special token(s) " + missing +
                                   " (a BERT vocab.txt needs [PAD], [UNK], [CLS], [SEP], [MASK])");
    }
    return vocab;
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens) {
    for (const std::string& token : tokens) {
        if (token.empty() || token.find_first_of("\r\n") != std::string::npos) {
            throw std::invalid_argument("vocabulary token is empty or contains a line break: '" +
                                        token + "'");
        }
    }
    Vocab vocab;
    vocab.tokens_ = std::move(tokens);
    vocab.index();
    return vocab;
}

void Vocab::index() {
    ids_.clear();
    ids_.reserve(tokens_.size());
    for (size_t i = 0; i < tokens_.size(); ++i) {
        if (!ids_.emplace(tokens_[i], static_cast<int64_t>(i)).second) {
            throw std::invalid_argument("duplicate vocabulary token '" + tokens_[i] + "' at id " +
                                        std::to_string(i));
        }
    }
    pad_id_ = id(kPad);
    unk_id_ = id(kUnk);
    cls_id_ = id(kCls);
    sep_id_ = id(kSep);
    mask_id_ = id(kMask);
}

int64_t Vocab::id(const std::string& token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
}

bool Vocab::is_special(int64_t id) const {
    if (id < 0 || id >= size()) return false;
    if (id == pad_id_ || id == unk_id_ || id == cls_id_ || id == sep_id_ || id == mask_id_) {
        return true;
    }
    // [unusedN]: the placeholder rows of the original vocabularies.
    const std::string& t = tokens_[static_cast<size_t>(id)];
    const std::string head = "[unused";
    if (t.size() <= head.size() + 1 || t.compare(0, head.size(), head) != 0 || t.back() != ']') {
        return false;
    }
    return std::all_of(t.begin() + static_cast<std::ptrdiff_t>(head.size()), t.end() - 1,
                       [](char ch) { return ch >= '0' && ch <= '9'; });
}

void Vocab::save(const std::string& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "cannot open vocabulary file for writing");
    for (const std::string& token : tokens_) out << token << '\n';
    out.close();
    if (!out) throw InputError(path, "write error in vocabulary file");
}

// ---------------------------------------------------------------------------------------------
// WordPieceTokenizer

WordPieceTokenizer::WordPieceTokenizer(Vocab vocab, bool lower_case, int max_input_chars_per_word)
    : vocab_(std::move(vocab)),
      lower_case_(lower_case),
      max_input_chars_per_word_(max_input_chars_per_word) {
    for (const std::string& token : vocab_.tokens()) {
        max_token_bytes_ = std::max(max_token_bytes_, token.size());
    }
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
    std::vector<std::string> out;
    basic_tokenize_into(text, lower_case_, out);
    return out;
}

std::vector<std::string> WordPieceTokenizer::wordpiece(const std::string& word) const {
    // The original whitespace-splits its input first; a basic token has no spaces left.
    std::vector<std::string> out;
    WordpieceScratch scratch;
    const auto* s = reinterpret_cast<const uint8_t*>(word.data());
    const size_t n = word.size();
    size_t piece_start = 0;
    for (size_t i = 0; i <= n;) {
        const size_t char_start = i;
        bool boundary = i == n;
        if (!boundary) {
            UChar32 c;
            U8_NEXT(s, i, n, c);
            boundary = c >= 0 && is_python_space(c);
        } else {
            ++i;
        }
        if (!boundary) continue;
        if (char_start > piece_start) {
            wordpiece_into(word.substr(piece_start, char_start - piece_start), vocab_,
                           max_input_chars_per_word_, max_token_bytes_, scratch, nullptr, &out);
        }
        piece_start = i;
    }
    return out;
}

void WordPieceTokenizer::tokenize_into(const std::string& text, std::vector<int64_t>* ids,
                                       std::vector<std::string>* tokens) const {
    if (ids && vocab_.unk_id() < 0) {
        throw std::invalid_argument("vocabulary has no [UNK] token; cannot map text to ids");
    }
    std::vector<std::string> words;
    basic_tokenize_into(text, lower_case_, words);
    WordpieceScratch scratch;
    for (const std::string& word : words) {
        wordpiece_into(word, vocab_, max_input_chars_per_word_, max_token_bytes_, scratch, ids,
                       tokens);
    }
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
    std::vector<std::string> tokens;
    tokenize_into(text, nullptr, &tokens);
    return tokens;
}

std::vector<int64_t> WordPieceTokenizer::token_ids(const std::string& text) const {
    std::vector<int64_t> ids;
    tokenize_into(text, &ids, nullptr);
    return ids;
}

Encoding WordPieceTokenizer::encode(const std::string& text_a, const std::string& text_b,
                                    int64_t max_len, bool has_pair) const {
    if (vocab_.cls_id() < 0 || vocab_.sep_id() < 0) {
        throw std::invalid_argument("vocabulary has no [CLS] or [SEP] token; cannot encode");
    }
    std::vector<int64_t> ids_a, ids_b;
    std::vector<std::string> tokens_a, tokens_b;
    tokenize_into(text_a, &ids_a, &tokens_a);
    tokenize_into(text_b, &ids_b, &tokens_b);
    // As run_classifier.py: a second segment only when asked for or when b has tokens.
    const bool pair = has_pair || !ids_b.empty();
    const int64_t specials = pair ? 3 : 2;
    if (max_len < specials) {
        throw std::invalid_argument("encode: max_len " + std::to_string(max_len) +
                                    " leaves no room for the " + std::to_string(specials) +
                                    " special tokens");
    }
    const size_t budget = static_cast<size_t>(max_len - specials);
    // _truncate_seq_pair: drop from the end of the longer side (b on ties) until it fits.
    while (ids_a.size() + ids_b.size() > budget) {
        if (ids_a.size() > ids_b.size()) {
            ids_a.pop_back();
            tokens_a.pop_back();
        } else {
            ids_b.pop_back();
            tokens_b.pop_back();
        }
    }

    Encoding enc;
    const size_t total = ids_a.size() + ids_b.size() + static_cast<size_t>(specials);
    enc.input_ids.reserve(total);
    enc.token_type_ids.reserve(total);
    enc.tokens.reserve(total);
    auto push = [&](int64_t id, const std::string& token, int64_t segment) {
        enc.input_ids.push_back(id);
        enc.tokens.push_back(token);
        enc.token_type_ids.push_back(segment);
    };
    push(vocab_.cls_id(), kCls, 0);
    for (size_t i = 0; i < ids_a.size(); ++i) push(ids_a[i], tokens_a[i], 0);
    push(vocab_.sep_id(), kSep, 0);
    if (pair) {
        for (size_t i = 0; i < ids_b.size(); ++i) push(ids_b[i], tokens_b[i], 1);
        push(vocab_.sep_id(), kSep, 1);
    }
    return enc;
}

}  // namespace engine
