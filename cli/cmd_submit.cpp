// `tupe submit`: one variant's stored predictions written in the GLUE server's layout
// (DIR/CoLA.tsv ... MNLI-m.tsv, MNLI-mm.tsv ... WNLI.tsv; analysis/submission.h), one file
// per task the variant was fine-tuned on, from the run the report shows: the best lr's
// median-seed run (experiments/report.h). Only dev predictions are stored so far.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "analysis/submission.h"
#include "analysis/tasks.h"
#include "cli_util.h"
#include "commands.h"
#include "engine/errors.h"
#include "experiments/experiment.h"
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
    Args args(argv, {"db", "experiment", "variant", "step", "out", "split"});
    const std::string split = args.get("split", "dev");
    if (split != "dev" && split != "test")
        throw UsageError("--split must be dev or test, got '" + split + "'");
    const std::string name = args.required("experiment");
    const std::string variant = args.required("variant");
    const std::string out = args.required("out");
    const std::string db = args.get("db", "results/tupe.sqlite");
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
    if (split == "test")
        throw engine::InputError(db,
                                 "no test predictions stored: `tupe run` keeps dev predictions "
                                 "only, so a server submission cannot be written yet (--split dev "
                                 "writes the dev ones)");

    const auto results = store.glue_results(experiment->id);
    const auto predictions = store.predictions(experiment->id);
    std::map<std::pair<int64_t, std::string>, const experiments::PredictionSet*> prediction_of;
    for (const auto& p : predictions) prediction_of[{p.run_id, p.split}] = &p;

    std::vector<analysis::SubmissionColumn> columns;
    std::vector<std::string> written_from;           // per column: the run it came from
    std::map<std::string, std::string> not_written;  // file name -> why
    std::set<std::string> synthetic;
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
        const auto p = prediction_of.find({chosen->run_id, chosen->split});
        if (p == prediction_of.end() || p->second->predicted.empty()) {
            not_written[file] = "its median-seed run " + chosen->run_name +
                                " has no stored predictions on " + chosen->split;
            continue;
        }
        columns.push_back({column, p->second->predicted});
        char score[32];
        std::snprintf(score, sizeof score, "%.2f", chosen->value);
        written_from.push_back(std::to_string(p->second->predicted.size()) + " rows; run " +
                               chosen->run_name + ", lr " + format_lr(chosen->lr) + ", " + metric +
                               " " + score + ", median of " + std::to_string(runs.size()) +
                               " seed(s)");
        if (found.task->synthetic) synthetic.insert(file);
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
            std::cerr << "submit: AX.tsv not written: the diagnostic set (MNLI model on "
                         "diagnostic/diagnostic.tsv) is not evaluated by `tupe run`\n";
        else
            std::cerr << "submit: " << file << " not written: " << label
                      << " has no stored fine-tuning results on " << file.substr(0, file.size() - 4)
                      << "\n";
    }
    if (columns.empty())
        throw engine::InputError(db, "nothing to write: " + label + " of experiment '" + name +
                                         "' has no stored predictions");

    const auto written = analysis::write_submission(out, columns);
    for (size_t i = 0; i < written.files.size(); ++i)
        std::cout << "wrote " << written.files[i] << "  (" << written_from[i] << ")\n";
    std::cout << "note: dev-set predictions (index = 0-based dev row; `tupe score` reads them). "
                 "The GLUE server scores the test sets, whose predictions are not stored yet.\n";
    if (!synthetic.empty())
        std::cout << "note: " << join(std::vector<std::string>(synthetic.begin(), synthetic.end()))
                  << ": built-in synthetic tasks, not GLUE; leave them out of an upload.\n";
    // No zip library is linked: the packing is left to the zip tool.
    std::cout << "to pack: cd " << out << " && zip ../submission.zip *.tsv\n";
    return 0;
}

}  // namespace cli
