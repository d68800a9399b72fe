// The statistics behind intervals and verdicts (analysis/evidence.h): Student's t against
// table values, the paired t-test and sign test against hand computations, percentile
// intervals, metrics on resampled sets against score_task, chance levels, and the bootstrap
// interval of an accuracy against its closed form (normal approximation of a binomial).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "analysis/evidence.h"
#include "analysis/metrics.h"

using namespace analysis;

TEST(StudentT, CdfAndQuantilesMatchTables) {
    EXPECT_NEAR(student_t_cdf(0.0, 3), 0.5, 1e-12);
    EXPECT_NEAR(student_t_cdf(2.0, 5), 0.94903026, 1e-7);  // scipy.stats.t.cdf(2, 5)
    EXPECT_NEAR(student_t_cdf(-1.0, 1), 0.25, 1e-10);      // Cauchy: 1/2 + atan(t)/pi
    EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062047, 1e-5);
    EXPECT_NEAR(student_t_quantile(0.975, 2), 4.30265273, 1e-6);
    EXPECT_NEAR(student_t_quantile(0.975, 10), 2.22813885, 1e-6);
    EXPECT_NEAR(student_t_quantile(0.975, 1e6), 1.959964, 1e-4);  // the normal limit
    EXPECT_THROW(student_t_quantile(1.0, 3), std::invalid_argument);
}

TEST(PairedTTest, MatchesAHandComputation) {
    // d = {-1, -0.9, -1.1}: mean -1, sd 0.1, t = -1 / (0.1 / sqrt 3) = -17.32, df 2.
    const auto t = paired_t_test({-1.0, -0.9, -1.1});
    ASSERT_TRUE(t.valid);
    EXPECT_NEAR(t.mean, -1.0, 1e-12);
    EXPECT_NEAR(t.sd, 0.1, 1e-12);
    EXPECT_NEAR(t.t, -17.3205081, 1e-6);
    EXPECT_NEAR(t.p, 2 * student_t_cdf(-17.3205081, 2), 1e-9);
    EXPECT_LT(t.p, 0.01);
    EXPECT_NEAR(t.ci_hi, -1.0 + 4.30265273 * 0.1 / std::sqrt(3.0), 1e-6);
    // One pair: no test; identical shifts: p = 0; no change: p = 1.
    EXPECT_FALSE(paired_t_test({-1.0}).valid);
    EXPECT_EQ(paired_t_test({-1.0}).p, 1.0);
    EXPECT_EQ(paired_t_test({0.5, 0.5}).p, 0.0);
    EXPECT_EQ(paired_t_test({0.0, 0.0}).p, 1.0);
    // Mixed signs: far from significant.
    EXPECT_GT(paired_t_test({-0.2, 0.2}).p, 0.5);
}

TEST(SignTest, ExactBinomialTails) {
    EXPECT_NEAR(sign_test_p(8, 0), 2.0 / 256, 1e-12);
    EXPECT_NEAR(sign_test_p(0, 8), 2.0 / 256, 1e-12);
    EXPECT_NEAR(sign_test_p(4, 1), 2 * 6.0 / 32, 1e-12);  // P(X <= 1) = 6/32
    EXPECT_EQ(sign_test_p(3, 3), 1.0);
    EXPECT_EQ(sign_test_p(0, 0), 1.0);
}

// Holm (1979), by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06,
// 0.04, made non-decreasing (0.04 -> 0.06), back in the input's order; capped at 1.
TEST(HolmAdjust, StepsDownAndStaysMonotone) {
    const auto adjusted = holm_adjust({0.01, 0.04, 0.03, 0.005});
    ASSERT_EQ(adjusted.size(), 4u);
    EXPECT_DOUBLE_EQ(adjusted[0], 0.03);
    EXPECT_DOUBLE_EQ(adjusted[1], 0.06);
    EXPECT_DOUBLE_EQ(adjusted[2], 0.06);
    EXPECT_DOUBLE_EQ(adjusted[3], 0.02);
    EXPECT_DOUBLE_EQ(holm_adjust({0.4, 0.5})[1], 0.8);  // 0.5 * 1, raised to 0.4 * 2
    EXPECT_DOUBLE_EQ(holm_adjust({0.6, 0.7})[0], 1.0);  // 0.6 * 2, capped
    EXPECT_TRUE(holm_adjust({}).empty());
}

// z = estimate / sd: an estimate 1.959964 standard deviations from 0 has p = 0.05.
TEST(BootstrapNormalP, IsTheNormalTailOfTheStandardisedEstimate) {
    std::vector<double> replicates;
    for (int i = 0; i < 1000; ++i) replicates.push_back(i % 2 == 0 ? 1.0 : -1.0);
    double mean = 0, ss = 0;
    for (double r : replicates) mean += r / 1000.0;
    for (double r : replicates) ss += (r - mean) * (r - mean);
    const double sd = std::sqrt(ss / 999.0);
    EXPECT_NEAR(bootstrap_normal_p(1.959964 * sd, replicates), 0.05, 1e-6);
    EXPECT_NEAR(bootstrap_normal_p(-1.959964 * sd, replicates), 0.05, 1e-6);
    EXPECT_DOUBLE_EQ(bootstrap_normal_p(0.0, replicates), 1.0);
    EXPECT_DOUBLE_EQ(bootstrap_normal_p(0.5, {2.0, 2.0}), 0.0);  // no spread, not 0
    EXPECT_DOUBLE_EQ(bootstrap_normal_p(0.0, {2.0, 2.0}), 1.0);
}

// Four ranked items, 0 apart from 2 and 3, 1 apart from 3: the lines are {0,1}, {1,2}, {2,3}.
// Nothing apart: one group; everything apart: one group each.
TEST(IndistinguishableRuns, AreTheMaximalRunsWithNoPairApart) {
    const auto apart = [](int i, int j) { return (i == 0 && j >= 2) || (i == 1 && j == 3); };
    const auto runs = indistinguishable_runs(4, apart);
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[0], std::make_pair(0, 1));
    EXPECT_EQ(runs[1], std::make_pair(1, 2));
    EXPECT_EQ(runs[2], std::make_pair(2, 3));
    EXPECT_EQ(indistinguishable_runs(3, [](int, int) { return false; }).size(), 1u);
    EXPECT_EQ(indistinguishable_runs(3, [](int, int) { return true; }).size(), 3u);
    EXPECT_TRUE(indistinguishable_runs(0, [](int, int) { return true; }).empty());
}

TEST(PercentileInterval, InterpolatesOrderStatistics) {
    std::vector<double> v;
    for (int i = 0; i <= 100; ++i) v.push_back(i);
    const auto ci = percentile_interval(v, 0.95);
    EXPECT_NEAR(ci.lo, 2.5, 1e-12);
    EXPECT_NEAR(ci.hi, 97.5, 1e-12);
    EXPECT_THROW(percentile_interval({}), std::invalid_argument);
}

TEST(MetricOn, AgreesWithScoreTaskAndHonoursTheIndex) {
    std::mt19937 rng(3);
    std::vector<double> gold, pred, x, y;
    for (int i = 0; i < 200; ++i) {
        gold.push_back(rng() % 2);
        pred.push_back(rng() % 3 == 0 ? 1 - gold.back() : gold.back());
        x.push_back(std::uniform_real_distribution<double>(0, 5)(rng));
        y.push_back(x.back() + std::normal_distribution<double>(0, 1)(rng));
    }
    const auto cls = score_task(MetricKind::kF1Accuracy, pred, gold);
    EXPECT_NEAR(metric_on("accuracy", gold, pred), cls.metrics.at("accuracy"), 1e-9);
    EXPECT_NEAR(metric_on("f1", gold, pred), cls.metrics.at("f1"), 1e-9);
    EXPECT_NEAR(metric_on("mcc", gold, pred),
                score_task(MetricKind::kMcc, pred, gold).metrics.at("mcc"), 1e-9);
    const auto reg = score_task(MetricKind::kPearsonSpearman, y, x);
    EXPECT_NEAR(metric_on("pearson", x, y), reg.metrics.at("pearson"), 1e-9);
    EXPECT_NEAR(metric_on("spearman", x, y), reg.metrics.at("spearman"), 1e-9);
    // Index {0, 0, 1}: example 0 counted twice.
    const std::vector<double> g = {1, 0, 1}, p = {1, 1, 0};
    const std::vector<uint32_t> idx = {0, 0, 1};
    EXPECT_NEAR(metric_on("accuracy", g, p, &idx), 200.0 / 3, 1e-9);
    EXPECT_THROW(metric_on("bleu", g, p), std::invalid_argument);
    EXPECT_THROW(metric_on("accuracy", g, {1.0}), std::invalid_argument);
}

TEST(ChanceLevel, MajorityAlwaysPositiveAndZero) {
    const std::vector<double> gold = {1, 1, 1, 0};  // 75% ones
    EXPECT_DOUBLE_EQ(chance_level("accuracy", gold), 75.0);
    EXPECT_NEAR(chance_level("f1", gold), 100 * 2 * 0.75 / 1.75, 1e-12);
    EXPECT_EQ(chance_level("mcc", gold), 0.0);
    EXPECT_EQ(chance_level("pearson", gold), 0.0);
    EXPECT_THROW(chance_level("bleu", gold), std::invalid_argument);
    // A constant prediction scores the chance level exactly.
    const std::vector<double> ones(4, 1.0);
    EXPECT_DOUBLE_EQ(metric_on("accuracy", gold, ones), chance_level("accuracy", gold));
    EXPECT_NEAR(metric_on("f1", gold, ones), chance_level("f1", gold), 1e-12);
}

TEST(Bootstrap, OneRunMatchesTheBinomialClosedForm) {
    // 700 of 1000 right: SE = sqrt(0.7 * 0.3 / 1000) = 1.449 points; 95%: 70 -+ 2.84.
    std::vector<double> gold, pred;
    for (int i = 0; i < 1000; ++i) {
        gold.push_back(i % 2);
        pred.push_back(i < 700 ? gold.back() : 1 - gold.back());
    }
    BootstrapOptions o;
    o.resamples = 2000;
    const auto reps = bootstrap_median_metric("accuracy", gold, {{0, &pred}}, o);
    ASSERT_EQ(reps.size(), 2000u);
    const auto ci = percentile_interval(reps);
    const double half = 1.96 * std::sqrt(0.7 * 0.3 / 1000) * 100;
    EXPECT_NEAR(ci.lo, 70 - half, 0.4);
    EXPECT_NEAR(ci.hi, 70 + half, 0.4);
    // Deterministic in the seeds; the example seed alone fixes the draws of one run.
    EXPECT_EQ(reps, bootstrap_median_metric("accuracy", gold, {{0, &pred}}, o));
}

TEST(Bootstrap, SeedsWidenTheIntervalAndPairedDrawsCancel) {
    std::vector<double> gold, a, b;
    for (int i = 0; i < 400; ++i) {
        gold.push_back(i % 2);
        a.push_back(i < 240 ? gold.back() : 1 - gold.back());  // 60%
        b.push_back(i < 320 ? gold.back() : 1 - gold.back());  // 80%
    }
    const auto one = percentile_interval(bootstrap_median_metric("accuracy", gold, {{0, &a}}));
    // Two pretraining runs that disagree by 20 points: the seed spread shows in the interval.
    const auto two =
        percentile_interval(bootstrap_median_metric("accuracy", gold, {{0, &a}, {1, &b}}));
    EXPECT_GT(two.hi - two.lo, 2 * (one.hi - one.lo));
    // The same run bootstrapped twice with one example seed: every replicate difference is 0.
    const auto r1 = bootstrap_median_metric("accuracy", gold, {{0, &a}});
    const auto r2 = bootstrap_median_metric("accuracy", gold, {{5, &a}});
    for (size_t i = 0; i < r1.size(); ++i) EXPECT_DOUBLE_EQ(r1[i], r2[i]);
    EXPECT_THROW(bootstrap_median_metric("accuracy", gold, {}), std::invalid_argument);
    const std::vector<double> short_pred = {1.0};
    EXPECT_THROW(bootstrap_median_metric("accuracy", gold, {{0, &short_pred}}),
                 std::invalid_argument);
}
