// Tests for engine::Vocab and engine::WordPieceTokenizer. Expected outputs follow Google's
// original tokenization.py (several cases are its tokenization_test.py verbatim); the
// bert-base-uncased cases run when TUPE_BERT_VOCAB points at that vocab.txt.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"

namespace {

using engine::Encoding;
using engine::InputError;
using engine::Vocab;
using engine::WordPieceTokenizer;
using Tokens = std::vector<std::string>;

// A file in the temp directory (tupe_test_tokenizer_<pid>_<name>), removed when the test ends.
struct TempFile : test_support::TempFile {
    TempFile(const std::string& name, const std::string& content)
        : test_support::TempFile("tupe_test_tokenizer_" + test_support::process_id() + "_" + name,
                                 content) {}
};

// The vocabularies of tokenization_test.py (test_wordpiece_tokenizer, test_full_tokenizer),
// with the specials Vocab::load needs added after the reference ids.
Vocab reference_vocab() {
    return Vocab::from_tokens({"[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un",
                               "runn", "##ing", ",", "[PAD]", "[MASK]"});
}

WordPieceTokenizer basic_only(bool lower_case = true) {
    return WordPieceTokenizer(Vocab::from_tokens({}), lower_case);
}

// A small vocabulary for encode(): every word is one token.
WordPieceTokenizer word_tokenizer() {
    return WordPieceTokenizer(
        Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a1", "a2", "a3", "a4",
                            "a5", "b1", "b2", "b3", "b4", "b5"}));
}

std::string error_of(const std::string& path) {
    try {
        Vocab::load(path);
    } catch (const InputError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// BasicTokenizer

TEST(BasicTokenizer, LowerCasesAndSplitsPunctuation) {
    // tokenization_test.py: test_basic_tokenizer_lower.
    EXPECT_EQ(basic_only().basic_tokenize(" \tHeLLo!how  \n Are yoU?  "),
              (Tokens{"hello", "!", "how", "are", "you", "?"}));
}

TEST(BasicTokenizer, KeepsCaseAndAccentsWhenCased) {
    // tokenization_test.py: test_basic_tokenizer_no_lower.
    EXPECT_EQ(basic_only(false).basic_tokenize(" \tHeLLo!how  \n Are yoU?  "),
              (Tokens{"HeLLo", "!", "how", "Are", "yoU", "?"}));
    EXPECT_EQ(basic_only(false).basic_tokenize("Héllo"), (Tokens{"Héllo"}));
}

TEST(BasicTokenizer, StripsAccents) {
    EXPECT_EQ(basic_only().basic_tokenize("Héllo"), (Tokens{"hello"}));
    // Already decomposed: e + U+0301 COMBINING ACUTE ACCENT.
    EXPECT_EQ(basic_only().basic_tokenize("He\u0301llo"), (Tokens{"hello"}));
    EXPECT_EQ(basic_only().basic_tokenize("naïve café ÀÇÑ"), (Tokens{"naive", "cafe", "acn"}));
}

TEST(BasicTokenizer, LowerCasesLikePython) {
    // str.lower(): final sigma in context, and U+0130 becomes i + U+0307 (then stripped).
    EXPECT_EQ(basic_only().basic_tokenize("ΟΔΟΣ Σ"), (Tokens{"οδος", "σ"}));
    EXPECT_EQ(basic_only().basic_tokenize("İstanbul"), (Tokens{"istanbul"}));
}

TEST(BasicTokenizer, SplitsAsciiSymbols) {
    // "$", "^" and "`" are not Unicode punctuation but the original treats all ASCII symbols
    // as punctuation.
    EXPECT_EQ(basic_only().basic_tokenize("$5^2 a`b x_y"),
              (Tokens{"$", "5", "^", "2", "a", "`", "b", "x", "_", "y"}));
    EXPECT_EQ(basic_only().basic_tokenize("don't"), (Tokens{"don", "'", "t"}));
}

TEST(BasicTokenizer, SplitsUnicodePunctuation) {
    EXPECT_EQ(basic_only().basic_tokenize("¿Qué?"), (Tokens{"¿", "que", "?"}));
    EXPECT_EQ(basic_only().basic_tokenize("word—word «hi»"),
              (Tokens{"word", "—", "word", "«", "hi", "»"}));
    // Symbols outside P* stay attached: U+00A9 is So, U+20AC is Sc.
    EXPECT_EQ(basic_only().basic_tokenize("a©b 5€"), (Tokens{"a©b", "5€"}));
}

TEST(BasicTokenizer, SpacesOutCjkIdeographs) {
    // tokenization_test.py: test_chinese.
    EXPECT_EQ(basic_only().basic_tokenize("ah\u535A\u63A8zz"),
              (Tokens{"ah", "\u535A", "\u63A8", "zz"}));
    // Kana and Hangul are not in the original's ranges: they stay whole words (and when
    // lower-casing, NFD turns Hangul syllables into conjoining jamo, as in the original).
    EXPECT_EQ(basic_only(false).basic_tokenize("こんにちは 한국어"),
              (Tokens{"こんにちは", "한국어"}));
    EXPECT_EQ(basic_only().basic_tokenize("한"), (Tokens{"\u1112\u1161\u11AB"}));
    // A compatibility ideograph is spaced out and, when lower-casing, NFD-decomposed.
    EXPECT_EQ(basic_only().basic_tokenize("x\uF900y"), (Tokens{"x", "\u8C48", "y"}));
}

TEST(BasicTokenizer, DropsControlCharacters) {
    // Cc and Cf are removed (U+0005, DEL, ZERO WIDTH SPACE, BOM), as are NUL and U+FFFD.
    EXPECT_EQ(basic_only().basic_tokenize("a\u0005b c\x7f"
                                          "d e\u200Bf\uFEFFg"),
              (Tokens{"ab", "cd", "efg"}));
    EXPECT_EQ(basic_only().basic_tokenize(std::string("x\0y\uFFFDz", 7)), (Tokens{"xyz"}));
}

TEST(BasicTokenizer, SplitsOnUnicodeWhitespace) {
    // Zs (NO-BREAK SPACE, IDEOGRAPHIC SPACE) and Python's other split() separators.
    EXPECT_EQ(basic_only().basic_tokenize("a\u00A0b\u3000c\u2028d\r\ne\tf"),
              (Tokens{"a", "b", "c", "d", "e", "f"}));
    EXPECT_TRUE(basic_only().basic_tokenize(" \t\n\u00A0 ").empty());
    EXPECT_TRUE(basic_only().basic_tokenize("").empty());
}

TEST(BasicTokenizer, DropsInvalidUtf8) {
    EXPECT_EQ(basic_only().basic_tokenize("ab\xFF\xC3"
                                          "cd"),
              (Tokens{"abcd"}));
}

// ---------------------------------------------------------------------------------------------
// WordPiece

TEST(WordPiece, SplitsIntoLongestPieces) {
    // tokenization_test.py: test_wordpiece_tokenizer.
    const WordPieceTokenizer tok(reference_vocab());
    EXPECT_TRUE(tok.tokenize("").empty());
    EXPECT_EQ(tok.tokenize("unwanted running"), (Tokens{"un", "##want", "##ed", "runn", "##ing"}));
    EXPECT_EQ(tok.wordpiece("unwanted"), (Tokens{"un", "##want", "##ed"}));
}

TEST(WordPiece, UnknownWhenNoSegmentation) {
    const WordPieceTokenizer tok(reference_vocab());
    EXPECT_EQ(tok.tokenize("unwantedX running"), (Tokens{"[UNK]", "runn", "##ing"}));
    // A first piece must not carry "##", a later one must.
    EXPECT_EQ(tok.wordpiece("ing"), (Tokens{"[UNK]"}));
}

TEST(WordPiece, LongWordIsUnknown) {
    const WordPieceTokenizer tok(reference_vocab(), true, 6);
    EXPECT_EQ(tok.tokenize("unwant unwanted"), (Tokens{"un", "##want", "[UNK]"}));
}

TEST(WordPiece, CountsCharactersNotBytes) {
    // "éé" is 2 characters but 4 bytes: within a 2-character limit.
    const WordPieceTokenizer tok(Vocab::from_tokens({"[UNK]", "\xC3\xA9", "##\xC3\xA9"}), false, 2);
    EXPECT_EQ(tok.wordpiece("\xC3\xA9\xC3\xA9"), (Tokens{"\xC3\xA9", "##\xC3\xA9"}));
    EXPECT_EQ(tok.wordpiece("\xC3\xA9\xC3\xA9\xC3\xA9"), (Tokens{"[UNK]"}));
}

TEST(WordPiece, MatchesReferenceFullTokenizer) {
    // tokenization_test.py: test_full_tokenizer, ids included.
    const WordPieceTokenizer tok(reference_vocab());
    EXPECT_EQ(tok.tokenize("UNwant\u00E9d,running"),
              (Tokens{"un", "##want", "##ed", ",", "runn", "##ing"}));
    EXPECT_EQ(tok.token_ids("UNwant\u00E9d,running"), (std::vector<int64_t>{7, 4, 5, 10, 8, 9}));
    EXPECT_EQ(tok.token_ids("zzz"), (std::vector<int64_t>{0}));
}

// ---------------------------------------------------------------------------------------------
// encode

TEST(Encode, SingleSequenceGetsClsAndSep) {
    const Encoding enc = word_tokenizer().encode("a1 a2");
    EXPECT_EQ(enc.tokens, (Tokens{"[CLS]", "a1", "a2", "[SEP]"}));
    EXPECT_EQ(enc.input_ids, (std::vector<int64_t>{2, 5, 6, 3}));
    EXPECT_EQ(enc.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(Encode, PairHasSegmentIds) {
    const Encoding enc = word_tokenizer().encode("a1 a2", "b1", 512);
    EXPECT_EQ(enc.tokens, (Tokens{"[CLS]", "a1", "a2", "[SEP]", "b1", "[SEP]"}));
    EXPECT_EQ(enc.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
    EXPECT_EQ(enc.input_ids.size(), enc.token_type_ids.size());
}

TEST(Encode, TruncatesLongerSideFirst) {
    // 5 + 2 tokens in max_len 8 (3 specials): a loses its last two tokens, b keeps both.
    const Encoding enc = word_tokenizer().encode("a1 a2 a3 a4 a5", "b1 b2", 8);
    EXPECT_EQ(enc.tokens, (Tokens{"[CLS]", "a1", "a2", "a3", "[SEP]", "b1", "b2", "[SEP]"}));
    EXPECT_EQ(enc.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 1}));
}

TEST(Encode, TruncatesSecondSideOnTies) {
    // _truncate_seq_pair pops from b when the sides are equally long.
    const Encoding enc = word_tokenizer().encode("a1 a2 a3", "b1 b2 b3", 7);
    EXPECT_EQ(enc.tokens, (Tokens{"[CLS]", "a1", "a2", "[SEP]", "b1", "b2", "[SEP]"}));
}

TEST(Encode, TruncatesSingleSequenceToMaxLenMinusTwo) {
    const Encoding enc = word_tokenizer().encode("a1 a2 a3 a4 a5", {}, 4);
    EXPECT_EQ(enc.tokens, (Tokens{"[CLS]", "a1", "a2", "[SEP]"}));
}

TEST(Encode, ForcedPairWithEmptySecondSide) {
    const Encoding enc = word_tokenizer().encode("a1", {}, 512, true);
    EXPECT_EQ(enc.tokens, (Tokens{"[CLS]", "a1", "[SEP]", "[SEP]"}));
    EXPECT_EQ(enc.token_type_ids, (std::vector<int64_t>{0, 0, 0, 1}));
}

TEST(Encode, RejectsMaxLenWithoutRoomForSpecials) {
    EXPECT_THROW(word_tokenizer().encode("a1", "b1", 2), std::invalid_argument);
    EXPECT_NO_THROW(word_tokenizer().encode("a1", {}, 2));
}

// ---------------------------------------------------------------------------------------------
// Vocab

TEST(Vocab, LoadsCrlfAndTrailingNewline) {
    const TempFile file("crlf.txt", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhello\r\n\r\n");
    const Vocab vocab = Vocab::load(file.path());
    EXPECT_EQ(vocab.size(), 6);
    EXPECT_EQ(vocab.id("hello"), 5);
    EXPECT_EQ(vocab.pad_id(), 0);
    EXPECT_EQ(vocab.mask_id(), 4);
    EXPECT_EQ(vocab.id("absent"), -1);
}

TEST(Vocab, MissingFileNamesThePath) {
    const std::string path = "/nonexistent/dir/vocab.txt";
    EXPECT_THROW(Vocab::load(path), InputError);
    EXPECT_NE(error_of(path).find(path), std::string::npos);
}

TEST(Vocab, EmptyFileIsAnError) {
    const TempFile file("empty.txt", "");
    EXPECT_NE(error_of(file.path()).find("empty"), std::string::npos);
    EXPECT_NE(error_of(file.path()).find(file.path()), std::string::npos);
}

TEST(Vocab, MissingSpecialTokenIsNamed) {
    const TempFile file("nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n");
    const std::string message = error_of(file.path());
    EXPECT_NE(message.find("[MASK]"), std::string::npos) << message;
    EXPECT_NE(message.find(file.path()), std::string::npos) << message;
}

TEST(Vocab, DuplicateTokenNamesTheLine) {
    const TempFile file("dup.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\nhello\n");
    try {
        Vocab::load(file.path());
        FAIL() << "duplicate accepted";
    } catch (const InputError& e) {
        EXPECT_EQ(e.line(), 8);
        EXPECT_EQ(e.path(), file.path());
        EXPECT_NE(std::string(e.what()).find(":8:"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("hello"), std::string::npos) << e.what();
    }
}

TEST(Vocab, BlankLineInsideIsAnError) {
    const TempFile file("blank.txt", "[PAD]\n[UNK]\n\n[CLS]\n[SEP]\n[MASK]\n");
    try {
        Vocab::load(file.path());
        FAIL() << "blank line accepted";
    } catch (const InputError& e) {
        EXPECT_EQ(e.line(), 3);
    }
}

TEST(Vocab, SaveThenLoadRoundTrips) {
    const Vocab vocab = reference_vocab();
    const TempFile file("saved.txt", "");
    vocab.save(file.path());
    const Vocab loaded = Vocab::load(file.path());
    EXPECT_EQ(loaded.tokens(), vocab.tokens());
    EXPECT_EQ(loaded.unk_id(), 0);
    EXPECT_EQ(loaded.cls_id(), 1);
}

TEST(Vocab, RecognisesSpecialTokens) {
    const Vocab vocab = Vocab::from_tokens({"[PAD]", "[unused0]", "[unused12]", "[UNK]", "[CLS]",
                                            "[SEP]", "[MASK]", "[unusedx]", "[unused]", "hello"});
    for (int64_t id : {0, 1, 2, 3, 4, 5, 6}) EXPECT_TRUE(vocab.is_special(id)) << id;
    for (int64_t id : {7, 8, 9, -1, 10}) EXPECT_FALSE(vocab.is_special(id)) << id;
}

TEST(Vocab, FromTokensRejectsDuplicates) {
    EXPECT_THROW(Vocab::from_tokens({"a", "b", "a"}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// bert-base-uncased (optional: needs the real vocab.txt)

TEST(BertBaseUncased, KnownTokenizations) {
    const char* path = std::getenv("TUPE_BERT_VOCAB");
    if (path == nullptr || *path == '\0') {
        GTEST_SKIP() << "set TUPE_BERT_VOCAB to bert-base-uncased's vocab.txt to run this test";
    }
    const WordPieceTokenizer tok(Vocab::load(path));
    ASSERT_EQ(tok.vocab().size(), 30522);
    EXPECT_EQ(tok.vocab().pad_id(), 0);
    EXPECT_EQ(tok.vocab().unk_id(), 100);
    EXPECT_EQ(tok.vocab().cls_id(), 101);
    EXPECT_EQ(tok.vocab().sep_id(), 102);
    EXPECT_EQ(tok.vocab().mask_id(), 103);
    // Greedy longest match: "una" is the longest prefix in the vocab, then "##ffa", "##ble".
    EXPECT_EQ(tok.tokenize("unaffable"), (Tokens{"una", "##ffa", "##ble"}));
    EXPECT_EQ(tok.tokenize("Hello, world!"), (Tokens{"hello", ",", "world", "!"}));
    EXPECT_EQ(tok.token_ids("Hello, world!"), (std::vector<int64_t>{7592, 1010, 2088, 999}));
    EXPECT_EQ(tok.tokenize("He was running"), (Tokens{"he", "was", "running"}));
    EXPECT_EQ(tok.tokenize("tokenization"), (Tokens{"token", "##ization"}));
    EXPECT_EQ(tok.tokenize("Héllo ¿Qué? naïve café — 東京"),
              (Tokens{"hello", "¿", "que", "?", "naive", "cafe", "—", "東", "京"}));
    const Encoding enc = tok.encode("Hello, world!", "running");
    EXPECT_EQ(enc.input_ids.front(), 101);
    EXPECT_EQ(enc.input_ids.back(), 102);
    EXPECT_EQ(enc.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1}));
    EXPECT_TRUE(tok.vocab().is_special(1));  // [unused0]
    EXPECT_FALSE(tok.vocab().is_special(7592));
}
