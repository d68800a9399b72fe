// The floor under validation-loss curves (engine::corpus_floor): the unigram and bigram
// cross-entropies against values computed by hand, the floor file round trip and its errors,
// and the warning for a run that ends on the floor.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/corpus.h"
#include "engine/errors.h"
#include "support/test_support.h"

using namespace engine;

namespace {

// [PAD] [UNK] [CLS] [SEP] [MASK] a b c: ids 5, 6, 7 are the maskable tokens.
Vocab abc_vocab() {
    return Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"});
}

Block block(std::vector<int64_t> ids) {
    Block b;
    b.ids = std::move(ids);
    b.word_start.assign(b.ids.size(), 1);
    return b;
}

}  // namespace

TEST(CorpusFloor, UnigramAndBigramMatchHandComputedCrossEntropies) {
    const Vocab v = abc_vocab();
    BlockDataset data;
    // train: [CLS] a a b [SEP], [CLS] a c [SEP] -> counts a 3, b 1, c 1 (5 tokens)
    data.train = {block({2, 5, 5, 6, 3}), block({2, 5, 7, 3})};
    // validation: [CLS] a b [SEP]
    data.validation = {block({2, 5, 6, 3})};
    const CorpusFloor f = corpus_floor(data, v);
    EXPECT_EQ(f.train_tokens, 5);
    EXPECT_EQ(f.validation_tokens, 2);
    // add-1/2 over 3 types: denominator 5 + 1.5 = 6.5; p(a) = 3.5/6.5, p(b) = 1.5/6.5
    const double pa = 3.5 / 6.5, pb = 1.5 / 6.5;
    EXPECT_NEAR(f.unigram_nats, -(std::log(pa) + std::log(pb)) / 2, 1e-12);
    // Witten-Bell. Context [CLS]: c = 2 (a twice), T = 1 type -> p(a|[CLS]) = (2 + pa) / 3.
    // Context a: successors a, b, c (one each), c(a) = 3, T = 3 -> p(b|a) = (1 + 3 pb) / 6.
    const double pa_cls = (2 + 1 * pa) / (2 + 1), pb_a = (1 + 3 * pb) / (3 + 3);
    EXPECT_NEAR(f.bigram_nats, -(std::log(pa_cls) + std::log(pb_a)) / 2, 1e-12);
}

TEST(CorpusFloor, UniformTokensGiveLogOfTheTypeCount) {
    const Vocab v = abc_vocab();
    BlockDataset data;
    std::vector<int64_t> ids = {2};
    for (int i = 0; i < 300; ++i) ids.push_back(5 + i % 3);
    ids.push_back(3);
    data.train = {block(ids)};
    data.validation = {block({2, 5, 6, 7, 3})};
    const CorpusFloor f = corpus_floor(data, v);
    EXPECT_NEAR(f.unigram_nats, std::log(3.0), 1e-12);  // 100.5 / 301.5 each
    // The training text is a strict cycle a b c. Witten-Bell: after [CLS] (seen once, one
    // successor) p(a) = (1 + 1/3) / 2; after a (100 times, always b) p(b) = (100 + 1/3) / 101;
    // c after b likewise.
    const double expected =
        -(std::log((1 + 1.0 / 3) / 2) + 2 * std::log((100 + 1.0 / 3) / 101)) / 3;
    EXPECT_NEAR(f.bigram_nats, expected, 1e-12);
    EXPECT_LT(f.bigram_nats, f.unigram_nats / 5);
}

TEST(CorpusFloor, NoValidationBlocksGiveNoFloorAndNoWarning) {
    BlockDataset data;
    data.train = {block({2, 5, 3})};
    const CorpusFloor f = corpus_floor(data, abc_vocab());
    EXPECT_EQ(f.validation_tokens, 0);
    EXPECT_EQ(floor_warning(10.0, f), "");
}

TEST(CorpusFloor, WarningOnlyWhenTheLossIsNotClearlyBelowTheFloor) {
    CorpusFloor f;
    f.unigram_nats = 6.9;
    f.validation_tokens = 100;
    EXPECT_NE(floor_warning(6.95, f).find("word frequencies only"), std::string::npos);
    EXPECT_NE(floor_warning(6.85, f).find("6.900"), std::string::npos);  // within 0.1 below
    EXPECT_EQ(floor_warning(6.7, f), "");
    EXPECT_EQ(floor_warning(std::nan(""), f), "");
}

TEST(CorpusFloor, FileRoundTripAndMalformedLinesNameTheLine) {
    const test_support::TempDir temp("tupe_floor_test");
    const auto& dir = temp.path();
    CorpusFloor f;
    f.unigram_nats = 6.123456789;
    f.bigram_nats = 5.5;
    f.validation_tokens = 42;
    f.train_tokens = 4200;
    const std::string path = floor_path(dir.string());
    write_floor(path, f);
    CorpusFloor g;
    ASSERT_TRUE(read_floor(path, g));
    EXPECT_NEAR(g.unigram_nats, f.unigram_nats, 1e-9);
    EXPECT_EQ(g.validation_tokens, 42);
    EXPECT_FALSE(read_floor((dir / "absent.txt").string(), g));
    std::ofstream(path) << "# comment\nunigram_nats = 6.1\nbigram_nats 5\n";
    try {
        read_floor(path, g);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(e.line(), 3);
        EXPECT_NE(std::string(e.what()).find("floor.txt"), std::string::npos);
    }
}
