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
#include "experiments/experiment.h"
#include "experiments/glue_data.h"
#include "experiments/report.h"
#include "experiments/result_store.h"

namespace cli {

namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
    return out;
}

std::string format_lr(double lr) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", lr);
    return buf;
}

}  // namespace

int cmd_submit(const Argv& argv) {
    Args args(argv, command_spec("submit"));
    const std::string split = args.get("split");
    if (split != "dev" && split != "test")
        throw UsageError("--split must be dev or test, got '" + split + "'");
    const std::string name = args.required("experiment");
    const std::string variant = args.required("variant");
    const std::string out = args.required("out");
    const std::string db = args.get("db");
    if (!fs::exists(db))
        throw engine::InputError(
            db, "no results database (run `tupe run EXPERIMENT.yaml` first, or pass --db)");
    auto store = experiments::ResultStore::open_for_reading(db);

    const auto experiment = store.find_experiment(name);
    if (!experiment) {
        std::vector<std::string> names;
        for (const auto& e : store.list_experiments()) names.push_back(e.name);
        throw engine::InputError(db, "no experiment named '" + name +
                                         "' (has: " + (names.empty() ? "none" : join(names)) + ")");
    }
    // The report's rows and cells: its rule picks the lr (the best median over seeds).
    const experiments::Report report = experiments::load_report(store, name);
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
    const bool test = split == "test";

    const auto results = store.glue_results(experiment->id);
    const auto predictions = store.predictions(experiment->id);
    std::map<std::pair<int64_t, std::string>, const experiments::PredictionSet*> prediction_of;
    for (const auto& p : predictions) prediction_of[{p.run_id, p.split}] = &p;

    std::vector<analysis::SubmissionColumn> columns;
    std::vector<std::string> written_from;           // per column: the run it came from
    std::map<std::string, std::string> not_written;  // file name -> why
    std::set<std::string> synthetic;
    const experiments::GlueResultRecord* mnli_run = nullptr;  // MNLI-m's: AX's model
    for (const auto& column : report.columns) {
        const auto cell = row->cells.find(column);
        if (cell == row->cells.end() || !cell->second.present) continue;
        const analysis::TaskColumn found = analysis::resolve_task_column(column);
        if (found.task == nullptr || found.split == nullptr) {
            std::cerr << "submit: " << column << ": not a task of the registry, skipped\n";
            continue;
        }
        const std::string file = analysis::submission_file_name(column);
        // The runs behind the cell: its best lr, every seed; the median one is written
        // (the lower of the two middle ones for an even count).
        const std::string metric = experiments::selection_metric(column);
        std::vector<const experiments::GlueResultRecord*> runs;
        for (const auto& r : results)
            if (r.task == column && r.metric == metric && r.lr == cell->second.best_lr &&
                r.checkpoint_step == row->step && experiments::variant_group(r.variant) == variant)
                runs.push_back(&r);
        std::stable_sort(runs.begin(), runs.end(),
                         [](const auto* a, const auto* b) { return a->value < b->value; });
        if (runs.empty()) continue;  // the cell came from these records: cannot happen
        const auto* chosen = runs[(runs.size() - 1) / 2];
        if (column == "mnli_m") mnli_run = chosen;
        // The stored split: the dev split the score is on, or the column's test split
        // (experiments/glue_data.h: test, test_matched, test_mismatched).
        std::string stored_split = chosen->split, test_file;
        if (test) {
            stored_split.clear();
            for (const auto& layout : experiments::test_splits(*found.task))
                if (layout.column == column) {
                    stored_split = layout.name;
                    test_file = layout.files.front();
                }
        }
        const auto p = prediction_of.find({chosen->run_id, stored_split});
        if (p == prediction_of.end() || p->second->predicted.empty()) {
            not_written[file] =
                test ? "its median-seed run " + chosen->run_name +
                           " has no stored test predictions (" +
                           (test_file.empty() ? "the task has no test split"
                                              : "no " + test_file + " in the GLUE folder") +
                           " when it was fine-tuned)"
                     : "its median-seed run " + chosen->run_name +
                           " has no stored predictions on " + chosen->split;
            continue;
        }
        columns.push_back(
            {column, p->second->predicted, test ? p->second->ids : std::vector<std::string>{}});
        char score[32];
        std::snprintf(score, sizeof score, "%.2f", chosen->value);
        written_from.push_back(std::to_string(p->second->predicted.size()) + " rows; run " +
                               chosen->run_name + ", lr " + format_lr(chosen->lr) + ", dev " +
                               metric + " " + score + ", median of " + std::to_string(runs.size()) +
                               " seed(s)");
        if (found.task->synthetic) synthetic.insert(file);
    }
    // AX: the diagnostic set, predicted by the MNLI model whose MNLI-m file is written.
    if (test && mnli_run != nullptr) {
        const auto p = prediction_of.find({mnli_run->run_id, "ax"});
        if (p == prediction_of.end() || p->second->predicted.empty()) {
            not_written["AX.tsv"] = "the MNLI run " + mnli_run->run_name +
                                    " has no stored diagnostic predictions (no "
                                    "diagnostic/diagnostic.tsv in the GLUE folder when it was "
                                    "fine-tuned)";
        } else {
            columns.push_back({"ax", p->second->predicted, p->second->ids});
            written_from.push_back(std::to_string(p->second->predicted.size()) +
                                   " rows; the MNLI run " + mnli_run->run_name);
        }
    }

    const std::string label = variant + " @ " + std::to_string(row->step);
    for (const auto& file : analysis::glue_submission_files()) {
        bool written = false;
        for (const auto& c : columns)
            written = written || analysis::submission_file_name(c.column) == file;
        if (written) continue;
        const auto why = not_written.find(file);
        if (why != not_written.end())
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
    for (const auto& [file, why] : not_written)  // synthetic tasks: not in the server's list
        if (std::find(analysis::glue_submission_files().begin(),
                      analysis::glue_submission_files().end(),
                      file) == analysis::glue_submission_files().end())
            std::cerr << "submit: " << file << " not written: " << why << "\n";
    if (columns.empty())
        throw engine::InputError(
            db, "nothing to write: " + label + " of experiment '" + name + "' has no stored " +
                    (test ? "test predictions (no test split was in its GLUE folders when it "
                            "was fine-tuned; --split dev writes the dev ones)"
                          : std::string("predictions")));

    const auto written = analysis::write_submission(out, columns);
    for (size_t i = 0; i < written.files.size(); ++i)
        std::cout << "wrote " << written.files[i] << "  (" << written_from[i] << ")\n";
    // The zip the server takes: the GLUE files at its top level; synthetic ones left out.
    std::vector<std::string> glue_files;
    for (const auto& f : written.files)
        if (!synthetic.count(fs::path(f).filename().string())) glue_files.push_back(f);
    if (!args.has("no-zip")) {
        if (glue_files.empty()) {
            std::cout << "note: no GLUE task file written, so no submission.zip\n";
        } else {
            const std::string zip = analysis::write_submission_zip(out, glue_files);
            std::cout << "wrote " << zip << "  (" << glue_files.size()
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
    if (!synthetic.empty())
        std::cout << "note: " << join(std::vector<std::string>(synthetic.begin(), synthetic.end()))
                  << ": built-in synthetic tasks, not GLUE; left out of the zip.\n";
    return 0;
}

}  // namespace cli
