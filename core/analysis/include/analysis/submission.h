// GLUE submission files (`index<TAB>prediction` with a header line, one file per task, as
// shared/GLUE_FORMAT.md describes them): reading one, and scoring it against gold labels with
// the task's metric (analysis/metrics.h), and writing one from stored predictions under the
// GLUE server's file names (CoLA.tsv ... MNLI-m.tsv, MNLI-mm.tsv ... AX.tsv), packed as the
// server takes them: a zip with the files at its top level (stored, CRC-32 as PKWARE's
// APPNOTE.TXT 4.3). Errors name the file and line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/tasks.h"

namespace analysis {

/// Reads a submission file: a header line (two tab-separated fields, e.g. "index\tprediction";
/// a UTF-8 BOM is skipped), then one `index<TAB>prediction` row per line. CRLF line ends are
/// accepted; blank lines are accepted only at the end, so row i of the result is line i + 2.
/// Throws engine::InputError(path, message, line) for an unreadable or empty file, a header
/// that looks like data (first field an integer), a row without exactly two fields, an empty
/// field, or a blank line followed by more rows.
std::vector<std::pair<std::string, std::string>> read_submission(const std::string& path);

/// Scores submission rows (index, prediction) against gold_by_index (index -> gold label
/// string, or a number for STS-B). Classification labels map to ids through `labels` (its
/// position: for kF1Accuracy tasks labels[1] is the positive class of F1); STS-B parses both
/// sides as numbers and ignores `labels`. Errors in the rows throw engine::InputError(source,
/// ..., line) with line = row + 2 (as read_submission numbers them): an index not in the gold
/// set, an index given twice, an unknown label or a malformed number. Gold indices without a
/// prediction throw engine::InputError(source, ...) saying how many are missing and naming the
/// first few. Problems with the gold data or `labels` (empty, duplicate labels, a gold label
/// not in `labels`) throw std::invalid_argument.
TaskScores score_submission(const std::string& task,
                            const std::vector<std::pair<std::string, std::string>>& rows,
                            const std::map<std::string, std::string>& gold_by_index,
                            const std::vector<std::string>& labels,
                            const std::string& source = "submission");

/// The GLUE server's file names in the order of its upload page: CoLA.tsv, SST-2.tsv,
/// MRPC.tsv, STS-B.tsv, QQP.tsv, MNLI-m.tsv, MNLI-mm.tsv, QNLI.tsv, RTE.tsv, WNLI.tsv, AX.tsv.
const std::vector<std::string>& glue_submission_files();

/// The submission file name of a result column: "cola" -> "CoLA.tsv", "mnli_m" -> "MNLI-m.tsv",
/// "mnli_mm" -> "MNLI-mm.tsv", "syn-cola" -> "SYN-CoLA.tsv" (a built-in synthetic task under its
/// own name, not a GLUE file), "ax" -> "AX.tsv" (the diagnostic set, predicted by the MNLI
/// model). Any spelling resolve_task_column accepts; a task of two dev splits ("mnli") or an
/// unknown name throws std::invalid_argument.
std::string submission_file_name(const std::string& column);

/// The task whose labels a column's file is written with: the column's task, MNLI for "ax".
/// Throws std::invalid_argument as submission_file_name.
const TaskInfo& submission_task(const std::string& column);

/// The prediction strings of one dev split, row i for dev example i: the label string
/// task.labels[id] for a classification task (the predicted value must be an integer id in
/// range), the value in the shortest text that reads back exactly for a regression task
/// (STS-B). Throws std::invalid_argument naming the row for a value that is not a label id or
/// not finite.
std::vector<std::string> prediction_strings(const TaskInfo& task,
                                            const std::vector<double>& predicted);

/// Writes `path` in the GLUE server's layout: the header `index<TAB>prediction`, then one
/// row `index<TAB>prediction_strings(task, predicted)[i]` per example, '\n' line ends, no
/// quoting. The index is ids[i] (a test file's own index column), or with no ids the 0-based
/// row of the split file (header excluded), as `tupe score` reads a dev file. read_submission
/// reads the file back. Throws engine::InputError(path, ...) when the file cannot be written,
/// std::invalid_argument as prediction_strings, for ids of another length than predicted, or
/// an id that is empty or holds a tab or line break.
void write_submission_file(const std::string& path, const TaskInfo& task,
                           const std::vector<double>& predicted,
                           const std::vector<std::string>& ids = {});

/// One result column's predictions for write_submission.
struct SubmissionColumn {
    std::string
        column;  ///< Result column: "cola", "mnli_m", "syn-rte" (resolve_task_column), "ax".
    std::vector<double> predicted;      ///< Label ids or scores in split-file order.
    std::vector<std::string> ids = {};  ///< The examples' own indices; empty = 0-based rows.
};

/// What write_submission wrote.
struct SubmissionWritten {
    std::vector<std::string> files;  ///< Paths written, in the order given.
};

/// Writes dir/submission_file_name(c.column) for each column (creating dir), with
/// write_submission_file. Errors as write_submission_file and submission_file_name; a column
/// given twice throws std::invalid_argument.
SubmissionWritten write_submission(const std::string& dir,
                                   const std::vector<SubmissionColumn>& columns);

/// CRC-32 (ISO-HDLC / zip / PNG: reflected polynomial 0xEDB88320, initial and final XOR
/// 0xFFFFFFFF) of `size` bytes, continuing from `crc` (0 for a fresh one):
/// crc32("123456789") = 0xCBF43926.
std::uint32_t crc32(const void* data, std::size_t size, std::uint32_t crc = 0);

/// One file of a zip archive.
struct ZipEntry {
    std::string name;  ///< Path inside the archive, '/' separated, e.g. "CoLA.tsv".
    std::string data;  ///< Its bytes.
};

/// Writes `path` as a zip archive of `entries` in the given order, each stored (method 0, no
/// compression) with its CRC-32, sizes and a fixed time stamp (1980-01-01 00:00), so equal
/// entries give byte-equal archives; local headers, the central directory and its end record
/// as PKWARE's APPNOTE.TXT 4.3.7, 4.3.12 and 4.3.16 (no zip64: every size and offset must fit
/// 32 bits). Written to a temporary file, then renamed. Throws std::invalid_argument for an
/// empty, duplicate, absolute or over-long name, or an archive past zip's 32-bit limits;
/// engine::InputError(path, ...) when it cannot be written.
void write_stored_zip(const std::string& path, const std::vector<ZipEntry>& entries);

/// Packs the given files (paths, e.g. SubmissionWritten::files) into dir/submission.zip, each
/// under its file name at the zip's top level (the layout the GLUE server takes), and returns
/// the zip's path. Throws engine::InputError naming a file that cannot be read, and as
/// write_stored_zip.
std::string write_submission_zip(const std::string& dir, const std::vector<std::string>& files);

}  // namespace analysis
