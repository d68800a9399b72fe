// Tests for engine::build_wordpiece_vocab: BERT's specials first, the alphabet, BPE-style
// merges as HF tokenizers' WordPieceTrainer makes them, and a vocabulary that tokenizes its
// own training text without [UNK].
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"

namespace {

using engine::Vocab;
using engine::VocabBuilderOptions;
using engine::WordPieceTokenizer;
using Tokens = std::vector<std::string>;

// A corpus file in the temp directory (tupe_test_vocab_builder_<pid>_<name>), removed when the
// test ends.
struct TempCorpus : test_support::TempFile {
    TempCorpus(const std::string& name, const std::string& content)
        : test_support::TempFile(
              "tupe_test_vocab_builder_" + test_support::process_id() + "_" + name, content) {}
};

const char* kText =
    "The quick brown fox jumps over the lazy dog.\n"
    "The dog sleeps; the fox runs, and the hunters are running after the foxes!\n"
    "Naïve runners run quickly — quicker than the quickest dogs.\n"
    "Héllo, world: 3 dogs, 12 foxes and 1999 runs ($5 each).\n"
    "A jumping fox jumped; jumpers jump.\n";

VocabBuilderOptions options(int64_t vocab_size, int64_t min_frequency = 1) {
    VocabBuilderOptions o;
    o.vocab_size = vocab_size;
    o.min_frequency = min_frequency;
    return o;
}

}  // namespace

TEST(VocabBuilder, SpecialsComeFirst) {
    const TempCorpus corpus("specials.txt", kText);
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), options(100));
    ASSERT_GE(vocab.size(), 5);
    EXPECT_EQ(vocab.token(0), "[PAD]");
    EXPECT_EQ(vocab.token(1), "[UNK]");
    EXPECT_EQ(vocab.token(2), "[CLS]");
    EXPECT_EQ(vocab.token(3), "[SEP]");
    EXPECT_EQ(vocab.token(4), "[MASK]");
    EXPECT_EQ(vocab.pad_id(), 0);
    EXPECT_EQ(vocab.mask_id(), 4);
}

TEST(VocabBuilder, AlphabetHasPlainAndContinuationCharacters) {
    const TempCorpus corpus("alphabet.txt", "abc ba\n");
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), options(5));
    // Every character plain (by code point), then "##" + each seen inside a word; a target
    // below the alphabet's size still keeps the whole alphabet.
    EXPECT_EQ(vocab.tokens(), (Tokens{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c",
                                      "##a", "##b", "##c"}));
}

TEST(VocabBuilder, MergesMostFrequentPairFirst) {
    // Alphabet e h l o ##e ##o fills ids 5-10; ("l", "##o") occurs 5 times, ("h", "##e") 3.
    const TempCorpus corpus("merges.txt", "lo lo lo lo lo he he he\n");
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), options(13));
    EXPECT_EQ(vocab.size(), 13);
    EXPECT_EQ(vocab.token(11), "lo");
    EXPECT_EQ(vocab.token(12), "he");
}

TEST(VocabBuilder, BreaksTiesBySmallerPairIds) {
    // ("a", "##b") and ("c", "##d") both occur once; "a" has the smaller id.
    const TempCorpus corpus("ties.txt", "cd ab\n");
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), options(12));
    EXPECT_EQ(vocab.token(11), "ab");
    EXPECT_FALSE(vocab.contains("cd"));
}

TEST(VocabBuilder, ReachesTargetSize) {
    const TempCorpus corpus("target.txt", kText);
    for (int64_t size : {80, 110, 140}) {
        EXPECT_EQ(engine::build_wordpiece_vocab(corpus.path(), options(size)).size(), size);
    }
}

TEST(VocabBuilder, StopsWhenNoPairsLeft) {
    // Every word becomes a single token long before 1000 entries.
    const TempCorpus corpus("exhaust.txt", "aaaa abab\n");
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), options(1000));
    EXPECT_LT(vocab.size(), 1000);
    EXPECT_TRUE(vocab.contains("aaaa"));
    EXPECT_TRUE(vocab.contains("abab"));
    const WordPieceTokenizer tok(vocab);
    EXPECT_EQ(tok.tokenize("aaaa abab"), (Tokens{"aaaa", "abab"}));
}

TEST(VocabBuilder, MinFrequencyStopsRarePairs) {
    const TempCorpus corpus("minfreq.txt", "xy xy zw\n");
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), options(100, 2));
    EXPECT_TRUE(vocab.contains("xy"));
    EXPECT_FALSE(vocab.contains("zw"));
}

TEST(VocabBuilder, TrainingTextHasNoUnknownTokens) {
    const TempCorpus corpus("roundtrip.txt", kText);
    for (int64_t size : {40, 100, 250}) {
        const WordPieceTokenizer tok(
            engine::build_wordpiece_vocab(corpus.path(), options(size, 2)));
        std::istringstream lines(kText);
        std::string line;
        while (std::getline(lines, line)) {
            const Tokens tokens = tok.tokenize(line);
            EXPECT_FALSE(tokens.empty());
            for (const std::string& t : tokens) EXPECT_NE(t, "[UNK]") << "in: " << line;
        }
    }
}

TEST(VocabBuilder, IsDeterministic) {
    const TempCorpus corpus("determinism.txt", kText);
    EXPECT_EQ(engine::build_wordpiece_vocab(corpus.path(), options(100)).tokens(),
              engine::build_wordpiece_vocab(corpus.path(), options(100)).tokens());
}

TEST(VocabBuilder, MaxLinesLimitsTheCorpus) {
    const TempCorpus corpus("maxlines.txt", "aa\nzz\n");
    VocabBuilderOptions o = options(100);
    o.max_lines = 1;
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), o);
    EXPECT_TRUE(vocab.contains("aa"));
    EXPECT_FALSE(vocab.contains("z"));
}

TEST(VocabBuilder, MissingOrEmptyCorpusIsAnError) {
    EXPECT_THROW(engine::build_wordpiece_vocab("/nonexistent/corpus.txt", options(100)),
                 engine::InputError);
    const TempCorpus blank("blank.txt", " \n\t\n");
    try {
        engine::build_wordpiece_vocab(blank.path(), options(100));
        FAIL() << "empty corpus accepted";
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), blank.path());
    }
}

TEST(VocabBuilder, InvalidUtf8WarnsOnceNamingTheFirstBadLine) {
    const TempCorpus corpus("bad_utf8.txt", "good words\nbad \xff word\nfine\nmore \xc3\n");
    VocabBuilderOptions o = options(100);
    std::vector<std::string> warnings;
    o.on_warning = [&](const std::string& w) { warnings.push_back(w); };
    const Vocab vocab = engine::build_wordpiece_vocab(corpus.path(), o);
    EXPECT_TRUE(vocab.contains("word"));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(corpus.path() + ":2: invalid UTF-8 (2 lines"), std::string::npos)
        << warnings[0];
}
