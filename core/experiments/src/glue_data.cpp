// The GLUE tab-separated and JSON-lines readers, and `glue_stats` (tasks: analysis/tasks.h).
// Layouts, labels and split sizes follow shared/GLUE_FORMAT.md; fields are split on tabs
// only, never unquoted (MRPC and RTE hold '"' characters inside fields).
#include "experiments/glue_data.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/errors.h"

namespace experiments {

namespace fs = std::filesystem;

namespace {

const std::string kUtf8Bom = "\xEF\xBB\xBF";

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Splits on '\t' only; "a\t\tb" has three fields, "" has one.
std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    size_t start = 0;
    for (;;) {
        const size_t tab = line.find('\t', start);
        if (tab == std::string::npos) {
            fields.push_back(line.substr(start));
            return fields;
        }
        fields.push_back(line.substr(start, tab - start));
        start = tab + 1;
    }
}

// Reads one line without its '\n' or a trailing '\r'; false at end of file.
bool next_line(std::istream& in, std::string& line, long& line_no) {
    if (!std::getline(in, line)) return false;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.compare(0, kUtf8Bom.size(), kUtf8Bom) == 0)
        line.erase(0, kUtf8Bom.size());
    return true;
}

// A whole-string float in [0, 5] (STS-B scores); false otherwise.
bool parse_score(const std::string& text, double& value) {
    if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return false;
    char* end = nullptr;
    value = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size() && std::isfinite(value) && value >= 0.0 &&
           value <= 5.0;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
    return out;
}

// Checks a label string against the task; throws InputError naming the line otherwise.
void check_label(const TaskInfo& task, const std::string& label, const std::string& path,
                 long line_no) {
    if (task.regression) {
        double value = 0.0;
        if (!parse_score(label, value))
            throw engine::InputError(
                path, "label \"" + label + "\" is not a score in [0, 5] (" + task.name + ")",
                line_no);
        return;
    }
    if (std::find(task.labels.begin(), task.labels.end(), label) == task.labels.end())
        throw engine::InputError(path,
                                 "label \"" + label + "\" is not one of " + task.name +
                                     "'s labels (" + join(task.labels, ", ") + ")",
                                 line_no);
}

// JSON field names of the two texts (the registry's; "" for a single-sentence task).
std::pair<std::string, std::string> jsonl_fields(const TaskInfo& task) {
    return {task.jsonl_a, task.jsonl_b};
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The file to read for a split: the .tsv when present, else the .jsonl; "" when neither.
std::string split_file(const TaskInfo& task, const std::string& glue_dir,
                       const std::string& split) {
    const fs::path dir = fs::path(glue_dir) / task.name;
    std::error_code ec;
    const fs::path tsv = dir / (split + ".tsv");
    if (fs::is_regular_file(tsv, ec)) return tsv.string();
    const fs::path jsonl = dir / (split + ".jsonl");
    if (fs::is_regular_file(jsonl, ec)) return jsonl.string();
    return "";
}

std::ifstream open_input(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw engine::InputError(path, "is a directory, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, "cannot open file");
    return in;
}

std::vector<std::string> split_names(const TaskInfo& task) {
    std::vector<std::string> names = {"train"};
    names.insert(names.end(), task.dev_splits.begin(), task.dev_splits.end());
    return names;
}

// STS-B scores counted per unit interval, the last one closed: [0,1) ... [4,5].
const std::vector<std::string> kScoreBins = {"[0,1)", "[1,2)", "[2,3)", "[3,4)", "[4,5]"};

std::map<std::string, long> label_counts(const TaskInfo& task, const Split& split) {
    std::map<std::string, long> counts;
    if (task.regression) {
        for (const auto& bin : kScoreBins) counts[bin] = 0;
        for (const auto& ex : split.examples) {
            const double v = std::strtod(ex.label.c_str(), nullptr);
            const auto bin = std::min<size_t>(4, static_cast<size_t>(std::max(0.0, v)));
            ++counts[kScoreBins[bin]];
        }
    } else {
        for (const auto& l : task.labels) counts[l] = 0;
        for (const auto& ex : split.examples) ++counts[ex.label];
    }
    return counts;
}

// Labels in registry order (or bin order) as "label:count" items.
std::string format_counts(const TaskInfo& task, const std::map<std::string, long>& counts) {
    const auto& order = task.regression ? kScoreBins : task.labels;
    std::string out;
    for (const auto& l : order) {
        if (!out.empty()) out += ' ';
        out += l + ":" + std::to_string(counts.at(l));
    }
    return out;
}

/// The first non-empty line of `in` (the header row) into `line`; an empty file is an
/// InputError naming `path`.
void read_header_row(std::istream& in, const std::string& path, std::string& line, long& line_no) {
    while (next_line(in, line, line_no))
        if (!line.empty()) return;
    throw engine::InputError(path, "empty file, expected a header row");
}

}  // namespace

Split read_glue_tsv(const TaskInfo& task, const std::string& path) {
    std::ifstream in = open_input(path);
    Split split;
    split.path = path;
    const bool skip_short = task.skip_short_rows;

    std::string line;
    long line_no = 0;
    // Field count every row must have: the header's, or (CoLA) the highest column used + 1.
    size_t expected = static_cast<size_t>(std::max({task.text_a, task.text_b, task.label}) + 1);
    if (task.header) {
        read_header_row(in, path, line, line_no);
        expected = split_tabs(line).size();
        const int highest = std::max(task.text_a, task.text_b);
        if (expected <= static_cast<size_t>(std::max(highest, task.label)))
            throw engine::InputError(path,
                                     "header has " + std::to_string(expected) + " fields; " +
                                         task.name + " needs at least " +
                                         std::to_string(std::max(highest, task.label) + 1),
                                     line_no);
    }
    const size_t label_col = task.label < 0 ? expected - 1 : static_cast<size_t>(task.label);
    // An index/id column first, where column 0 holds neither a text nor the label.
    const bool id_col = task.header && task.text_a != 0 && task.text_b != 0 && label_col != 0;

    while (next_line(in, line, line_no)) {
        if (line.empty()) continue;
        auto fields = split_tabs(line);
        if (fields.size() != expected) {
            if (skip_short) {
                ++split.skipped;
                continue;
            }
            throw engine::InputError(path,
                                     "expected " + std::to_string(expected) +
                                         " tab-separated fields, got " +
                                         std::to_string(fields.size()),
                                     line_no);
        }
        Example ex;
        ex.line = line_no;
        ex.id = id_col ? fields[0] : std::to_string(line_no);
        ex.text_a = std::move(fields[static_cast<size_t>(task.text_a)]);
        if (task.text_b >= 0) ex.text_b = std::move(fields[static_cast<size_t>(task.text_b)]);
        ex.label = std::move(fields[label_col]);
        check_label(task, ex.label, path, line_no);
        split.examples.push_back(std::move(ex));
    }
    if (in.bad()) throw engine::InputError(path, "read error", line_no);
    return split;
}

Split read_glue_jsonl(const TaskInfo& task, const std::string& path) {
    std::ifstream in = open_input(path);
    Split split;
    split.path = path;
    const auto names = jsonl_fields(task);

    std::string line;
    long line_no = 0;
    while (next_line(in, line, line_no)) {
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        nlohmann::json row;
        try {
            row = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
            throw engine::InputError(path, std::string("invalid JSON: ") + e.what(), line_no);
        }
        if (!row.is_object()) throw engine::InputError(path, "expected a JSON object", line_no);

        const auto text = [&](const std::string& field) {
            const auto it = row.find(field);
            if (it == row.end())
                throw engine::InputError(path, "missing field \"" + field + "\"", line_no);
            if (!it->is_string())
                throw engine::InputError(path, "field \"" + field + "\" is not a string", line_no);
            return it->get<std::string>();
        };
        const auto label_it = row.find("label");
        if (label_it == row.end())
            throw engine::InputError(path, "missing field \"label\"", line_no);
        const nlohmann::json& label = *label_it;
        if (label.is_number() && label.get<double>() == -1.0) {
            ++split.skipped;  // HF's marker for an unlabelled (test) row, -1.0 for STS-B
            continue;
        }

        Example ex;
        ex.line = line_no;
        ex.text_a = text(names.first);
        if (!names.second.empty()) ex.text_b = text(names.second);
        const auto idx = row.find("idx");
        ex.id = idx == row.end() ? std::to_string(line_no)
                                 : (idx->is_string() ? idx->get<std::string>() : idx->dump());
        if (task.regression) {
            // dump() writes the shortest text that reads back the same double ("3.8").
            if (label.is_string()) {
                ex.label = label.get<std::string>();
            } else if (label.is_number()) {
                ex.label = label.dump();
            } else {
                throw engine::InputError(path, "label " + label.dump() + " is not a number",
                                         line_no);
            }
        } else if (label.is_number_integer()) {
            const long long i = label.get<long long>();
            if (i < 0 || i >= static_cast<long long>(task.labels.size()))
                throw engine::InputError(path,
                                         "label " + std::to_string(i) + " is outside 0.." +
                                             std::to_string(task.labels.size() - 1) + " (" +
                                             task.name + ": " + join(task.labels, ", ") + ")",
                                         line_no);
            ex.label = task.labels[static_cast<size_t>(i)];
        } else if (label.is_string()) {
            ex.label = label.get<std::string>();
        } else {
            throw engine::InputError(path, "label " + label.dump() + " is not an integer", line_no);
        }
        check_label(task, ex.label, path, line_no);
        split.examples.push_back(std::move(ex));
    }
    if (in.bad()) throw engine::InputError(path, "read error", line_no);
    return split;
}

Split read_glue_file(const TaskInfo& task, const std::string& path) {
    if (ends_with(lower(path), ".jsonl") || ends_with(lower(path), ".json"))
        return read_glue_jsonl(task, path);
    return read_glue_tsv(task, path);
}

std::map<std::string, Split> load_task(const TaskInfo& task, const std::string& glue_dir) {
    std::map<std::string, Split> out;
    for (const auto& split : split_names(task)) {
        const std::string path = split_file(task, glue_dir, split);
        if (path.empty()) {
            const fs::path tsv = fs::path(glue_dir) / task.name / (split + ".tsv");
            throw engine::InputError(tsv.string(), "file not found (nor " + split +
                                                       ".jsonl beside it) for task " + task.name);
        }
        out[split] = read_glue_file(task, path);
    }
    return out;
}

std::vector<TestSplitInfo> test_splits(const TaskInfo& task) {
    // A synthetic task copies a GLUE task's layout (SYN-CoLA: CoLA's).
    std::string base = task.name;
    if (task.synthetic && base.rfind("SYN-", 0) == 0) base = base.substr(4);
    const std::string dir = task.name + "/";
    auto one = [&](int a, int b) {
        return std::vector<TestSplitInfo>{{"test", task.key, {dir + "test.tsv"}, a, b}};
    };
    if (base == "CoLA" || base == "SST-2") return one(1, -1);
    if (base == "MRPC") return one(3, 4);
    if (base == "STS-B") return one(7, 8);
    if (base == "QQP" || base == "QNLI" || base == "RTE" || base == "WNLI") return one(1, 2);
    if (base == "MNLI") {
        // The AX diagnostic set is predicted by the MNLI model (GLUE's AX.tsv).
        return {
            {"test_matched", "mnli_m", {dir + "test_matched.tsv"}, 8, 9},
            {"test_mismatched", "mnli_mm", {dir + "test_mismatched.tsv"}, 8, 9},
            {"ax", "ax", {"diagnostic/diagnostic.tsv", "AX/AX.tsv", "AX/diagnostic.tsv"}, 1, 2}};
    }
    return {};
}

Split read_glue_test_tsv(const TestSplitInfo& layout, const std::string& path) {
    std::ifstream in = open_input(path);
    Split split;
    split.path = path;
    std::string line;
    long line_no = 0;
    read_header_row(in, path, line, line_no);
    const size_t expected = split_tabs(line).size();
    const int highest = std::max(layout.text_a, layout.text_b);
    if (expected <= static_cast<size_t>(highest))
        throw engine::InputError(path,
                                 "header has " + std::to_string(expected) + " fields; the " +
                                     layout.name + " split needs at least " +
                                     std::to_string(highest + 1) + " (index first)",
                                 line_no);
    std::map<std::string, long> seen;  // index -> line
    while (next_line(in, line, line_no)) {
        if (line.empty()) continue;
        auto fields = split_tabs(line);
        if (fields.size() != expected)
            throw engine::InputError(path,
                                     "expected " + std::to_string(expected) +
                                         " tab-separated fields, got " +
                                         std::to_string(fields.size()),
                                     line_no);
        if (fields[0].empty()) throw engine::InputError(path, "empty index", line_no);
        const auto [it, fresh] = seen.emplace(fields[0], line_no);
        if (!fresh)
            throw engine::InputError(path,
                                     "index '" + fields[0] + "' given twice (first on line " +
                                         std::to_string(it->second) + ")",
                                     line_no);
        Example ex;
        ex.line = line_no;
        ex.id = fields[0];
        ex.text_a = std::move(fields[static_cast<size_t>(layout.text_a)]);
        if (layout.text_b >= 0) ex.text_b = std::move(fields[static_cast<size_t>(layout.text_b)]);
        split.examples.push_back(std::move(ex));
    }
    if (in.bad()) throw engine::InputError(path, "read error", line_no);
    return split;
}

std::vector<std::pair<TestSplitInfo, Split>> load_test_splits(const TaskInfo& task,
                                                              const std::string& glue_dir) {
    std::vector<std::pair<TestSplitInfo, Split>> out;
    std::error_code ec;
    for (const auto& layout : test_splits(task))
        for (const auto& file : layout.files) {
            const fs::path path = fs::path(glue_dir) / file;
            if (!fs::is_regular_file(path, ec)) continue;
            out.emplace_back(layout, read_glue_test_tsv(layout, path.string()));
            break;
        }
    return out;
}

std::string glue_stats(const std::string& glue_dir, bool json, int* unreadable) {
    if (unreadable) *unreadable = 0;
    std::error_code ec;
    if (!fs::is_directory(glue_dir, ec))
        throw engine::InputError(glue_dir, "not a directory (expected the glue_data folder)");

    nlohmann::json report;
    report["glue_dir"] = glue_dir;
    report["tasks"] = nlohmann::json::array();
    // Text rows: task, split, examples, expected, check, skipped, labels (or a note).
    std::vector<std::vector<std::string>> rows = {
        {"task", "split", "examples", "expected", "check", "skipped", "labels"}};

    for (const auto& task : glue_tasks()) {
        const bool present = fs::is_directory(fs::path(glue_dir) / task.name, ec);
        if (!present && task.synthetic) continue;
        nlohmann::json jt;
        jt["name"] = task.name;
        jt["key"] = task.key;
        jt["present"] = present;
        jt["splits"] = nlohmann::json::array();
        if (!present) {
            rows.push_back({task.name, "-", "-", "-", "missing", "-", "folder not found"});
            report["tasks"].push_back(jt);
            continue;
        }
        for (const auto& name : split_names(task)) {
            nlohmann::json js;
            js["split"] = name;
            const long expected = expected_split_size(task, name);
            js["expected"] = expected < 0 ? nlohmann::json(nullptr) : nlohmann::json(expected);
            const std::string expected_text = expected < 0 ? "-" : std::to_string(expected);
            const std::string path = split_file(task, glue_dir, name);
            if (path.empty()) {
                js["path"] = nullptr;
                js["error"] = "file not found";
                rows.push_back(
                    {task.name, name, "-", expected_text, "missing", "-", name + ".tsv not found"});
                jt["splits"].push_back(js);
                continue;
            }
            js["path"] = path;
            try {
                const Split split = read_glue_file(task, path);
                const auto counts = label_counts(task, split);
                const long n = static_cast<long>(split.examples.size());
                const bool matches = expected < 0 || n == expected;
                js["examples"] = n;
                js["skipped"] = split.skipped;
                js["matches_expected"] =
                    expected < 0 ? nlohmann::json(nullptr) : nlohmann::json(matches);
                js["labels"] = counts;
                rows.push_back({task.name, name, std::to_string(n), expected_text,
                                expected < 0 ? "-" : (matches ? "ok" : "MISMATCH"),
                                std::to_string(split.skipped), format_counts(task, counts)});
            } catch (const engine::InputError& e) {
                js["error"] = e.what();
                rows.push_back({task.name, name, "-", expected_text, "ERROR", "-", e.what()});
                if (unreadable) ++*unreadable;
            }
            jt["splits"].push_back(js);
        }
        report["tasks"].push_back(jt);
    }
    if (json) return report.dump(2) + "\n";

    // Aligned table: numbers right-aligned, text left-aligned, last column unpadded.
    std::vector<size_t> width(rows.front().size(), 0);
    for (const auto& row : rows)
        for (size_t c = 0; c + 1 < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    std::ostringstream out;
    out << "GLUE data in " << glue_dir << "\n";
    for (const auto& row : rows) {
        for (size_t c = 0; c < row.size(); ++c) {
            const bool numeric = c == 2 || c == 3 || c == 5;
            if (c + 1 == row.size()) {
                out << row[c];
            } else {
                out << (numeric ? std::right : std::left) << std::setw(static_cast<int>(width[c]))
                    << row[c] << "  ";
            }
        }
        out << "\n";
    }
    return out.str();
}

}  // namespace experiments
