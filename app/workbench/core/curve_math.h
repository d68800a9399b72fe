// The numbers behind the training-curves view, kept free of Qt so they can be tested by hand:
// TensorBoard's debiased exponential moving average, min/max-preserving decimation of long
// curves, grouping of runs that differ only by seed (mean, sample std, n per x) and the
// "steps to reach the baseline's final value" readout (the paper's 30%-of-steps claim).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace app {

/// TensorBoard's smoothing (tf.summary scalar dashboard): last = last*w + (1-w)*y,
/// smoothed = last / (1 - w^n) with n the finite points seen so far. Non-finite points pass
/// through unchanged and do not move the average; a constant curve is returned as is.
/// `weight` in [0, 1): 0 = no smoothing.
std::vector<double> emaDebiased(const std::vector<double>& y, double weight);

/// Indices of the points to draw so that a curve of n points keeps its shape with about
/// `buckets` * 4 points: per bucket of consecutive points, the first, the last, the minimum and
/// the maximum (in x order). The first and last point of the curve are always kept; with
/// n <= 4 * buckets every index is returned. Non-finite values are kept (they mark gaps).
std::vector<std::size_t> decimateMinMax(const std::vector<double>& y, std::size_t buckets);

/// One curve of a run.
struct Curve {
    std::string label;     ///< e.g. the run name
    std::string groupKey;  ///< runs with the same key differ only by seed
    std::vector<double> x, y;
};

/// Runs of one seed group reduced to mean +- std at each x any member has.
struct SeedGroup {
    std::string key;
    std::vector<std::string> members;  ///< labels, in input order
    std::vector<double> x;             ///< ascending union of the members' x
    std::vector<double> mean, stddev;  ///< sample std (n - 1); 0 where n == 1
    std::vector<int> n;                ///< members with a finite value at this x
};

/// The group key of a run name: the name without its seed parts ("/seed2", "-seed2",
/// "_seed2", and the pretraining seed "@seed2"), e.g. "tupe-a@seed2" -> "tupe-a",
/// "tupe-a/step180/syn-cola/lr0.001/seed2" -> "tupe-a/step180/syn-cola/lr0.001".
std::string seedGroupKey(const std::string& runName);

/// Groups `curves` by groupKey (first appearance order). Points are matched by exact x (runs
/// of one config log at the same steps).
std::vector<SeedGroup> groupBySeed(const std::vector<Curve>& curves);

/// The first x at which y reaches `target`: y <= target when lowerIsBetter, else y >= target.
/// Returns a negative number when it never does.
double firstXReaching(const std::vector<double>& x, const std::vector<double>& y, double target,
                      bool lowerIsBetter);

/// How a curve reaches a target: the first x at which it does, and the first x after that at
/// which it is on the far side of the target again (the crossing is not kept), or -1.
struct Reach {
    double first = -1;      ///< first x with y at or past the target; -1: never
    double leftAgain = -1;  ///< first x after `first` with y back before the target; -1: none
    bool reached() const { return first >= 0; }
    bool kept() const { return first >= 0 && leftAgain < 0; }
};
Reach reachOf(const std::vector<double>& x, const std::vector<double>& y, double target,
              bool lowerIsBetter);

/// Whether smaller values of the metric are better ("loss", "perplexity", "ppl" in the key).
bool lowerIsBetter(const std::string& metricKey);

}  // namespace app
