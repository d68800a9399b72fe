// A stored experiment read as a factorial design: one row per finished pretraining run with its
// factor levels, read from the run's stored resolved config (every config key whose value
// differs between the runs; keys that always change together are one factor and its aliases;
// the seed is the replicate), and its metrics (final validation loss, the floors, the task
// columns and their average, positional share, the ablation's whole-model change in loss).
// Then the main effect of each factor (the mean at each level with a 95% interval) and the
// interaction of two, from the pooled within-cell (seed-to-seed) variance: the textbook
// analysis of a replicated factorial (Box, Hunter & Hunter, "Statistics for Experimenters",
// 2nd ed. 2005, ch. 5). Shared by `tupe factors` and the app's factor view.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "experiments/result_store.h"

namespace experiments {

/// One factor: the config key that names it, its levels in display order (numbers ascending,
/// false before true, otherwise the order the runs were stored in) and the keys that change
/// with it in every run (model.preset's scheme fields).
struct Factor {
    std::string key;
    std::vector<std::string> levels;
    std::vector<std::string> aliases;
};

/// One finished pretraining run.
struct FactorRun {
    int64_t run_id = 0;
    std::string name;                       ///< "untie_cls=true,shared_pos_term=false@seed2"
    int64_t seed = 0;                       ///< train.seed: the replicate
    std::vector<std::string> levels;        ///< one per factor
    std::map<std::string, double> metrics;  ///< by metric key; absent: not measured
    /// The metric, or NaN when the run has none.
    double metric(const std::string& key) const;
};

/// A metric column: its key (tupe factors --metric), a title and whether lower is better.
struct FactorMetric {
    std::string key;    ///< "val_loss", "task_avg", "SYN-BSHIFT", "positional_share", ...
    std::string title;  ///< "final validation loss (nats)"
    bool lower_is_better = false;
};

/// The experiment as a factorial.
struct FactorTable {
    std::string experiment;
    std::vector<Factor> factors;
    std::vector<FactorMetric> metrics;  ///< the columns that at least one run has
    std::vector<FactorRun> runs;        ///< in store order
    std::vector<std::string> notes;     ///< runs left out and why
    /// The index of factor `key` (or of a factor it aliases), -1 when there is none.
    int factor_index(const std::string& key) const;
    /// The metric `key`, nullptr when the table has no such column.
    const FactorMetric* find_metric(const std::string& key) const;
};

/// Reads experiment `name` from the store: its finished pretraining runs, their levels and
/// metrics. Throws std::invalid_argument for an unknown experiment or one without a finished
/// pretraining run; StoreError for a store problem.
FactorTable load_factor_table(ResultStore& store, const std::string& name);

/// The mean of a metric at one level (or cell) with its 95% t-interval (NaN bounds when the
/// design has no replicate to estimate the seed-to-seed spread from).
struct LevelMean {
    std::string level;
    double mean = std::numeric_limits<double>::quiet_NaN();
    double lo = std::numeric_limits<double>::quiet_NaN();
    double hi = std::numeric_limits<double>::quiet_NaN();
    int cells = 0;  ///< cells of the other factors averaged (each weighted equally)
    int runs = 0;
};

/// A difference of means with its 95% t-interval and two-sided p (NaN without replicates).
struct Contrast {
    bool valid = false;
    double estimate = std::numeric_limits<double>::quiet_NaN();
    double lo = std::numeric_limits<double>::quiet_NaN();
    double hi = std::numeric_limits<double>::quiet_NaN();
    double p = std::numeric_limits<double>::quiet_NaN();
};

/// One factor's main effect: its level means, pooled over the other factors (`within_factor`
/// empty) or within one level of another factor; for two levels the second minus the first.
struct MainEffect {
    std::string factor;
    std::string within_factor, within_level;
    std::vector<LevelMean> levels;
    Contrast contrast;
};

/// Every factor's main effect on one metric.
struct FactorEffects {
    std::string metric;
    int runs = 0, cells = 0;
    double residual_sd = std::numeric_limits<double>::quiet_NaN();  ///< pooled within cells
    int df = 0;  ///< runs - cells with a value: the interval's degrees of freedom
    std::vector<MainEffect> effects;
    std::vector<std::string> notes;
};

/// The main effects of every factor on `metric` over the runs with a value. A level mean is the
/// unweighted mean of the cell means at that level (a least-squares mean: each combination of
/// the other factors counts once however many seeds it has); its interval is
/// mean +- t(0.975, df) * s * sqrt(sum 1/n_c) / k over its k cells, s the pooled within-cell
/// standard deviation. With `within` (a factor key), every other factor's effect within each of
/// its levels, with the same s. Throws std::invalid_argument for an unknown metric or factor.
FactorEffects main_effects(const FactorTable& table, const std::string& metric,
                           const std::string& within = "");

/// Two factors' cell means (a's levels x b's levels, pooled over the rest) and, when both have
/// two levels, the interaction contrast (m11 - m10) - (m01 - m00).
struct Interaction {
    std::string a, b;
    std::vector<std::string> a_levels, b_levels;
    std::vector<std::vector<LevelMean>> cells;  ///< [a level][b level]
    Contrast contrast;
};
Interaction interaction(const FactorTable& table, const std::string& metric, const std::string& a,
                        const std::string& b);

/// `tupe factors`' output: "table", "json" or "csv". Throws std::invalid_argument otherwise.
std::string render_factor_effects(const FactorTable& table, const FactorEffects& effects,
                                  const std::string& format);

}  // namespace experiments
