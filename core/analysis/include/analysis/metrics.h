// GLUE evaluation metrics in plain C++: accuracy, F1 of class 1, Matthews correlation, Pearson
// and Spearman (matching scikit-learn / SciPy, edge cases noted per function), per-task scores in
// percent as GLUE tables print them, and the TUPE paper's and the GLUE leaderboard's averages.
// Which task is scored how comes from the task registry (analysis/tasks.h); GLUE submission
// files are read and scored in analysis/submission.h.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/tasks.h"

namespace analysis {

// Metrics on raw predictions. Each throws std::invalid_argument (with both sizes) when the two
// vectors differ in length or are empty. Results are fractions, not percent.

/// Fraction of positions where pred[i] == gold[i], in [0, 1].
double accuracy(const std::vector<int>& pred, const std::vector<int>& gold);

/// F1 of label 1 against every other label: 2 TP / (2 TP + FP + FN). Returns 0 when undefined
/// (no 1 in pred or gold), as sklearn.metrics.f1_score(pos_label=1, zero_division=0).
double f1_class1(const std::vector<int>& pred, const std::vector<int>& gold);

/// Matthews correlation coefficient, multi-class form as sklearn.metrics.matthews_corrcoef:
/// with n samples, c correct, t_k / p_k the gold / predicted counts of label k,
///   (c n - sum_k t_k p_k) / sqrt((n^2 - sum_k p_k^2) (n^2 - sum_k t_k^2)).
/// Returns 0 when the denominator is 0 (e.g. constant predictions), as sklearn does.
double matthews_corrcoef(const std::vector<int>& pred, const std::vector<int>& gold);

/// Pearson correlation, in [-1, 1]. Returns 0 when either series is constant (all values
/// equal, including n == 1), where scipy.stats.pearsonr returns nan (and warns). Throws
/// std::invalid_argument for a non-finite value.
double pearson(const std::vector<double>& x, const std::vector<double>& y);

/// Spearman rank correlation: Pearson of the ranks, ties given their average rank (as
/// scipy.stats.rankdata(method="average") and scipy.stats.spearmanr). Returns 0 when either
/// series is constant, where SciPy returns nan. Throws std::invalid_argument for a non-finite
/// value.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

/// Average ranks, 1-based, ties averaged: {10, 20, 20, 30} -> {1, 2.5, 2.5, 4}.
std::vector<double> average_ranks(const std::vector<double>& values);

// Tasks and their scores.

/// Scores of one task, in percent (x100) as GLUE tables show them, keyed as in MetricKind.
struct TaskScores {
    std::map<std::string, double> metrics;
};

/// The canonical name of a GLUE task: cola, sst2, mrpc, stsb, qqp, mnli_m, mnli_mm, qnli, rte,
/// wnli. Matching ignores case and treats '-' and '_' alike, so the GLUE folder and submission
/// names (CoLA, SST-2, STS-B, MNLI-m, MNLI-mm, ...) are accepted, and mnli_matched /
/// mnli_mismatched too. A bare "MNLI" is rejected as ambiguous (say mnli_m or mnli_mm).
/// Synthetic names ("syn-" in any case, e.g. SYN-CoLA) are returned unchanged. Anything else
/// throws std::invalid_argument listing the accepted names.
std::string canonical_task(const std::string& task);

/// True for a synthetic task name: starts with "syn-", ignoring case (SYN-CoLA, syn-copy).
bool is_synthetic_task(const std::string& task);

/// The metric kind of a GLUE task: cola -> kMcc; mrpc, qqp -> kF1Accuracy; stsb ->
/// kPearsonSpearman; sst2, mnli_m, mnli_mm, qnli, rte, wnli -> kAccuracy. Throws
/// std::invalid_argument for unknown names and for syn- names (they carry no fixed kind).
MetricKind metric_kind(const std::string& task);

/// The label strings of a GLUE task in the usual id order (shared/GLUE_FORMAT.md): "0", "1"
/// for cola, sst2, mrpc, qqp, wnli; entailment, neutral, contradiction for MNLI; entailment,
/// not_entailment for qnli and rte; empty for stsb (regression). Throws like metric_kind.
std::vector<std::string> glue_labels(const std::string& task);

/// Scores predictions against gold by `kind`. Classification kinds take label ids stored as
/// doubles and throw std::invalid_argument for a value that is not a finite integer (naming
/// its position); kPearsonSpearman takes the raw scores. Size errors as the metrics above.
TaskScores score_task(MetricKind kind, const std::vector<double>& predictions,
                      const std::vector<double>& gold);

/// Scores a GLUE task (any spelling canonical_task accepts) with its metric_kind. A syn- name
/// throws std::invalid_argument: use the overload taking a MetricKind.
TaskScores score_task(const std::string& task, const std::vector<double>& predictions,
                      const std::vector<double>& gold);

/// Scores a synthetic (syn-...) task with the given kind. A GLUE name is accepted too when
/// `kind` is its metric_kind; a different kind throws std::invalid_argument.
TaskScores score_task(const std::string& task, MetricKind kind,
                      const std::vector<double>& predictions, const std::vector<double>& gold);

/// The model-selection metric of the TUPE paper (percent): "mcc" for kMcc, "pearson" for
/// kPearsonSpearman, "accuracy" otherwise (so MRPC and QQP select on accuracy, not F1).
/// Throws std::invalid_argument when that key is missing from `scores`.
double primary_metric(MetricKind kind, const TaskScores& scores);

/// primary_metric for a task by name. For a GLUE task the kind is metric_kind(task); for a
/// syn- task it is read off the keys: "mcc" if present, else "pearson", else "accuracy".
double primary_metric(const std::string& task, const TaskScores& scores);

// Averages. Keys may use any spelling canonical_task accepts; syn- keys are ignored;
// unrecognised names, and two keys naming the same task, throw std::invalid_argument.

/// The TUPE paper's GLUE average (its Table 1, dev sets): the plain mean of 9 primary
/// metrics, MNLI-m and MNLI-mm counted separately: mnli_m, mnli_mm, qnli, qqp, sst2, cola,
/// mrpc, rte, stsb. WNLI is left out (ignored when present). Throws std::invalid_argument
/// naming every missing task.
double tupe_average(const std::map<std::string, double>& primary_by_task);

/// The GLUE leaderboard score: a macro-average over 9 tasks, WNLI included: cola (mcc),
/// sst2, qnli, rte, wnli (accuracy), mrpc and qqp (mean of f1 and accuracy), stsb (mean of
/// pearson and spearman), and MNLI counted once as mean(mnli_m accuracy, mnli_mm accuracy).
/// AX is not part of it. Throws std::invalid_argument naming every missing task, or the task
/// and key when a metric is missing from a task's scores.
double leaderboard_average(const std::map<std::string, TaskScores>& scores_by_task);

}  // namespace analysis
