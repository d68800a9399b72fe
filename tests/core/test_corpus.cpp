// Tests of the pretraining data pipeline (engine/corpus.h): corpus reading, the token cache,
// block packing and the validation split, BERT masking statistics and determinism, epoch
// orders and batch padding. Corpora are tiny files or hand-built TokenizedCorpus values.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "engine/corpus.h"
#include "engine/errors.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using engine::Block;
using engine::BlockDataset;
using engine::DataConfig;
using engine::TokenizedCorpus;
using engine::Vocab;

namespace {

constexpr int kFirstWord = 6;  // ids 0..5 are specials in test_vocab()

/// [PAD] [UNK] [CLS] [SEP] [MASK] [unused0], a few real words and pieces, then w0..w{n-1}.
Vocab test_vocab(int extra_words = 200) {
    std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"};
    for (const char* w : {"the", "cat", "sat", "on", "mat", ".", ",", "un", "##believ", "##able",
                          "dog", "ran", "a", "b"})
        t.emplace_back(w);
    for (int i = 0; i < extra_words; ++i) t.push_back("w" + std::to_string(i));
    return Vocab::from_tokens(t);
}

/// A corpus from docs -> sentences -> ids; every id starts a word unless listed in `cont`.
TokenizedCorpus make_corpus(const std::vector<std::vector<std::vector<uint32_t>>>& docs,
                            const std::set<uint32_t>& cont = {}) {
    TokenizedCorpus c;
    c.sentence_begin.push_back(0);
    c.doc_begin.push_back(0);
    for (const auto& doc : docs) {
        for (const auto& sentence : doc) {
            for (uint32_t id : sentence) {
                c.ids.push_back(id);
                c.word_start.push_back(cont.count(id) ? 0 : 1);
            }
            c.sentence_begin.push_back(c.ids.size());
        }
        c.doc_begin.push_back(c.num_sentences());
    }
    return c;
}

/// `n` consecutive ids starting at `first`.
std::vector<uint32_t> run_of(uint32_t first, uint32_t n) {
    std::vector<uint32_t> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
}

/// The tokens of a block without [CLS]/[SEP].
std::vector<int64_t> inner(const Block& b) { return {b.ids.begin() + 1, b.ids.end() - 1}; }

/// A fresh directory per test (tupe_corpus_<suite>_<test>), removed when the test ends.
struct TempDir : test_support::TempDir {
    TempDir()
        : test_support::TempDir("tupe_corpus_" + test_support::test_suite_name() + "_" +
                                test_support::test_name()) {}
};

using test_support::write_file;

void expect_same_corpus(const TokenizedCorpus& a, const TokenizedCorpus& b) {
    EXPECT_EQ(a.ids, b.ids);
    EXPECT_EQ(a.sentence_begin, b.sentence_begin);
    EXPECT_EQ(a.doc_begin, b.doc_begin);
    EXPECT_EQ(a.word_start, b.word_start);
}

const char* kSmallCorpus =
    "The cat sat on the mat.\r\n"
    "A dog ran, unbelievable.\r\n"
    "\r\n"
    "The dog sat.\n"
    "   \n"
    "\n"
    "A cat ran on a mat.\n";

// ---- reading and caching --------------------------------------------------------------------

TEST(TokenizeCorpus, BlankLinesSeparateDocumentsAndCrlfIsTolerated) {
    TempDir dir;
    const auto path = dir.file("small.txt");
    write_file(path, kSmallCorpus);
    engine::WordPieceTokenizer tok(test_vocab());
    const TokenizedCorpus c = engine::tokenize_corpus(path, tok);

    ASSERT_EQ(c.num_documents(), 3u);
    ASSERT_EQ(c.num_sentences(), 4u);
    EXPECT_EQ(c.doc_begin, (std::vector<uint64_t>{0, 2, 3, 4}));
    EXPECT_EQ(c.sentence_begin.back(), c.ids.size());
    EXPECT_EQ(c.word_start.size(), c.ids.size());

    const Vocab& v = tok.vocab();
    // Sentence 1: a dog ran , un ##believ ##able .
    const std::vector<uint32_t> expected = {uint32_t(v.id("a")),      uint32_t(v.id("dog")),
                                            uint32_t(v.id("ran")),    uint32_t(v.id(",")),
                                            uint32_t(v.id("un")),     uint32_t(v.id("##believ")),
                                            uint32_t(v.id("##able")), uint32_t(v.id("."))};
    const std::vector<uint32_t> got(c.ids.begin() + c.sentence_begin[1],
                                    c.ids.begin() + c.sentence_begin[2]);
    EXPECT_EQ(got, expected);
    const std::vector<uint8_t> flags(c.word_start.begin() + c.sentence_begin[1],
                                     c.word_start.begin() + c.sentence_begin[2]);
    EXPECT_EQ(flags, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 0, 1}));
    for (uint32_t id : c.ids) EXPECT_NE(id, uint32_t(v.unk_id()));
}

TEST(TokenizeCorpus, MissingFileThrowsInputErrorNamingThePath) {
    TempDir dir;
    const auto path = dir.file("does_not_exist.txt");
    engine::WordPieceTokenizer tok(test_vocab());
    try {
        engine::tokenize_corpus(path, tok);
        FAIL() << "expected InputError";
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), path);
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    }
    EXPECT_THROW(engine::load_or_build_corpus(path, tok, dir.file("cache")), engine::InputError);
}

TEST(TokenizeCorpus, EmptyCorpusThrowsInputErrorNamingThePath) {
    TempDir dir;
    engine::WordPieceTokenizer tok(test_vocab());
    for (const std::string text : {"", "\n\n  \r\n\t\n"}) {
        const auto path = dir.file("empty.txt");
        write_file(path, text);
        try {
            engine::tokenize_corpus(path, tok);
            FAIL() << "expected InputError";
        } catch (const engine::InputError& e) {
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
        }
        EXPECT_THROW(engine::load_or_build_corpus(path, tok, dir.file("cache")),
                     engine::InputError);
    }
}

TEST(TokenizeCorpus, InvalidUtf8WarnsWithFirstLineAndCountButKeepsTheRest) {
    TempDir dir;
    const auto path = dir.file("bad_utf8.txt");
    // Lines 2 and 4 hold a stray continuation byte and a truncated sequence.
    write_file(path, "the cat sat .\nthe \x80 dog ran .\n\na \xe2\x82 mat .\n");
    engine::WordPieceTokenizer tok(test_vocab());
    const TokenizedCorpus c = engine::tokenize_corpus(path, tok);
    EXPECT_EQ(c.num_sentences(), 3u);  // nothing aborted, nothing but the bad bytes dropped
    EXPECT_NE(c.warning.find(path + ":2: invalid UTF-8"), std::string::npos) << c.warning;
    EXPECT_NE(c.warning.find("2 lines"), std::string::npos) << c.warning;

    write_file(path, kSmallCorpus);
    EXPECT_EQ(engine::tokenize_corpus(path, tok).warning, "");
}

TEST(CorpusCache, RoundTripEqualsFreshTokenization) {
    TempDir dir;
    const auto path = dir.file("small.txt");
    write_file(path, kSmallCorpus);
    engine::WordPieceTokenizer tok(test_vocab());
    const auto cache_dir = dir.file("cache/nested");  // created on demand
    const auto cache = engine::corpus_cache_path(path, tok, cache_dir);
    EXPECT_EQ(fs::path(cache).parent_path(), fs::path(cache_dir));
    EXPECT_FALSE(fs::exists(cache));

    const TokenizedCorpus fresh = engine::tokenize_corpus(path, tok);
    const TokenizedCorpus built = engine::load_or_build_corpus(path, tok, cache_dir);
    ASSERT_TRUE(fs::exists(cache));
    expect_same_corpus(built, fresh);

    // The second call reads the cache and leaves it as it is.
    const auto before = fs::last_write_time(cache);
    const TokenizedCorpus loaded = engine::load_or_build_corpus(path, tok, cache_dir);
    expect_same_corpus(loaded, fresh);
    EXPECT_EQ(fs::last_write_time(cache), before);
    // No temporary files are left behind.
    int files = 0;
    for (const auto& entry : fs::directory_iterator(cache_dir)) {
        (void)entry;
        ++files;
    }
    EXPECT_EQ(files, 1);
}

TEST(CorpusCache, KeyDependsOnCorpusVocabAndCase) {
    TempDir dir;
    const auto path = dir.file("small.txt");
    write_file(path, kSmallCorpus);
    engine::WordPieceTokenizer tok(test_vocab());
    const auto base = engine::corpus_cache_path(path, tok, dir.file("cache"));
    EXPECT_EQ(engine::corpus_cache_path(path, tok, dir.file("cache")), base);
    EXPECT_NE(engine::corpus_cache_path(path, engine::WordPieceTokenizer(test_vocab(), false),
                                        dir.file("cache")),
              base);
    EXPECT_NE(engine::corpus_cache_path(path, engine::WordPieceTokenizer(test_vocab(201)),
                                        dir.file("cache")),
              base);
    write_file(path, std::string(kSmallCorpus) + "more\n");
    EXPECT_NE(engine::corpus_cache_path(path, tok, dir.file("cache")), base);
}

TEST(CorpusCache, CorruptCacheIsRebuilt) {
    TempDir dir;
    const auto path = dir.file("small.txt");
    write_file(path, kSmallCorpus);
    engine::WordPieceTokenizer tok(test_vocab());
    const auto cache_dir = dir.file("cache");
    const TokenizedCorpus fresh = engine::tokenize_corpus(path, tok);
    engine::load_or_build_corpus(path, tok, cache_dir);
    const auto cache = engine::corpus_cache_path(path, tok, cache_dir);
    const auto full_size = fs::file_size(cache);

    // Truncated.
    fs::resize_file(cache, full_size - 5);
    expect_same_corpus(engine::load_or_build_corpus(path, tok, cache_dir), fresh);
    EXPECT_EQ(fs::file_size(cache), full_size);

    // Same size, one token id flipped: only the checksum can tell.
    {
        std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(48);  // the first token id, right after the header
        const char bad[4] = {7, 0, 0, 0};
        f.write(bad, 4);
    }
    expect_same_corpus(engine::load_or_build_corpus(path, tok, cache_dir), fresh);

    // Garbage of the right size.
    write_file(cache, std::string(full_size, 'x'));
    expect_same_corpus(engine::load_or_build_corpus(path, tok, cache_dir), fresh);
    EXPECT_EQ(fs::file_size(cache), full_size);
}

// ---- blocks and the validation split --------------------------------------------------------

TEST(MakeBlocks, BlocksStartWithClsEndWithSepAndFitMaxSeqLen) {
    const Vocab v = test_vocab();
    std::vector<std::vector<std::vector<uint32_t>>> docs;
    for (uint32_t d = 0; d < 6; ++d) {
        std::vector<std::vector<uint32_t>> doc;
        for (uint32_t s = 0; s < 7; ++s)
            doc.push_back(run_of(kFirstWord + (d * 7 + s) % 50, 1 + (s * 5 + d) % 13));
        docs.push_back(doc);
    }
    const TokenizedCorpus c = make_corpus(docs);
    DataConfig cfg;
    cfg.max_seq_len = 12;
    cfg.validation_fraction = 0.3;
    const BlockDataset ds = engine::make_blocks(c, v, cfg);
    ASSERT_FALSE(ds.train.empty());
    ASSERT_FALSE(ds.validation.empty());
    size_t tokens = 0;
    for (const auto* split : {&ds.train, &ds.validation}) {
        for (const Block& b : *split) {
            ASSERT_GE(b.ids.size(), 3u);
            EXPECT_LE(b.ids.size(), size_t(cfg.max_seq_len));
            EXPECT_EQ(b.ids.front(), v.cls_id());
            EXPECT_EQ(b.ids.back(), v.sep_id());
            EXPECT_EQ(b.word_start.size(), b.ids.size());
            EXPECT_EQ(b.word_start.front(), 1);
            EXPECT_EQ(b.word_start.back(), 1);
            for (int64_t id : inner(b)) EXPECT_FALSE(v.is_special(id));
            tokens += b.ids.size() - 2;
        }
    }
    EXPECT_EQ(tokens, c.ids.size());  // nothing dropped, nothing duplicated
    cfg.max_seq_len = 2;              // no room for a token between [CLS] and [SEP]
    EXPECT_THROW(engine::make_blocks(c, v, cfg), std::invalid_argument);
}

TEST(MakeBlocks, PacksWholeSentencesGreedily) {
    const Vocab v = test_vocab();
    // One document of sentences of 3, 3, 3, 5 tokens with room for 8: [3 3] [3 5].
    const TokenizedCorpus c = make_corpus(
        {{run_of(10, 3), run_of(20, 3), run_of(30, 3), run_of(40, 5)}, {run_of(60, 2)}});
    DataConfig cfg;
    cfg.max_seq_len = 10;
    cfg.validation_fraction = 0.5;
    const BlockDataset ds = engine::make_blocks(c, v, cfg);
    ASSERT_EQ(ds.train.size(), 2u);
    EXPECT_EQ(inner(ds.train[0]), (std::vector<int64_t>{10, 11, 12, 20, 21, 22}));
    EXPECT_EQ(inner(ds.train[1]), (std::vector<int64_t>{30, 31, 32, 40, 41, 42, 43, 44}));
    ASSERT_EQ(ds.validation.size(), 1u);
}

TEST(MakeBlocks, LongSentenceIsSplitIntoChunksKeepingWordFlags) {
    const Vocab v = test_vocab();
    // Sentence of 19 tokens (every third a "##" piece), room 8: chunks 8, 8, 3; the short
    // sentence that follows packs after the remainder.
    const std::vector<uint32_t> longs = run_of(kFirstWord + 14, 19);
    std::set<uint32_t> cont;
    for (size_t i = 0; i < longs.size(); ++i)
        if (i % 3 == 2) cont.insert(longs[i]);
    const TokenizedCorpus c = make_corpus(
        {{run_of(kFirstWord, 2), longs, run_of(kFirstWord + 40, 4)}, {run_of(90, 3)}}, cont);
    DataConfig cfg;
    cfg.max_seq_len = 10;
    cfg.validation_fraction = 0.5;
    const BlockDataset ds = engine::make_blocks(c, v, cfg);
    ASSERT_EQ(ds.train.size(), 4u);  // [2] [8] [8] [3+4]
    EXPECT_EQ(ds.train[0].ids.size(), 2u + 2);
    EXPECT_EQ(ds.train[1].ids.size(), 8u + 2);
    EXPECT_EQ(ds.train[2].ids.size(), 8u + 2);
    EXPECT_EQ(ds.train[3].ids.size(), 7u + 2);
    std::vector<int64_t> joined;
    std::vector<uint8_t> flags;
    for (int i = 1; i <= 3; ++i) {
        const auto in = inner(ds.train[i]);
        joined.insert(joined.end(), in.begin(), in.end());
        flags.insert(flags.end(), ds.train[i].word_start.begin() + 1,
                     ds.train[i].word_start.end() - 1);
    }
    joined.resize(19);
    flags.resize(19);
    EXPECT_EQ(joined, std::vector<int64_t>(longs.begin(), longs.end()));
    for (size_t i = 0; i < 19; ++i) EXPECT_EQ(flags[i], i % 3 == 2 ? 0 : 1) << i;
    // The second chunk starts at sentence offset 8 (8 % 3 == 2), inside a word: it keeps the
    // original flag 0 rather than being promoted to a word start.
    EXPECT_EQ(ds.train[2].word_start[1], 0);
}

TEST(MakeBlocks, BlocksNeverCrossDocuments) {
    const Vocab v = test_vocab();
    // Document d uses only ids [kFirstWord + 20 d, kFirstWord + 20 d + 20).
    std::vector<std::vector<std::vector<uint32_t>>> docs;
    for (uint32_t d = 0; d < 8; ++d) {
        std::vector<std::vector<uint32_t>> doc;
        for (uint32_t s = 0; s < 5; ++s) doc.push_back(run_of(kFirstWord + 20 * d + s, 1 + s));
        docs.push_back(doc);
    }
    DataConfig cfg;
    cfg.max_seq_len = 64;  // room for a whole document; must still not merge two
    cfg.validation_fraction = 0.25;
    const BlockDataset ds = engine::make_blocks(make_corpus(docs), v, cfg);
    EXPECT_EQ(ds.train.size() + ds.validation.size(), 8u);
    for (const auto* split : {&ds.train, &ds.validation}) {
        for (const Block& b : *split) {
            std::set<int64_t> owners;
            for (int64_t id : inner(b)) owners.insert((id - kFirstWord) / 20);
            EXPECT_EQ(owners.size(), 1u);
        }
    }
}

TEST(MakeBlocks, ValidationSplitIsNonEmptyDisjointAndEveryKthDocument) {
    const Vocab v = test_vocab();
    std::vector<std::vector<std::vector<uint32_t>>> docs;
    for (uint32_t d = 0; d < 10; ++d) docs.push_back({run_of(kFirstWord + 10 * d, 3)});
    const TokenizedCorpus c = make_corpus(docs);
    auto doc_of = [](const Block& b) { return (b.ids[1] - kFirstWord) / 10; };

    DataConfig cfg;
    cfg.validation_fraction = 0.2;  // k = 5: documents 4 and 9
    BlockDataset ds = engine::make_blocks(c, v, cfg);
    std::set<int64_t> train, val;
    for (const Block& b : ds.train) train.insert(doc_of(b));
    for (const Block& b : ds.validation) val.insert(doc_of(b));
    EXPECT_EQ(val, (std::set<int64_t>{4, 9}));
    EXPECT_EQ(train.size(), 8u);
    for (int64_t d : val) EXPECT_EQ(train.count(d), 0u);

    cfg.validation_fraction = 0.02;  // k = 50 > 10 documents: the last one
    ds = engine::make_blocks(c, v, cfg);
    ASSERT_EQ(ds.validation.size(), 1u);
    EXPECT_EQ(doc_of(ds.validation[0]), 9);
    EXPECT_EQ(ds.train.size(), 9u);

    cfg.validation_fraction = 0.9;  // k would be 1: capped so training keeps documents
    ds = engine::make_blocks(c, v, cfg);
    EXPECT_FALSE(ds.train.empty());
    EXPECT_FALSE(ds.validation.empty());

    // Two documents, tiny fraction: one each.
    cfg.validation_fraction = 0.001;
    ds = engine::make_blocks(make_corpus({docs[0], docs[1]}), v, cfg);
    EXPECT_EQ(ds.train.size(), 1u);
    EXPECT_EQ(ds.validation.size(), 1u);
}

TEST(MakeBlocks, SingleDocumentSplitsItsBlocks) {
    const Vocab v = test_vocab();
    std::vector<std::vector<uint32_t>> doc;
    for (uint32_t s = 0; s < 20; ++s) doc.push_back(run_of(kFirstWord + s, 8));
    DataConfig cfg;
    cfg.max_seq_len = 10;  // one sentence per block: 20 blocks
    cfg.validation_fraction = 0.1;
    const BlockDataset ds = engine::make_blocks(make_corpus({doc}), v, cfg);
    EXPECT_EQ(ds.train.size(), 18u);
    ASSERT_EQ(ds.validation.size(), 2u);
    EXPECT_EQ(ds.validation[0].ids[1], kFirstWord + 18);  // the last blocks are held out
    EXPECT_EQ(ds.validation[1].ids[1], kFirstWord + 19);
}

TEST(MakeBlocks, SingleBlockServesAsTrainAndValidation) {
    const Vocab v = test_vocab();
    const BlockDataset ds = engine::make_blocks(make_corpus({{run_of(10, 4)}}), v, DataConfig{});
    ASSERT_EQ(ds.train.size(), 1u);
    ASSERT_EQ(ds.validation.size(), 1u);
    EXPECT_EQ(ds.train[0].ids, ds.validation[0].ids);
}

TEST(MakeBlocks, RejectsBadConfigAndEmptyCorpus) {
    const Vocab v = test_vocab();
    const TokenizedCorpus c = make_corpus({{run_of(10, 4)}, {run_of(20, 4)}});
    for (double f : {0.0, 1.0, -0.5}) {
        DataConfig cfg;
        cfg.validation_fraction = f;
        EXPECT_THROW(engine::make_blocks(c, v, cfg), std::invalid_argument) << f;
    }
    EXPECT_THROW(engine::make_blocks(TokenizedCorpus{}, v, DataConfig{}), std::invalid_argument);
    EXPECT_THROW(engine::make_blocks(make_corpus({{}, {}}), v, DataConfig{}),
                 std::invalid_argument);
}

// ---- masking --------------------------------------------------------------------------------

/// `n` blocks of `len` non-special tokens each, drawn from the vocabulary's plain words.
std::vector<Block> plain_blocks(const Vocab& v, int n, int len) {
    std::vector<Block> blocks(static_cast<size_t>(n));
    const int64_t words = v.size() - kFirstWord;
    for (int i = 0; i < n; ++i) {
        Block& b = blocks[static_cast<size_t>(i)];
        b.ids.push_back(v.cls_id());
        for (int t = 0; t < len; ++t) b.ids.push_back(kFirstWord + (i * 31 + t * 7) % words);
        b.ids.push_back(v.sep_id());
        b.word_start.assign(b.ids.size(), 1);
    }
    return blocks;
}

TEST(MaskBlock, StatisticsMatchBert) {
    const Vocab v = test_vocab(1000);
    const auto blocks = plain_blocks(v, 3000, 126);
    DataConfig cfg;  // mask_prob 0.15
    long total = 0, chosen = 0, as_mask = 0, as_random = 0, unchanged = 0;
    std::vector<int64_t> ids, labels;
    for (size_t i = 0; i < blocks.size(); ++i) {
        engine::mask_block(blocks[i], v, cfg, 1234, 0, i, ids, labels);
        ASSERT_EQ(ids.size(), blocks[i].ids.size());
        ASSERT_EQ(labels.size(), blocks[i].ids.size());
        for (size_t t = 0; t < ids.size(); ++t) {
            const int64_t orig = blocks[i].ids[t];
            if (v.is_special(orig)) continue;
            ++total;
            if (labels[t] == -100) {
                EXPECT_EQ(ids[t], orig);
                continue;
            }
            EXPECT_EQ(labels[t], orig);
            ++chosen;
            if (ids[t] == v.mask_id()) {
                ++as_mask;
            } else if (ids[t] == orig) {
                ++unchanged;
            } else {
                ++as_random;
                EXPECT_FALSE(v.is_special(ids[t]));
            }
        }
    }
    // round(0.15 * 126) = 19 per block, exactly.
    EXPECT_EQ(chosen, 19L * 3000);
    EXPECT_NEAR(double(chosen) / total, 0.15, 0.002);
    // 57,000 draws: one standard deviation of the 80% share is 0.0017, of the 10% shares
    // 0.0013; the tolerances are more than 8 of them, and the seed is fixed.
    EXPECT_NEAR(double(as_mask) / chosen, 0.8, 0.015);
    EXPECT_NEAR(double(as_random) / chosen, 0.1, 0.012);
    EXPECT_NEAR(double(unchanged) / chosen, 0.1, 0.012);
}

TEST(MaskBlock, NeverMasksSpecialTokensAndMasksAtLeastOne) {
    const Vocab v = test_vocab();
    DataConfig cfg;
    cfg.mask_prob = 0.5;
    // Specials everywhere but two positions.
    Block b;
    b.ids = {v.cls_id(),     v.unk_id(), kFirstWord + 3, v.id("[unused0]"), v.mask_id(),
             kFirstWord + 4, v.unk_id(), v.sep_id(),     v.pad_id()};
    b.word_start.assign(b.ids.size(), 1);
    std::vector<int64_t> ids, labels;
    for (uint64_t i = 0; i < 500; ++i) {
        engine::mask_block(b, v, cfg, 7, i, i, ids, labels);
        int masked = 0;
        for (size_t t = 0; t < b.ids.size(); ++t) {
            if (v.is_special(b.ids[t])) {
                EXPECT_EQ(labels[t], -100);
                EXPECT_EQ(ids[t], b.ids[t]);
            } else if (labels[t] != -100) {
                ++masked;
            }
        }
        EXPECT_EQ(masked, 1);  // round(0.5 * 2) = 1
    }
    // A tiny mask_prob still masks one token per block.
    cfg.mask_prob = 0.01;
    engine::mask_block(b, v, cfg, 7, 0, 0, ids, labels);
    EXPECT_EQ(std::count_if(labels.begin(), labels.end(), [](int64_t l) { return l != -100; }), 1);
    // Nothing maskable: nothing masked.
    Block only_specials;
    only_specials.ids = {v.cls_id(), v.unk_id(), v.sep_id()};
    only_specials.word_start = {1, 1, 1};
    engine::mask_block(only_specials, v, cfg, 7, 0, 0, ids, labels);
    EXPECT_EQ(ids, only_specials.ids);
    EXPECT_EQ(labels, (std::vector<int64_t>{-100, -100, -100}));
}

TEST(MaskBlock, WholeWordMaskingMasksEveryPieceOfAChosenWord) {
    const Vocab v = test_vocab(1000);
    // Words of 1, 2 and 3 pieces in turn; a block opening mid-word (flag 0 after [CLS]).
    std::vector<Block> blocks = plain_blocks(v, 1000, 120);
    for (Block& b : blocks) {
        const std::vector<uint8_t> pattern = {0, 1, 1, 0, 1, 0, 0};
        for (size_t t = 1; t + 1 < b.ids.size(); ++t) b.word_start[t] = pattern[(t - 1) % 7];
    }
    DataConfig cfg;
    cfg.whole_word_masking = true;
    long total = 0, chosen = 0;
    std::vector<int64_t> ids, labels;
    for (size_t i = 0; i < blocks.size(); ++i) {
        const Block& b = blocks[i];
        engine::mask_block(b, v, cfg, 99, 3, i, ids, labels);
        // Every word: all pieces labelled or none.
        size_t t = 1;
        while (t + 1 < b.ids.size()) {
            size_t e = t + 1;
            while (e + 1 < b.ids.size() && b.word_start[e] == 0) ++e;
            const bool first = labels[t] != -100;
            for (size_t k = t; k < e; ++k) EXPECT_EQ(labels[k] != -100, first) << i << " " << k;
            t = e;
        }
        for (size_t k = 1; k + 1 < b.ids.size(); ++k) {
            ++total;
            chosen += labels[k] != -100;
        }
    }
    EXPECT_NEAR(double(chosen) / total, 0.15, 0.01);
}

TEST(MaskBlock, DeterministicPerSeedEpochAndBlock) {
    const Vocab v = test_vocab(1000);
    const auto blocks = plain_blocks(v, 2, 100);
    DataConfig cfg;
    std::vector<int64_t> a_ids, a_labels, b_ids, b_labels;
    engine::mask_block(blocks[0], v, cfg, 5, 2, 17, a_ids, a_labels);
    engine::mask_block(blocks[0], v, cfg, 5, 2, 17, b_ids, b_labels);
    EXPECT_EQ(a_ids, b_ids);
    EXPECT_EQ(a_labels, b_labels);

    engine::mask_block(blocks[0], v, cfg, 5, 3, 17, b_ids, b_labels);  // next epoch
    EXPECT_NE(a_labels, b_labels);
    engine::mask_block(blocks[0], v, cfg, 6, 2, 17, b_ids, b_labels);  // other seed
    EXPECT_NE(a_labels, b_labels);
    engine::mask_block(blocks[0], v, cfg, 5, 2, 18, b_ids, b_labels);  // other block index
    EXPECT_NE(a_labels, b_labels);
}

TEST(EpochOrder, IsAPermutationThatChangesWithEpoch) {
    const auto e0 = engine::epoch_order(1000, 11, 0);
    const auto e1 = engine::epoch_order(1000, 11, 1);
    auto sorted = e0;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint64_t> identity(1000);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(sorted, identity);
    sorted = e1;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity);
    EXPECT_NE(e0, e1);
    EXPECT_NE(e0, identity);
    EXPECT_EQ(engine::epoch_order(1000, 11, 0), e0);
    EXPECT_NE(engine::epoch_order(1000, 12, 0), e0);
    EXPECT_TRUE(engine::epoch_order(0, 1, 1).empty());
    EXPECT_EQ(engine::epoch_order(1, 1, 1), (std::vector<uint64_t>{0}));
}

// ---- batches --------------------------------------------------------------------------------

TEST(MlmBatch, PadsToTheLongestBlock) {
    const Vocab v = test_vocab();
    std::vector<Block> blocks = plain_blocks(v, 4, 20);
    blocks[1] = plain_blocks(v, 1, 5)[0];   // 7 tokens
    blocks[3] = plain_blocks(v, 1, 30)[0];  // 32 tokens
    DataConfig cfg;
    const std::vector<uint64_t> indices = {1, 3, 0};
    const engine::MlmBatch batch = engine::make_mlm_batch(blocks, indices, v, cfg, 3, 4);
    ASSERT_EQ(batch.batch_size, 3);
    ASSERT_EQ(batch.seq_len, 32);
    ASSERT_EQ(batch.input_ids.size(), 3u * 32);
    ASSERT_EQ(batch.labels.size(), 3u * 32);
    ASSERT_EQ(batch.attention_mask.size(), 3u * 32);
    std::vector<int64_t> ids, labels;
    for (size_t r = 0; r < indices.size(); ++r) {
        const Block& b = blocks[indices[r]];
        // Rows equal mask_block keyed by the block's own index: independent of the batch.
        engine::mask_block(b, v, cfg, 3, 4, indices[r], ids, labels);
        for (size_t t = 0; t < 32; ++t) {
            const size_t k = r * 32 + t;
            if (t < b.ids.size()) {
                EXPECT_EQ(batch.attention_mask[k], 1);
                EXPECT_EQ(batch.input_ids[k], ids[t]);
                EXPECT_EQ(batch.labels[k], labels[t]);
            } else {
                EXPECT_EQ(batch.attention_mask[k], 0);
                EXPECT_EQ(batch.input_ids[k], v.pad_id());
                EXPECT_EQ(batch.labels[k], -100);
            }
        }
    }
    const engine::MlmBatch empty = engine::make_mlm_batch(blocks, {}, v, cfg, 3, 4);
    EXPECT_EQ(empty.batch_size, 0);
    EXPECT_EQ(empty.seq_len, 0);
    EXPECT_THROW(engine::make_mlm_batch(blocks, {4}, v, cfg, 3, 4), std::out_of_range);
}

}  // namespace
