// Rankings with a multiple-comparison correction (see ranking.h). The rule (Holm over every
// pair of a ranking, family-wise alpha 0.05) was fixed before any ranking was looked at.
#include "experiments/ranking.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "analysis/evidence.h"
#include "analysis/text_format.h"
#include "experiments/report.h"
#include "stored_runs.h"

namespace experiments {

using analysis::fixed_number;

namespace {

// Letters for the groups: a..z, then a1, b1, ...
std::string group_letter(size_t k) {
    std::string s(1, static_cast<char>('a' + k % 26));
    if (k >= 26) s += std::to_string(k / 26);
    return s;
}

// Holm-adjusts the pairs, marks those told apart and gives each variant its group letters.
void settle(Ranking& r, double alpha) {
    std::vector<double> p;
    for (const auto& pair : r.pairs) p.push_back(pair.p);
    const auto adjusted = analysis::holm_adjust(p);
    for (size_t i = 0; i < r.pairs.size(); ++i) {
        r.pairs[i].p_holm = adjusted[i];
        r.pairs[i].apart = adjusted[i] < alpha;
    }
    std::map<std::pair<std::string, std::string>, bool> apart;
    for (const auto& pair : r.pairs) apart[{pair.better, pair.worse}] = pair.apart;
    const auto& v = r.variants;
    const auto runs =
        analysis::indistinguishable_runs(static_cast<int>(v.size()), [&](int i, int j) {
            return apart[{v[static_cast<size_t>(i)].variant, v[static_cast<size_t>(j)].variant}];
        });
    for (size_t k = 0; k < runs.size(); ++k)
        for (int i = runs[k].first; i <= runs[k].second; ++i)
            r.variants[static_cast<size_t>(i)].groups += group_letter(k);
}

Ranking rank_on_loss(const Groups& groups, double alpha) {
    Ranking r;
    r.lower_is_better = true;
    int64_t step = -1;
    for (const auto& [group, seeds] : groups)
        for (const auto& [seed, run] : seeds)
            step = step < 0 ? run.last_step() : std::min(step, run.last_step());
    r.measure = "validation MLM loss at step " + std::to_string(step) + " (mean over seeds)";
    r.test =
        "paired t-test over the pretraining seeds two variants share, every pair; Holm's "
        "correction over all pairs, family-wise alpha " +
        fixed_number(alpha, 2);
    std::map<std::string, std::map<int64_t, double>> loss;
    for (const auto& [group, seeds] : groups)
        for (const auto& [seed, run] : seeds) {
            const double l = run.loss_at(step);
            if (std::isfinite(l)) loss[group][seed] = l;
        }
    for (const auto& [group, by_seed] : loss) {
        std::vector<double> values;
        for (const auto& [seed, l] : by_seed) values.push_back(l);
        RankedVariant v;
        v.variant = group;
        v.seeds = static_cast<int>(values.size());
        v.value =
            std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
        v.lo = v.hi = v.value;
        if (values.size() >= 2) {
            const auto t = analysis::paired_t_test(values);  // its interval: a one-sample t
            v.lo = t.ci_lo, v.hi = t.ci_hi;
        }
        r.variants.push_back(v);
    }
    std::stable_sort(
        r.variants.begin(), r.variants.end(),
        [](const RankedVariant& a, const RankedVariant& b) { return a.value < b.value; });
    bool any_test = false;
    for (size_t i = 0; i < r.variants.size(); ++i)
        for (size_t j = i + 1; j < r.variants.size(); ++j) {
            const auto& a = loss[r.variants[i].variant];
            const auto& b = loss[r.variants[j].variant];
            std::vector<double> d;
            for (const auto& [seed, la] : a)
                if (b.count(seed)) d.push_back(la - b.at(seed));
            const auto t = analysis::paired_t_test(d);
            RankedPair pair{r.variants[i].variant, r.variants[j].variant, t.mean, t.n, t.p};
            any_test = any_test || t.valid;
            r.pairs.push_back(pair);
        }
    if (!any_test && r.variants.size() >= 2)
        r.note = "fewer than 2 shared seeds per pair: no test, nothing told apart";
    settle(r, alpha);
    return r;
}

Ranking rank_on_tasks(const Report& report, const std::vector<std::string>& columns,
                      const std::vector<std::string>& variants, double alpha) {
    Ranking r;
    r.lower_is_better = false;
    std::string names;
    for (const auto& c : columns) names += (names.empty() ? "" : ", ") + c;
    r.measure = "task average at the last checkpoint (" + names + ")";
    r.test =
        "paired bootstrap over pretraining seeds and dev examples (the same draws for every "
        "variant), p from the bootstrap standard error; Holm's correction over all pairs, "
        "family-wise alpha " +
        fixed_number(alpha, 2);
    std::map<std::string, std::vector<double>> replicates;
    for (const auto& name : variants) {
        const ReportRow* row = final_row(report, name);
        if (!row) continue;
        double point = 0;
        auto reps = mean_replicates(*row, columns, &point);
        if (reps.empty()) continue;
        RankedVariant v;
        v.variant = name;
        v.seeds = 0;
        for (const auto& c : columns) {
            auto it = row->cells.find(c);
            if (it != row->cells.end()) v.seeds = std::max(v.seeds, it->second.pretrain_seeds);
        }
        v.value = point;
        const auto ci = analysis::percentile_interval(reps);
        v.lo = ci.lo, v.hi = ci.hi;
        replicates[name] = std::move(reps);
        r.variants.push_back(v);
    }
    std::stable_sort(
        r.variants.begin(), r.variants.end(),
        [](const RankedVariant& a, const RankedVariant& b) { return a.value > b.value; });
    for (size_t i = 0; i < r.variants.size(); ++i)
        for (size_t j = i + 1; j < r.variants.size(); ++j) {
            const auto& a = replicates[r.variants[i].variant];
            const auto& b = replicates[r.variants[j].variant];
            std::vector<double> d(a.size());
            for (size_t k = 0; k < d.size(); ++k) d[k] = a[k] - b[k];
            const double diff = r.variants[i].value - r.variants[j].value;
            RankedPair pair{r.variants[i].variant, r.variants[j].variant, diff,
                            static_cast<int>(d.size()), analysis::bootstrap_normal_p(diff, d)};
            r.pairs.push_back(pair);
        }
    settle(r, alpha);
    return r;
}

std::string ci_text(const RankedVariant& v, int digits) {
    if (v.lo == v.hi) return "";
    return "[" + fixed_number(v.lo, digits) + ", " + fixed_number(v.hi, digits) + "]";
}

std::string p_cell(double p) {
    if (p < 1e-4) return "<1e-4";
    return fixed_number(p, 4);
}

// The pairs not told apart, "a ~ b (p, Holm p)", for the table's last line.
std::string not_apart_text(const Ranking& r, int digits) {
    std::string out;
    for (const auto& pair : r.pairs)
        if (!pair.apart)
            out += (out.empty() ? "" : "; ") + pair.better + " ~ " + pair.worse + " (" +
                   fixed_number(pair.difference, digits) + ", p " + p_cell(pair.p) + ", Holm " +
                   p_cell(pair.p_holm) + ")";
    return out;
}

}  // namespace

std::vector<Ranking> rank_variants(ResultStore& store, const std::string& name,
                                   const RankOptions& options) {
    const auto experiment = store.find_experiment(name);
    if (!experiment)
        throw std::invalid_argument("no experiment named '" + name + "' in " + store.path());
    std::map<std::string, int> left_out;
    const Groups groups = load_pretrain_groups(store, experiment->id, &left_out);
    std::vector<Ranking> out;
    if (!groups.empty()) out.push_back(rank_on_loss(groups, options.alpha));
    const Report report = load_report(store, name);
    std::vector<std::string> columns = options.columns;
    for (const auto& c : columns)
        if (std::find(report.columns.begin(), report.columns.end(), c) == report.columns.end()) {
            std::string have;
            for (const auto& k : report.columns) have += (have.empty() ? "" : ", ") + k;
            throw std::invalid_argument("--columns: experiment '" + name + "' has no task '" + c +
                                        "' (it has: " + (have.empty() ? "none" : have) + ")");
        }
    if (columns.empty()) columns = report.columns;
    std::vector<std::string> variants;
    for (const auto& row : report.rows)
        if (!row.reference &&
            std::find(variants.begin(), variants.end(), row.variant) == variants.end())
            variants.push_back(row.variant);
    if (!columns.empty() && !variants.empty()) {
        Ranking tasks = rank_on_tasks(report, columns, variants, options.alpha);
        if (!tasks.variants.empty()) out.push_back(std::move(tasks));
    }
    for (auto& r : out)
        for (const auto& [group, n] : left_out)
            r.note += std::string(r.note.empty() ? "" : "; ") + group + ": " + std::to_string(n) +
                      " finished run(s) of another config left out";
    return out;
}

std::string render_rankings(const std::string& experiment, const std::vector<Ranking>& rankings,
                            ClaimsFormat format) {
    if (format == ClaimsFormat::kJson) {
        nlohmann::json j;
        j["experiment"] = experiment;
        j["rankings"] = nlohmann::json::array();
        for (const auto& r : rankings) {
            nlohmann::json rj{{"measure", r.measure},
                              {"test", r.test},
                              {"lower_is_better", r.lower_is_better},
                              {"note", r.note}};
            rj["variants"] = nlohmann::json::array();
            for (const auto& v : r.variants)
                rj["variants"].push_back({{"variant", v.variant},
                                          {"seeds", v.seeds},
                                          {"value", v.value},
                                          {"lo", v.lo},
                                          {"hi", v.hi},
                                          {"groups", v.groups}});
            rj["pairs"] = nlohmann::json::array();
            for (const auto& p : r.pairs)
                rj["pairs"].push_back({{"better", p.better},
                                       {"worse", p.worse},
                                       {"difference", p.difference},
                                       {"n", p.n},
                                       {"p", p.p},
                                       {"p_holm", p.p_holm},
                                       {"apart", p.apart}});
            j["rankings"].push_back(rj);
        }
        return j.dump(2) + "\n";
    }
    std::ostringstream os;
    const bool md = format == ClaimsFormat::kMarkdown;
    if (rankings.empty()) os << "experiment '" << experiment << "' has no finished runs to rank\n";
    for (const auto& r : rankings) {
        const int digits = r.lower_is_better ? 3 : 2;
        size_t told = 0;
        for (const auto& p : r.pairs) told += p.apart;
        os << (md ? "**" : "") << r.measure << (md ? "**" : "") << ", experiment '" << experiment
           << "'\n"
           << (md ? "\n" : "") << r.test << "\n\n";
        if (md)
            os << "| rank | variant | seeds | value | 95% CI | group "
                  "|\n|---|---|---|---|---|---|\n";
        else {
            char head[128];
            std::snprintf(head, sizeof head, "%-5s %-22s %5s %9s  %-18s %s\n", "rank", "variant",
                          "seeds", r.lower_is_better ? "loss" : "score", "95% CI", "group");
            os << head;
        }
        for (size_t i = 0; i < r.variants.size(); ++i) {
            const auto& v = r.variants[i];
            if (md) {
                os << "| " << i + 1 << " | " << v.variant << " | " << v.seeds << " | "
                   << fixed_number(v.value, digits) << " | " << ci_text(v, digits) << " | "
                   << v.groups << " |\n";
            } else {
                char line[256];
                std::snprintf(line, sizeof line, "%-5zu %-22s %5d %9s  %-18s %s\n", i + 1,
                              v.variant.c_str(), v.seeds, fixed_number(v.value, digits).c_str(),
                              ci_text(v, digits).c_str(), v.groups.c_str());
                os << line;
            }
        }
        os << (md ? "\n" : "") << "pairs told apart: " << told << " of " << r.pairs.size()
           << "; variants sharing a letter are not told apart\n";
        const std::string same = not_apart_text(r, digits);
        if (!same.empty()) os << (md ? "\n" : "") << "not told apart: " << same << "\n";
        if (!r.note.empty()) os << (md ? "\n" : "") << "note: " << r.note << "\n";
        os << "\n";
    }
    return os.str();
}

}  // namespace experiments
