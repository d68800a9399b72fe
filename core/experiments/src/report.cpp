// Table 1 reports from stored GLUE results (see report.h).
#include "experiments/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "analysis/evidence.h"
#include "analysis/tasks.h"
#include "analysis/text_format.h"
#include "engine/corpus.h"
#include "engine/errors.h"
#include "experiments/experiment.h"
#include "experiments/job_identity.h"

namespace experiments {

using analysis::csv_field;
using analysis::fixed_number;
using analysis::signed_number;

namespace {

// Report columns (the paper's Table 1 order, the built-in tasks, WNLI) and the nine of the
// paper's average come from the task registry (analysis/tasks.h).

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint64_t text_hash(const std::string& text) {
    uint64_t h = 1469598103934665603ULL;
    for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    return h;
}

}  // namespace

// The TUPE paper's selection metric per task (GLUE_FORMAT.md), from the registry's metric.
std::string selection_metric(const std::string& task) {
    const analysis::TaskColumn found = analysis::resolve_task_column(task);
    if (found.task == nullptr) return "accuracy";
    return analysis::selection_metric_key(found.task->metric);
}

Report load_report(ResultStore& store, const std::string& name) {
    const auto e = store.find_experiment(name);
    if (!e) throw std::invalid_argument("no experiment named '" + name + "' in " + store.path());
    std::map<int64_t, int64_t> parent_of;
    std::map<std::string, std::string> identity_of_cell;
    for (const auto& r : store.list_runs(e->id)) {
        if (r.parent_run_id) parent_of[r.id] = *r.parent_run_id;
        if (r.kind == "finetune" && !r.cell.empty()) identity_of_cell.emplace(r.cell, r.identity);
    }
    return build_report(name, store.glue_results(e->id), store.predictions(e->id), parent_of,
                        identity_of_cell);
}

std::string pretraining_summary(ResultStore& store, const std::string& name) {
    const auto e = store.find_experiment(name);
    if (!e) throw std::invalid_argument("no experiment named '" + name + "' in " + store.path());
    std::map<std::string, std::vector<std::string>> finals;  // group -> "seed S: loss"
    std::vector<std::string> order, warnings;
    std::set<std::string> floors, free_floors;
    std::map<std::string, int> blas;  // kernels -> runs (pretraining and fine-tuning)
    for (const auto& r : store.list_runs(e->id)) {
        if (!r.blas.empty()) ++blas[r.blas];
        if (r.kind != "pretrain") continue;
        const auto curve = store.metrics(r.id, "validation/loss");
        if (curve.empty()) continue;
        const std::string group = variant_group(r.variant.empty() ? r.name : r.variant);
        if (!finals.count(group)) order.push_back(group);
        finals[group].push_back(fixed_number(curve.back().value, 3) + " (seed " +
                                std::to_string(r.seed) + ", step " +
                                std::to_string(curve.back().step) + ")");
        const auto params = store.params(r.id);
        auto it = params.find("floor.unigram_nats");
        if (it == params.end()) continue;
        const double floor = std::stod(it->second);
        floors.insert(fixed_number(floor, 3));
        // The context-free floor where stored (runs pretrained before it was are judged
        // against the unigram floor, as then).
        const auto free_it = params.find("floor.context_free_nats");
        const double free_level = free_it != params.end() ? std::stod(free_it->second) : 0.0;
        if (free_level > 0) free_floors.insert(fixed_number(free_level, 3));
        const bool free = free_level > 0 && curve.back().value <= floor - engine::kFloorMargin;
        const double level = free ? free_level : floor;
        if (curve.back().value > level - engine::kFloorMargin)
            warnings.push_back(
                "warning: " + r.name + " ends at " + fixed_number(curve.back().value, 3) +
                ", not " + fixed_number(engine::kFloorMargin, 1) + " nats below the " +
                (free ? "context-free floor " : "unigram floor ") + fixed_number(level, 3) +
                (free ? ": it learned word frequencies and to copy visible tokens, no context"
                      : ": it learned word frequencies only") +
                ", and its fine-tuning rows say nothing about positions");
    }
    if (order.empty()) return "";
    std::ostringstream os;
    os << "validation MLM loss at the end of pretraining (nats; lower is better):\n";
    for (const auto& g : order) {
        os << "  " << g << ":";
        for (const auto& f : finals[g]) os << " " << f;
        os << "\n";
    }
    if (floors.empty()) {
        os << "  unigram floor: not recorded (pretrained before the floor was stored)\n";
    } else {
        os << "  unigram floor:";
        for (const auto& f : floors) os << " " << f;
        os << " (the validation targets' cross-entropy under training word frequencies)\n";
    }
    if (!free_floors.empty()) {
        os << "  context-free floor:";
        for (const auto& f : free_floors) os << " " << f;
        os << " (the same targets for a model that sees only the scored token under 80/10/10 "
              "masking: frequencies and copying, no context)\n";
    }
    for (const auto& w : warnings) os << w << "\n";
    if (blas.size() > 1) {
        // Another BLAS kernel set rounds differently: the numbers agree to rounding, not
        // bit for bit (runs.blas).
        os << "note: these runs multiplied with " << blas.size() << " BLAS kernel sets (";
        bool first = true;
        for (const auto& [kernels, runs] : blas) {
            os << (first ? "" : "; ") << kernels << ": " << runs << " run(s)";
            first = false;
        }
        os << "); their numbers agree to rounding, not bit for bit\n";
    }
    return os.str();
}

ReportFormat report_format_from_string(const std::string& name) {
    if (name == "table") return ReportFormat::kTable;
    if (name == "markdown") return ReportFormat::kMarkdown;
    if (name == "csv") return ReportFormat::kCsv;
    if (name == "latex") return ReportFormat::kLatex;
    if (name == "json") return ReportFormat::kJson;
    throw std::invalid_argument("unknown format '" + name +
                                "' (expected table, markdown, csv, latex or json)");
}

std::string column_title(const std::string& key) {
    const analysis::TaskColumn found = analysis::resolve_task_column(key);
    return found.split != nullptr && found.split->column == key ? found.split->label : key;
}

namespace {

constexpr int kReportResamples = 1000;

// A report row's key: (variant group, checkpoint step, cell).
using ReportRowKey = std::tuple<std::string, int64_t, std::string>;

// The selection-metric results by row, task and lr, and the rows in order of appearance.
struct ReportGroups {
    std::map<ReportRowKey, std::map<std::string, std::map<double, std::vector<double>>>> values;
    std::map<ReportRowKey,
             std::map<std::string, std::map<double, std::vector<const GlueResultRecord*>>>>
        runs;  // the runs behind `values`
    std::vector<ReportRowKey> row_order;
    std::set<std::string> tasks;
    std::map<std::string, std::vector<std::string>> cells_of;  // group -> its cells
};

// What a cell's interval and chance are computed from.
struct ReportEvidenceSources {
    std::map<std::pair<int64_t, std::string>, const PredictionSet*> prediction_of;  // (run, split)
    const std::map<int64_t, int64_t>& parent_of;
};

bool is_zero_shot_task(const std::string& task) {
    const analysis::TaskColumn found = analysis::resolve_task_column(task);
    return found.task != nullptr && found.task->zero_shot;
}

// Groups the results of each task's selection metric by (variant group, step, cell), task, lr.
// A zero-shot task's results join every row of their pretraining cell and step whose
// fine-tuned tasks' data gives the same dev files (zero_shot_task_data): a study that added
// training examples for its fine-tuned tasks shows its pair-task scores in the new row too,
// and the old row keeps them.
ReportGroups collect_report_groups(const std::vector<GlueResultRecord>& results,
                                   const std::map<std::string, std::string>& identity_of_cell) {
    std::map<std::string, std::string> zero_shot_keys;
    const auto zero_shot_key = [&](const std::string& cell) -> const std::string& {
        auto [it, fresh] = zero_shot_keys.emplace(cell, cell);
        const auto identity = identity_of_cell.find(cell);
        if (fresh && identity != identity_of_cell.end()) {
            JobIdentity id = JobIdentity::parse(identity->second);
            const auto data = id.fields().find("finetune.task_data");
            if (data != id.fields().end())
                id.set("finetune.task_data", zero_shot_task_data(data->second));
            it->second = id.cell(pooled_keys(true));
        }
        return it->second;
    };
    ReportGroups g;
    std::map<std::pair<std::string, int64_t>, std::vector<std::string>> fine_tuned_cells;
    for (const auto& r : results) {
        if (r.metric != selection_metric(r.task) || is_zero_shot_task(r.task)) continue;
        auto& cells = fine_tuned_cells[{variant_group(r.variant), r.checkpoint_step}];
        if (std::find(cells.begin(), cells.end(), r.cell) == cells.end()) cells.push_back(r.cell);
        // A group's cells in the order of their first fine-tuned results: the latest last.
        auto& of_group = g.cells_of[variant_group(r.variant)];
        if (std::find(of_group.begin(), of_group.end(), r.cell) == of_group.end())
            of_group.push_back(r.cell);
    }
    const auto add = [&](const GlueResultRecord& r, const std::string& cell) {
        const auto key = std::make_tuple(variant_group(r.variant), r.checkpoint_step, cell);
        auto& cells = g.cells_of[std::get<0>(key)];
        if (std::find(cells.begin(), cells.end(), cell) == cells.end()) cells.push_back(cell);
        if (!g.values.count(key)) g.row_order.push_back(key);
        g.values[key][r.task][r.lr].push_back(r.value);
        g.runs[key][r.task][r.lr].push_back(&r);
        g.tasks.insert(r.task);
    };
    for (const auto& r : results) {
        if (r.metric != selection_metric(r.task)) continue;
        if (!is_zero_shot_task(r.task)) {
            add(r, r.cell);
            continue;
        }
        bool joined = false;
        const auto rows = fine_tuned_cells.find({variant_group(r.variant), r.checkpoint_step});
        if (rows != fine_tuned_cells.end())
            for (const auto& cell : rows->second)
                if (zero_shot_key(cell) == zero_shot_key(r.cell)) {
                    add(r, cell);
                    joined = true;
                }
        if (!joined) add(r, r.cell);
    }
    return g;
}

// Sets one cell's interval and chance from the predictions of its runs, when all are stored.
void add_cell_evidence(ReportCell& cell, const std::string& task,
                       const std::vector<const GlueResultRecord*>& runs,
                       const ReportEvidenceSources& src) {
    cell.has_interval = cell.has_chance = cell.above_chance = false;
    cell.replicates.clear();
    cell.pretrain_seeds = 0;
    std::vector<analysis::RunPredictions> preds;
    const std::vector<double>* gold = nullptr;
    std::set<int64_t> parents;
    for (const auto* r : runs) {
        auto it = src.prediction_of.find({r->run_id, r->split});
        if (it == src.prediction_of.end()) return;
        if (gold && it->second->gold != *gold) return;  // not one dev set
        gold = &it->second->gold;
        auto parent = src.parent_of.find(r->run_id);
        const int64_t cluster = parent == src.parent_of.end() ? r->run_id : parent->second;
        parents.insert(cluster);
        preds.push_back({cluster, &it->second->predicted});
    }
    if (!gold || gold->empty()) return;
    const std::string metric = selection_metric(task);
    cell.pretrain_seeds = static_cast<int>(parents.size());
    cell.has_chance = true;
    cell.chance = analysis::chance_level(metric, *gold);
    analysis::BootstrapOptions options;
    options.resamples = kReportResamples;
    options.example_seed = text_hash(task);  // the same examples for every row: paired
    options.run_seed = text_hash(task + "/" + runs.front()->variant);
    cell.replicates = analysis::bootstrap_median_metric(metric, *gold, preds, options);
    const auto interval = analysis::percentile_interval(cell.replicates);
    cell.has_interval = true;
    cell.lo = interval.lo;
    cell.hi = interval.hi;
    cell.above_chance = cell.lo > cell.chance;
}

// Sets the report's columns (the registry's order, then other tasks) and its synthetic flag.
void set_report_columns(Report& report, const std::set<std::string>& tasks) {
    for (const auto& k : analysis::report_columns())
        if (tasks.count(k)) report.columns.push_back(k);
    for (const auto& t : tasks)
        if (std::find(analysis::report_columns().begin(), analysis::report_columns().end(), t) ==
            analysis::report_columns().end())
            report.columns.push_back(t);
    for (const auto& c : report.columns)
        if (c.rfind("syn-", 0) == 0) report.synthetic = true;
}

// Orders rows by first appearance of their variant (the plan's order), then cell, then steps
// ascending.
void sort_report_rows(std::vector<ReportRowKey>& row_order,
                      const std::map<std::string, std::vector<std::string>>& cells_of) {
    std::map<std::string, size_t> first_seen;
    for (const auto& key : row_order) first_seen.emplace(std::get<0>(key), first_seen.size());
    const auto cell_rank = [&](const ReportRowKey& k) {
        const auto& cells = cells_of.at(std::get<0>(k));
        return std::find(cells.begin(), cells.end(), std::get<2>(k)) - cells.begin();
    };
    std::stable_sort(row_order.begin(), row_order.end(), [&](const auto& a, const auto& b) {
        const size_t pa = first_seen.at(std::get<0>(a)), pb = first_seen.at(std::get<0>(b));
        if (pa != pb) return pa < pb;
        if (cell_rank(a) != cell_rank(b)) return cell_rank(a) < cell_rank(b);
        return std::get<1>(a) < std::get<1>(b);
    });
}

// A variant with runs of several cells: each (group, cell) gets what sets its cell apart.
std::map<std::pair<std::string, std::string>, std::string> report_cell_labels(
    const std::map<std::string, std::vector<std::string>>& cells_of,
    const std::map<std::string, std::string>& identity_of_cell) {
    std::map<std::pair<std::string, std::string>, std::string> cell_label;
    for (const auto& [group, cells] : cells_of) {
        if (cells.size() < 2) continue;
        std::vector<std::string> identities;
        for (const auto& c : cells) {
            const auto it = identity_of_cell.find(c);
            identities.push_back(it == identity_of_cell.end() ? "" : it->second);
        }
        const auto labels = distinguishing_labels(identities, true);
        // Cells that differ only in the checkpoint step: the rows' "@ step" tells them apart.
        if (std::all_of(labels.begin(), labels.end(),
                        [](const std::string& l) { return l.empty(); }) &&
            std::none_of(identities.begin(), identities.end(),
                         [](const std::string& id) { return id.empty(); }))
            continue;
        for (size_t i = 0; i < cells.size(); ++i)
            cell_label[{group, cells[i]}] =
                labels[i].empty() ? "cell " + (cells[i].empty() ? std::string("(before identities)")
                                                                : cells[i].substr(0, 8))
                                  : labels[i];
    }
    return cell_label;
}

// How Avg is computed: the paper's nine numbers when all are present, else the shown columns.
std::string report_average_rule(const Report& report, bool all_nine) {
    return all_nine ? "Avg: mean of the 9 numbers MNLI-m, MNLI-mm, QNLI, QQP, SST, CoLA, MRPC, "
                      "RTE, STS (TUPE paper; WNLI out)"
                    : "Avg: mean of the " + std::to_string(report.columns.size()) +
                          " columns shown (not a GLUE average" +
                          (report.synthetic ? "; SYN-* are synthetic built-in tasks" : "") + ")";
}

// One task's cell: the median over seeds at the lr with the best median, and that lr's evidence.
ReportCell best_lr_cell(const std::string& task, const std::map<double, std::vector<double>>& by_lr,
                        const std::map<double, std::vector<const GlueResultRecord*>>& runs_by_lr,
                        const ReportEvidenceSources& src) {
    ReportCell cell;
    cell.present = true;
    double best = -1e300;
    for (const auto& [lr, values] : by_lr) {
        const double m = median(values);
        if (m > best) {
            add_cell_evidence(cell, task, runs_by_lr.at(lr), src);
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
    return cell;
}

// Sets the row's Avg over `avg_over` and, when every column has one, Avg's interval: the mean
// of the columns' replicates (independent dev sets).
void add_row_average(ReportRow& row, const std::vector<std::string>& avg_over) {
    double sum = 0;
    int count = 0;
    for (const auto& t : avg_over)
        if (row.cells.count(t)) sum += row.cells[t].median, ++count;
    row.has_average = count == static_cast<int>(avg_over.size()) && count > 0;
    row.average = count ? sum / count : 0;
    if (!row.has_average) return;
    bool all = true;
    for (const auto& t : avg_over) all = all && row.cells[t].has_interval;
    if (!all) return;
    auto& a = row.average_cell;
    a.present = true;
    a.median = row.average;
    a.replicates.assign(kReportResamples, 0.0);
    for (const auto& t : avg_over) {
        const auto& c = row.cells[t];
        a.chance += c.chance / static_cast<double>(avg_over.size());
        for (int b = 0; b < kReportResamples; ++b)
            a.replicates[static_cast<size_t>(b)] +=
                c.replicates[static_cast<size_t>(b)] / static_cast<double>(avg_over.size());
    }
    const auto interval = analysis::percentile_interval(a.replicates);
    a.has_interval = a.has_chance = true;
    a.lo = interval.lo;
    a.hi = interval.hi;
    a.above_chance = a.lo > a.chance;
}

// The row of one key: its label, its cells at their best lr and its Avg.
ReportRow report_row_of(
    const ReportRowKey& key, const ReportGroups& groups,
    const std::map<std::pair<std::string, std::string>, std::string>& cell_label,
    const ReportEvidenceSources& src, const std::vector<std::string>& avg_over) {
    ReportRow row;
    row.variant = std::get<0>(key);
    row.step = std::get<1>(key);
    row.cell = std::get<2>(key);
    row.label = row.variant + " @ " + std::to_string(row.step);
    if (const auto it = cell_label.find({row.variant, row.cell}); it != cell_label.end())
        row.label += " [" + it->second + "]";
    const auto& runs = groups.runs.at(key);
    for (const auto& [task, by_lr] : groups.values.at(key))
        row.cells[task] = best_lr_cell(task, by_lr, runs.at(task), src);
    add_row_average(row, avg_over);
    return row;
}

}  // namespace

Report build_report(const std::string& experiment, const std::vector<GlueResultRecord>& results,
                    const std::vector<PredictionSet>& predictions,
                    const std::map<int64_t, int64_t>& parent_of,
                    const std::map<std::string, std::string>& identity_of_cell) {
    Report report;
    report.experiment = experiment;
    ReportGroups groups = collect_report_groups(results, identity_of_cell);
    ReportEvidenceSources src{{}, parent_of};
    for (const auto& p : predictions) src.prediction_of[{p.run_id, p.split}] = &p;
    set_report_columns(report, groups.tasks);
    sort_report_rows(groups.row_order, groups.cells_of);
    const auto cell_label = report_cell_labels(groups.cells_of, identity_of_cell);
    const bool all_nine =
        std::all_of(analysis::paper_columns().begin(), analysis::paper_columns().end(),
                    [&](const std::string& t) { return groups.tasks.count(t) > 0; });
    report.average_rule = report_average_rule(report, all_nine);
    const auto& avg_over = all_nine ? analysis::paper_columns() : report.columns;
    for (const auto& key : groups.row_order)
        report.rows.push_back(report_row_of(key, groups, cell_label, src, avg_over));
    return report;
}

void add_paper_rows(Report& report, const std::string& path) {
    std::ifstream in(path);
    if (!in) throw engine::InputError(path, "cannot open the paper's reference table");
    // The paper's column headers are the registry's table headers (MNLI-m, SST, STS, ...).
    static const std::map<std::string, std::string> column_key = [] {
        std::map<std::string, std::string> m;
        for (const auto& column : analysis::paper_columns())
            m[analysis::resolve_task_column(column).split->label] = column;
        return m;
    }();
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
            throw engine::InputError(path, "expected " + std::to_string(header.size()) + " fields",
                                     line_no);
        ReportRow row;
        row.reference = true;
        const long steps = std::stol(fields[1]);
        row.label = fields[0] + " (paper, " +
                    (steps >= 1000000 ? "1M" : std::to_string(steps / 1000) + "k") + ")";
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
    for (const auto& k : analysis::paper_columns())
        if (std::find(report.columns.begin(), report.columns.end(), k) == report.columns.end())
            report.columns.push_back(k);
    std::stable_sort(report.columns.begin(), report.columns.end(),
                     [](const auto& a, const auto& b) {
                         auto pos = [](const std::string& k) {
                             return std::find(analysis::report_columns().begin(),
                                              analysis::report_columns().end(), k) -
                                    analysis::report_columns().begin();
                         };
                         return pos(a) < pos(b);
                     });
}

namespace {

// The best median per column among this store's rows (published rows are not ranked).
std::map<std::string, double> best_median_per_column(const Report& report) {
    std::map<std::string, double> best;
    for (const auto& row : report.rows)
        if (!row.reference)
            for (const auto& [k, c] : row.cells)
                if (c.present && (!best.count(k) || c.median > best[k])) best[k] = c.median;
    return best;
}

// The first row of this store (not a published one), the baseline of the deltas; or nullptr.
const ReportRow* first_store_row(const Report& report) {
    for (const auto& row : report.rows)
        if (!row.reference) return &row;
    return nullptr;
}

// Adds a cell's interval, chance and pretraining seed count to its JSON object.
void json_cell_evidence(nlohmann::json& j, const ReportCell& c) {
    if (c.has_interval) j["ci95"] = {c.lo, c.hi};
    if (c.has_chance) j["chance"] = c.chance;
    if (c.has_interval) j["above_chance"] = c.above_chance;
    if (c.pretrain_seeds > 0) j["pretrain_seeds"] = c.pretrain_seeds;
}

// One row as a JSON object: its identity, its cells and its Avg.
nlohmann::json json_report_row(const ReportRow& row) {
    nlohmann::json r = {{"label", row.label},
                        {"variant", row.variant},
                        {"step", row.step},
                        {"reference", row.reference}};
    if (!row.reference) r["cell"] = row.cell;
    for (const auto& [k, c] : row.cells) {
        r["cells"][k] = {{"median", c.median},
                         {"mean", c.mean},
                         {"std", c.stddev},
                         {"n", c.n},
                         {"best_lr", c.best_lr}};
        json_cell_evidence(r["cells"][k], c);
    }
    if (row.has_average) {
        r["avg"] = row.average;
        if (row.average_cell.present) {
            r["avg_evidence"] = nlohmann::json::object();
            json_cell_evidence(r["avg_evidence"], row.average_cell);
        }
    }
    return r;
}

// The report as JSON, indented by 2, with a final newline.
std::string render_report_json(const Report& report) {
    nlohmann::json j;
    j["experiment"] = report.experiment;
    j["average_rule"] = report.average_rule;
    j["columns"] = report.columns;
    j["interval"] =
        "95% percentile bootstrap of the median (dev examples; pretraining and fine-tuning "
        "seeds where several)";
    j["rows"] = nlohmann::json::array();
    for (const auto& row : report.rows) j["rows"].push_back(json_report_row(row));
    return j.dump(2) + "\n";
}

// True when some cell (Avg not counted) has an interval.
bool any_cell_interval(const Report& report) {
    bool any_interval = false;
    for (const auto& row : report.rows)
        for (const auto& [k, c] : row.cells) any_interval = any_interval || c.has_interval;
    return any_interval;
}

// Writes a cell's CSV evidence fields (lo, hi, chance, above_chance) when the table has them.
void csv_cell_evidence(std::ostringstream& os, const ReportCell* c, bool any_interval) {
    if (!any_interval) return;
    if (!c || !c->has_interval) {
        os << ",,,,";
        return;
    }
    os << "," << fixed_number(c->lo, 4) << "," << fixed_number(c->hi, 4) << ","
       << (c->has_chance ? fixed_number(c->chance, 4) : "") << "," << (c->above_chance ? "1" : "0");
}

// The report as CSV: the header (with evidence columns when any cell has an interval), then
// one line per row.
std::string render_report_csv(const Report& report, const std::vector<std::string>& header,
                              bool any_interval) {
    std::ostringstream os;
    for (size_t i = 0; i < header.size(); ++i) {
        os << (i ? "," : "") << csv_field(header[i]);
        if (i > 0 && any_interval)
            for (const char* suffix : {"_lo", "_hi", "_chance", "_above_chance"})
                os << "," << csv_field(header[i] + suffix);
    }
    os << "\n";
    for (const auto& row : report.rows) {
        os << csv_field(row.label);
        for (const auto& k : report.columns) {
            auto it = row.cells.find(k);
            os << "," << (it == row.cells.end() ? "" : fixed_number(it->second.median, 4));
            csv_cell_evidence(os, it == row.cells.end() ? nullptr : &it->second, any_interval);
        }
        os << "," << (row.has_average ? fixed_number(row.average, 4) : "");
        csv_cell_evidence(os, row.average_cell.present ? &row.average_cell : nullptr, any_interval);
        os << "\n";
    }
    return os.str();
}

// What the table, markdown and LaTeX formats need to write a cell.
struct ReportTextStyle {
    ReportFormat format;
    bool mean_std;
    const ReportRow* baseline;           // the first row of this store: deltas are to it
    std::map<std::string, double> best;  // best median per column
};

// A cell's text: its number, then its interval and chance mark, or else its delta to the
// baseline row when `with_delta`; "-" when the row has no such cell.
std::string report_cell_text(const ReportTextStyle& style, const ReportRow& row,
                             const std::string& k, bool with_delta) {
    auto it = row.cells.find(k);
    if (it == row.cells.end() || !it->second.present) return std::string("-");
    const auto& c = it->second;
    std::string s = style.mean_std && !row.reference
                        ? fixed_number(c.mean, 2) + " +- " + fixed_number(c.stddev, 2) + " (" +
                              std::to_string(c.n) + ")"
                        : fixed_number(c.median, 2);
    const ReportRow* baseline = style.baseline;
    if (c.has_interval) {
        s += " [" + fixed_number(c.lo, 1) + ", " + fixed_number(c.hi, 1) + "]";
        if (!c.above_chance) s += style.format == ReportFormat::kLatex ? "$^{\\sim}$" : " ~";
    } else if (with_delta && baseline && &row != baseline && !row.reference &&
               baseline->cells.count(k)) {
        s += " (" + signed_number(c.median - baseline->cells.at(k).median, 2) + ")";
    }
    return s;
}

// True when the row's cell of column k is the best of this store's rows in that column.
bool is_best_cell(const ReportTextStyle& style, const ReportRow& row, const std::string& k) {
    auto it = row.cells.find(k);
    return !row.reference && it != row.cells.end() && style.best.count(k) &&
           std::fabs(it->second.median - style.best.at(k)) < 1e-9;
}

// A row's Avg text: the average, then its interval and chance mark when it has them.
std::string report_avg_text(const ReportRow& row, ReportFormat format) {
    std::string avg = row.has_average ? fixed_number(row.average, 2) : "-";
    if (row.average_cell.has_interval) {
        const auto& a = row.average_cell;
        avg += " [" + fixed_number(a.lo, 1) + ", " + fixed_number(a.hi, 1) + "]";
        if (!a.above_chance) avg += format == ReportFormat::kLatex ? "$^{\\sim}$" : " ~";
    }
    return avg;
}

// A row's table cells: its label, each column (the best marked in the format's way), its Avg.
std::vector<std::string> report_table_row(const ReportTextStyle& style, const Report& report,
                                          const ReportRow& row) {
    std::vector<std::string> cells = {row.label};
    for (const auto& k : report.columns) {
        std::string t = report_cell_text(style, row, k, style.format != ReportFormat::kLatex);
        if (is_best_cell(style, row, k)) {
            if (style.format == ReportFormat::kMarkdown)
                t = "**" + t + "**";
            else if (style.format == ReportFormat::kLatex)
                t = "\\textbf{" + t + "}";
            else
                t += " *";
        }
        cells.push_back(t);
    }
    cells.push_back(report_avg_text(row, style.format));
    return cells;
}

// The chance line under the table: what a model that ignores its input scores. Returns false
// when no column has a chance level (the line is then left out).
bool report_chance_row(const Report& report, std::vector<std::string>& chance_row) {
    bool any_chance = false;
    chance_row = {"chance"};
    for (const auto& k : report.columns) {
        const ReportCell* found = nullptr;
        for (const auto& row : report.rows) {
            auto it = row.cells.find(k);
            if (!row.reference && it != row.cells.end() && it->second.has_chance) {
                found = &it->second;
                break;
            }
        }
        any_chance = any_chance || found;
        chance_row.push_back(found ? fixed_number(found->chance, 2) : "-");
    }
    const ReportRow* with_avg = nullptr;
    for (const auto& row : report.rows)
        if (!row.reference && row.average_cell.has_chance) with_avg = &row;
    chance_row.push_back(with_avg ? fixed_number(with_avg->average_cell.chance, 2) : "-");
    return any_chance;
}

// Writes the table (first line the header) as a markdown table, numbers right-aligned.
void write_markdown_table(std::ostringstream& os,
                          const std::vector<std::vector<std::string>>& table) {
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
}

// Writes the table (first line the header) as a LaTeX booktabs tabular, '_' escaped.
void write_latex_table(std::ostringstream& os, const std::vector<std::vector<std::string>>& table) {
    os << "\\begin{tabular}{l" << std::string(table[0].size() - 1, 'r') << "}\n\\toprule\n";
    for (size_t r = 0; r < table.size(); ++r) {
        for (size_t i = 0; i < table[r].size(); ++i) {
            std::string c = table[r][i];
            for (size_t p = 0; (p = c.find('_', p)) != std::string::npos; p += 2)
                c.replace(p, 1, "\\_");
            os << (i ? " & " : "") << c;
        }
        os << " \\\\\n";
        if (r == 0) os << "\\midrule\n";
    }
    os << "\\bottomrule\n\\end{tabular}\n";
}

// Writes the table (first line the header) as aligned plain text with a rule under the header.
void write_plain_table(std::ostringstream& os, const std::vector<std::vector<std::string>>& table) {
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

// The notes printed with a table: how Avg and the cells are computed, and what the marks mean.
std::string report_notes(const Report& report, ReportFormat format, bool mean_std,
                         bool any_interval) {
    std::string notes =
        report.average_rule + ". Cells: " +
        (mean_std ? "mean +- std (n seeds) at the best lr"
                  : "median over seeds at the best lr (TUPE's rule)") +
        (any_interval ? std::string("; [lo, hi] = 95% bootstrap interval of that median "
                                    "(dev examples, and pretraining and fine-tuning seeds "
                                    "where several); ~ = the interval reaches the chance "
                                    "row (cannot be told from chance)")
                      : std::string("; (+x) = difference to the first row")) +
        "; best per column marked" +
        (format == ReportFormat::kMarkdown ? " in bold"
         : format == ReportFormat::kLatex  ? " in bold"
                                           : " *") +
        ".";
    if (report.synthetic) notes += " SYN-* columns are synthetic built-in tasks, not GLUE.";
    return notes;
}

}  // namespace

std::string render_report(const Report& report, ReportFormat format, bool mean_std) {
    if (format == ReportFormat::kJson) return render_report_json(report);
    const bool any_interval = any_cell_interval(report);
    std::vector<std::string> header = {"model"};
    for (const auto& k : report.columns) header.push_back(column_title(k));
    header.push_back("Avg");
    if (format == ReportFormat::kCsv) return render_report_csv(report, header, any_interval);

    const ReportTextStyle style{format, mean_std, first_store_row(report),
                                best_median_per_column(report)};
    std::vector<std::vector<std::string>> table = {header};
    for (const auto& row : report.rows) table.push_back(report_table_row(style, report, row));
    std::vector<std::string> chance_row;
    if (report_chance_row(report, chance_row)) table.push_back(chance_row);
    std::ostringstream os;
    if (format == ReportFormat::kMarkdown)
        write_markdown_table(os, table);
    else if (format == ReportFormat::kLatex)
        write_latex_table(os, table);
    else
        write_plain_table(os, table);
    const std::string notes = report_notes(report, format, mean_std, any_interval);
    if (format == ReportFormat::kLatex)
        os << "% " << notes << "\n";
    else
        os << "\n" << notes << "\n";
    return os.str();
}

}  // namespace experiments
