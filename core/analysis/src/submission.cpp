// GLUE submission files (analysis/submission.h): `index<TAB>prediction` rows read with line
// numbers, then scored with the task's metric against gold labels; and written from stored
// predictions under the GLUE server's file names.
#include "analysis/submission.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "engine/errors.h"
#include "engine/text_util.h"

namespace analysis {

using engine::join;

namespace {

/// Parses the whole of `text` as a finite double, locale-independently (Qt sets the C locale
/// from the environment, so strtod could expect a decimal comma).
bool parse_double(const std::string& text, double& out) {
    const char* first = text.data();
    const char* last = first + text.size();
    if (first != last && *first == '+') ++first;  // from_chars rejects a leading '+'
    const auto [ptr, ec] = std::from_chars(first, last, out);
    return ec == std::errc() && ptr == last && first != last && std::isfinite(out);
}

bool is_integer_text(const std::string& s) {
    std::size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    if (i == s.size()) return false;
    for (; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
    }
    return true;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (;;) {
        const std::size_t tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab == std::string::npos ? tab : tab - start));
        if (tab == std::string::npos) return fields;
        start = tab + 1;
    }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> read_submission(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, "cannot open the submission file");
    std::vector<std::pair<std::string, std::string>> rows;
    std::string line;
    long line_no = 0;
    long first_blank = 0;  // the first blank line seen, allowed only if nothing follows
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line_no == 1) {
            if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
            const auto fields = split_tabs(line);
            if (fields.size() != 2) {
                throw engine::InputError(path,
                                         "expected a header line 'index<TAB>prediction', got " +
                                             std::to_string(fields.size()) + " field(s)",
                                         line_no);
            }
            if (is_integer_text(fields[0])) {
                throw engine::InputError(
                    path,
                    "the first line looks like data; expected a header 'index<TAB>prediction'",
                    line_no);
            }
            continue;
        }
        if (line.find_first_not_of(" \t") == std::string::npos) {
            if (first_blank == 0) first_blank = line_no;
            continue;
        }
        if (first_blank != 0) {
            throw engine::InputError(path, "blank line inside the file", first_blank);
        }
        const auto fields = split_tabs(line);
        if (fields.size() != 2) {
            throw engine::InputError(path,
                                     "expected 2 tab-separated fields (index, prediction), got " +
                                         std::to_string(fields.size()),
                                     line_no);
        }
        if (fields[0].empty() || fields[1].empty()) {
            throw engine::InputError(
                path, std::string("empty ") + (fields[0].empty() ? "index" : "prediction"),
                line_no);
        }
        rows.emplace_back(fields[0], fields[1]);
    }
    if (in.bad()) throw engine::InputError(path, "read error", line_no);
    if (line_no == 0) {
        throw engine::InputError(path, "empty file; expected a header 'index<TAB>prediction'");
    }
    return rows;
}

TaskScores score_submission(const std::string& task,
                            const std::vector<std::pair<std::string, std::string>>& rows,
                            const std::map<std::string, std::string>& gold_by_index,
                            const std::vector<std::string>& labels, const std::string& source) {
    const MetricKind kind = metric_kind(task);
    const bool regression = kind == MetricKind::kPearsonSpearman;
    if (gold_by_index.empty()) {
        throw std::invalid_argument("score_submission: no gold labels for task " + task);
    }
    std::map<std::string, int> label_id;
    if (!regression) {
        if (labels.empty()) {
            throw std::invalid_argument("score_submission: empty label list for task " + task);
        }
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (!label_id.emplace(labels[i], static_cast<int>(i)).second) {
                throw std::invalid_argument("score_submission: label '" + labels[i] +
                                            "' listed twice");
            }
        }
    }
    const std::string expected = regression ? "a number" : "one of: " + join(labels);

    // Gold, in index order; the position of each index in it.
    std::vector<double> gold;
    std::map<std::string, std::size_t> slot;
    for (const auto& [index, text] : gold_by_index) {
        double value = 0;
        if (regression) {
            if (!parse_double(text, value)) {
                throw std::invalid_argument("score_submission: gold score '" + text +
                                            "' for index " + index + " is not a number");
            }
        } else {
            const auto it = label_id.find(text);
            if (it == label_id.end()) {
                throw std::invalid_argument("score_submission: gold label '" + text +
                                            "' for index " + index + " is not " + expected);
            }
            value = it->second;
        }
        slot.emplace(index, gold.size());
        gold.push_back(value);
    }

    std::vector<double> pred(gold.size(), 0.0);
    std::vector<long> seen_on(gold.size(), 0);  // line of the prediction, 0 = none yet
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const long line = static_cast<long>(r) + 2;  // line 1 is the header
        const auto& [index, text] = rows[r];
        const auto where = slot.find(index);
        if (where == slot.end()) {
            throw engine::InputError(source,
                                     "index '" + index + "' is not in the gold set (" +
                                         std::to_string(gold.size()) + " indices)",
                                     line);
        }
        const std::size_t k = where->second;
        if (seen_on[k] != 0) {
            throw engine::InputError(source,
                                     "index '" + index + "' given twice (first on line " +
                                         std::to_string(seen_on[k]) + ")",
                                     line);
        }
        seen_on[k] = line;
        if (regression) {
            if (!parse_double(text, pred[k])) {
                throw engine::InputError(source, "prediction '" + text + "' is not a number", line);
            }
        } else {
            const auto it = label_id.find(text);
            if (it == label_id.end()) {
                throw engine::InputError(
                    source, "unknown label '" + text + "'; expected " + expected, line);
            }
            pred[k] = it->second;
        }
    }

    std::size_t missing = 0;
    std::vector<std::string> examples;
    for (const auto& [index, k] : slot) {
        if (seen_on[k] != 0) continue;
        ++missing;
        if (examples.size() < 5) examples.push_back(index);
    }
    if (missing > 0) {
        throw engine::InputError(source, "no prediction for " + std::to_string(missing) + " of " +
                                             std::to_string(gold.size()) + " gold indices (e.g. " +
                                             join(examples) + ")");
    }
    return score_task(kind, pred, gold);
}

const std::vector<std::string>& glue_submission_files() {
    static const std::vector<std::string> files = {
        "CoLA.tsv",    "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv",
        "MNLI-mm.tsv", "QNLI.tsv",  "RTE.tsv",  "WNLI.tsv",  "AX.tsv"};
    return files;
}

namespace {

/// The AX diagnostic set's column, any case ("ax", "AX").
bool is_ax(const std::string& column) { return column == "ax" || column == "AX"; }

}  // namespace

const TaskInfo& submission_task(const std::string& column) {
    if (is_ax(column)) return find_task("MNLI");  // AX is predicted by the MNLI model
    submission_file_name(column);                 // the same errors
    return *resolve_task_column(column).task;
}

std::string submission_file_name(const std::string& column) {
    if (is_ax(column)) return "AX.tsv";
    const TaskColumn found = resolve_task_column(column);
    if (found.task == nullptr) {
        throw std::invalid_argument("no task or result column named '" + column + "'");
    }
    if (found.split == nullptr) {
        std::vector<std::string> columns;
        for (const auto& d : found.task->dev) columns.push_back(d.column);
        throw std::invalid_argument("'" + column + "' has " +
                                    std::to_string(found.task->dev.size()) +
                                    " dev splits; name one column: " + join(columns));
    }
    // MNLI's two files are named after their dev split's label (MNLI-m, MNLI-mm); every
    // other task after its GLUE folder (the label of SST-2 is the paper's "SST").
    const std::string stem = found.task->dev.size() > 1 ? found.split->label : found.task->name;
    return stem + ".tsv";
}

std::vector<std::string> prediction_strings(const TaskInfo& task,
                                            const std::vector<double>& predicted) {
    std::vector<std::string> out;
    out.reserve(predicted.size());
    for (std::size_t i = 0; i < predicted.size(); ++i) {
        const double v = predicted[i];
        if (!std::isfinite(v)) {
            throw std::invalid_argument(task.name + ": prediction of row " + std::to_string(i) +
                                        " is not a finite number");
        }
        if (task.regression) {
            // Shortest text that parses back to the same double: the round trip is exact.
            char buf[64];
            const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
            if (ec != std::errc()) {
                throw std::invalid_argument(task.name + ": cannot format row " + std::to_string(i));
            }
            out.emplace_back(buf, ptr);
            continue;
        }
        const double id = std::round(v);
        if (id != v || id < 0 || id >= static_cast<double>(task.labels.size())) {
            throw std::invalid_argument(
                task.name + ": prediction of row " + std::to_string(i) + " is not a label id 0.." +
                std::to_string(task.labels.size() - 1) + " (" + join(task.labels) + ")");
        }
        out.push_back(task.labels[static_cast<std::size_t>(id)]);
    }
    return out;
}

void write_submission_file(const std::string& path, const TaskInfo& task,
                           const std::vector<double>& predicted,
                           const std::vector<std::string>& ids) {
    const auto strings = prediction_strings(task, predicted);
    if (!ids.empty() && ids.size() != predicted.size()) {
        throw std::invalid_argument(task.name + ": " + std::to_string(ids.size()) +
                                    " indices for " + std::to_string(predicted.size()) +
                                    " predictions");
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (ids[i].empty() || ids[i].find_first_of("\t\r\n") != std::string::npos) {
            throw std::invalid_argument(task.name + ": index of row " + std::to_string(i) +
                                        " is empty or holds a tab or line break");
        }
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw engine::InputError(path, "cannot write the submission file");
    out << "index\tprediction\n";
    for (std::size_t i = 0; i < strings.size(); ++i) {
        if (ids.empty()) {
            out << i;
        } else {
            out << ids[i];
        }
        out << '\t' << strings[i] << '\n';
    }
    out.flush();
    if (!out) throw engine::InputError(path, "write error");
}

SubmissionWritten write_submission(const std::string& dir,
                                   const std::vector<SubmissionColumn>& columns) {
    std::set<std::string> names;
    for (const auto& c : columns) {
        if (!names.insert(submission_file_name(c.column)).second) {
            throw std::invalid_argument("write_submission: column '" + c.column + "' given twice");
        }
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw engine::InputError(dir, "cannot create the directory: " + ec.message());
    SubmissionWritten written;
    for (const auto& c : columns) {
        const std::string path =
            (std::filesystem::path(dir) / submission_file_name(c.column)).string();
        write_submission_file(path, submission_task(c.column), c.predicted, c.ids);
        written.files.push_back(path);
    }
    return written;
}

namespace {

// CRC-32 table of the reflected polynomial 0xEDB88320 (zip, PNG, zlib's crc32).
std::array<std::uint32_t, 256> make_crc32_table() {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t n = 0; n < 256; ++n) {
        std::uint32_t c = n;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[n] = c;
    }
    return table;
}

void put16(std::string& out, std::uint32_t v) {
    out += static_cast<char>(v & 0xff);
    out += static_cast<char>((v >> 8) & 0xff);
}

void put32(std::string& out, std::uint32_t v) {
    put16(out, v & 0xffff);
    put16(out, v >> 16);
}

// MS-DOS date of 1980-01-01 (day 1, month 1, year 0) and time 00:00:00 (APPNOTE 4.4.6).
constexpr std::uint32_t kDosDate = (1u << 5) | 1u, kDosTime = 0;
constexpr std::uint64_t kZip32Max = 0xFFFFFFFFull;

}  // namespace

std::uint32_t crc32(const void* data, std::size_t size, std::uint32_t crc) {
    static const std::array<std::uint32_t, 256> table = make_crc32_table();
    const auto* p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

void write_stored_zip(const std::string& path, const std::vector<ZipEntry>& entries) {
    if (entries.size() > 0xFFFF) {
        throw std::invalid_argument("write_stored_zip: " + std::to_string(entries.size()) +
                                    " entries, more than a zip without zip64 holds (65535)");
    }
    std::set<std::string> names;
    for (const auto& e : entries) {
        if (e.name.empty() || e.name.size() > 0xFFFF || e.name.front() == '/' ||
            e.name.find('\\') != std::string::npos) {
            throw std::invalid_argument("write_stored_zip: bad entry name '" + e.name + "'");
        }
        if (!names.insert(e.name).second) {
            throw std::invalid_argument("write_stored_zip: entry '" + e.name + "' given twice");
        }
    }
    // Local header + data per entry (APPNOTE 4.3.7), then the central directory (4.3.12).
    std::string body, directory;
    for (const auto& e : entries) {
        const std::uint64_t offset = body.size();
        if (e.data.size() > kZip32Max || offset > kZip32Max) {
            throw std::invalid_argument("write_stored_zip: '" + e.name +
                                        "' lies past the 4 GiB a zip without zip64 holds");
        }
        const std::uint32_t crc = crc32(e.data.data(), e.data.size());
        const auto size = static_cast<std::uint32_t>(e.data.size());
        const auto name_len = static_cast<std::uint32_t>(e.name.size());
        put32(body, 0x04034b50u);  // local file header signature
        put16(body, 10);           // version needed: 1.0 (stored)
        put16(body, 0);            // flags: none (sizes known, names ASCII)
        put16(body, 0);            // method 0: stored
        put16(body, kDosTime);
        put16(body, kDosDate);
        put32(body, crc);
        put32(body, size);  // compressed size
        put32(body, size);  // uncompressed size
        put16(body, name_len);
        put16(body, 0);  // extra field length
        body += e.name;
        body += e.data;

        put32(directory, 0x02014b50u);  // central directory header signature
        put16(directory, 20);           // made by: MS-DOS / FAT attributes, spec 2.0
        put16(directory, 10);           // version needed
        put16(directory, 0);            // flags
        put16(directory, 0);            // method
        put16(directory, kDosTime);
        put16(directory, kDosDate);
        put32(directory, crc);
        put32(directory, size);
        put32(directory, size);
        put16(directory, name_len);
        put16(directory, 0);  // extra field length
        put16(directory, 0);  // comment length
        put16(directory, 0);  // disk number start
        put16(directory, 0);  // internal attributes
        put32(directory, 0);  // external attributes
        put32(directory, static_cast<std::uint32_t>(offset));
        directory += e.name;
    }
    if (body.size() > kZip32Max || body.size() + directory.size() > kZip32Max) {
        throw std::invalid_argument(
            "write_stored_zip: the archive passes the 4 GiB a zip "
            "without zip64 holds");
    }
    // End of central directory record (APPNOTE 4.3.16).
    std::string end;
    put32(end, 0x06054b50u);
    put16(end, 0);  // this disk
    put16(end, 0);  // disk of the central directory
    put16(end, static_cast<std::uint32_t>(entries.size()));
    put16(end, static_cast<std::uint32_t>(entries.size()));
    put32(end, static_cast<std::uint32_t>(directory.size()));
    put32(end, static_cast<std::uint32_t>(body.size()));
    put16(end, 0);  // comment length

    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw engine::InputError(path, "cannot write the zip (at " + tmp + ")");
        out << body << directory << end;
        out.flush();
        if (!out) {
            std::error_code ec;
            std::filesystem::remove(tmp, ec);
            throw engine::InputError(path, "write error");
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw engine::InputError(path, "cannot move " + tmp + " into place: " + ec.message());
}

std::string write_submission_zip(const std::string& dir, const std::vector<std::string>& files) {
    std::vector<ZipEntry> entries;
    for (const auto& file : files) {
        std::ifstream in(file, std::ios::binary);
        if (!in) throw engine::InputError(file, "cannot open to add to the zip");
        std::ostringstream bytes;
        bytes << in.rdbuf();
        if (in.bad()) throw engine::InputError(file, "read error while zipping");
        entries.push_back({std::filesystem::path(file).filename().string(), bytes.str()});
    }
    const std::string path = (std::filesystem::path(dir) / "submission.zip").string();
    write_stored_zip(path, entries);
    return path;
}

}  // namespace analysis
