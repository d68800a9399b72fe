// Smoothing, decimation and seed grouping for the curves view (see curve_math.h).
#include "core/curve_math.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

namespace app {

std::vector<double> emaDebiased(const std::vector<double>& y, double weight) {
    std::vector<double> out(y.size());
    const bool constant =
        std::all_of(y.begin(), y.end(), [&](double v) { return !y.empty() && v == y.front(); });
    double last = 0.0;
    int accumulated = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        if (constant || !std::isfinite(y[i])) {
            out[i] = y[i];
            continue;
        }
        last = last * weight + (1.0 - weight) * y[i];
        ++accumulated;
        const double debias = weight == 1.0 ? 1.0 : 1.0 - std::pow(weight, accumulated);
        out[i] = last / debias;
    }
    return out;
}

std::vector<std::size_t> decimateMinMax(const std::vector<double>& y, std::size_t buckets) {
    const std::size_t n = y.size();
    std::vector<std::size_t> keep;
    if (buckets == 0 || n <= 4 * buckets) {
        keep.resize(n);
        for (std::size_t i = 0; i < n; ++i) keep[i] = i;
        return keep;
    }
    keep.reserve(4 * buckets + 2);
    for (std::size_t b = 0; b < buckets; ++b) {
        const std::size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;  // [lo, hi)
        if (lo >= hi) continue;
        std::size_t imin = lo, imax = lo;
        for (std::size_t i = lo; i < hi; ++i) {
            if (!std::isfinite(y[i])) {
                keep.push_back(i);  // a gap (diverged loss) must stay visible
                continue;
            }
            if (!std::isfinite(y[imin]) || y[i] < y[imin]) imin = i;
            if (!std::isfinite(y[imax]) || y[i] > y[imax]) imax = i;
        }
        for (std::size_t i : {lo, imin, imax, hi - 1}) keep.push_back(i);
    }
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    return keep;
}

std::string seedGroupKey(const std::string& runName) {
    static const std::regex seed("[/_@-]seed[0-9]+");
    return std::regex_replace(runName, seed, "");
}

std::vector<SeedGroup> groupBySeed(const std::vector<Curve>& curves) {
    std::vector<SeedGroup> groups;
    std::map<std::string, std::size_t> index;
    std::vector<std::vector<const Curve*>> members;
    for (const Curve& c : curves) {
        auto it = index.find(c.groupKey);
        if (it == index.end()) {
            it = index.emplace(c.groupKey, groups.size()).first;
            groups.push_back(SeedGroup{c.groupKey, {}, {}, {}, {}, {}});
            members.emplace_back();
        }
        groups[it->second].members.push_back(c.label);
        members[it->second].push_back(&c);
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
        std::map<double, std::vector<double>> at;  // x -> finite values of the members
        for (const Curve* c : members[g])
            for (std::size_t i = 0; i < c->x.size() && i < c->y.size(); ++i)
                if (std::isfinite(c->y[i])) at[c->x[i]].push_back(c->y[i]);
        SeedGroup& out = groups[g];
        for (const auto& [x, values] : at) {
            const int n = static_cast<int>(values.size());
            double mean = 0;
            for (double v : values) mean += v;
            mean /= n;
            double ss = 0;
            for (double v : values) ss += (v - mean) * (v - mean);
            out.x.push_back(x);
            out.mean.push_back(mean);
            out.stddev.push_back(n > 1 ? std::sqrt(ss / (n - 1)) : 0.0);
            out.n.push_back(n);
        }
    }
    return groups;
}

double firstXReaching(const std::vector<double>& x, const std::vector<double>& y, double target,
                      bool lowerIsBetter) {
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
        if (!std::isfinite(y[i])) continue;
        if (lowerIsBetter ? y[i] <= target : y[i] >= target) return x[i];
    }
    return -1.0;
}

Reach reachOf(const std::vector<double>& x, const std::vector<double>& y, double target,
              bool lowerIsBetter) {
    Reach r;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
        if (!std::isfinite(y[i])) continue;
        const bool past = lowerIsBetter ? y[i] <= target : y[i] >= target;
        if (r.first < 0 && past) r.first = x[i];
        if (r.first >= 0 && !past) {
            r.leftAgain = x[i];
            break;
        }
    }
    return r;
}

bool lowerIsBetter(const std::string& metricKey) {
    for (const char* word : {"loss", "perplexity", "ppl"})
        if (metricKey.find(word) != std::string::npos) return true;
    return false;
}

}  // namespace app
