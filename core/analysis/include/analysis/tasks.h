// The GLUE task registry: everything the workbench knows about a task, in one table
// (core/analysis/src/tasks.cpp). File layout and labels as in shared/GLUE_FORMAT.md (a copy is
// resources/GLUE_FORMAT.md, which tests/core/test_tasks.cpp reads and checks this table
// against), dev splits and the columns they are reported under, the metric, the TUPE paper's
// model-selection metric and Table 1 column order, and the expected split sizes. The readers
// (experiments/glue_data.h), the metrics (analysis/metrics.h), the runner and the report
// derive from it: a new GLUE-like task is one entry here.
#pragma once

#include <string>
#include <vector>

namespace analysis {

/// How a task is scored. Keys written into TaskScores::metrics (analysis/metrics.h), in
/// percent: kAccuracy "accuracy"; kF1Accuracy "f1" and "accuracy"; kMcc "mcc";
/// kPearsonSpearman "pearson" and "spearman".
enum class MetricKind { kAccuracy, kF1Accuracy, kMcc, kPearsonSpearman };

/// "accuracy", "f1_accuracy", "mcc" or "pearson_spearman".
const char* metric_kind_name(MetricKind kind);

/// The TUPE paper's model-selection metric key of a kind (shared/GLUE_FORMAT.md): "mcc" for
/// kMcc, "pearson" for kPearsonSpearman, "accuracy" otherwise (MRPC and QQP select on accuracy).
const char* selection_metric_key(MetricKind kind);

/// One dev split of a task and the result column it is reported under.
struct DevSplit {
    std::string file;                  ///< File stem: "dev", "dev_matched", "dev_mismatched".
    std::string column;                ///< Result column: the task key, or mnli_m / mnli_mm.
    std::string label;                 ///< Table header: "MNLI-m", "SST" (the paper's), "CoLA".
    std::vector<std::string> aliases;  ///< More spellings of the column: "mnli_matched".
    long size = -1;                    ///< Examples in GLUE_FORMAT.md, -1 when unknown.
};

/// One task: where its files live, which columns hold what, and how it is scored.
struct TaskInfo {
    std::string name;  ///< GLUE folder name: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI.
    std::string key;   ///< Lower-case key: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli.
    bool header;       ///< train/dev files start with a header row (all but CoLA).
    int text_a;        ///< 0-based column of the first text.
    int text_b;        ///< 0-based column of the second text, -1 for single-sentence tasks.
    int label;         ///< 0-based label column, -1 = the last column.
    /// Label strings as written in the TSV files, in HF `datasets` order (index i of an HF
    /// export is labels[i]). Empty for regression.
    std::vector<std::string> labels;
    bool regression;                      ///< STS-B: the label is a float in [0, 5].
    bool skip_short_rows;                 ///< QQP: rows with too few fields are dropped.
    std::vector<std::string> dev_splits;  ///< File stems of `dev`, in order.
    std::vector<DevSplit> dev;            ///< The dev splits with their result columns.
    long train_size;                      ///< Training examples in GLUE_FORMAT.md, -1 unknown.
    int default_epochs;                   ///< 5 for MNLI/QNLI/QQP, 10 otherwise.
    bool synthetic;                       ///< A generated word-order task (synthetic_tasks.h).
    /// A minimal-pair task scored without training (experiments/zero_shot.h): each dev row
    /// holds two orders of the same words, the label is the index (0 or 1) of the attested
    /// one, and the pretrained MLM's pseudo-log-likelihood picks one. Accuracy; chance 50.
    bool zero_shot = false;
    MetricKind metric;  ///< How its dev sets are scored.
    /// Text fields of an HF `datasets` JSON-lines export: {"sentence", ""}, {"premise",
    /// "hypothesis"}, ...
    std::string jsonl_a, jsonl_b;
    /// Position in the TUPE paper's Table 1 (MNLI 0, QNLI 1, QQP 2, SST-2 3, CoLA 4, MRPC 5,
    /// RTE 6, STS-B 7); -1 for a task outside it (WNLI, the synthetic tasks).
    int paper_position;
};

/// The nine GLUE tasks in GLUE_FORMAT.md's order, then the synthetic tasks SYN-CoLA,
/// SYN-MRPC, SYN-STS-B and SYN-RTE (fine-tuned), then the zero-shot minimal-pair tasks
/// SYN-BSHIFT, SYN-MOVE, SYN-SPAN and SYN-REV.
const std::vector<TaskInfo>& glue_tasks();

/// The task whose folder name or key equals `name`, ignoring case ("STS-B", "stsb", "mnli").
/// Throws std::invalid_argument listing the valid names when there is none.
const TaskInfo& find_task(const std::string& name);

/// The size of a split as GLUE_FORMAT.md gives it (examples, header excluded), or -1 when
/// unknown (synthetic tasks, test splits, unknown split names). Split = file stem.
long expected_split_size(const TaskInfo& task, const std::string& split);

/// The result column of a task's dev split: "mnli_mm" for (MNLI, "dev_mismatched"), the key
/// for a task with one dev split. Throws std::invalid_argument for a split the task lacks.
std::string reported_column(const TaskInfo& task, const std::string& dev_split);

/// A task and one of its dev splits, found from any spelling of a task or a result column.
struct TaskColumn {
    const TaskInfo* task = nullptr;
    const DevSplit* split = nullptr;  ///< nullptr when `name` named a task of 2+ dev splits.
};

/// Resolves a task or column name: "MNLI-mm", "mnli_mismatched" -> (MNLI, dev_mismatched);
/// "SST-2", "sst2" -> (SST-2, dev); "mnli" -> (MNLI, no split); "syn-cola" -> (SYN-CoLA, dev).
/// Matching ignores case and treats '-' and '_' alike. Returns {nullptr, nullptr} for a name
/// that is neither.
TaskColumn resolve_task_column(const std::string& name);

/// The TUPE paper's Table 1 columns in its order: mnli_m, mnli_mm, qnli, qqp, sst2, cola,
/// mrpc, rte, stsb (the nine numbers of its GLUE average).
const std::vector<std::string>& paper_columns();

/// The keys of the paper's Table 1 tasks in its order: mnli, qnli, qqp, sst2, cola, mrpc,
/// rte, stsb.
const std::vector<std::string>& paper_task_keys();

/// The keys of the synthetic tasks in registry order: syn-cola, syn-mrpc, syn-stsb, syn-rte,
/// syn-bshift, syn-move, syn-span, syn-rev.
const std::vector<std::string>& synthetic_task_keys();

/// Every result column in report order: the paper's columns, the synthetic tasks, then the
/// other GLUE tasks (WNLI).
const std::vector<std::string>& report_columns();

}  // namespace analysis
