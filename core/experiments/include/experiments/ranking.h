// Which variants of a study can be told apart (`tupe rank`): every variant ranked on its final
// validation MLM loss (paired t-tests over pretraining seeds) and on its task average at the
// last checkpoint (paired bootstrap over seeds and dev examples), every pair tested, the
// p-values Holm-corrected over all pairs of the ranking, and the variants grouped: variants
// that share a group letter are not told apart at family-wise alpha. A ranking of 16 schemes
// is 120 comparisons; without the correction about 6 of them would come out "significant" by
// chance alone.
#pragma once

#include <string>
#include <vector>

#include "experiments/claims.h"
#include "experiments/result_store.h"

namespace experiments {

struct RankedVariant {
    std::string variant;
    int seeds = 0;       ///< Pretraining seeds behind the value.
    double value = 0;    ///< Mean final loss over seeds, or the task average's point value.
    double lo = 0;       ///< 95% interval (t over seeds; percentile bootstrap for tasks);
    double hi = 0;       ///< lo == hi == value when there is none (one seed).
    std::string groups;  ///< Letters of the groups it belongs to ("a", "ab").
};

struct RankedPair {
    std::string better, worse;  ///< In rank order.
    double difference = 0;      ///< better - worse (loss: negative; score: positive).
    int n = 0;                  ///< Seeds paired (loss) or bootstrap replicates (tasks).
    double p = 1;               ///< Two-sided, uncorrected.
    double p_holm = 1;          ///< Holm-adjusted over every pair of the ranking.
    bool apart = false;         ///< p_holm < alpha.
};

struct Ranking {
    std::string measure;  ///< "validation MLM loss at step 3000", "task average (...)".
    std::string test;     ///< The test, the correction and alpha, in one line.
    bool lower_is_better = true;
    std::vector<RankedVariant> variants;  ///< Best first.
    std::vector<RankedPair> pairs;        ///< Every pair, in rank order of the better one.
    std::string note;                     ///< Why a ranking has no test (empty otherwise).
};

struct RankOptions {
    /// Task columns averaged for the task ranking (report column keys); empty = every column
    /// of the report.
    std::vector<std::string> columns;
    double alpha = 0.05;  ///< Family-wise, over all pairs of one ranking.
};

/// The rankings of experiment `name`: validation loss, then the task average when the store
/// holds fine-tuning or zero-shot results with predictions. Throws std::invalid_argument for an
/// unknown experiment or a column the report does not have.
std::vector<Ranking> rank_variants(ResultStore& store, const std::string& name,
                                   const RankOptions& options = {});

/// Table, markdown or JSON (the formats of `tupe claims`).
std::string render_rankings(const std::string& experiment, const std::vector<Ranking>& rankings,
                            ClaimsFormat format);

}  // namespace experiments
