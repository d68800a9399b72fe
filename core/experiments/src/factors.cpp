// A stored experiment as a factorial design, its main effects and interactions (see factors.h).
#include "experiments/factors.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "analysis/evidence.h"
#include "engine/config.h"
#include "experiments/report.h"

namespace experiments {

namespace factor_stats {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Settings that cannot change a result (job_identity.cpp's kNotIdentity, less the names that
// label one: preset, size, corpus, vocab) and the seed, which is the replicate, not a factor.
const std::set<std::string> kNotFactors = {"out_dir",
                                           "data.cache_dir",
                                           "train.device",
                                           "train.threads",
                                           "train.tensorboard",
                                           "train.log_interval",
                                           "train.checkpoint_interval",
                                           "train.seed"};

double last_value(ResultStore& store, int64_t run, const std::string& key) {
    const auto points = store.metrics(run, key);
    return points.empty() ? kNaN : points.back().value;
}

double param_number(const std::map<std::string, std::string>& params, const std::string& key) {
    const auto it = params.find(key);
    if (it == params.end()) return kNaN;
    try {
        return std::stod(it->second);
    } catch (const std::exception&) {
        return kNaN;
    }
}

// The whole-model row of the last checkpoint in `tupe ablate`'s ablation.json: the change in
// masked-token loss with every positional term removed. NaN when the file has none.
double ablation_whole_model(const std::string& path) {
    std::ifstream in(path);
    if (!in) return kNaN;
    try {
        const nlohmann::json j = nlohmann::json::parse(in);
        if (!j.contains("checkpoints") || j["checkpoints"].empty()) return kNaN;
        for (const auto& row : j["checkpoints"].back().at("rows")) {
            const auto whole = [&](const char* k) {
                return !row.contains(k) || row[k].is_null() ||
                       (row[k].is_number() && row[k].get<double>() < 0);
            };
            if (whole("layer") && whole("head") && row.contains("delta_loss") &&
                row["delta_loss"].is_number())
                return row["delta_loss"].get<double>();
        }
    } catch (const nlohmann::json::exception&) {
        // A malformed file is the ablation view's to report; here the run has no value.
    }
    return kNaN;
}

bool is_number(const std::string& s, double* out) {
    try {
        size_t used = 0;
        *out = std::stod(s, &used);
        return used == s.size();
    } catch (const std::exception&) {
        return false;
    }
}

// Levels in display order: numbers ascending, false before true, else as first seen.
std::vector<std::string> ordered_levels(std::vector<std::string> seen) {
    std::vector<double> numbers(seen.size());
    bool numeric = true;
    for (size_t i = 0; i < seen.size(); ++i) numeric = numeric && is_number(seen[i], &numbers[i]);
    if (numeric) {
        std::vector<size_t> idx(seen.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        std::sort(idx.begin(), idx.end(),
                  [&](size_t a, size_t b) { return numbers[a] < numbers[b]; });
        std::vector<std::string> out;
        for (size_t i : idx) out.push_back(seen[i]);
        return out;
    }
    if (seen.size() == 2 &&
        std::set<std::string>(seen.begin(), seen.end()) == std::set<std::string>{"false", "true"})
        return {"false", "true"};
    return seen;
}

// Every config key's value and the identity's other keys, per run.
using RunValues = std::map<std::string, std::string>;

RunValues values_of(const RunRecord& run) {
    RunValues values;
    const engine::PretrainConfig config = engine::parse_config_text(run.config_text);
    for (const auto& key : engine::config_keys())
        if (!kNotFactors.count(key)) values[key] = engine::get_config_value(config, key);
    std::istringstream lines(run.identity);
    std::string line;
    while (std::getline(lines, line)) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        const std::string key = line.substr(0, eq);
        if (!values.count(key) && !kNotFactors.count(key)) values[key] = line.substr(eq + 1);
    }
    return values;
}

// The keys that vary between runs grouped into factors: keys whose values determine each
// other in every run are one factor, named by its first key in config order.
std::vector<Factor> find_factors(const std::vector<RunValues>& runs) {
    std::vector<std::string> order = engine::config_keys();
    for (const auto& r : runs)
        for (const auto& [key, value] : r)
            if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
    auto column = [&](const std::string& key) {
        std::vector<std::string> out;
        for (const auto& r : runs) {
            const auto it = r.find(key);
            out.push_back(it == r.end() ? "" : it->second);
        }
        return out;
    };
    auto determines = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
        std::map<std::string, std::string> map;
        for (size_t i = 0; i < a.size(); ++i)
            if (!map.emplace(a[i], b[i]).second && map[a[i]] != b[i]) return false;
        return true;
    };
    std::vector<Factor> factors;
    std::vector<std::vector<std::string>> columns;
    for (const auto& key : order) {
        const auto col = column(key);
        if (std::set<std::string>(col.begin(), col.end()).size() < 2) continue;
        bool aliased = false;
        for (size_t f = 0; f < factors.size() && !aliased; ++f)
            if (determines(columns[f], col) && determines(col, columns[f])) {
                factors[f].aliases.push_back(key);
                aliased = true;
            }
        if (aliased) continue;
        std::vector<std::string> seen;
        for (const auto& v : col)
            if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
        factors.push_back({key, ordered_levels(seen), {}});
        columns.push_back(col);
    }
    return factors;
}

// Per pretraining run: each task's score at the run's last fine-tuned snapshot (the task's
// selection metric; the median over fine-tuning seeds at each lr, then the best lr: the
// report's rule for one pretraining run), by column title.
std::map<int64_t, std::map<std::string, double>> task_scores(
    ResultStore& store, int64_t experiment_id, const std::map<int64_t, int64_t>& parent_of) {
    std::map<int64_t,
             std::map<std::string, std::map<int64_t, std::map<double, std::vector<double>>>>>
        by_run;  // run -> task -> step -> lr -> values
    for (const auto& g : store.glue_results(experiment_id)) {
        if (g.metric != selection_metric(g.task)) continue;
        const auto p = parent_of.find(g.run_id);
        const int64_t run = p == parent_of.end() ? g.run_id : p->second;
        by_run[run][g.task][g.checkpoint_step][g.lr].push_back(g.value);
    }
    std::map<int64_t, std::map<std::string, double>> out;
    for (const auto& [run, tasks] : by_run) {
        int64_t last = 0;
        for (const auto& [task, steps] : tasks) last = std::max(last, steps.rbegin()->first);
        for (const auto& [task, steps] : tasks) {
            const auto at = steps.find(last);
            if (at == steps.end()) continue;
            double best = -std::numeric_limits<double>::infinity();
            for (const auto& [lr, values] : at->second)
                best = std::max(best, analysis::median_of(values));
            out[run][column_title(task)] = best;
        }
    }
    return out;
}

void add_metric_columns(FactorTable& t, const std::vector<std::string>& task_columns) {
    const std::vector<FactorMetric> fixed_front = {
        {"val_loss", "final validation loss (nats)", true},
        {"below_context_free", "context-free floor minus final validation loss (nats)", false},
        {"unigram_floor", "unigram floor (nats)", false},
        {"context_free_floor", "context-free floor (nats)", false}};
    std::vector<FactorMetric> all = fixed_front;
    for (const auto& c : task_columns) all.push_back({c, c + " (%)", false});
    all.push_back({"task_avg", "task average (%)", false});
    all.push_back({"positional_share", "positional share (tupe analyze)", false});
    all.push_back(
        {"ablation_delta", "change in loss without positions (tupe ablate, nats)", false});
    for (const auto& m : all)
        if (std::any_of(t.runs.begin(), t.runs.end(),
                        [&](const FactorRun& r) { return std::isfinite(r.metric(m.key)); }))
            t.metrics.push_back(m);
}

// The metrics of one pretraining run.
std::map<std::string, double> run_metrics(ResultStore& store, const RunRecord& run,
                                          const std::map<std::string, double>& tasks) {
    std::map<std::string, double> m;
    m["val_loss"] = last_value(store, run.id, "validation/loss");
    const auto params = store.params(run.id);
    m["unigram_floor"] = param_number(params, "floor.unigram_nats");
    m["context_free_floor"] = param_number(params, "floor.context_free_nats");
    m["below_context_free"] = m["context_free_floor"] - m["val_loss"];
    m["positional_share"] = last_value(store, run.id, "property/positional_share");
    m["ablation_delta"] = kNaN;
    for (const auto& a : store.artifacts(run.id)) {
        const std::string suffix = "ablation/ablation.json";
        if (a.path.size() >= suffix.size() &&
            a.path.compare(a.path.size() - suffix.size(), suffix.size(), suffix) == 0)
            m["ablation_delta"] = ablation_whole_model(a.path);
    }
    double sum = 0;
    for (const auto& [task, value] : tasks) m[task] = value, sum += value;
    m["task_avg"] = tasks.empty() ? kNaN : sum / static_cast<double>(tasks.size());
    return m;
}

}  // namespace factor_stats

double FactorRun::metric(const std::string& key) const {
    const auto it = metrics.find(key);
    return it == metrics.end() ? factor_stats::kNaN : it->second;
}

int FactorTable::factor_index(const std::string& key) const {
    for (size_t i = 0; i < factors.size(); ++i)
        if (factors[i].key == key ||
            std::count(factors[i].aliases.begin(), factors[i].aliases.end(), key))
            return static_cast<int>(i);
    return -1;
}

const FactorMetric* FactorTable::find_metric(const std::string& key) const {
    for (const auto& m : metrics)
        if (m.key == key) return &m;
    return nullptr;
}

FactorTable load_factor_table(ResultStore& store, const std::string& name) {
    const auto exp = store.find_experiment(name);
    if (!exp) {
        std::string names;
        for (const auto& e : store.list_experiments())
            names += (names.empty() ? "" : ", ") + e.name;
        throw std::invalid_argument(
            "no experiment '" + name + "' in " + store.path() +
            (names.empty() ? " (it holds none)" : " (it holds " + names + ")"));
    }
    FactorTable t;
    t.experiment = name;
    std::vector<RunRecord> pretrain;
    std::map<int64_t, int64_t> parent_of;
    int unfinished = 0;
    for (const auto& r : store.list_runs(exp->id)) {
        if (r.parent_run_id) parent_of[r.id] = *r.parent_run_id;
        if (r.kind != "pretrain") continue;
        if (r.status == "finished")
            pretrain.push_back(r);
        else
            ++unfinished;
    }
    if (unfinished > 0)
        t.notes.push_back(std::to_string(unfinished) +
                          " pretraining run(s) not finished: left out");
    std::vector<factor_stats::RunValues> values;
    std::vector<RunRecord> kept;
    for (const auto& r : pretrain) {
        try {
            values.push_back(factor_stats::values_of(r));
            kept.push_back(r);
        } catch (const std::exception& e) {
            t.notes.push_back(r.name + ": stored config unreadable (" + e.what() + "): left out");
        }
    }
    if (kept.empty())
        throw std::invalid_argument("experiment '" + name + "' has no finished pretraining run");
    t.factors = factor_stats::find_factors(values);
    const auto tasks = factor_stats::task_scores(store, exp->id, parent_of);
    std::vector<std::string> task_columns;
    for (size_t i = 0; i < kept.size(); ++i) {
        FactorRun fr;
        fr.run_id = kept[i].id;
        fr.name = kept[i].name;
        fr.seed = kept[i].seed;
        for (const auto& f : t.factors) fr.levels.push_back(values[i][f.key]);
        const auto it = tasks.find(kept[i].id);
        const std::map<std::string, double> none;
        fr.metrics =
            factor_stats::run_metrics(store, kept[i], it == tasks.end() ? none : it->second);
        if (it != tasks.end())
            for (const auto& [task, v] : it->second)
                if (std::find(task_columns.begin(), task_columns.end(), task) == task_columns.end())
                    task_columns.push_back(task);
        t.runs.push_back(std::move(fr));
    }
    factor_stats::add_metric_columns(t, task_columns);
    return t;
}

namespace factor_stats {

struct Cell {
    std::vector<std::string> levels;
    double mean = 0;
    int n = 0;
};

// The cells of the runs with a finite `metric`, and the pooled within-cell variance.
struct CellStats {
    std::vector<Cell> cells;
    int runs = 0, df = 0;
    double s = kNaN;
};

CellStats cell_stats(const FactorTable& t, const std::string& metric) {
    std::map<std::vector<std::string>, std::vector<double>> by_cell;
    CellStats out;
    for (const auto& r : t.runs)
        if (const double v = r.metric(metric); std::isfinite(v))
            by_cell[r.levels].push_back(v), ++out.runs;
    double ss = 0;
    for (const auto& [levels, values] : by_cell) {
        double sum = 0;
        for (double v : values) sum += v;
        const double mean = sum / static_cast<double>(values.size());
        for (double v : values) ss += (v - mean) * (v - mean);
        out.cells.push_back({levels, mean, static_cast<int>(values.size())});
    }
    out.df = out.runs - static_cast<int>(out.cells.size());
    if (out.df > 0) out.s = std::sqrt(ss / out.df);
    return out;
}

// The least-squares mean of `cells` (each counts once) with its interval; `half` gets the
// standard error's multiplier sum 1/n / k^2 for contrasts.
LevelMean ls_mean(const std::vector<const Cell*>& cells, const CellStats& st,
                  const std::string& level, double* variance_factor) {
    LevelMean m;
    m.level = level;
    m.cells = static_cast<int>(cells.size());
    if (cells.empty()) return m;
    double sum = 0, inv_n = 0;
    for (const Cell* c : cells) sum += c->mean, inv_n += 1.0 / c->n, m.runs += c->n;
    const double k = static_cast<double>(cells.size());
    m.mean = sum / k;
    const double factor = inv_n / (k * k);
    if (variance_factor) *variance_factor = factor;
    if (st.df > 0) {
        const double half = analysis::student_t_quantile(0.975, st.df) * st.s * std::sqrt(factor);
        m.lo = m.mean - half, m.hi = m.mean + half;
    }
    return m;
}

Contrast make_contrast(double estimate, double variance_factor, const CellStats& st) {
    Contrast c;
    c.estimate = estimate;
    if (st.df <= 0 || !std::isfinite(estimate)) return c;
    c.valid = true;
    const double se = st.s * std::sqrt(variance_factor);
    if (se == 0) {
        c.lo = c.hi = estimate;
        c.p = estimate == 0 ? 1 : 0;
        return c;
    }
    const double q = analysis::student_t_quantile(0.975, st.df);
    c.lo = estimate - q * se, c.hi = estimate + q * se;
    c.p = 2 * (1 - analysis::student_t_cdf(std::fabs(estimate / se), st.df));
    return c;
}

MainEffect effect_of(const FactorTable& t, const CellStats& st, size_t f, int within,
                     const std::string& within_level) {
    MainEffect e;
    e.factor = t.factors[f].key;
    if (within >= 0) e.within_factor = t.factors[size_t(within)].key, e.within_level = within_level;
    std::vector<double> factors;
    for (const auto& level : t.factors[f].levels) {
        std::vector<const Cell*> cells;
        for (const auto& c : st.cells)
            if (c.levels[f] == level && (within < 0 || c.levels[size_t(within)] == within_level))
                cells.push_back(&c);
        double factor = 0;
        e.levels.push_back(ls_mean(cells, st, level, &factor));
        factors.push_back(factor);
    }
    if (e.levels.size() == 2 && e.levels[0].cells > 0 && e.levels[1].cells > 0)
        e.contrast =
            make_contrast(e.levels[1].mean - e.levels[0].mean, factors[0] + factors[1], st);
    return e;
}

}  // namespace factor_stats

FactorEffects main_effects(const FactorTable& t, const std::string& metric,
                           const std::string& within) {
    if (!t.find_metric(metric)) {
        std::string keys;
        for (const auto& m : t.metrics) keys += (keys.empty() ? "" : ", ") + m.key;
        throw std::invalid_argument("no metric '" + metric + "' in experiment " + t.experiment +
                                    " (it has " + keys + ")");
    }
    const int w = within.empty() ? -1 : t.factor_index(within);
    if (!within.empty() && w < 0)
        throw std::invalid_argument("no factor '" + within + "' in experiment " + t.experiment);
    const factor_stats::CellStats st = factor_stats::cell_stats(t, metric);
    FactorEffects out;
    out.metric = metric;
    out.runs = st.runs;
    out.cells = static_cast<int>(st.cells.size());
    out.df = st.df;
    out.residual_sd = st.s;
    if (st.df <= 0)
        out.notes.push_back("one run per cell: no seed-to-seed spread to put an interval on");
    for (size_t f = 0; f < t.factors.size(); ++f) {
        if (w < 0) {
            out.effects.push_back(factor_stats::effect_of(t, st, f, -1, ""));
            continue;
        }
        if (int(f) == w) continue;
        for (const auto& level : t.factors[size_t(w)].levels)
            out.effects.push_back(factor_stats::effect_of(t, st, f, w, level));
    }
    return out;
}

Interaction interaction(const FactorTable& t, const std::string& metric, const std::string& a,
                        const std::string& b) {
    const int ia = t.factor_index(a), ib = t.factor_index(b);
    if (ia < 0 || ib < 0 || ia == ib)
        throw std::invalid_argument("an interaction needs two different factors of experiment " +
                                    t.experiment + ", got '" + a + "' and '" + b + "'");
    if (!t.find_metric(metric))
        throw std::invalid_argument("no metric '" + metric + "' in experiment " + t.experiment);
    const factor_stats::CellStats st = factor_stats::cell_stats(t, metric);
    Interaction out;
    out.a = t.factors[size_t(ia)].key, out.b = t.factors[size_t(ib)].key;
    out.a_levels = t.factors[size_t(ia)].levels, out.b_levels = t.factors[size_t(ib)].levels;
    std::vector<std::vector<double>> factor(out.a_levels.size(),
                                            std::vector<double>(out.b_levels.size(), 0));
    for (size_t i = 0; i < out.a_levels.size(); ++i) {
        out.cells.emplace_back();
        for (size_t j = 0; j < out.b_levels.size(); ++j) {
            std::vector<const factor_stats::Cell*> cells;
            for (const auto& c : st.cells)
                if (c.levels[size_t(ia)] == out.a_levels[i] &&
                    c.levels[size_t(ib)] == out.b_levels[j])
                    cells.push_back(&c);
            out.cells[i].push_back(factor_stats::ls_mean(
                cells, st, out.a_levels[i] + " x " + out.b_levels[j], &factor[i][j]));
        }
    }
    if (out.a_levels.size() == 2 && out.b_levels.size() == 2) {
        const auto m = [&](size_t i, size_t j) { return out.cells[i][j].mean; };
        const double est = (m(1, 1) - m(1, 0)) - (m(0, 1) - m(0, 0));
        out.contrast = factor_stats::make_contrast(
            est, factor[0][0] + factor[0][1] + factor[1][0] + factor[1][1], st);
    }
    return out;
}

}  // namespace experiments
