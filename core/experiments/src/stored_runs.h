// What the claims and the ranking read from a store: the finished pretraining runs of an
// experiment by variant group and seed, with their validation curves, and the report row of a
// variant at its last checkpoint with the mean of its columns' bootstrap replicates. Internal
// to the store library (claims.cpp, ranking.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "experiments/report.h"
#include "experiments/result_store.h"

namespace experiments {

struct PretrainRun {
    int64_t id = 0;
    std::string name, group, out_dir, config_text;
    int64_t seed = 0;
    std::vector<MetricPoint> validation;  ///< validation/loss by step
    int64_t last_step() const { return validation.empty() ? 0 : validation.back().step; }
    double final_loss() const { return validation.back().value; }
    /// The loss at `step`, linearly interpolated between evaluations; NaN outside the curve.
    double loss_at(int64_t step) const {
        for (size_t i = 0; i < validation.size(); ++i) {
            if (validation[i].step == step) return validation[i].value;
            if (validation[i].step > step && i > 0) {
                const auto& a = validation[i - 1];
                const auto& b = validation[i];
                const double f =
                    static_cast<double>(step - a.step) / static_cast<double>(b.step - a.step);
                return a.value + f * (b.value - a.value);
            }
        }
        return std::nan("");
    }
    /// The first (interpolated) step at which the curve reaches `target` or below; -1 if never.
    double first_step_at_or_below(double target) const {
        for (size_t i = 0; i < validation.size(); ++i) {
            if (validation[i].value <= target) {
                if (i == 0) return static_cast<double>(validation[0].step);
                const auto& a = validation[i - 1];
                const auto& b = validation[i];
                const double f = (a.value - target) / (a.value - b.value);
                return static_cast<double>(a.step) + f * static_cast<double>(b.step - a.step);
            }
        }
        return -1;
    }
};

// group -> seed -> run
using Groups = std::map<std::string, std::map<int64_t, PretrainRun>>;

/// The finished pretrain runs of an experiment that have validation data, by variant group and
/// seed. Runs of one variant with different configs (another cell: a rerun with --new-runs) are
/// never pooled: each variant is judged on the cell of its latest run, and `left_out` counts
/// the others of each group.
Groups load_pretrain_groups(ResultStore& store, int64_t experiment_id,
                            std::map<std::string, int>* left_out);

/// The report row of `group` at its last checkpoint step, of several there the one of the
/// latest cell (a config rerun beside the stored one with --new-runs); null if none.
const ReportRow* final_row(const Report& report, const std::string& group);

/// Mean over `columns` of the row's bootstrap replicates (the same dev draws per column, so
/// two rows' means pair up), and in `point` the mean of the columns' medians; empty when a
/// column lacks an interval.
std::vector<double> mean_replicates(const ReportRow& row, const std::vector<std::string>& columns,
                                    double* point);

}  // namespace experiments
