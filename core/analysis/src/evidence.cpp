// Tests, intervals and chance levels (see evidence.h).
#include "analysis/evidence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "analysis/metrics.h"

namespace analysis {

namespace {

// Continued fraction of the incomplete beta function (modified Lentz).
double beta_continued_fraction(double a, double b, double x) {
    const double tiny = 1e-300;
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
    if (std::fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 500; ++m) {
        const double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
        d = 1.0 + aa * d;
        if (std::fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
        d = 1.0 + aa * d;
        if (std::fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        const double delta = d * c;
        h *= delta;
        if (std::fabs(delta - 1.0) < 1e-15) break;
    }
    return h;
}

// I_x(a, b), the regularized incomplete beta function.
double incomplete_beta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                  a * std::log(x) + b * std::log1p(-x));
    if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
    return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

// splitmix64: the draws depend only on the seeds, on every standard library.
struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) {}
    uint64_t next() {
        state += 0x9e3779b97f4a7c15ULL;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    uint32_t below(uint64_t n) { return static_cast<uint32_t>(next() % n); }  // n << 2^64
};

int label_of(double v) { return static_cast<int>(std::lround(v)); }

}  // namespace

double student_t_cdf(double t, double df) {
    if (!(df > 0)) throw std::invalid_argument("student_t_cdf: df must be > 0");
    if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
    const double x = df / (df + t * t);
    const double tail = 0.5 * incomplete_beta(0.5 * df, 0.5, x);
    return t > 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double df) {
    if (!(p > 0 && p < 1)) throw std::invalid_argument("student_t_quantile: p must be in (0, 1)");
    double lo = -1e6, hi = 1e6;
    for (int i = 0; i < 200 && hi - lo > 1e-10; ++i) {
        const double mid = 0.5 * (lo + hi);
        (student_t_cdf(mid, df) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

PairedTest paired_t_test(const std::vector<double>& d) {
    PairedTest r;
    r.n = static_cast<int>(d.size());
    if (d.empty()) return r;
    double sum = 0;
    for (double v : d) sum += v;
    r.mean = sum / r.n;
    r.ci_lo = r.ci_hi = r.mean;
    if (r.n < 2) return r;
    double ss = 0;
    for (double v : d) ss += (v - r.mean) * (v - r.mean);
    r.sd = std::sqrt(ss / (r.n - 1));
    r.valid = true;
    const double df = r.n - 1;
    const double se = r.sd / std::sqrt(static_cast<double>(r.n));
    if (se == 0) {
        r.t = r.mean == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), r.mean);
        r.p = r.mean == 0 ? 1 : 0;
        return r;
    }
    r.t = r.mean / se;
    r.p = std::min(1.0, 2.0 * student_t_cdf(-std::fabs(r.t), df));
    const double q = student_t_quantile(0.975, df);
    r.ci_lo = r.mean - q * se;
    r.ci_hi = r.mean + q * se;
    return r;
}

double sign_test_p(int64_t positive, int64_t negative) {
    const int64_t n = positive + negative;
    if (n == 0) return 1;
    const int64_t k = std::min(positive, negative);
    // P(X <= k), X ~ Binomial(n, 1/2), summed in log space.
    double p = 0;
    for (int64_t i = 0; i <= k; ++i)
        p += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) -
                      n * std::log(2.0));
    return std::min(1.0, 2.0 * p);
}

std::vector<double> holm_adjust(const std::vector<double>& p) {
    const size_t m = p.size();
    std::vector<size_t> order(m);
    for (size_t i = 0; i < m; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
    std::vector<double> out(m);
    double running = 0;
    for (size_t rank = 0; rank < m; ++rank) {
        const double scaled = std::min(1.0, p[order[rank]] * static_cast<double>(m - rank));
        running = std::max(running, scaled);
        out[order[rank]] = running;
    }
    return out;
}

double bootstrap_normal_p(double estimate, const std::vector<double>& replicates) {
    double mean = 0, ss = 0;
    for (double r : replicates) mean += r;
    if (!replicates.empty()) mean /= static_cast<double>(replicates.size());
    for (double r : replicates) ss += (r - mean) * (r - mean);
    const double sd =
        replicates.size() > 1 ? std::sqrt(ss / static_cast<double>(replicates.size() - 1)) : 0;
    if (sd == 0) return estimate == 0 ? 1.0 : 0.0;
    return std::erfc(std::fabs(estimate / sd) / std::sqrt(2.0));
}

std::vector<std::pair<int, int>> indistinguishable_runs(
    int n, const std::function<bool(int, int)>& apart) {
    std::vector<std::pair<int, int>> runs;
    for (int first = 0; first < n; ++first) {
        int last = first;
        const auto joins = [&](int j) {
            for (int i = first; i < j; ++i)
                if (apart(i, j)) return false;
            return true;
        };
        while (last + 1 < n && joins(last + 1)) ++last;
        // A run inside the previous one is not maximal.
        if (runs.empty() || last > runs.back().second) runs.emplace_back(first, last);
    }
    return runs;
}

Interval percentile_interval(std::vector<double> samples, double level) {
    if (samples.empty()) throw std::invalid_argument("percentile_interval: no samples");
    std::sort(samples.begin(), samples.end());
    auto at = [&](double q) {
        const double pos = q * static_cast<double>(samples.size() - 1);
        const auto i = static_cast<size_t>(std::floor(pos));
        const size_t j = std::min(i + 1, samples.size() - 1);
        return samples[i] + (pos - static_cast<double>(i)) * (samples[j] - samples[i]);
    };
    const double alpha = (1.0 - level) / 2.0;
    return {at(alpha), at(1.0 - alpha)};
}

double median_of(std::vector<double> v) {
    if (v.empty()) throw std::invalid_argument("median_of: empty");
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double metric_on(const std::string& metric, const std::vector<double>& gold,
                 const std::vector<double>& pred, const std::vector<uint32_t>* index) {
    if (gold.size() != pred.size() || gold.empty())
        throw std::invalid_argument("metric_on: " + std::to_string(gold.size()) + " gold vs " +
                                    std::to_string(pred.size()) + " predictions");
    const size_t n = index ? index->size() : gold.size();
    auto at = [&](size_t i) { return index ? (*index)[i] : static_cast<uint32_t>(i); };
    if (metric == "pearson" || metric == "spearman") {
        std::vector<double> x(n), y(n);
        for (size_t i = 0; i < n; ++i) x[i] = pred[at(i)], y[i] = gold[at(i)];
        if (metric == "spearman") {
            x = average_ranks(x);
            y = average_ranks(y);
        }
        double mx = 0, my = 0;
        for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
        mx /= n, my /= n;
        double sxy = 0, sxx = 0, syy = 0;
        for (size_t i = 0; i < n; ++i) {
            sxy += (x[i] - mx) * (y[i] - my);
            sxx += (x[i] - mx) * (x[i] - mx);
            syy += (y[i] - my) * (y[i] - my);
        }
        return sxx > 0 && syy > 0 ? 100.0 * sxy / std::sqrt(sxx * syy) : 0.0;
    }
    if (metric == "accuracy") {
        size_t correct = 0;
        for (size_t i = 0; i < n; ++i) correct += label_of(pred[at(i)]) == label_of(gold[at(i)]);
        return 100.0 * static_cast<double>(correct) / static_cast<double>(n);
    }
    if (metric == "f1") {
        double tp = 0, fp = 0, fn = 0;
        for (size_t i = 0; i < n; ++i) {
            const bool p = label_of(pred[at(i)]) == 1, g = label_of(gold[at(i)]) == 1;
            tp += p && g, fp += p && !g, fn += !p && g;
        }
        return tp > 0 ? 100.0 * 2 * tp / (2 * tp + fp + fn) : 0.0;
    }
    if (metric == "mcc") {
        std::map<int, double> t, p;
        double correct = 0;
        for (size_t i = 0; i < n; ++i) {
            const int g = label_of(gold[at(i)]), q = label_of(pred[at(i)]);
            t[g] += 1, p[q] += 1, correct += g == q;
        }
        double tp_sum = 0, pp = 0, tt = 0;
        for (const auto& [k, c] : t) tp_sum += c * (p.count(k) ? p[k] : 0.0), tt += c * c;
        for (const auto& [k, c] : p) pp += c * c;
        const double nn = static_cast<double>(n);
        const double denominator = std::sqrt((nn * nn - pp) * (nn * nn - tt));
        return denominator > 0 ? 100.0 * (correct * nn - tp_sum) / denominator : 0.0;
    }
    throw std::invalid_argument("unknown metric '" + metric +
                                "' (expected accuracy, f1, mcc, pearson or spearman)");
}

double chance_level(const std::string& metric, const std::vector<double>& gold) {
    if (metric == "mcc" || metric == "pearson" || metric == "spearman") return 0.0;
    if (gold.empty()) throw std::invalid_argument("chance_level: no gold labels");
    if (metric == "accuracy") {
        std::map<int, double> counts;
        for (double g : gold) counts[label_of(g)] += 1;
        double best = 0;
        for (const auto& [k, c] : counts) best = std::max(best, c);
        return 100.0 * best / static_cast<double>(gold.size());
    }
    if (metric == "f1") {
        double ones = 0;
        for (double g : gold) ones += label_of(g) == 1;
        const double p = ones / static_cast<double>(gold.size());
        return 100.0 * 2 * p / (1 + p);
    }
    throw std::invalid_argument("unknown metric '" + metric +
                                "' (expected accuracy, f1, mcc, pearson or spearman)");
}

std::vector<double> bootstrap_median_metric(const std::string& metric,
                                            const std::vector<double>& gold,
                                            const std::vector<RunPredictions>& runs,
                                            const BootstrapOptions& options) {
    if (runs.empty()) throw std::invalid_argument("bootstrap_median_metric: no runs");
    std::map<int64_t, std::vector<const std::vector<double>*>> clusters;
    for (const auto& r : runs) {
        if (!r.predicted || r.predicted->size() != gold.size())
            throw std::invalid_argument(
                "bootstrap_median_metric: a run's predictions do not "
                "match the dev set's size");
        clusters[r.cluster].push_back(r.predicted);
    }
    std::vector<std::vector<const std::vector<double>*>> groups;
    for (auto& [id, members] : clusters) groups.push_back(members);
    Rng examples(options.example_seed), draws(options.run_seed);
    std::vector<double> out;
    out.reserve(static_cast<size_t>(options.resamples));
    std::vector<uint32_t> index(gold.size());
    std::vector<double> values;
    for (int b = 0; b < options.resamples; ++b) {
        for (auto& i : index) i = examples.below(gold.size());
        values.clear();
        for (size_t c = 0; c < groups.size(); ++c) {
            const auto& g = groups[draws.below(groups.size())];
            for (size_t r = 0; r < g.size(); ++r)
                values.push_back(metric_on(metric, gold, *g[draws.below(g.size())], &index));
        }
        out.push_back(median_of(values));
    }
    return out;
}

}  // namespace analysis
