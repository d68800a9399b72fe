// The statistics behind "how sure is this number": Student's t (for paired tests over
// pretraining seeds), the exact sign test, percentile bootstrap intervals, GLUE metrics on
// resampled dev sets, and the chance level of each metric. Plain C++; no tensors.
// References: Efron & Tibshirani, "An Introduction to the Bootstrap" (1993), ch. 13
// (percentile interval); Dror et al., "The Hitchhiker's Guide to Testing Statistical
// Significance in NLP" (ACL 2018) for the choice of tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace analysis {

/// P(T <= t) for Student's t with df > 0 degrees of freedom (regularized incomplete beta).
double student_t_cdf(double t, double df);
/// The p-quantile of Student's t, p in (0, 1) (bisection on student_t_cdf, |error| < 1e-9).
double student_t_quantile(double p, double df);

/// A two-sided paired t-test of mean(differences) = 0.
struct PairedTest {
    int n = 0;
    double mean = 0;  ///< Mean difference.
    double sd = 0;    ///< Sample standard deviation of the differences.
    double t = 0;
    double p = 1;                 ///< Two-sided; 1 when n < 2 (no test possible).
    double ci_lo = 0, ci_hi = 0;  ///< 95% t-interval of the mean difference (n >= 2).
    bool valid = false;           ///< n >= 2.
};
/// With sd = 0 and mean != 0 (every pair moved by the same amount) p is 0; with both 0, 1.
PairedTest paired_t_test(const std::vector<double>& differences);

/// Two-sided exact binomial sign test of `positive` vs `negative` outcomes (ties dropped):
/// min(1, 2 * P(X <= min(pos, neg))) with X ~ Binomial(pos + neg, 1/2). 1 when both are 0.
double sign_test_p(int64_t positive, int64_t negative);

/// Holm's step-down adjustment of m p-values (Holm 1979): the i-th smallest times (m - i + 1),
/// made non-decreasing in that order and capped at 1, returned in the input's order. Calling
/// "adjusted p < alpha" significant controls the family-wise error rate at alpha.
std::vector<double> holm_adjust(const std::vector<double>& p);

/// Two-sided p of "the difference is 0" from a paired bootstrap: z = estimate / (standard
/// deviation of the replicates), p = 2 (1 - Phi(|z|)). A normal approximation, used where a
/// correction over many pairs needs p-values finer than 1 / resamples. 1 when the replicates
/// have no spread and the estimate is 0; 0 when they have none and it is not.
double bootstrap_normal_p(double estimate, const std::vector<double>& replicates);

/// The groups of a ranking: items 0..n-1 in rank order and `apart(i, j)` (i < j) whether two
/// are told apart. Returns the maximal runs [first, last] of consecutive items no two of which
/// are told apart, in order; every item lies in at least one (the lines drawn under a ranked
/// list, or the letters of a compact letter display for a ranked list).
std::vector<std::pair<int, int>> indistinguishable_runs(int n,
                                                        const std::function<bool(int, int)>& apart);

struct Interval {
    double lo = 0;
    double hi = 0;
};
/// The central `level` percentile interval of `samples` (linear interpolation between order
/// statistics, as numpy.percentile's default). Throws std::invalid_argument when empty.
Interval percentile_interval(std::vector<double> samples, double level = 0.95);

/// A GLUE selection metric, in percent: "accuracy", "f1" (class 1), "mcc", "pearson",
/// "spearman", on gold/pred restricted to `index` (positions, repeats allowed; nullptr = all).
/// Agrees with analysis::score_task on the full set. Throws std::invalid_argument for an
/// unknown metric name or mismatched sizes.
double metric_on(const std::string& metric, const std::vector<double>& gold,
                 const std::vector<double>& predicted,
                 const std::vector<uint32_t>* index = nullptr);

/// What a model that ignores its input scores, in percent: accuracy -> the majority class's
/// share of `gold`; f1 -> F1 of always predicting 1 (2p / (1 + p), p the share of 1s); mcc,
/// pearson, spearman -> 0. Throws std::invalid_argument for an unknown metric.
double chance_level(const std::string& metric, const std::vector<double>& gold);

/// One fine-tuning run's dev predictions (all runs of a cell share the dev set).
struct RunPredictions {
    int64_t cluster = 0;  ///< Runs of one pretraining run share a cluster (resampled together).
    const std::vector<double>* predicted = nullptr;
};

struct BootstrapOptions {
    int resamples = 1000;
    /// Seeds the dev-example draws: two cells bootstrapped with the same example_seed on the
    /// same dev set draw the same examples, so their replicate differences are a paired
    /// bootstrap of the difference.
    uint64_t example_seed = 1;
    uint64_t run_seed = 2;  ///< Seeds the draws of clusters and runs.
};

/// Replicates of "median over runs of metric": each replicate draws clusters with
/// replacement, then runs within each drawn cluster with replacement, then dev examples with
/// replacement (one draw shared by all runs), and takes the median of the runs' metric. With
/// one run this is the plain bootstrap over dev examples; with several it adds the seed
/// spread (two-stage cluster bootstrap: pretraining seeds, then fine-tuning seeds).
std::vector<double> bootstrap_median_metric(const std::string& metric,
                                            const std::vector<double>& gold,
                                            const std::vector<RunPredictions>& runs,
                                            const BootstrapOptions& options = {});

/// The median of a non-empty vector (mean of the middle two for an even size).
double median_of(std::vector<double> values);

}  // namespace analysis
