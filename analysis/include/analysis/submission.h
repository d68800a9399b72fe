// GLUE submission files (`index<TAB>prediction` with a header line, one file per task, as
// shared/GLUE_FORMAT.md describes them): reading one, and scoring it against gold labels with
// the task's metric (analysis/metrics.h). Errors name the file and line.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/metrics.h"

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

}  // namespace analysis
