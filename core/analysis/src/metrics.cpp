// GLUE metrics, task scores and averages (analysis/metrics.h). Pure C++: no Torch. Formulas follow
// scikit-learn (accuracy_score, f1_score, matthews_corrcoef) and SciPy (pearsonr, spearmanr,
// rankdata "average"); the averages follow shared/GLUE_FORMAT.md.
#include "analysis/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

namespace analysis {

namespace {

template <typename A, typename B>
void check_sizes(const char* what, const std::vector<A>& a, const std::vector<B>& b) {
    if (a.size() != b.size()) {
        throw std::invalid_argument(std::string(what) + ": sizes differ (" +
                                    std::to_string(a.size()) + " predictions vs " +
                                    std::to_string(b.size()) + " gold)");
    }
    if (a.empty()) throw std::invalid_argument(std::string(what) + ": empty input (0 vs 0)");
}

void check_finite(const char* what, const std::vector<double>& v, const char* which) {
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (!std::isfinite(v[i])) {
            throw std::invalid_argument(std::string(what) + ": " + which + "[" + std::to_string(i) +
                                        "] is not finite");
        }
    }
}

bool is_constant(const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
}

/// Pearson of two checked, equally long, non-empty series.
double pearson_unchecked(const std::vector<double>& x, const std::vector<double>& y) {
    // An explicit test, not sxx == 0: the mean of n equal doubles need not equal them exactly,
    // which would leave a tiny non-zero variance and a meaningless ratio.
    if (is_constant(x) || is_constant(y)) return 0.0;
    const double n = static_cast<double>(x.size());
    const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
    const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
    double sxx = 0.0, syy = 0.0, sxy = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double dx = x[i] - mx, dy = y[i] - my;
        sxx += dx * dx;
        syy += dy * dy;
        sxy += dx * dy;
    }
    if (sxx == 0.0 || syy == 0.0) return 0.0;
    // Clamped as SciPy does: rounding can push |r| a hair past 1.
    return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

std::string lower_dashes_as_underscores(const std::string& s) {
    std::string out = s;
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c == '-') c = '_';
    }
    return out;
}

/// Re-keys a by-task map by canonical name, dropping syn- tasks; duplicates throw.
template <typename V>
std::map<std::string, V> canonical_keys(const char* what, const std::map<std::string, V>& in) {
    std::map<std::string, V> out;
    std::map<std::string, std::string> spelled;  // canonical -> key as given
    for (const auto& [key, value] : in) {
        const std::string name = canonical_task(key);
        if (is_synthetic_task(name)) continue;
        const auto [it, fresh] = spelled.emplace(name, key);
        if (!fresh) {
            throw std::invalid_argument(std::string(what) + ": '" + it->second + "' and '" + key +
                                        "' both name task " + name);
        }
        out.emplace(name, value);
    }
    return out;
}

template <typename V>
void require_tasks(const char* what, const std::map<std::string, V>& by_task,
                   const std::vector<std::string>& needed) {
    std::string missing;
    for (const auto& t : needed) {
        if (by_task.count(t) == 0) missing += (missing.empty() ? "" : ", ") + t;
    }
    if (!missing.empty()) {
        throw std::invalid_argument(std::string(what) + ": missing tasks: " + missing);
    }
}

double metric_of(const std::string& task, const TaskScores& scores, const std::string& key) {
    const auto it = scores.metrics.find(key);
    if (it == scores.metrics.end()) {
        throw std::invalid_argument("task " + task + ": no '" + key + "' in its scores");
    }
    return it->second;
}

std::vector<int> to_labels(const char* which, const std::vector<double>& v) {
    std::vector<int> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        const double x = v[i];
        if (!std::isfinite(x) || x != std::floor(x) || std::fabs(x) > 1e9) {
            throw std::invalid_argument(std::string("score_task: ") + which + "[" +
                                        std::to_string(i) + "] = " + std::to_string(x) +
                                        " is not an integer label id");
        }
        out[i] = static_cast<int>(x);
    }
    return out;
}

}  // namespace

double accuracy(const std::vector<int>& pred, const std::vector<int>& gold) {
    check_sizes("accuracy", pred, gold);
    std::size_t correct = 0;
    for (std::size_t i = 0; i < pred.size(); ++i) correct += pred[i] == gold[i];
    return static_cast<double>(correct) / static_cast<double>(pred.size());
}

double f1_class1(const std::vector<int>& pred, const std::vector<int>& gold) {
    check_sizes("f1_class1", pred, gold);
    double tp = 0, fp = 0, fn = 0;
    for (std::size_t i = 0; i < pred.size(); ++i) {
        const bool p = pred[i] == 1, g = gold[i] == 1;
        tp += p && g;
        fp += p && !g;
        fn += !p && g;
    }
    // Equal to 2PR / (P + R) whenever that is defined; 0 otherwise (zero_division=0).
    const double denom = 2 * tp + fp + fn;
    return denom == 0 ? 0.0 : 2 * tp / denom;
}

double matthews_corrcoef(const std::vector<int>& pred, const std::vector<int>& gold) {
    check_sizes("matthews_corrcoef", pred, gold);
    std::map<int, double> t, p;  // label -> gold count, predicted count
    double correct = 0;
    for (std::size_t i = 0; i < pred.size(); ++i) {
        t[gold[i]] += 1;
        p[pred[i]] += 1;
        correct += pred[i] == gold[i];
    }
    const double n = static_cast<double>(pred.size());
    double tp_sum = 0, pp_sum = 0, tt_sum = 0;
    for (const auto& [label, count] : t) {
        tt_sum += count * count;
        const auto it = p.find(label);
        if (it != p.end()) tp_sum += count * it->second;
    }
    for (const auto& [label, count] : p) pp_sum += count * count;
    // sklearn's names: cov_ytyp, cov_ypyp, cov_ytyt (each n^2 times a covariance).
    const double cov_ytyp = correct * n - tp_sum;
    const double cov_ypyp = n * n - pp_sum;
    const double cov_ytyt = n * n - tt_sum;
    if (cov_ypyp * cov_ytyt == 0) return 0.0;
    return cov_ytyp / std::sqrt(cov_ytyt * cov_ypyp);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
    check_sizes("pearson", x, y);
    check_finite("pearson", x, "x");
    check_finite("pearson", y, "y");
    return pearson_unchecked(x, y);
}

std::vector<double> average_ranks(const std::vector<double>& values) {
    std::vector<std::size_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    std::vector<double> ranks(values.size());
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i + 1;
        while (j < order.size() && values[order[j]] == values[order[i]]) ++j;
        // Positions i..j-1 (0-based) share rank mean(i+1 .. j) = (i + 1 + j) / 2.
        const double rank = 0.5 * static_cast<double>(i + 1 + j);
        for (std::size_t k = i; k < j; ++k) ranks[order[k]] = rank;
        i = j;
    }
    return ranks;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
    check_sizes("spearman", x, y);
    check_finite("spearman", x, "x");
    check_finite("spearman", y, "y");
    return pearson_unchecked(average_ranks(x), average_ranks(y));
}

bool is_synthetic_task(const std::string& task) {
    return task.size() >= 4 && task[3] == '-' &&
           lower_dashes_as_underscores(task.substr(0, 3)) == "syn";
}

std::string canonical_task(const std::string& task) {
    if (is_synthetic_task(task)) return task;
    const TaskColumn found = resolve_task_column(task);
    if (found.task != nullptr && !found.task->synthetic && found.split != nullptr)
        return found.split->column;
    std::string hint;
    if (found.task != nullptr && !found.task->synthetic) {
        std::string columns;
        for (const auto& d : found.task->dev) columns += (columns.empty() ? "" : " or ") + d.column;
        hint = " (" + found.task->name + " is scored per dev set: say " + columns + ")";
    }
    std::string keys, names;
    for (const auto& t : glue_tasks()) {
        if (t.synthetic) continue;
        for (const auto& d : t.dev) {
            keys += (keys.empty() ? "" : ", ") + d.column;
            names += (names.empty() ? "" : ", ") + (t.dev.size() == 1 ? t.name : d.label);
        }
    }
    throw std::invalid_argument("unknown task '" + task + "'" + hint + "; expected one of " + keys +
                                " (or " + names + "), or a syn-... name");
}

MetricKind metric_kind(const std::string& task) {
    const std::string name = canonical_task(task);
    if (is_synthetic_task(name)) {
        throw std::invalid_argument("synthetic task '" + task +
                                    "' has no fixed metric: pass a MetricKind");
    }
    return resolve_task_column(name).task->metric;
}

TaskScores score_task(MetricKind kind, const std::vector<double>& predictions,
                      const std::vector<double>& gold) {
    check_sizes("score_task", predictions, gold);
    TaskScores s;
    if (kind == MetricKind::kPearsonSpearman) {
        s.metrics["pearson"] = 100.0 * pearson(predictions, gold);
        s.metrics["spearman"] = 100.0 * spearman(predictions, gold);
        return s;
    }
    const std::vector<int> p = to_labels("predictions", predictions);
    const std::vector<int> g = to_labels("gold", gold);
    switch (kind) {
        case MetricKind::kMcc: s.metrics["mcc"] = 100.0 * matthews_corrcoef(p, g); break;
        case MetricKind::kF1Accuracy:
            s.metrics["f1"] = 100.0 * f1_class1(p, g);
            s.metrics["accuracy"] = 100.0 * accuracy(p, g);
            break;
        default: s.metrics["accuracy"] = 100.0 * accuracy(p, g); break;
    }
    return s;
}

TaskScores score_task(const std::string& task, const std::vector<double>& predictions,
                      const std::vector<double>& gold) {
    return score_task(metric_kind(task), predictions, gold);
}

TaskScores score_task(const std::string& task, MetricKind kind,
                      const std::vector<double>& predictions, const std::vector<double>& gold) {
    if (!is_synthetic_task(canonical_task(task)) && metric_kind(task) != kind) {
        throw std::invalid_argument("score_task: GLUE task '" + task +
                                    "' is not scored with the MetricKind given");
    }
    return score_task(kind, predictions, gold);
}

double primary_metric(MetricKind kind, const TaskScores& scores) {
    const char* key = selection_metric_key(kind);
    const auto it = scores.metrics.find(key);
    if (it == scores.metrics.end()) {
        throw std::invalid_argument(std::string("primary_metric: no '") + key + "' in the scores");
    }
    return it->second;
}

double primary_metric(const std::string& task, const TaskScores& scores) {
    if (!is_synthetic_task(task)) return primary_metric(metric_kind(task), scores);
    const auto& m = scores.metrics;
    const MetricKind kind = m.count("mcc")       ? MetricKind::kMcc
                            : m.count("pearson") ? MetricKind::kPearsonSpearman
                                                 : MetricKind::kAccuracy;
    return primary_metric(kind, scores);
}

double tupe_average(const std::map<std::string, double>& primary_by_task) {
    const auto by_task = canonical_keys("tupe_average", primary_by_task);
    require_tasks("tupe_average", by_task, paper_columns());
    double sum = 0;
    for (const auto& t : paper_columns()) sum += by_task.at(t);
    return sum / static_cast<double>(paper_columns().size());
}

double leaderboard_average(const std::map<std::string, TaskScores>& scores_by_task) {
    const auto by_task = canonical_keys("leaderboard_average", scores_by_task);
    std::vector<std::string> columns;
    for (const auto& t : glue_tasks())
        if (!t.synthetic)
            for (const auto& d : t.dev) columns.push_back(d.column);
    require_tasks("leaderboard_average", by_task, columns);
    const auto get = [&](const std::string& column, const std::string& key) {
        return metric_of(column, by_task.at(column), key);
    };
    // One number per task; two-metric tasks and MNLI's two dev sets count once as their mean.
    double sum = 0;
    int tasks = 0;
    for (const auto& t : glue_tasks()) {
        if (t.synthetic) continue;
        double task_sum = 0;
        for (const auto& d : t.dev) {
            const std::string& c = d.column;
            switch (t.metric) {
                case MetricKind::kMcc: task_sum += get(c, "mcc"); break;
                case MetricKind::kF1Accuracy:
                    task_sum += 0.5 * (get(c, "f1") + get(c, "accuracy"));
                    break;
                case MetricKind::kPearsonSpearman:
                    task_sum += 0.5 * (get(c, "pearson") + get(c, "spearman"));
                    break;
                default: task_sum += get(c, "accuracy"); break;
            }
        }
        sum += t.dev.size() == 1 ? task_sum : task_sum / static_cast<double>(t.dev.size());
        ++tasks;
    }
    return sum / static_cast<double>(tasks);
}

std::vector<std::string> glue_labels(const std::string& task) {
    const std::string name = canonical_task(task);
    metric_kind(name);  // rejects syn- names
    return resolve_task_column(name).task->labels;
}

}  // namespace analysis
