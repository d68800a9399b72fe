// The floor under validation-loss curves (engine::corpus_floor): the unigram and bigram
// cross-entropies against values computed by hand, the context-free floor against a brute-force
// Bayes computation, the floor file round trip and its errors,
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

TEST(CorpusFloor, ContextFreeFloorIsTheBayesLossOfSeeingOnlyTheScoredToken) {
    // Brute force, independent of the closed form: every input a scored target t can show
    // under the 80/10/10 rule ([MASK]; t kept; each maskable x as the random replacement),
    // the posterior over targets by Bayes' rule from the joint table, its expected loss.
    const Vocab v = abc_vocab();
    BlockDataset data;
    data.train = {block({2, 5, 5, 5, 5, 6, 6, 7, 3})};  // a 4, b 2, c 1
    data.validation = {block({2, 5, 6, 7, 5, 3})};
    const CorpusFloor f = corpus_floor(data, v);
    const double den = 7 + 1.5;
    const std::vector<double> q = {4.5 / den, 2.5 / den, 1.5 / den};  // a, b, c (add-1/2)
    const int n = 3;
    // joint[x][t]: P(input x, target t) over the visible inputs (kept or replaced).
    auto posterior = [&](int x, int t) {
        double num = 0, z = 0;
        for (int u = 0; u < n; ++u) {
            const double joint = 0.1 * q[u] * (u == x) + 0.1 * q[u] / n;
            z += joint;
            if (u == t) num = joint;
        }
        return num / z;
    };
    double total = 0;
    for (int t : {0, 1, 2, 0}) {
        double loss = 0.8 * -std::log(q[t]) + 0.1 * -std::log(posterior(t, t));
        for (int x = 0; x < n; ++x) loss += 0.1 / n * -std::log(posterior(x, t));
        total += loss;
    }
    EXPECT_NEAR(f.context_free_nats, total / 4, 1e-12);
    EXPECT_LT(f.context_free_nats, f.unigram_nats);  // copying the visible tokens pays
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
    // With the context-free floor known, it is the level (the lower one).
    f.context_free_nats = 6.4;
    EXPECT_NE(floor_warning(6.35, f).find("context-free floor 6.400"), std::string::npos);
    EXPECT_NE(floor_warning(6.85, f).find("unigram floor 6.900"), std::string::npos);
    EXPECT_EQ(floor_warning(6.25, f), "");
}

TEST(CorpusFloor, FileRoundTripAndMalformedLinesNameTheLine) {
    const test_support::TempDir temp("tupe_floor_test");
    const auto& dir = temp.path();
    CorpusFloor f;
    f.unigram_nats = 6.123456789;
    f.bigram_nats = 5.5;
    f.context_free_nats = 6.25;
    f.validation_tokens = 42;
    f.train_tokens = 4200;
    const std::string path = floor_path(dir.string());
    write_floor(path, f);
    CorpusFloor g;
    ASSERT_TRUE(read_floor(path, g));
    EXPECT_NEAR(g.unigram_nats, f.unigram_nats, 1e-9);
    EXPECT_NEAR(g.context_free_nats, 6.25, 1e-12);
    EXPECT_EQ(g.validation_tokens, 42);
    // A file written before the context-free floor existed reads with it at 0 (unknown).
    std::ofstream(path) << "unigram_nats = 6.1\nbigram_nats = 5\n";
    CorpusFloor old;
    ASSERT_TRUE(read_floor(path, old));
    EXPECT_EQ(old.context_free_nats, 0.0);
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
