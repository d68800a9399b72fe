// Tests of the GLUE metrics (analysis/metrics.h): every metric against values worked out by hand
// in the comments, the sklearn/SciPy edge cases (ties, constant series, zero denominators), task
// names and per-task scores, both averages on the TUPE paper's Table 1 BERT-A row, and reading
// and scoring GLUE submission files, including errors that name the file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/submission.h"
#include "engine/errors.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using analysis::MetricKind;
using analysis::TaskScores;

namespace {

/// Runs `body` expecting std::invalid_argument whose message contains `what`.
void expect_invalid(const std::function<void()>& body, const std::string& what) {
    try {
        body();
        ADD_FAILURE() << "expected std::invalid_argument containing '" << what << "'";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

/// Runs `body` expecting engine::InputError at `line` (0: none) whose message contains `what`.
void expect_line_error(const std::function<void()>& body, long line, const std::string& what) {
    try {
        body();
        ADD_FAILURE() << "expected engine::InputError containing '" << what << "'";
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.line(), line) << e.what();
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

/// The BERT-A row of the TUPE paper's Table 1 (dev, primary metrics); average 82.96.
std::map<std::string, double> bert_a_row() {
    return {{"MNLI-m", 84.93}, {"MNLI-mm", 84.91}, {"QNLI", 91.34},
            {"QQP", 91.04},    {"SST-2", 92.88},   {"CoLA", 55.19},
            {"MRPC", 88.29},   {"RTE", 68.61},     {"STS-B", 89.43}};
}

/// A fresh directory per test (tupe_metrics_<test>_<random>), removed afterwards; write(name,
/// bytes) returns the file's path.
class SubmissionTest : public test_support::TempDirTest {
  protected:
    SubmissionTest()
        : TempDirTest("tupe_metrics_" + test_support::test_name() + "_" +
                      test_support::random_tag()) {}
};

}  // namespace

// Shared example: pred {1,0,1,1,0}, gold {1,1,1,0,0}.
// Positions 0, 2, 4 agree; TP = 2 (0, 2), FP = 1 (3), FN = 1 (1), TN = 1 (4).

TEST(Accuracy, CountsMatches) {
    // 3 of 5 agree.
    EXPECT_DOUBLE_EQ(analysis::accuracy({1, 0, 1, 1, 0}, {1, 1, 1, 0, 0}), 0.6);
    EXPECT_DOUBLE_EQ(analysis::accuracy({2, 0, 1}, {2, 0, 1}), 1.0);
}

TEST(Metrics, ThrowOnSizeMismatchWithBothSizes) {
    expect_invalid([] { analysis::accuracy({1, 0}, {1, 0, 1}); }, "2 predictions vs 3 gold");
    expect_invalid([] { analysis::f1_class1({1}, {}); }, "1 predictions vs 0 gold");
    expect_invalid([] { analysis::matthews_corrcoef({}, {1}); }, "0 predictions vs 1 gold");
    expect_invalid([] { analysis::pearson({1, 2}, {1}); }, "2 predictions vs 1 gold");
    expect_invalid([] { analysis::spearman({1}, {1, 2}); }, "1 predictions vs 2 gold");
}

TEST(Metrics, ThrowOnEmptyInput) {
    expect_invalid([] { analysis::accuracy({}, {}); }, "empty");
    expect_invalid([] { analysis::f1_class1({}, {}); }, "empty");
    expect_invalid([] { analysis::matthews_corrcoef({}, {}); }, "empty");
    expect_invalid([] { analysis::pearson({}, {}); }, "empty");
    expect_invalid([] { analysis::spearman({}, {}); }, "empty");
}

TEST(F1Class1, MatchesHandComputedValue) {
    // TP 2, FP 1, FN 1: P = R = 2/3, F1 = 2 TP / (2 TP + FP + FN) = 4 / 6.
    EXPECT_DOUBLE_EQ(analysis::f1_class1({1, 0, 1, 1, 0}, {1, 1, 1, 0, 0}), 2.0 / 3.0);
    // All predicted 1, gold {1,0,0,0}: TP 1, FP 3, FN 0 -> 2 / (2 + 3) = 0.4.
    EXPECT_DOUBLE_EQ(analysis::f1_class1({1, 1, 1, 1}, {1, 0, 0, 0}), 0.4);
}

TEST(F1Class1, TreatsOtherLabelsAsNegative) {
    // pred {1,2,1,0}, gold {1,1,2,1}: TP 1 (pos 0), FP 1 (pos 2), FN 2 (pos 1, 3) -> 2/5.
    EXPECT_DOUBLE_EQ(analysis::f1_class1({1, 2, 1, 0}, {1, 1, 2, 1}), 0.4);
}

TEST(F1Class1, ZeroWhenUndefinedOrNoPositivePredictions) {
    // Constant 0 predictions: TP 0, so F1 = 0 (sklearn: 0, precision undefined -> 0).
    EXPECT_DOUBLE_EQ(analysis::f1_class1({0, 0, 0}, {1, 0, 1}), 0.0);
    // No 1 anywhere: 2 TP + FP + FN = 0, zero_division=0 -> 0.
    EXPECT_DOUBLE_EQ(analysis::f1_class1({0, 0}, {0, 0}), 0.0);
    EXPECT_DOUBLE_EQ(analysis::f1_class1({1, 1}, {1, 1}), 1.0);
}

TEST(MatthewsCorrcoef, BinaryMatchesHandComputedValue) {
    // Binary form: (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))
    //   = (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
    // Multi-class form agrees: n 5, c 3, t = p = {0:2, 1:3}, sum t p = 13,
    //   (3*5 - 13) / sqrt((25 - 13)(25 - 13)) = 2/12.
    EXPECT_NEAR(analysis::matthews_corrcoef({1, 0, 1, 1, 0}, {1, 1, 1, 0, 0}), 1.0 / 6.0, 1e-12);
}

TEST(MatthewsCorrcoef, MultiClassMatchesHandComputedValue) {
    // pred {0,0,0,0,1,2}, gold {0,1,2,1,1,2}: correct at 0, 4, 5 -> c = 3, n = 6.
    // gold counts t = {0:1, 1:3, 2:2}; predicted p = {0:4, 1:1, 2:1}.
    // sum t p = 1*4 + 3*1 + 2*1 = 9;  sum p^2 = 16 + 1 + 1 = 18;  sum t^2 = 1 + 9 + 4 = 14.
    // MCC = (3*6 - 9) / sqrt((36 - 18)(36 - 14)) = 9 / sqrt(396) = 0.4522670168666454.
    EXPECT_NEAR(analysis::matthews_corrcoef({0, 0, 0, 0, 1, 2}, {0, 1, 2, 1, 1, 2}),
                0.4522670168666454, 1e-12);
}

TEST(MatthewsCorrcoef, PerfectAndInverse) {
    EXPECT_DOUBLE_EQ(analysis::matthews_corrcoef({0, 1, 1, 0}, {0, 1, 1, 0}), 1.0);
    EXPECT_DOUBLE_EQ(analysis::matthews_corrcoef({1, 0, 0, 1}, {0, 1, 1, 0}), -1.0);
    // Labels need not be 0..K-1.
    EXPECT_DOUBLE_EQ(analysis::matthews_corrcoef({-3, 7, 7}, {-3, 7, 7}), 1.0);
}

TEST(MatthewsCorrcoef, ZeroWhenDenominatorIsZero) {
    // Constant predictions: sum p^2 = n^2, so n^2 - sum p^2 = 0 -> 0 (sklearn returns 0).
    EXPECT_DOUBLE_EQ(analysis::matthews_corrcoef({1, 1, 1, 1}, {1, 0, 1, 0}), 0.0);
    // Constant gold, even with varied predictions.
    EXPECT_DOUBLE_EQ(analysis::matthews_corrcoef({1, 0, 1}, {0, 0, 0}), 0.0);
    // Single sample.
    EXPECT_DOUBLE_EQ(analysis::matthews_corrcoef({1}, {1}), 0.0);
}

TEST(Pearson, MatchesHandComputedValue) {
    // x {1,2,3,4}, y {2,4,5,9}: means 2.5, 5; dx {-1.5,-.5,.5,1.5}, dy {-3,-1,0,4}.
    // sxy = 4.5 + .5 + 0 + 6 = 11; sxx = 5; syy = 9 + 1 + 0 + 16 = 26.
    // r = 11 / sqrt(130) = 0.9647638212377322.
    EXPECT_NEAR(analysis::pearson({1, 2, 3, 4}, {2, 4, 5, 9}), 0.9647638212377322, 1e-12);
}

TEST(Pearson, PerfectAndInverse) {
    EXPECT_DOUBLE_EQ(analysis::pearson({1, 2, 3, 4}, {3, 5, 7, 9}), 1.0);
    EXPECT_NEAR(analysis::pearson({0.1, 0.2, 0.3}, {-1, -2, -3}), -1.0, 1e-12);
    EXPECT_DOUBLE_EQ(analysis::pearson({1, 2}, {5, 4}), -1.0);
}

TEST(Pearson, ZeroForConstantSeriesWhereScipyGivesNan) {
    EXPECT_DOUBLE_EQ(analysis::pearson({2, 2, 2}, {1, 2, 3}), 0.0);
    EXPECT_DOUBLE_EQ(analysis::pearson({1, 2, 3}, {0.1, 0.1, 0.1}), 0.0);
    // 0.1 summed three times and divided by 3 is not exactly 0.1: constancy is tested directly.
    EXPECT_DOUBLE_EQ(analysis::pearson({0.1, 0.1, 0.1}, {0.1, 0.1, 0.1}), 0.0);
    EXPECT_DOUBLE_EQ(analysis::pearson({4}, {7}), 0.0);
}

TEST(Pearson, RejectsNonFiniteValues) {
    expect_invalid([] { analysis::pearson({1, NAN, 3}, {1, 2, 3}); }, "x[1] is not finite");
    expect_invalid([] { analysis::spearman({1, 2}, {1, INFINITY}); }, "y[1] is not finite");
}

TEST(AverageRanks, TiesGetTheirMeanRank) {
    // {1,2,2,3}: the two 2s share ranks 2 and 3 -> 2.5 each.
    EXPECT_EQ(analysis::average_ranks({1, 2, 2, 3}), (std::vector<double>{1, 2.5, 2.5, 4}));
    // Unsorted with a triple tie: 5 is smallest (1); the three 7s take 2..4 -> 3; 9 is 5.
    EXPECT_EQ(analysis::average_ranks({7, 5, 9, 7, 7}), (std::vector<double>{3, 1, 5, 3, 3}));
}

TEST(Spearman, TiesUseAverageRanks) {
    // ranks x {1,2.5,2.5,4}, y {1,2,3,4}; both mean 2.5.
    // dx {-1.5,0,0,1.5}, dy {-1.5,-.5,.5,1.5}: sxy = 4.5, sxx = 4.5, syy = 5.
    // rho = 4.5 / sqrt(22.5) = 3 / sqrt(10) = 0.9486832980505138.
    EXPECT_NEAR(analysis::spearman({1, 2, 2, 3}, {10, 20, 30, 40}), 0.9486832980505138, 1e-12);
    // Ties on both sides: ranks {1.5,1.5,3.5,3.5} and {1,2.5,2.5,4}; dx {-1,-1,1,1},
    // dy {-1.5,0,0,1.5}: sxy = 3, sxx = 4, syy = 4.5 -> 3 / sqrt(18) = 0.7071067811865476.
    EXPECT_NEAR(analysis::spearman({1, 1, 2, 2}, {1, 2, 2, 3}), 0.7071067811865476, 1e-12);
}

TEST(Spearman, PerfectAndInverseForMonotoneData) {
    // y = x^2 is monotone on positives: rho = 1 while Pearson is below 1.
    const std::vector<double> x = {1, 2, 3, 4, 5}, y = {1, 4, 9, 16, 25};
    EXPECT_DOUBLE_EQ(analysis::spearman(x, y), 1.0);
    EXPECT_LT(analysis::pearson(x, y), 1.0);
    EXPECT_DOUBLE_EQ(analysis::spearman(x, {50, 40, 30, 20, 10}), -1.0);
}

TEST(Spearman, ZeroForConstantSeries) {
    EXPECT_DOUBLE_EQ(analysis::spearman({3, 3, 3, 3}, {1, 2, 3, 4}), 0.0);
}

TEST(TaskNames, AcceptGlueSpellings) {
    EXPECT_EQ(analysis::canonical_task("CoLA"), "cola");
    EXPECT_EQ(analysis::canonical_task("SST-2"), "sst2");
    EXPECT_EQ(analysis::canonical_task("sst2"), "sst2");
    EXPECT_EQ(analysis::canonical_task("STS-B"), "stsb");
    EXPECT_EQ(analysis::canonical_task("MNLI-m"), "mnli_m");
    EXPECT_EQ(analysis::canonical_task("MNLI-mm"), "mnli_mm");
    EXPECT_EQ(analysis::canonical_task("mnli_mm"), "mnli_mm");
    EXPECT_EQ(analysis::canonical_task("WNLI"), "wnli");
    EXPECT_EQ(analysis::canonical_task("syn-copy"), "syn-copy");
    EXPECT_EQ(analysis::canonical_task("SYN-CoLA"), "SYN-CoLA");
    EXPECT_EQ(analysis::canonical_task("MNLI_mismatched"), "mnli_mm");
}

TEST(TaskNames, RejectUnknownAndBareMnli) {
    expect_invalid([] { analysis::canonical_task("squad"); }, "unknown task 'squad'");
    expect_invalid([] { analysis::canonical_task("MNLI"); }, "mnli_m or mnli_mm");
    expect_invalid([] { analysis::metric_kind("syn-x"); }, "pass a MetricKind");
    expect_invalid([] { analysis::metric_kind("SYN-MRPC"); }, "pass a MetricKind");
}

TEST(TaskNames, MetricKindPerTask) {
    EXPECT_EQ(analysis::metric_kind("CoLA"), MetricKind::kMcc);
    EXPECT_EQ(analysis::metric_kind("mrpc"), MetricKind::kF1Accuracy);
    EXPECT_EQ(analysis::metric_kind("QQP"), MetricKind::kF1Accuracy);
    EXPECT_EQ(analysis::metric_kind("STS-B"), MetricKind::kPearsonSpearman);
    for (const char* t : {"sst2", "mnli_m", "mnli_mm", "qnli", "rte", "wnli"}) {
        EXPECT_EQ(analysis::metric_kind(t), MetricKind::kAccuracy) << t;
    }
}

TEST(ScoreTask, ReportsPercentWithGlueKeys) {
    const std::vector<double> p = {1, 0, 1, 1, 0}, g = {1, 1, 1, 0, 0};
    // Same example as above, times 100.
    const TaskScores mrpc = analysis::score_task("MRPC", p, g);
    EXPECT_EQ(mrpc.metrics.size(), 2u);
    EXPECT_NEAR(mrpc.metrics.at("f1"), 200.0 / 3.0, 1e-12);
    EXPECT_NEAR(mrpc.metrics.at("accuracy"), 60.0, 1e-12);
    const TaskScores cola = analysis::score_task("cola", p, g);
    EXPECT_EQ(cola.metrics.size(), 1u);
    EXPECT_NEAR(cola.metrics.at("mcc"), 100.0 / 6.0, 1e-12);
    const TaskScores rte = analysis::score_task("RTE", p, g);
    EXPECT_EQ(rte.metrics.size(), 1u);
    EXPECT_NEAR(rte.metrics.at("accuracy"), 60.0, 1e-12);
    const TaskScores stsb = analysis::score_task("STS-B", {1, 2, 2, 3}, {1, 2, 3, 4});
    EXPECT_NEAR(stsb.metrics.at("spearman"), 100.0 * 0.9486832980505138, 1e-12);
    // Pearson of {1,2,2,3} vs {1,2,3,4}: dx {-1,0,0,1}, dy {-1.5,-.5,.5,1.5}: 3 / sqrt(2*5).
    EXPECT_NEAR(stsb.metrics.at("pearson"), 100.0 * 3.0 / std::sqrt(10.0), 1e-12);
}

TEST(ScoreTask, ConstantPredictionsGiveZeroMccAndF1) {
    const std::vector<double> zeros = {0, 0, 0, 0}, gold = {0, 1, 1, 0};
    EXPECT_DOUBLE_EQ(analysis::score_task("CoLA", zeros, gold).metrics.at("mcc"), 0.0);
    EXPECT_DOUBLE_EQ(analysis::score_task("QQP", zeros, gold).metrics.at("f1"), 0.0);
    EXPECT_DOUBLE_EQ(analysis::score_task("QQP", zeros, gold).metrics.at("accuracy"), 50.0);
}

TEST(ScoreTask, SyntheticTasksNeedAKind) {
    const std::vector<double> p = {1, 0, 1, 1, 0}, g = {1, 1, 1, 0, 0};
    expect_invalid([&] { analysis::score_task("syn-parity", p, g); }, "pass a MetricKind");
    const TaskScores s = analysis::score_task("syn-parity", MetricKind::kMcc, p, g);
    EXPECT_NEAR(s.metrics.at("mcc"), 100.0 / 6.0, 1e-12);
    EXPECT_NEAR(analysis::primary_metric("syn-parity", s), 100.0 / 6.0, 1e-12);
    // A GLUE name with its own kind is fine; with another kind it is an error.
    EXPECT_NO_THROW(analysis::score_task("CoLA", MetricKind::kMcc, p, g));
    expect_invalid([&] { analysis::score_task("CoLA", MetricKind::kAccuracy, p, g); },
                   "not scored with");
}

TEST(ScoreTask, RejectsNonIntegerLabelsAndSizeMismatch) {
    expect_invalid([] { analysis::score_task("sst2", {0, 0.5}, {0, 1}); }, "predictions[1]");
    expect_invalid(
        [] {
            analysis::score_task("sst2", {0, 1}, {0, 1, 1});
        },
        "2 predictions vs 3 gold");
}

TEST(PrimaryMetric, FollowsTheTupePaper) {
    TaskScores two;
    two.metrics = {{"f1", 90.0}, {"accuracy", 85.0}};
    // MRPC and QQP select on accuracy (GLUE_FORMAT.md: "accuracy elsewhere"), not F1.
    EXPECT_DOUBLE_EQ(analysis::primary_metric("MRPC", two), 85.0);
    EXPECT_DOUBLE_EQ(analysis::primary_metric("qqp", two), 85.0);
    TaskScores sts;
    sts.metrics = {{"pearson", 88.0}, {"spearman", 87.0}};
    EXPECT_DOUBLE_EQ(analysis::primary_metric("STS-B", sts), 88.0);
    EXPECT_DOUBLE_EQ(analysis::primary_metric("syn-reg", sts), 88.0);
    TaskScores cola;
    cola.metrics = {{"mcc", 55.0}};
    EXPECT_DOUBLE_EQ(analysis::primary_metric("CoLA", cola), 55.0);
    expect_invalid([&] { analysis::primary_metric("rte", cola); }, "'accuracy'");
}

TEST(TupeAverage, ReproducesTable1BertA) {
    // 84.93 + 84.91 + 91.34 + 91.04 + 92.88 + 55.19 + 88.29 + 68.61 + 89.43 = 746.62;
    // 746.62 / 9 = 82.9578 -> 82.96 as printed.
    auto row = bert_a_row();
    EXPECT_NEAR(analysis::tupe_average(row), 82.96, 0.005);
    // WNLI and synthetic tasks do not enter it.
    row["WNLI"] = 0.0;
    row["syn-copy"] = 0.0;
    EXPECT_NEAR(analysis::tupe_average(row), 746.62 / 9.0, 1e-9);
}

TEST(TupeAverage, NamesMissingTasks) {
    auto row = bert_a_row();
    row.erase("CoLA");
    row.erase("MNLI-mm");
    try {
        analysis::tupe_average(row);
        ADD_FAILURE() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("mnli_mm"), std::string::npos) << msg;
        EXPECT_NE(msg.find("cola"), std::string::npos) << msg;
    }
}

TEST(TupeAverage, RejectsTwoKeysForOneTask) {
    auto row = bert_a_row();
    row["cola"] = 50.0;
    expect_invalid([&] { analysis::tupe_average(row); }, "both name task cola");
    row.erase("cola");
    row["glue-ax"] = 1.0;
    expect_invalid([&] { analysis::tupe_average(row); }, "unknown task 'glue-ax'");
}

TEST(LeaderboardAverage, SingleNumberRowWithWnli) {
    // Table 1's BERT-A row with both metrics of MRPC, QQP, STS-B equal to the printed number,
    // plus WNLI 65.07. MNLI counts once: (84.93 + 84.91) / 2 = 84.92.
    // 84.92 + 91.34 + 91.04 + 92.88 + 55.19 + 88.29 + 68.61 + 89.43 + 65.07 = 726.77;
    // / 9 = 80.7522 (not 82.96: nine tasks with WNLI, MNLI once).
    std::map<std::string, TaskScores> s;
    for (const auto& [task, v] : bert_a_row()) {
        switch (analysis::metric_kind(task)) {
            case MetricKind::kF1Accuracy: s[task].metrics = {{"f1", v}, {"accuracy", v}}; break;
            case MetricKind::kPearsonSpearman:
                s[task].metrics = {{"pearson", v}, {"spearman", v}};
                break;
            case MetricKind::kMcc: s[task].metrics = {{"mcc", v}}; break;
            case MetricKind::kAccuracy: s[task].metrics = {{"accuracy", v}}; break;
        }
    }
    s["WNLI"].metrics = {{"accuracy", 65.07}};
    EXPECT_NEAR(analysis::leaderboard_average(s), 726.77 / 9.0, 1e-9);
}

TEST(LeaderboardAverage, TwoMetricTasksCountOnceAsTheirMean) {
    // MRPC (91.00 + 88.29) / 2 = 89.645; QQP (88.00 + 91.04) / 2 = 89.52;
    // STS-B (89.43 + 89.03) / 2 = 89.23; MNLI 84.92; CoLA 55.19; SST-2 92.88; QNLI 91.34;
    // RTE 68.61; WNLI 65.07. Sum 726.405, / 9 = 80.71166...
    std::map<std::string, TaskScores> s;
    s["cola"].metrics = {{"mcc", 55.19}};
    s["sst2"].metrics = {{"accuracy", 92.88}};
    s["mrpc"].metrics = {{"f1", 91.00}, {"accuracy", 88.29}};
    s["stsb"].metrics = {{"pearson", 89.43}, {"spearman", 89.03}};
    s["qqp"].metrics = {{"f1", 88.00}, {"accuracy", 91.04}};
    s["mnli_m"].metrics = {{"accuracy", 84.93}};
    s["mnli_mm"].metrics = {{"accuracy", 84.91}};
    s["qnli"].metrics = {{"accuracy", 91.34}};
    s["rte"].metrics = {{"accuracy", 68.61}};
    s["wnli"].metrics = {{"accuracy", 65.07}};
    EXPECT_NEAR(analysis::leaderboard_average(s), 726.405 / 9.0, 1e-9);
    s["syn-copy"].metrics = {{"accuracy", 0.0}};
    EXPECT_NEAR(analysis::leaderboard_average(s), 726.405 / 9.0, 1e-9);

    s["qqp"].metrics.erase("f1");
    expect_invalid([&] { analysis::leaderboard_average(s); }, "task qqp: no 'f1'");
    s.erase("wnli");
    s.erase("stsb");
    expect_invalid([&] { analysis::leaderboard_average(s); }, "missing tasks: stsb, wnli");
}

TEST_F(SubmissionTest, ReadsRowsWithCrlfAndBom) {
    const std::string path =
        write("RTE.tsv", "\xEF\xBB\xBFindex\tprediction\r\n0\tentailment\r\n1\tnot_entailment\r\n");
    const auto rows = analysis::read_submission(path);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].first, "0");
    EXPECT_EQ(rows[0].second, "entailment");
    EXPECT_EQ(rows[1].second, "not_entailment");
}

TEST_F(SubmissionTest, AcceptsTrailingBlankLinesAndNoFinalNewline) {
    EXPECT_EQ(analysis::read_submission(write("a.tsv", "index\tprediction\n0\t1\n\n\r\n")).size(),
              1u);
    EXPECT_EQ(analysis::read_submission(write("b.tsv", "index\tprediction\n0\t1")).size(), 1u);
    EXPECT_TRUE(analysis::read_submission(write("c.tsv", "index\tprediction\n")).empty());
}

TEST_F(SubmissionTest, ReadErrorsNameFileAndLine) {
    const std::string missing = (dir_ / "nope.tsv").string();
    expect_line_error([&] { analysis::read_submission(missing); }, 0, "nope.tsv");
    const std::string empty = write("empty.tsv", "");
    expect_line_error([&] { analysis::read_submission(empty); }, 0, "empty file");
    const std::string no_header = write("nh.tsv", "0\t1\n1\t0\n");
    expect_line_error([&] { analysis::read_submission(no_header); }, 1, "looks like data");
    const std::string bad_header = write("bh.tsv", "index,prediction\n0\t1\n");
    expect_line_error([&] { analysis::read_submission(bad_header); }, 1, "header");
    const std::string three = write("three.tsv", "index\tprediction\n0\t1\n1\t0\textra\n");
    expect_line_error([&] { analysis::read_submission(three); }, 3, "got 3");
    const std::string comma = write("comma.tsv", "index\tprediction\n0,1\n");
    expect_line_error([&] { analysis::read_submission(comma); }, 2, "got 1");
    const std::string blank = write("blank.tsv", "index\tprediction\n0\t1\n\n1\t0\n");
    expect_line_error([&] { analysis::read_submission(blank); }, 3, "blank line");
    const std::string empty_pred = write("ep.tsv", "index\tprediction\n0\t\n");
    expect_line_error([&] { analysis::read_submission(empty_pred); }, 2, "empty prediction");
    try {
        analysis::read_submission(three);
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), three);
        EXPECT_EQ(std::string(e.what()).rfind(three + ":3: ", 0), 0u) << e.what();
    }
}

TEST(GlueLabels, FollowGlueFormat) {
    EXPECT_EQ(analysis::glue_labels("MNLI-mm"),
              (std::vector<std::string>{"entailment", "neutral", "contradiction"}));
    EXPECT_EQ(analysis::glue_labels("QNLI"),
              (std::vector<std::string>{"entailment", "not_entailment"}));
    EXPECT_EQ(analysis::glue_labels("CoLA"), (std::vector<std::string>{"0", "1"}));
    EXPECT_TRUE(analysis::glue_labels("STS-B").empty());
}

TEST_F(SubmissionTest, ScoresMnliFileAgainstGold) {
    // Rows out of order; gold {0:e, 1:n, 2:c, 3:e}; predictions e, c, c, e -> 3 of 4 = 75%.
    const std::string path = write(
        "MNLI-m.tsv",
        "index\tprediction\n3\tentailment\n1\tcontradiction\n0\tentailment\n2\tcontradiction\n");
    const std::map<std::string, std::string> gold = {
        {"0", "entailment"}, {"1", "neutral"}, {"2", "contradiction"}, {"3", "entailment"}};
    const TaskScores s = analysis::score_submission("MNLI-m", analysis::read_submission(path), gold,
                                                    analysis::glue_labels("MNLI-m"), path);
    EXPECT_DOUBLE_EQ(s.metrics.at("accuracy"), 75.0);
}

TEST(ScoreSubmission, MrpcF1UsesSecondLabelAsPositive) {
    // pred {1,0,1,1,0} vs gold {1,1,1,0,0} as strings: F1 66.67, accuracy 60.
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"a", "1"}, {"b", "0"}, {"c", "1"}, {"d", "1"}, {"e", "0"}};
    const std::map<std::string, std::string> gold = {
        {"a", "1"}, {"b", "1"}, {"c", "1"}, {"d", "0"}, {"e", "0"}};
    const TaskScores s = analysis::score_submission("MRPC", rows, gold, {"0", "1"});
    EXPECT_NEAR(s.metrics.at("f1"), 200.0 / 3.0, 1e-12);
    EXPECT_NEAR(s.metrics.at("accuracy"), 60.0, 1e-12);
}

TEST(ScoreSubmission, StsbParsesNumbers) {
    // Same numbers as Pearson.MatchesHandComputedValue: 100 * 11 / sqrt(130).
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"0", "1"}, {"1", "2.0"}, {"2", "3e0"}, {"3", "+4"}};
    const std::map<std::string, std::string> gold = {
        {"0", "2"}, {"1", "4"}, {"2", "5.000"}, {"3", "9"}};
    const TaskScores s = analysis::score_submission("STS-B", rows, gold, {});
    EXPECT_NEAR(s.metrics.at("pearson"), 96.47638212377322, 1e-12);
    EXPECT_DOUBLE_EQ(s.metrics.at("spearman"), 100.0);
}

TEST(ScoreSubmission, RowErrorsNameTheLine) {
    const std::map<std::string, std::string> gold = {{"0", "entailment"}, {"1", "not_entailment"}};
    const std::vector<std::string> labels = {"entailment", "not_entailment"};
    using Rows = std::vector<std::pair<std::string, std::string>>;
    // Row 1 is line 3 (line 1 is the header).
    expect_line_error(
        [&] {
            analysis::score_submission("RTE", Rows{{"0", "entailment"}, {"1", "neutral"}}, gold,
                                       labels, "RTE.tsv");
        },
        3, "unknown label 'neutral'; expected one of: entailment, not_entailment");
    expect_line_error(
        [&] {
            analysis::score_submission("RTE", Rows{{"7", "entailment"}}, gold, labels, "RTE.tsv");
        },
        2, "index '7' is not in the gold set");
    expect_line_error(
        [&] {
            analysis::score_submission(
                "RTE", Rows{{"0", "entailment"}, {"1", "entailment"}, {"0", "entailment"}}, gold,
                labels, "RTE.tsv");
        },
        4, "index '0' given twice (first on line 2)");
    expect_line_error(
        [&] {
            analysis::score_submission("STS-B", Rows{{"0", "3,5"}}, {{"0", "3.5"}}, {}, "S.tsv");
        },
        2, "prediction '3,5' is not a number");
}

TEST(ScoreSubmission, MissingPredictionsAreCounted) {
    const std::map<std::string, std::string> gold = {
        {"0", "0"}, {"1", "1"}, {"2", "0"}, {"3", "1"}, {"4", "1"}};
    const std::vector<std::pair<std::string, std::string>> rows = {{"0", "0"}, {"3", "1"}};
    expect_line_error(
        [&] {
            analysis::score_submission("SST-2", rows, gold, {"0", "1"}, "SST-2.tsv");
        },
        0, "no prediction for 3 of 5 gold indices (e.g. 1, 2, 4)");
}

TEST(ScoreSubmission, BadGoldOrLabelListIsInvalidArgument) {
    const auto score = [](const std::map<std::string, std::string>& gold,
                          const std::vector<std::string>& labels) {
        return [=] { analysis::score_submission("SST-2", {{"0", "1"}}, gold, labels); };
    };
    expect_invalid(score({{"0", "2"}}, {"0", "1"}), "gold label '2'");
    expect_invalid(score({{"0", "1"}}, {}), "empty label list");
    expect_invalid(score({{"0", "1"}}, {"1", "1"}), "listed twice");
    expect_invalid(score({}, {"0", "1"}), "no gold labels");
}
