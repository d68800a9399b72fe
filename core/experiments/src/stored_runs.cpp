// See stored_runs.h.
#include "stored_runs.h"

#include <algorithm>

#include "experiments/experiment.h"

namespace experiments {

Groups load_pretrain_groups(ResultStore& store, int64_t experiment_id,
                            std::map<std::string, int>* left_out) {
    Groups groups;
    std::map<std::string, std::string> cell_of_group;
    const auto runs = store.list_runs(experiment_id);
    for (const auto& r : runs)
        if (r.kind == "pretrain" && r.status == "finished")
            cell_of_group[variant_group(r.variant.empty() ? r.name : r.variant)] = r.cell;
    for (const auto& r : runs) {
        if (r.kind != "pretrain" || r.status != "finished") continue;
        const std::string group = variant_group(r.variant.empty() ? r.name : r.variant);
        if (r.cell != cell_of_group[group]) {
            ++(*left_out)[group];
            continue;
        }
        PretrainRun p;
        p.id = r.id;
        p.name = r.name;
        p.group = group;
        p.seed = r.seed;
        p.out_dir = r.out_dir;
        p.config_text = r.config_text;
        p.validation = store.metrics(r.id, "validation/loss");
        if (p.validation.empty()) continue;  // nothing to compare (a run without validation data)
        groups[p.group][p.seed] = p;
    }
    return groups;
}

const ReportRow* final_row(const Report& report, const std::string& group) {
    const ReportRow* out = nullptr;
    for (const auto& row : report.rows)
        // At the last step, the last row: rows of one step are in order of their cells'
        // first results, so a config rerun beside the stored one (--new-runs) is judged.
        if (!row.reference && row.variant == group && (!out || row.step >= out->step)) out = &row;
    return out;
}

std::vector<double> mean_replicates(const ReportRow& row, const std::vector<std::string>& columns,
                                    double* point) {
    std::vector<double> out;
    *point = 0;
    for (const auto& c : columns) {
        auto it = row.cells.find(c);
        if (it == row.cells.end() || !it->second.has_interval) return {};
        const auto& r = it->second.replicates;
        if (out.empty()) out.assign(r.size(), 0.0);
        if (r.size() != out.size()) return {};
        for (size_t i = 0; i < r.size(); ++i) out[i] += r[i] / static_cast<double>(columns.size());
        *point += it->second.median / static_cast<double>(columns.size());
    }
    return out;
}

}  // namespace experiments
