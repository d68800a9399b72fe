// The paper's Table 1 layout from stored GLUE results: rows = variants x pretraining
// checkpoints, columns = tasks (MNLI-m/mm, QNLI, QQP, SST, CoLA, MRPC, RTE, STS, then the
// built-in synthetic tasks), cells = the TUPE reporting rule (median over seeds per lr, then
// the best lr), the best per column marked, deltas against the first row.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "experiments/result_store.h"

namespace experiments {

enum class ReportFormat { kTable, kMarkdown, kCsv, kLatex, kJson };
/// "table", "markdown", "csv", "latex", "json"; throws std::invalid_argument otherwise.
ReportFormat report_format_from_string(const std::string& name);

/// One cell: the selection metric of the task (MCC for CoLA, Pearson for STS-B, accuracy
/// elsewhere; GLUE_FORMAT.md) in percent.
struct ReportCell {
    bool present = false;
    double median = 0;  ///< Median over seeds at the best lr: the reported number.
    double mean = 0;    ///< Mean over seeds at the best lr.
    double stddev = 0;  ///< Sample standard deviation over seeds at the best lr (0 when n = 1).
    int n = 0;          ///< Runs at the best lr (pretraining x fine-tuning seeds).
    int pretrain_seeds = 0;  ///< Distinct pretraining runs among them.
    double best_lr = 0;
    /// The 95% interval of the reported median: a bootstrap over dev examples, and over
    /// pretraining and fine-tuning seeds where there are several (analysis::
    /// bootstrap_median_metric). Needs the stored predictions; has_interval false without.
    bool has_interval = false;
    double lo = 0, hi = 0;
    std::vector<double> replicates;  ///< The bootstrap replicates behind lo/hi.
    /// The metric's chance level on this dev set (majority class, always-positive F1, 0 for
    /// MCC and correlations), from the stored gold labels.
    bool has_chance = false;
    double chance = 0;
    /// lo > chance: the cell can be told apart from chance. False without an interval.
    bool above_chance = false;
};

struct ReportRow {
    /// "tupe-a @ 300", "tupe-a @ 300 [train.lr=0.002]" when runs of the variant differ in more
    /// than seeds and lr (one row per cell: never pooled), or "TUPE-A (paper, 1M)".
    std::string label;
    std::string variant;
    std::string cell;  ///< The runs' cell (RunRecord::cell); "" for runs stored before it.
    int64_t step = 0;
    bool reference = false;                   ///< A published row, not a run of this store.
    std::map<std::string, ReportCell> cells;  ///< By column key.
    bool has_average = false;
    double average = 0;
    ReportCell average_cell;  ///< Interval and chance of Avg (mean of the columns' replicates).
};

struct Report {
    std::string experiment;
    std::vector<std::string> columns;  ///< Column keys in display order (mnli_m, ..., syn-rte).
    std::vector<ReportRow> rows;
    std::string average_rule;  ///< How Avg was computed, printed with every table.
    bool synthetic = false;    ///< Some columns are built-in synthetic tasks.
};

/// Builds the table from the store's results of one experiment. With `predictions` (the
/// store's per-example predictions) every cell gets its interval and chance level;
/// `parent_of` (fine-tuning run id -> pretraining run id) groups runs by pretraining seed.
/// Rows group variants by variant_group ("tupe-a@seed2" -> "tupe-a") and by cell: runs whose
/// identities differ in more than the pooled keys are separate rows, labelled by what differs
/// (from `identity_of_cell`: cell -> one of its runs' identity).
Report build_report(const std::string& experiment, const std::vector<GlueResultRecord>& results,
                    const std::vector<PredictionSet>& predictions = {},
                    const std::map<int64_t, int64_t>& parent_of = {},
                    const std::map<std::string, std::string>& identity_of_cell = {});

/// build_report of experiment `name` with everything the store holds for it. Throws
/// StoreError for a store problem, std::invalid_argument for an unknown experiment.
Report load_report(ResultStore& store, const std::string& name);

/// The pretraining side of the table, one line per variant group: the final validation MLM
/// loss of each pretraining seed, the unigram floor it has to beat (run params
/// floor.unigram_nats), and a warning for every run that did not get 0.1 nats below it.
std::string pretraining_summary(ResultStore& store, const std::string& name);

/// The selection metric of a task column: mcc for CoLA, pearson for STS-B, accuracy else.
std::string selection_metric(const std::string& task);

/// Adds the paper's published Table 1 rows (resources/paper_table1.tsv) below the runs.
void add_paper_rows(Report& report, const std::string& paper_table_tsv);

/// Renders the report. `mean_std` shows mean +- std (n) instead of the median.
std::string render_report(const Report& report, ReportFormat format, bool mean_std = false);

/// The display name of a column key ("mnli_m" -> "MNLI-m", "syn-cola" -> "SYN-CoLA").
std::string column_title(const std::string& key);

}  // namespace experiments
