// GLUE metrics, task scores, averages and submission scoring (analysis/metrics.h). Pure C++:
// no Torch. Formulas follow scikit-learn (accuracy_score, f1_score, matthews_corrcoef) and
// SciPy (pearsonr, spearmanr, rankdata "average"); the averages follow shared/GLUE_FORMAT.md.
#include "analysis/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>

#include "engine/errors.h"

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

/// The nine GLUE tasks of the TUPE average, in the paper's column order.
const std::vector<std::string>& tupe_tasks() {
    static const std::vector<std::string> tasks = {"mnli_m", "mnli_mm", "qnli", "qqp", "sst2",
                                                   "cola",   "mrpc",    "rte",  "stsb"};
    return tasks;
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

/// Parses the whole of `text` as a finite double, locale-independently (Qt sets the C locale
/// from the environment, so strtod could expect a decimal comma).
bool parse_double(const std::string& text, double& out) {
    const char* first = text.data();
    const char* last = first + text.size();
    if (first != last && *first == '+') ++first;  // from_chars rejects a leading '+'
    const auto [ptr, ec] = std::from_chars(first, last, out);
    return ec == std::errc() && ptr == last && first != last && std::isfinite(out);
}

bool is_integer_text(const std::string& s) {
    std::size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    if (i == s.size()) return false;
    for (; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
    }
    return true;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (;;) {
        const std::size_t tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab == std::string::npos ? tab : tab - start));
        if (tab == std::string::npos) return fields;
        start = tab + 1;
    }
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
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
    static const std::map<std::string, std::string> names = {
        {"cola", "cola"},
        {"sst2", "sst2"},
        {"sst_2", "sst2"},
        {"mrpc", "mrpc"},
        {"stsb", "stsb"},
        {"sts_b", "stsb"},
        {"qqp", "qqp"},
        {"mnli_m", "mnli_m"},
        {"mnli_mm", "mnli_mm"},
        {"mnli_matched", "mnli_m"},
        {"mnli_mismatched", "mnli_mm"},
        {"qnli", "qnli"},
        {"rte", "rte"},
        {"wnli", "wnli"},
    };
    const std::string key = lower_dashes_as_underscores(task);
    const auto it = names.find(key);
    if (it != names.end()) return it->second;
    std::string hint;
    if (key == "mnli") hint = " (MNLI is scored per dev set: say mnli_m or mnli_mm)";
    throw std::invalid_argument(
        "unknown task '" + task + "'" + hint +
        "; expected one of cola, sst2, mrpc, stsb, qqp, mnli_m, mnli_mm, qnli, rte, wnli (or "
        "CoLA, SST-2, MRPC, STS-B, QQP, MNLI-m, MNLI-mm, QNLI, RTE, WNLI), or a syn-... name");
}

MetricKind metric_kind(const std::string& task) {
    const std::string name = canonical_task(task);
    if (is_synthetic_task(name)) {
        throw std::invalid_argument("synthetic task '" + task +
                                    "' has no fixed metric: pass a MetricKind");
    }
    if (name == "cola") return MetricKind::kMcc;
    if (name == "mrpc" || name == "qqp") return MetricKind::kF1Accuracy;
    if (name == "stsb") return MetricKind::kPearsonSpearman;
    return MetricKind::kAccuracy;
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
    const char* key = kind == MetricKind::kMcc               ? "mcc"
                      : kind == MetricKind::kPearsonSpearman ? "pearson"
                                                             : "accuracy";
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
    require_tasks("tupe_average", by_task, tupe_tasks());
    double sum = 0;
    for (const auto& t : tupe_tasks()) sum += by_task.at(t);
    return sum / static_cast<double>(tupe_tasks().size());
}

double leaderboard_average(const std::map<std::string, TaskScores>& scores_by_task) {
    const auto by_task = canonical_keys("leaderboard_average", scores_by_task);
    require_tasks(
        "leaderboard_average", by_task,
        {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli_m", "mnli_mm", "qnli", "rte", "wnli"});
    const auto get = [&](const std::string& task, const std::string& key) {
        return metric_of(task, by_task.at(task), key);
    };
    // One number per task; two-metric tasks and MNLI's two dev sets count once as their mean.
    const double per_task[] = {
        get("cola", "mcc"),
        get("sst2", "accuracy"),
        0.5 * (get("mrpc", "f1") + get("mrpc", "accuracy")),
        0.5 * (get("stsb", "pearson") + get("stsb", "spearman")),
        0.5 * (get("qqp", "f1") + get("qqp", "accuracy")),
        0.5 * (get("mnli_m", "accuracy") + get("mnli_mm", "accuracy")),
        get("qnli", "accuracy"),
        get("rte", "accuracy"),
        get("wnli", "accuracy"),
    };
    return std::accumulate(std::begin(per_task), std::end(per_task), 0.0) / 9.0;
}

std::vector<std::string> glue_labels(const std::string& task) {
    const std::string name = canonical_task(task);
    metric_kind(name);  // rejects syn- names
    if (name == "stsb") return {};
    if (name == "mnli_m" || name == "mnli_mm") return {"entailment", "neutral", "contradiction"};
    if (name == "qnli" || name == "rte") return {"entailment", "not_entailment"};
    return {"0", "1"};
}

std::vector<std::pair<std::string, std::string>> read_submission(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, "cannot open the submission file");
    std::vector<std::pair<std::string, std::string>> rows;
    std::string line;
    long line_no = 0;
    long first_blank = 0;  // the first blank line seen, allowed only if nothing follows
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line_no == 1) {
            if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
            const auto fields = split_tabs(line);
            if (fields.size() != 2) {
                throw engine::InputError(path,
                                         "expected a header line 'index<TAB>prediction', got " +
                                             std::to_string(fields.size()) + " field(s)",
                                         line_no);
            }
            if (is_integer_text(fields[0])) {
                throw engine::InputError(
                    path,
                    "the first line looks like data; expected a header 'index<TAB>prediction'",
                    line_no);
            }
            continue;
        }
        if (line.find_first_not_of(" \t") == std::string::npos) {
            if (first_blank == 0) first_blank = line_no;
            continue;
        }
        if (first_blank != 0) {
            throw engine::InputError(path, "blank line inside the file", first_blank);
        }
        const auto fields = split_tabs(line);
        if (fields.size() != 2) {
            throw engine::InputError(path,
                                     "expected 2 tab-separated fields (index, prediction), got " +
                                         std::to_string(fields.size()),
                                     line_no);
        }
        if (fields[0].empty() || fields[1].empty()) {
            throw engine::InputError(
                path, std::string("empty ") + (fields[0].empty() ? "index" : "prediction"),
                line_no);
        }
        rows.emplace_back(fields[0], fields[1]);
    }
    if (in.bad()) throw engine::InputError(path, "read error", line_no);
    if (line_no == 0) {
        throw engine::InputError(path, "empty file; expected a header 'index<TAB>prediction'");
    }
    return rows;
}

TaskScores score_submission(const std::string& task,
                            const std::vector<std::pair<std::string, std::string>>& rows,
                            const std::map<std::string, std::string>& gold_by_index,
                            const std::vector<std::string>& labels, const std::string& source) {
    const MetricKind kind = metric_kind(task);
    const bool regression = kind == MetricKind::kPearsonSpearman;
    if (gold_by_index.empty()) {
        throw std::invalid_argument("score_submission: no gold labels for task " + task);
    }
    std::map<std::string, int> label_id;
    if (!regression) {
        if (labels.empty()) {
            throw std::invalid_argument("score_submission: empty label list for task " + task);
        }
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (!label_id.emplace(labels[i], static_cast<int>(i)).second) {
                throw std::invalid_argument("score_submission: label '" + labels[i] +
                                            "' listed twice");
            }
        }
    }
    const std::string expected = regression ? "a number" : "one of: " + join(labels);

    // Gold, in index order; the position of each index in it.
    std::vector<double> gold;
    std::map<std::string, std::size_t> slot;
    for (const auto& [index, text] : gold_by_index) {
        double value = 0;
        if (regression) {
            if (!parse_double(text, value)) {
                throw std::invalid_argument("score_submission: gold score '" + text +
                                            "' for index " + index + " is not a number");
            }
        } else {
            const auto it = label_id.find(text);
            if (it == label_id.end()) {
                throw std::invalid_argument("score_submission: gold label '" + text +
                                            "' for index " + index + " is not " + expected);
            }
            value = it->second;
        }
        slot.emplace(index, gold.size());
        gold.push_back(value);
    }

    std::vector<double> pred(gold.size(), 0.0);
    std::vector<long> seen_on(gold.size(), 0);  // line of the prediction, 0 = none yet
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const long line = static_cast<long>(r) + 2;  // line 1 is the header
        const auto& [index, text] = rows[r];
        const auto where = slot.find(index);
        if (where == slot.end()) {
            throw engine::InputError(source,
                                     "index '" + index + "' is not in the gold set (" +
                                         std::to_string(gold.size()) + " indices)",
                                     line);
        }
        const std::size_t k = where->second;
        if (seen_on[k] != 0) {
            throw engine::InputError(source,
                                     "index '" + index + "' given twice (first on line " +
                                         std::to_string(seen_on[k]) + ")",
                                     line);
        }
        seen_on[k] = line;
        if (regression) {
            if (!parse_double(text, pred[k])) {
                throw engine::InputError(source, "prediction '" + text + "' is not a number", line);
            }
        } else {
            const auto it = label_id.find(text);
            if (it == label_id.end()) {
                throw engine::InputError(
                    source, "unknown label '" + text + "'; expected " + expected, line);
            }
            pred[k] = it->second;
        }
    }

    std::size_t missing = 0;
    std::vector<std::string> examples;
    for (const auto& [index, k] : slot) {
        if (seen_on[k] != 0) continue;
        ++missing;
        if (examples.size() < 5) examples.push_back(index);
    }
    if (missing > 0) {
        throw engine::InputError(source, "no prediction for " + std::to_string(missing) + " of " +
                                             std::to_string(gold.size()) + " gold indices (e.g. " +
                                             join(examples) + ")");
    }
    return score_task(kind, pred, gold);
}

}  // namespace analysis
