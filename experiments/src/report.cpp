// Table 1 reports from stored GLUE results (see report.h).
#include "experiments/report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/errors.h"

namespace experiments {

namespace {

// The paper's column order, then the built-in tasks.
const std::vector<std::string> kOrder = {"mnli_m", "mnli_mm", "qnli", "qqp",      "sst2",     "cola",
                                         "mrpc",   "rte",     "stsb", "syn-cola", "syn-mrpc", "syn-stsb",
                                         "syn-rte", "wnli"};
const std::vector<std::string> kTupeNine = {"mnli_m", "mnli_mm", "qnli", "qqp", "sst2",
                                            "cola",   "mrpc",    "rte",  "stsb"};

// The TUPE paper's selection metric per task (GLUE_FORMAT.md).
std::string selection_metric(const std::string& task) {
    if (task == "cola" || task == "syn-cola") return "mcc";
    if (task == "stsb" || task == "syn-stsb") return "pearson";
    return "accuracy";
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fmt(double v, int digits = 2) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

std::string signed_fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.2f", v);
    return buf;
}

}  // namespace

ReportFormat report_format_from_string(const std::string& name) {
    if (name == "table") return ReportFormat::kTable;
    if (name == "markdown") return ReportFormat::kMarkdown;
    if (name == "csv") return ReportFormat::kCsv;
    if (name == "latex") return ReportFormat::kLatex;
    if (name == "json") return ReportFormat::kJson;
    throw std::invalid_argument("unknown format '" + name + "' (expected table, markdown, csv, latex or json)");
}

std::string column_title(const std::string& key) {
    static const std::map<std::string, std::string> titles = {
        {"mnli_m", "MNLI-m"}, {"mnli_mm", "MNLI-mm"}, {"qnli", "QNLI"},  {"qqp", "QQP"},
        {"sst2", "SST"},      {"cola", "CoLA"},       {"mrpc", "MRPC"},  {"rte", "RTE"},
        {"stsb", "STS"},      {"wnli", "WNLI"},       {"syn-cola", "SYN-CoLA"},
        {"syn-mrpc", "SYN-MRPC"}, {"syn-stsb", "SYN-STS"}, {"syn-rte", "SYN-RTE"}};
    auto it = titles.find(key);
    return it == titles.end() ? key : it->second;
}

Report build_report(const std::string& experiment, const std::vector<GlueResultRecord>& results) {
    Report report;
    report.experiment = experiment;
    // (variant, step) -> task -> lr -> values over seeds
    std::map<std::pair<std::string, int64_t>, std::map<std::string, std::map<double, std::vector<double>>>> groups;
    std::vector<std::pair<std::string, int64_t>> row_order;
    std::set<std::string> tasks;
    for (const auto& r : results) {
        if (r.metric != selection_metric(r.task)) continue;
        const auto key = std::make_pair(r.variant, r.checkpoint_step);
        if (!groups.count(key)) row_order.push_back(key);
        groups[key][r.task][r.lr].push_back(r.value);
        tasks.insert(r.task);
    }
    for (const auto& k : kOrder)
        if (tasks.count(k)) report.columns.push_back(k);
    for (const auto& t : tasks)
        if (std::find(kOrder.begin(), kOrder.end(), t) == kOrder.end()) report.columns.push_back(t);
    for (const auto& c : report.columns)
        if (c.rfind("syn-", 0) == 0) report.synthetic = true;

    // Rows in order of first appearance of their variant (the plan's order), steps ascending.
    std::map<std::string, size_t> first_seen;
    for (const auto& key : row_order) first_seen.emplace(key.first, first_seen.size());
    std::stable_sort(row_order.begin(), row_order.end(), [&](const auto& a, const auto& b) {
        const size_t pa = first_seen.at(a.first), pb = first_seen.at(b.first);
        return pa != pb ? pa < pb : a.second < b.second;
    });
    const bool all_nine = std::all_of(kTupeNine.begin(), kTupeNine.end(),
                                      [&](const std::string& t) { return tasks.count(t) > 0; });
    report.average_rule = all_nine
        ? "Avg: mean of the 9 numbers MNLI-m, MNLI-mm, QNLI, QQP, SST, CoLA, MRPC, RTE, STS (TUPE paper; WNLI out)"
        : "Avg: mean of the " + std::to_string(report.columns.size()) +
              " columns shown (not a GLUE average" + (report.synthetic ? "; SYN-* are synthetic built-in tasks" : "") + ")";
    for (const auto& key : row_order) {
        ReportRow row;
        row.variant = key.first;
        row.step = key.second;
        row.label = key.first + " @ " + std::to_string(key.second);
        double sum = 0;
        int count = 0;
        for (const auto& [task, by_lr] : groups[key]) {
            ReportCell cell;
            cell.present = true;
            double best = -1e300;
            for (const auto& [lr, values] : by_lr) {
                const double m = median(values);
                if (m > best) {
                    best = m;
                    cell.best_lr = lr;
                    cell.median = m;
                    cell.n = static_cast<int>(values.size());
                    double s = 0;
                    for (double v : values) s += v;
                    cell.mean = s / values.size();
                    double ss = 0;
                    for (double v : values) ss += (v - cell.mean) * (v - cell.mean);
                    cell.stddev = values.size() > 1 ? std::sqrt(ss / (values.size() - 1)) : 0.0;
                }
            }
            row.cells[task] = cell;
        }
        const auto& avg_over = all_nine ? kTupeNine : report.columns;
        for (const auto& t : avg_over)
            if (row.cells.count(t)) sum += row.cells[t].median, ++count;
        row.has_average = count == static_cast<int>(avg_over.size()) && count > 0;
        row.average = count ? sum / count : 0;
        report.rows.push_back(row);
    }
    return report;
}

void add_paper_rows(Report& report, const std::string& path) {
    std::ifstream in(path);
    if (!in) throw engine::InputError(path, "cannot open the paper's reference table");
    static const std::map<std::string, std::string> column_key = {
        {"MNLI-m", "mnli_m"}, {"MNLI-mm", "mnli_mm"}, {"QNLI", "qnli"}, {"QQP", "qqp"}, {"SST", "sst2"},
        {"CoLA", "cola"},     {"MRPC", "mrpc"},       {"RTE", "rte"},   {"STS", "stsb"}};
    std::string line;
    std::vector<std::string> header;
    long line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> fields;
        std::stringstream ss(line);
        std::string f;
        while (std::getline(ss, f, '\t')) fields.push_back(f);
        if (header.empty()) {
            header = fields;
            continue;
        }
        if (fields.size() != header.size())
            throw engine::InputError(path, "expected " + std::to_string(header.size()) + " fields", line_no);
        ReportRow row;
        row.reference = true;
        const long steps = std::stol(fields[1]);
        row.label = fields[0] + " (paper, " + (steps >= 1000000 ? "1M" : std::to_string(steps / 1000) + "k") + ")";
        row.variant = fields[0];
        row.step = steps;
        for (size_t i = 2; i < header.size(); ++i) {
            if (header[i] == "Avg") {
                row.has_average = true;
                row.average = std::stod(fields[i]);
                continue;
            }
            auto it = column_key.find(header[i]);
            if (it == column_key.end()) continue;
            ReportCell c;
            c.present = true;
            c.median = c.mean = std::stod(fields[i]);
            c.n = 5;
            row.cells[it->second] = c;
        }
        report.rows.push_back(row);
    }
    for (const auto& k : kTupeNine)
        if (std::find(report.columns.begin(), report.columns.end(), k) == report.columns.end())
            report.columns.push_back(k);
    std::stable_sort(report.columns.begin(), report.columns.end(), [](const auto& a, const auto& b) {
        auto pos = [](const std::string& k) { return std::find(kOrder.begin(), kOrder.end(), k) - kOrder.begin(); };
        return pos(a) < pos(b);
    });
}

std::string render_report(const Report& report, ReportFormat format, bool mean_std) {
    // Best per column among this store's rows (published rows are not ranked).
    std::map<std::string, double> best;
    for (const auto& row : report.rows)
        if (!row.reference)
            for (const auto& [k, c] : row.cells)
                if (c.present && (!best.count(k) || c.median > best[k])) best[k] = c.median;
    const ReportRow* baseline = nullptr;
    for (const auto& row : report.rows)
        if (!row.reference) {
            baseline = &row;
            break;
        }

    if (format == ReportFormat::kJson) {
        nlohmann::json j;
        j["experiment"] = report.experiment;
        j["average_rule"] = report.average_rule;
        j["columns"] = report.columns;
        j["rows"] = nlohmann::json::array();
        for (const auto& row : report.rows) {
            nlohmann::json r = {{"label", row.label}, {"variant", row.variant}, {"step", row.step},
                                {"reference", row.reference}};
            for (const auto& [k, c] : row.cells)
                r["cells"][k] = {{"median", c.median}, {"mean", c.mean}, {"std", c.stddev},
                                 {"n", c.n}, {"best_lr", c.best_lr}};
            if (row.has_average) r["avg"] = row.average;
            j["rows"].push_back(r);
        }
        return j.dump(2) + "\n";
    }

    auto cell_text = [&](const ReportRow& row, const std::string& k, bool with_delta) {
        auto it = row.cells.find(k);
        if (it == row.cells.end() || !it->second.present) return std::string("-");
        const auto& c = it->second;
        std::string s = mean_std && !row.reference
                            ? fmt(c.mean) + " +- " + fmt(c.stddev) + " (" + std::to_string(c.n) + ")"
                            : fmt(c.median);
        if (with_delta && baseline && &row != baseline && !row.reference && baseline->cells.count(k))
            s += " (" + signed_fmt(c.median - baseline->cells.at(k).median) + ")";
        return s;
    };
    auto is_best = [&](const ReportRow& row, const std::string& k) {
        auto it = row.cells.find(k);
        return !row.reference && it != row.cells.end() && best.count(k) &&
               std::fabs(it->second.median - best[k]) < 1e-9;
    };
    std::vector<std::string> header = {"model"};
    for (const auto& k : report.columns) header.push_back(column_title(k));
    header.push_back("Avg");

    std::ostringstream os;
    if (format == ReportFormat::kCsv) {
        for (size_t i = 0; i < header.size(); ++i) os << (i ? "," : "") << header[i];
        os << "\n";
        for (const auto& row : report.rows) {
            os << '"' << row.label << '"';
            for (const auto& k : report.columns) {
                auto it = row.cells.find(k);
                os << "," << (it == row.cells.end() ? "" : fmt(it->second.median, 4));
            }
            os << "," << (row.has_average ? fmt(row.average, 4) : "") << "\n";
        }
        return os.str();
    }

    std::vector<std::vector<std::string>> table = {header};
    for (const auto& row : report.rows) {
        std::vector<std::string> cells = {row.label};
        for (const auto& k : report.columns) {
            std::string t = cell_text(row, k, format != ReportFormat::kLatex);
            if (is_best(row, k)) {
                if (format == ReportFormat::kMarkdown) t = "**" + t + "**";
                else if (format == ReportFormat::kLatex) t = "\\textbf{" + t + "}";
                else t += " *";
            }
            cells.push_back(t);
        }
        cells.push_back(row.has_average ? fmt(row.average) : "-");
        table.push_back(cells);
    }
    if (format == ReportFormat::kMarkdown) {
        for (size_t r = 0; r < table.size(); ++r) {
            os << "|";
            for (const auto& c : table[r]) os << " " << c << " |";
            os << "\n";
            if (r == 0) {
                os << "|";
                for (size_t i = 0; i < table[0].size(); ++i) os << (i ? "---:|" : "---|");
                os << "\n";
            }
        }
    } else if (format == ReportFormat::kLatex) {
        os << "\\begin{tabular}{l" << std::string(table[0].size() - 1, 'r') << "}\n\\toprule\n";
        for (size_t r = 0; r < table.size(); ++r) {
            for (size_t i = 0; i < table[r].size(); ++i) {
                std::string c = table[r][i];
                for (size_t p = 0; (p = c.find('_', p)) != std::string::npos; p += 2) c.replace(p, 1, "\\_");
                os << (i ? " & " : "") << c;
            }
            os << " \\\\\n";
            if (r == 0) os << "\\midrule\n";
        }
        os << "\\bottomrule\n\\end{tabular}\n";
    } else {
        std::vector<size_t> width(table[0].size(), 0);
        for (const auto& r : table)
            for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
        for (size_t r = 0; r < table.size(); ++r) {
            for (size_t i = 0; i < table[r].size(); ++i) {
                const std::string pad(width[i] - table[r][i].size(), ' ');
                os << (i ? "  " : "") << (i == 0 ? table[r][i] + pad : pad + table[r][i]);
            }
            os << "\n";
            if (r == 0) {
                size_t total = 0;
                for (size_t i = 0; i < width.size(); ++i) total += width[i] + (i ? 2 : 0);
                os << std::string(total, '-') << "\n";
            }
        }
    }
    std::string notes = report.average_rule + ". Cells: " +
                        (mean_std ? "mean +- std (n seeds) at the best lr"
                                  : "median over seeds at the best lr (TUPE's rule)") +
                        "; (+x) = difference to the first row; best per column marked" +
                        (format == ReportFormat::kMarkdown ? " in bold" : format == ReportFormat::kLatex ? " in bold" : " *") + ".";
    if (report.synthetic) notes += " SYN-* columns are synthetic built-in tasks, not GLUE.";
    if (format == ReportFormat::kLatex) os << "% " << notes << "\n";
    else os << "\n" << notes << "\n";
    return os.str();
}

}  // namespace experiments
