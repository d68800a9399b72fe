// The curves view's numbers against hand-computed values: TensorBoard's debiased EMA, the
// min/max-preserving decimation, seed grouping (mean, sample std, n) and steps-to-reach.
#include <gtest/gtest.h>

#include <cmath>

#include "core/curve_math.h"

using namespace app;

TEST(EmaDebiased, MatchesHandValues) {
    // w = 0.5: last = 0.5*0 + 0.5*1 = 0.5, debias 1-0.5 = 0.5 -> 1.0
    //          last = 0.25 + 0.5*3 = 1.75, debias 0.75 -> 2.3333
    //          last = 0.875 + 0.5*2 = 1.875, debias 0.875 -> 2.142857
    const auto s = emaDebiased({1.0, 3.0, 2.0}, 0.5);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_DOUBLE_EQ(s[0], 1.0);
    EXPECT_NEAR(s[1], 1.75 / 0.75, 1e-12);
    EXPECT_NEAR(s[2], 1.875 / 0.875, 1e-12);
}

TEST(EmaDebiased, ZeroWeightIsIdentityAndNonFinitePassesThrough) {
    const std::vector<double> y = {4.0, 2.0, 7.0};
    EXPECT_EQ(emaDebiased(y, 0.0), y);
    // The NaN stays NaN and does not move the average: the third value sees n = 2.
    const auto s = emaDebiased({1.0, NAN, 3.0}, 0.5);
    EXPECT_DOUBLE_EQ(s[0], 1.0);
    EXPECT_TRUE(std::isnan(s[1]));
    EXPECT_NEAR(s[2], (0.25 + 1.5) / 0.75, 1e-12);
}

TEST(EmaDebiased, ConstantCurveUnchanged) {
    const std::vector<double> y(5, 2.5);
    EXPECT_EQ(emaDebiased(y, 0.9), y);
}

TEST(DecimateMinMax, KeepsExtremesAndEnds) {
    std::vector<double> y(100000);
    for (size_t i = 0; i < y.size(); ++i) y[i] = std::sin(double(i) * 0.001);
    y[12345] = 50.0;   // a spike
    y[77777] = -40.0;  // a dip
    const auto keep = decimateMinMax(y, 500);
    EXPECT_LE(keep.size(), 2000u);
    EXPECT_GE(keep.size(), 500u);
    EXPECT_EQ(keep.front(), 0u);
    EXPECT_EQ(keep.back(), y.size() - 1);
    EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
    EXPECT_NE(std::find(keep.begin(), keep.end(), 12345u), keep.end());
    EXPECT_NE(std::find(keep.begin(), keep.end(), 77777u), keep.end());
    // The decimated curve has the same global min and max.
    double mn = INFINITY, mx = -INFINITY;
    for (size_t i : keep) mn = std::min(mn, y[i]), mx = std::max(mx, y[i]);
    EXPECT_EQ(mx, 50.0);
    EXPECT_EQ(mn, -40.0);
}

TEST(DecimateMinMax, ShortCurvesKeepEveryPoint) {
    const auto keep = decimateMinMax({3, 1, 2}, 10);
    EXPECT_EQ(keep, (std::vector<size_t>{0, 1, 2}));
}

TEST(SeedGroup, KeyDropsOnlyTheSeed) {
    EXPECT_EQ(seedGroupKey("tupe-a/step180/syn-cola/lr0.001/seed2"),
              "tupe-a/step180/syn-cola/lr0.001");
    EXPECT_EQ(seedGroupKey("bert-a-seed3"), "bert-a");
    EXPECT_EQ(seedGroupKey("tupe-a@seed2"), "tupe-a");  // pretraining seeds
    EXPECT_EQ(seedGroupKey("tupe-a@seed2/step3000/syn-rte/lr0.001/seed1"),
              "tupe-a/step3000/syn-rte/lr0.001");
    EXPECT_EQ(seedGroupKey("tupe-r"), "tupe-r");
}

TEST(SeedGroup, MeanStdAndCount) {
    std::vector<Curve> curves = {
        {"a/seed1", "a", {1, 2, 3}, {1.0, 2.0, 3.0}},
        {"a/seed2", "a", {1, 2}, {3.0, 4.0}},
        {"b/seed1", "b", {1}, {10.0}},
    };
    const auto groups = groupBySeed(curves);
    ASSERT_EQ(groups.size(), 2u);
    const SeedGroup& a = groups[0];
    EXPECT_EQ(a.key, "a");
    EXPECT_EQ(a.members, (std::vector<std::string>{"a/seed1", "a/seed2"}));
    EXPECT_EQ(a.x, (std::vector<double>{1, 2, 3}));
    EXPECT_EQ(a.n, (std::vector<int>{2, 2, 1}));
    EXPECT_DOUBLE_EQ(a.mean[0], 2.0);
    EXPECT_DOUBLE_EQ(a.mean[1], 3.0);
    EXPECT_DOUBLE_EQ(a.mean[2], 3.0);
    EXPECT_NEAR(a.stddev[0], std::sqrt(2.0), 1e-12);  // sample std of {1, 3}
    EXPECT_DOUBLE_EQ(a.stddev[2], 0.0);               // n = 1
    EXPECT_EQ(groups[1].n, (std::vector<int>{1}));
}

TEST(StepsToReach, FirstCrossingInBothDirections) {
    const std::vector<double> x = {100, 200, 300, 400};
    EXPECT_EQ(firstXReaching(x, {5, 4, 3, 2}, 3.5, true), 300);
    EXPECT_EQ(firstXReaching(x, {0.1, 0.5, 0.7, 0.9}, 0.7, false), 300);
    EXPECT_LT(firstXReaching(x, {5, 4, 3, 2}, 1.0, true), 0);
    EXPECT_TRUE(lowerIsBetter("train/loss"));
    EXPECT_FALSE(lowerIsBetter("dev/accuracy"));
}

TEST(CurveMath, ReachTellsAKeptCrossingFromOneTheCurveLeaves) {
    const std::vector<double> x = {0, 10, 20, 30, 40};
    // Reaches 5 at 20 and stays.
    Reach kept = reachOf(x, {8, 6, 5, 4.8, 4.9}, 5.0, true);
    EXPECT_EQ(kept.first, 20);
    EXPECT_TRUE(kept.kept());
    // Reaches it at 10, back above at 20: the crossing is not kept.
    Reach left = reachOf(x, {8, 4.9, 5.2, 4.8, 4.7}, 5.0, true);
    EXPECT_EQ(left.first, 10);
    EXPECT_EQ(left.leftAgain, 20);
    EXPECT_FALSE(left.kept());
    // Higher is better: reaching 0.8 accuracy.
    EXPECT_EQ(reachOf(x, {0.5, 0.7, 0.85, 0.9, 0.95}, 0.8, false).first, 20);
    EXPECT_FALSE(reachOf(x, {8, 7, 6, 5.5, 5.1}, 5.0, true).reached());
    // A NaN point is neither side.
    EXPECT_TRUE(reachOf(x, {8, 4.9, NAN, 4.8, 4.7}, 5.0, true).kept());
}
