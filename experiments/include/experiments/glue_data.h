// GLUE readers for the standard `glue_data/` download (tab-separated, no quoting; layouts,
// labels and sizes as in shared/GLUE_FORMAT.md, held by the task registry analysis/tasks.h) and
// for HF `datasets` JSON-lines exports of the same tasks. The synthetic word-order tasks
// (synthetic_tasks.h) reuse the CoLA / MRPC / STS-B / RTE layouts.
#pragma once

#include <map>
#include <string>
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
/// be opened or lacks its header. Test files (no labels) are not supported.
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

/// A report on `glue_dir`: for every task folder present, per split (train and dev splits),
/// the example count, skipped rows, label distribution (STS-B: counts per unit interval of
/// the score) and the expected size from GLUE_FORMAT.md with a mismatch mark; a split that
/// fails to load shows its error instead. GLUE tasks without a folder are listed as missing;
/// synthetic tasks only appear when present. `json` selects a JSON document (nlohmann) over
/// an aligned text table. Throws engine::InputError when glue_dir is not a directory.
/// `unreadable`, when given, receives the number of split files that failed to load.
std::string glue_stats(const std::string& glue_dir, bool json, int* unreadable = nullptr);

}  // namespace experiments
