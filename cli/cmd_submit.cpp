// `tupe submit`: one variant's stored predictions written in the GLUE server's layout
// (DIR/CoLA.tsv ... MNLI-m.tsv, MNLI-mm.tsv ... WNLI.tsv; analysis/submission.h), one file
// per task the variant was fine-tuned on, from the run the report shows: the best lr's
// median-seed run (experiments/report.h): its dev predictions (`tupe score` reads them back) or
// with --split test its test predictions under the test files' indices, and the GLUE files
// zipped as the server takes them (DIR/submission.zip, unless --no-zip).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "analysis/submission.h"
#include "analysis/tasks.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/text_util.h"
#include "experiments/experiment.h"
#include "experiments/glue_data.h"
#include "experiments/report.h"
#include "experiments/result_store.h"

namespace cli {

namespace fs = std::filesystem;
using engine::join;

namespace {

std::string format_lr(double lr) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", lr);
    return buf;
}

/// The columns to write and what is known about the ones that are not.
struct SubmitPlan {
    std::vector<analysis::SubmissionColumn> columns;
    std::vector<std::string> written_from;           // per column: the run it came from
    std::map<std::string, std::string> not_written;  // file name -> why
    std::set<std::string> synthetic;
    const experiments::GlueResultRecord* mnli_run = nullptr;  // MNLI-m's: AX's model
};

/// What the command reads from the store for one variant of one experiment.
struct SubmitSource {
    std::string db, name, variant;
    bool test = false;
    const experiments::ReportRow* row = nullptr;
    std::vector<experiments::GlueResultRecord> results;
    std::map<std::pair<int64_t, std::string>, const experiments::PredictionSet*> prediction_of;
};

/// The variant's report row: the last step, or --step's.
const experiments::ReportRow* pick_submit_row(const experiments::Report& report, const Args& args,
                                              const std::string& db, const std::string& name,
                                              const std::string& variant) {
    std::vector<std::string> variants;
    std::vector<const experiments::ReportRow*> rows;
    for (const auto& row : report.rows) {
        if (std::find(variants.begin(), variants.end(), row.variant) == variants.end())
            variants.push_back(row.variant);
        if (row.variant == variant) rows.push_back(&row);
    }
    if (rows.empty())
        throw engine::InputError(
            db, "experiment '" + name + "' has no GLUE results of variant '" + variant +
                    "' (has: " + (variants.empty() ? "none" : join(variants)) + ")");
    const experiments::ReportRow* row = rows.back();  // rows are by ascending step: the last
    if (args.has("step")) {
        const long long step = args.get_int("step", 0);
        std::vector<std::string> steps;
        row = nullptr;
        for (const auto* r : rows) {
            steps.push_back(std::to_string(r->step));
            if (r->step == step) row = r;
        }
        if (row == nullptr)
            throw engine::InputError(db, "variant '" + variant + "' of experiment '" + name +
                                             "' has no GLUE results at step " +
                                             std::to_string(step) + " (has: " + join(steps) + ")");
    }
    return row;
}

/// One report column's file: the median-seed run of the cell's best lr, its stored predictions
/// on the split asked for; or why it is not written.
void plan_submit_column(const std::string& column, const experiments::ReportCell& cell,
                        const SubmitSource& src, SubmitPlan& plan) {
    const analysis::TaskColumn found = analysis::resolve_task_column(column);
    if (found.task == nullptr || found.split == nullptr) {
        std::cerr << "submit: " << column << ": not a task of the registry, skipped\n";
        return;
    }
    const std::string file = analysis::submission_file_name(column);
    // The runs behind the cell: its best lr, every seed; the median one is written
    // (the lower of the two middle ones for an even count).
    const std::string metric = experiments::selection_metric(column);
    std::vector<const experiments::GlueResultRecord*> runs;
    for (const auto& r : src.results)
        if (r.task == column && r.metric == metric && r.lr == cell.best_lr &&
            r.checkpoint_step == src.row->step &&
            experiments::variant_group(r.variant) == src.variant)
            runs.push_back(&r);
    std::stable_sort(runs.begin(), runs.end(),
                     [](const auto* a, const auto* b) { return a->value < b->value; });
    if (runs.empty()) return;  // the cell came from these records: cannot happen
    const auto* chosen = runs[(runs.size() - 1) / 2];
    if (column == "mnli_m") plan.mnli_run = chosen;
    // The stored split: the dev split the score is on, or the column's test split
    // (experiments/glue_data.h: test, test_matched, test_mismatched).
    std::string stored_split = chosen->split, test_file;
    if (src.test) {
        stored_split.clear();
        for (const auto& layout : experiments::test_splits(*found.task))
            if (layout.column == column) {
                stored_split = layout.name;
                test_file = layout.files.front();
            }
    }
    const auto p = src.prediction_of.find({chosen->run_id, stored_split});
    if (p == src.prediction_of.end() || p->second->predicted.empty()) {
        plan.not_written[file] =
            src.test
                ? "its median-seed run " + chosen->run_name + " has no stored test predictions (" +
                      (test_file.empty() ? "the task has no test split"
                                         : "no " + test_file + " in the GLUE folder") +
                      " when it was fine-tuned)"
                : "its median-seed run " + chosen->run_name + " has no stored predictions on " +
                      chosen->split;
        return;
    }
    plan.columns.push_back(
        {column, p->second->predicted, src.test ? p->second->ids : std::vector<std::string>{}});
    char score[32];
    std::snprintf(score, sizeof score, "%.2f", chosen->value);
    plan.written_from.push_back(std::to_string(p->second->predicted.size()) + " rows; run " +
                                chosen->run_name + ", lr " + format_lr(chosen->lr) + ", dev " +
                                metric + " " + score + ", median of " +
                                std::to_string(runs.size()) + " seed(s)");
    if (found.task->synthetic) plan.synthetic.insert(file);
}

/// AX: the diagnostic set, predicted by the MNLI model whose MNLI-m file is written.
void plan_submit_ax(const SubmitSource& src, SubmitPlan& plan) {
    if (!src.test || plan.mnli_run == nullptr) return;
    const auto p = src.prediction_of.find({plan.mnli_run->run_id, "ax"});
    if (p == src.prediction_of.end() || p->second->predicted.empty()) {
        plan.not_written["AX.tsv"] = "the MNLI run " + plan.mnli_run->run_name +
                                     " has no stored diagnostic predictions (no "
                                     "diagnostic/diagnostic.tsv in the GLUE folder when it was "
                                     "fine-tuned)";
    } else {
        plan.columns.push_back({"ax", p->second->predicted, p->second->ids});
        plan.written_from.push_back(std::to_string(p->second->predicted.size()) +
                                    " rows; the MNLI run " + plan.mnli_run->run_name);
    }
}

/// Every GLUE file (and synthetic task file) not written, and why, on stderr.
void report_unsubmitted_files(const SubmitPlan& plan, const std::string& label, bool test) {
    for (const auto& file : analysis::glue_submission_files()) {
        bool written = false;
        for (const auto& c : plan.columns)
            written = written || analysis::submission_file_name(c.column) == file;
        if (written) continue;
        const auto why = plan.not_written.find(file);
        if (why != plan.not_written.end())
            std::cerr << "submit: " << file << " not written: " << why->second << "\n";
        else if (file == "AX.tsv")
            std::cerr << "submit: AX.tsv not written: "
                      << (test ? "no MNLI-m results of " + label +
                                     " (AX is predicted by the "
                                     "MNLI model)"
                               : std::string("the diagnostic set has no dev split (--split "
                                             "test writes it from the MNLI model)"))
                      << "\n";
        else
            std::cerr << "submit: " << file << " not written: " << label
                      << " has no stored fine-tuning results on " << file.substr(0, file.size() - 4)
                      << "\n";
    }
    for (const auto& [file, why] : plan.not_written)  // synthetic tasks: not in the server's list
        if (std::find(analysis::glue_submission_files().begin(),
                      analysis::glue_submission_files().end(),
                      file) == analysis::glue_submission_files().end())
            std::cerr << "submit: " << file << " not written: " << why << "\n";
}

/// The files written, the zip the server takes and the notes, on stdout.
void write_submit_files(const SubmitPlan& plan, const std::string& out, bool zip, bool test) {
    const auto written = analysis::write_submission(out, plan.columns);
    for (size_t i = 0; i < written.files.size(); ++i)
        std::cout << "wrote " << written.files[i] << "  (" << plan.written_from[i] << ")\n";
    // The zip the server takes: the GLUE files at its top level; synthetic ones left out.
    std::vector<std::string> glue_files;
    for (const auto& f : written.files)
        if (!plan.synthetic.count(fs::path(f).filename().string())) glue_files.push_back(f);
    if (zip) {
        if (glue_files.empty()) {
            std::cout << "note: no GLUE task file written, so no submission.zip\n";
        } else {
            const std::string path = analysis::write_submission_zip(out, glue_files);
            std::cout << "wrote " << path << "  (" << glue_files.size()
                      << " file(s) at its top level)\n";
        }
    }
    if (test)
        std::cout << "note: test-set predictions (index = the test file's index column), for "
                     "the GLUE server: upload "
                  << (fs::path(out) / "submission.zip").string() << "\n";
    else
        std::cout << "note: dev-set predictions (index = 0-based dev row; `tupe score` reads "
                     "them). The GLUE server scores the test sets: --split test.\n";
    if (!plan.synthetic.empty())
        std::cout << "note: "
                  << join(std::vector<std::string>(plan.synthetic.begin(), plan.synthetic.end()))
                  << ": built-in synthetic tasks, not GLUE; left out of the zip.\n";
}

}  // namespace

int cmd_submit(const Argv& argv) {
    Args args(argv, command_spec("submit"));
    const std::string split = args.get("split");
    if (split != "dev" && split != "test")
        throw UsageError("--split must be dev or test, got '" + split + "'");
    SubmitSource src;
    src.name = args.required("experiment");
    src.variant = args.required("variant");
    const std::string out = args.required("out");
    src.db = args.get("db");
    if (!fs::exists(src.db))
        throw engine::InputError(
            src.db, "no results database (run `tupe run EXPERIMENT.yaml` first, or pass --db)");
    auto store = experiments::ResultStore::open_for_reading(src.db);

    const auto experiment = store.find_experiment(src.name);
    if (!experiment) {
        std::vector<std::string> names;
        for (const auto& e : store.list_experiments()) names.push_back(e.name);
        throw engine::InputError(src.db, "no experiment named '" + src.name + "' (has: " +
                                             (names.empty() ? "none" : join(names)) + ")");
    }
    // The report's rows and cells: its rule picks the lr (the best median over seeds).
    const experiments::Report report = experiments::load_report(store, src.name);
    src.row = pick_submit_row(report, args, src.db, src.name, src.variant);
    src.test = split == "test";
    src.results = store.glue_results(experiment->id);
    const auto predictions = store.predictions(experiment->id);
    for (const auto& p : predictions) src.prediction_of[{p.run_id, p.split}] = &p;

    SubmitPlan plan;
    for (const auto& column : report.columns) {
        const auto cell = src.row->cells.find(column);
        if (cell == src.row->cells.end() || !cell->second.present) continue;
        plan_submit_column(column, cell->second, src, plan);
    }
    plan_submit_ax(src, plan);

    const std::string label = src.variant + " @ " + std::to_string(src.row->step);
    report_unsubmitted_files(plan, label, src.test);
    if (plan.columns.empty())
        throw engine::InputError(
            src.db, "nothing to write: " + label + " of experiment '" + src.name +
                        "' has no stored " +
                        (src.test ? "test predictions (no test split was in its GLUE folders "
                                    "when it was fine-tuned; --split dev writes the dev ones)"
                                  : std::string("predictions")));
    write_submit_files(plan, out, !args.has("no-zip"), src.test);
    return 0;
}

}  // namespace cli
