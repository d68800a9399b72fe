// Tests of the head-type detector (analysis/head_types.h) on hand-made attention maps whose
// type is the answer: one-hot previous/next/sink maps, a +-1 band, a uniform map, a head that
// looks at the other occurrences of its token, and maps just below each threshold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include "analysis/head_types.h"

using analysis::HeadType;
using analysis::HeadTypeAccumulator;
using analysis::HeadTypeScores;

namespace {

constexpr int64_t kN = 14;  // [CLS], 12 words, [SEP]

// Tokens [CLS] a b c d a b c d a b c d [SEP]: every word occurs three times, 4 apart.
std::vector<int64_t> repeating_tokens() {
    std::vector<int64_t> t = {101};
    for (int64_t k = 0; k < kN - 2; ++k) t.push_back(1000 + k % 4);
    t.push_back(102);
    return t;
}

// Tokens with no repeat among the words.
std::vector<int64_t> distinct_tokens() {
    std::vector<int64_t> t = {101};
    for (int64_t k = 0; k < kN - 2; ++k) t.push_back(2000 + k);
    t.push_back(102);
    return t;
}

// An n x n map whose row i is row(i) (a function filling n weights).
std::vector<double> make_map(const std::function<void(int64_t, std::vector<double>&)>& row) {
    std::vector<double> map(kN * kN, 0.0);
    for (int64_t i = 0; i < kN; ++i) {
        std::vector<double> r(kN, 0.0);
        row(i, r);
        for (int64_t j = 0; j < kN; ++j) map[i * kN + j] = r[j];
    }
    return map;
}

HeadTypeScores scores_of(const std::vector<double>& map, const std::vector<int64_t>& tokens,
                         int copies = 1) {
    HeadTypeAccumulator acc;
    for (int k = 0; k < copies; ++k) acc.add(map, tokens);
    return acc.scores();
}

HeadType type_of(const std::vector<double>& map,
                 const std::vector<int64_t>& tokens = distinct_tokens()) {
    return analysis::classify_head_type(scores_of(map, tokens));
}

// One-hot rows on the key `target(i)`, clamped into the window.
std::vector<double> one_hot(const std::function<int64_t(int64_t)>& target) {
    return make_map([&](int64_t i, std::vector<double>& r) {
        r[std::min<int64_t>(kN - 1, std::max<int64_t>(0, target(i)))] = 1.0;
    });
}

}  // namespace

TEST(HeadTypes, OneHotMapsGetTheirType) {
    EXPECT_EQ(type_of(one_hot([](int64_t i) { return i - 1; })), HeadType::kPrevious);
    EXPECT_EQ(type_of(one_hot([](int64_t i) { return i + 1; })), HeadType::kNext);
    EXPECT_EQ(type_of(one_hot([](int64_t) { return 0; })), HeadType::kClsSink);
    EXPECT_EQ(type_of(one_hot([](int64_t) { return kN - 1; })), HeadType::kSepSink);
    // Attending to itself is the narrowest local window.
    EXPECT_EQ(type_of(one_hot([](int64_t i) { return i; })), HeadType::kLocal);
}

TEST(HeadTypes, PreviousTokenScoresAreExact) {
    const HeadTypeScores s = scores_of(one_hot([](int64_t i) { return i - 1; }), distinct_tokens());
    EXPECT_EQ(s.rows, kN - 2);
    EXPECT_DOUBLE_EQ(s.previous, 1.0);  // words 2..12 look at word i - 1
    EXPECT_DOUBLE_EQ(s.next, 0.0);
    EXPECT_DOUBLE_EQ(s.cls_sink, 1.0 / (kN - 2));  // word 1's previous token is [CLS]
    EXPECT_DOUBLE_EQ(s.local, (kN - 3.0) / (kN - 2));
    EXPECT_DOUBLE_EQ(s.entropy, 0.0);
    EXPECT_TRUE(std::isnan(s.duplicate));  // no word recurs
    EXPECT_EQ(s.duplicate_rows, 0);
}

TEST(HeadTypes, UniformMapIsBroadWithChanceScores) {
    const auto uniform = make_map([](int64_t, std::vector<double>& r) {
        for (double& a : r) a = 1.0 / kN;
    });
    const HeadTypeScores s = scores_of(uniform, repeating_tokens());
    EXPECT_NEAR(s.entropy, 1.0, 1e-12);
    EXPECT_NEAR(s.cls_sink, 1.0 / kN, 1e-12);
    EXPECT_NEAR(s.previous, 1.0 / kN, 1e-12);
    // Two other occurrences of every word: uniform attention is exactly the chance level.
    EXPECT_NEAR(s.duplicate, 2.0 / kN, 1e-12);
    EXPECT_NEAR(s.duplicate_chance, 2.0 / kN, 1e-12);
    EXPECT_EQ(analysis::classify_head_type(s), HeadType::kBroad);
}

TEST(HeadTypes, BandIsLocalNotAdjacent) {
    // Each word spreads over itself and both neighbours (a +-1 band): previous = next = 1/3.
    const auto band = make_map([](int64_t i, std::vector<double>& r) {
        for (int64_t j = i - 1; j <= i + 1; ++j)
            if (j >= 0 && j < kN) r[j] = 1.0 / 3;
    });
    const HeadTypeScores s = scores_of(band, distinct_tokens());
    EXPECT_NEAR(s.previous, 1.0 / 3, 1e-12);
    EXPECT_NEAR(s.next, 1.0 / 3, 1e-12);
    EXPECT_EQ(analysis::classify_head_type(s), HeadType::kLocal);
}

TEST(HeadTypes, DuplicateTokenHeadAttendsToOtherOccurrences) {
    const auto tokens = repeating_tokens();
    // Each word splits its attention over the other two occurrences of its token (4 and 8
    // words away: nothing local).
    const auto dup = make_map([&](int64_t i, std::vector<double>& r) {
        if (i == 0 || i == kN - 1) {
            r[i] = 1.0;
            return;
        }
        for (int64_t j = 1; j < kN - 1; ++j)
            if (j != i && tokens[j] == tokens[i]) r[j] = 0.5;
    });
    const HeadTypeScores s = scores_of(dup, tokens);
    EXPECT_EQ(s.duplicate_rows, kN - 2);
    EXPECT_DOUBLE_EQ(s.duplicate, 1.0);
    // First occurrences look only later (0), middle ones half back, last ones all back (1).
    EXPECT_DOUBLE_EQ(s.duplicate_earlier, 0.5);
    EXPECT_DOUBLE_EQ(s.local, 0.0);
    EXPECT_EQ(analysis::classify_head_type(s), HeadType::kDuplicate);
    // With a minimum above its 12 rows the same map is not duplicate-token (nothing local,
    // entropy ln 2 / ln 14): mixed.
    analysis::HeadTypeThresholds strict;
    strict.duplicate_min_rows = 13;
    EXPECT_EQ(analysis::classify_head_type(s, strict), HeadType::kMixed);
}

TEST(HeadTypes, JustBelowEachThresholdFallsThrough) {
    // 0.49 on the previous token, 0.26 on [CLS], 0.25 on [SEP]: no sink, not previous, local
    // 0.49, entropy ~0.4: mixed, until the adjacency threshold drops below 0.49.
    const auto weak = make_map([](int64_t i, std::vector<double>& r) {
        r[std::max<int64_t>(0, i - 1)] += 0.49, r[0] += 0.26, r[kN - 1] += 0.25;
    });
    const HeadTypeScores s = scores_of(weak, distinct_tokens());
    EXPECT_DOUBLE_EQ(s.previous, 0.49);
    EXPECT_EQ(analysis::classify_head_type(s), HeadType::kMixed);
    analysis::HeadTypeThresholds looser;
    looser.adjacent_min = 0.45;
    EXPECT_EQ(analysis::classify_head_type(s, looser), HeadType::kPrevious);

    // 0.4 on [CLS], 0.4 on [SEP], 0.2 on itself: no rule holds.
    const auto split = make_map(
        [](int64_t i, std::vector<double>& r) { r[0] += 0.4, r[kN - 1] += 0.4, r[i] += 0.2; });
    EXPECT_EQ(type_of(split), HeadType::kMixed);
}

TEST(HeadTypes, SinksComeBeforeAdjacency) {
    // Every word: 0.6 on [CLS] and 0.4 on its previous token: cls_sink, though previous is 0.4+.
    const auto map = make_map([](int64_t i, std::vector<double>& r) {
        r[0] += 0.6;
        r[std::max<int64_t>(0, i - 1)] += 0.4;
    });
    EXPECT_EQ(type_of(map), HeadType::kClsSink);
}

TEST(HeadTypes, PoolingIsPerRowAndFloatMapsAgree) {
    const auto prev = one_hot([](int64_t i) { return i - 1; });
    const auto next = one_hot([](int64_t i) { return i + 1; });
    HeadTypeAccumulator acc;
    acc.add(prev, distinct_tokens());
    std::vector<float> as_float(next.begin(), next.end());
    acc.add(as_float.data(), kN, distinct_tokens().data());
    const HeadTypeScores s = acc.scores();
    EXPECT_EQ(s.rows, 2 * (kN - 2));
    EXPECT_DOUBLE_EQ(s.previous, 0.5);
    EXPECT_DOUBLE_EQ(s.next, 0.5);
}

TEST(HeadTypes, NamesRuleAndBadInput) {
    EXPECT_STREQ(analysis::head_type_name(HeadType::kSepSink), "sep_sink");
    EXPECT_EQ(analysis::head_types().size(), 8u);
    EXPECT_EQ(analysis::head_types().back(), HeadType::kMixed);
    const std::string rule = analysis::describe(analysis::HeadTypeThresholds{});
    EXPECT_NE(rule.find(">= 0.5"), std::string::npos) << rule;
    EXPECT_NE(rule.find("+-2"), std::string::npos) << rule;
    HeadTypeAccumulator acc;
    EXPECT_THROW(acc.add(std::vector<double>(5, 0.0), {1, 2, 3}), std::invalid_argument);
    EXPECT_THROW(acc.add(std::vector<double>(4, 0.25), {1, 2}), std::invalid_argument);
    EXPECT_TRUE(std::isnan(acc.scores().previous));
    EXPECT_EQ(analysis::classify_head_type(acc.scores()), HeadType::kMixed);
}
