// GLUE readers for the standard `glue_data/` download (tab-separated, no quoting; layouts,
// labels and sizes as in shared/GLUE_FORMAT.md, held by the task registry analysis/tasks.h) and
// for HF `datasets` JSON-lines exports of the same tasks. The synthetic word-order tasks
// (synthetic_tasks.h) reuse the CoLA / MRPC / STS-B / RTE layouts.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/tasks.h"

namespace experiments {

// The task registry lives in analysis/tasks.h (one entry per task; the readers below use its
// columns, labels, dev splits and HF field names).
using analysis::expected_split_size;
using analysis::find_task;
using analysis::glue_tasks;
using analysis::TaskInfo;

/// One labelled example.
struct Example {
    std::string id;      ///< The file's index/id column, HF's idx, or else the line number.
    std::string text_a;  ///< Bytes as in the file (UTF-8 is not decoded or checked).
    std::string text_b;  ///< Empty for single-sentence tasks.
    std::string label;   ///< A string of task.labels, or the float text for STS-B.
    long line = 0;       ///< 1-based line in the source file.
};

/// The examples of one file.
struct Split {
    std::string path;
    std::vector<Example> examples;
    long skipped = 0;  ///< Rows dropped on purpose: QQP short rows, unlabelled JSONL rows.
};

/// Reads a train or dev file in the GLUE layout of `task`. Fields are split on tabs only, with
/// no quote processing (a '"' is an ordinary character); a trailing '\r' is dropped (CRLF);
/// a leading UTF-8 byte-order mark is dropped; empty lines are ignored. With a header, every
/// row must have as many fields as the header (MNLI: 12 in train, 16 in dev); without one
/// (CoLA) as many as the highest column used plus one. Throws engine::InputError with
/// path:line for a row with the wrong field count ("expected N tab-separated fields, got M"),
/// except QQP, whose malformed rows are skipped and counted; for a label outside
/// task.labels; for an STS-B score that is not a float in [0, 5]; and when the file cannot
/// be opened or lacks its header. Test files (no labels): read_glue_test_tsv.
Split read_glue_tsv(const TaskInfo& task, const std::string& path);

/// Reads an HF `datasets` JSON-lines export: one object a line with the task's text fields
/// (cola/sst2: sentence; mrpc/stsb/rte/wnli: sentence1, sentence2; qqp: question1, question2;
/// mnli: premise, hypothesis; qnli: question, sentence), `label` and optionally `idx`. An
/// integer label i becomes task.labels[i] (HF order, e.g. MNLI 0=entailment 1=neutral
/// 2=contradiction); a string label must be one of task.labels; STS-B takes a number in
/// [0, 5]. Rows with label -1 (unlabelled test rows) are skipped and counted. Empty lines are
/// ignored. Throws engine::InputError with path:line for invalid JSON, a missing or
/// non-string text field, or a bad label.
Split read_glue_jsonl(const TaskInfo& task, const std::string& path);

/// read_glue_jsonl for paths ending in ".jsonl" or ".json", read_glue_tsv otherwise.
Split read_glue_file(const TaskInfo& task, const std::string& path);

/// Loads `glue_dir/<task.name>/train.tsv` and every dev split (keys "train", "dev" or
/// "dev_matched" and "dev_mismatched"). Where a .tsv is absent, the .jsonl file with the same
/// stem is read instead. Throws engine::InputError naming the .tsv path when neither exists.
std::map<std::string, Split> load_task(const TaskInfo& task, const std::string& glue_dir);

/// One test split of a task as GLUE_FORMAT.md lays it out: where the file is (a stem under the
/// task folder, or the AX diagnostic set), which columns hold the texts, and the submission
/// column its predictions are written under.
struct TestSplitInfo {
    std::string name;    ///< Stored split name: "test", "test_matched", "test_mismatched", "ax".
    std::string column;  ///< Submission column: the task key, "mnli_m", "mnli_mm", or "ax".
    /// Candidate paths relative to glue_dir, the first that exists is read
    /// ("RTE/test.tsv"; AX: "diagnostic/diagnostic.tsv", "AX/AX.tsv", "AX/diagnostic.tsv").
    std::vector<std::string> files;
    int text_a = 1;   ///< 0-based column of the first text (column 0 is the index).
    int text_b = -1;  ///< 0-based column of the second text, -1 for single-sentence tasks.
};

/// The test splits of `task` in GLUE_FORMAT.md's layouts: CoLA/SST-2 test.tsv (index,
/// sentence), MRPC (index, #1 ID, #2 ID, #1 String, #2 String), STS-B (9 columns, texts 7 and
/// 8), QQP (id, question1, question2), MNLI test_matched.tsv and test_mismatched.tsv (10
/// columns, texts 8 and 9) and then the AX diagnostic set (index, sentence1, sentence2),
/// QNLI/RTE/WNLI (index, text A, text B). A synthetic task takes the layout of the GLUE task
/// it copies (SYN-CoLA: CoLA's).
std::vector<TestSplitInfo> test_splits(const TaskInfo& task);

/// Reads an unlabelled test file: a header row, then rows of the header's field count (split
/// on tabs only; CRLF, a BOM and empty lines as read_glue_tsv). Example::id is column 0 (the
/// `index` / `id` the server matches predictions on), label is empty. Throws
/// engine::InputError with path:line for a missing header, a header with too few fields for
/// the texts, a row with the wrong field count, an empty index or an index given twice.
Split read_glue_test_tsv(const TestSplitInfo& layout, const std::string& path);

/// The test splits of `task` whose file is present under `glue_dir`, in test_splits order,
/// each read with read_glue_test_tsv. A split whose file is absent is left out; an unreadable
/// one throws as read_glue_test_tsv.
std::vector<std::pair<TestSplitInfo, Split>> load_test_splits(const TaskInfo& task,
                                                              const std::string& glue_dir);

/// A report on `glue_dir`: for every task folder present, per split (train and dev splits),
/// the example count, skipped rows, label distribution (STS-B: counts per unit interval of
/// the score) and the expected size from GLUE_FORMAT.md with a mismatch mark; a split that
/// fails to load shows its error instead. GLUE tasks without a folder are listed as missing;
/// synthetic tasks only appear when present. `json` selects a JSON document (nlohmann) over
/// an aligned text table. Throws engine::InputError when glue_dir is not a directory.
/// `unreadable`, when given, receives the number of split files that failed to load.
std::string glue_stats(const std::string& glue_dir, bool json, int* unreadable = nullptr);

}  // namespace experiments
