// The factor view's data (see factor_data.h).
#include "core/factor_data.h"

#include <cmath>
#include <limits>

#include "core/properties_data.h"
#include "plotting/palette.h"

namespace app {

QString ParallelAxis::label(double t) const {
    if (categorical) {
        if (levels.isEmpty()) return {};
        const int n = int(levels.size());
        const int i = n == 1 ? 0 : int(std::lround(t * (n - 1)));
        return levels.value(std::clamp(i, 0, n - 1));
    }
    return QString::number(lo + t * (hi - lo), 'g', 4);
}

std::vector<ParallelAxis> parallelAxes(const experiments::FactorTable& table,
                                       const QStringList& metrics) {
    std::vector<ParallelAxis> axes;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (size_t f = 0; f < table.factors.size(); ++f) {
        const auto& factor = table.factors[f];
        ParallelAxis a;
        a.key = QString::fromStdString(factor.key);
        a.title = a.key.section('.', -1);
        a.categorical = true;
        for (const auto& l : factor.levels) a.levels << QString::fromStdString(l);
        const int n = int(a.levels.size());
        for (const auto& run : table.runs) {
            const int i = int(a.levels.indexOf(QString::fromStdString(run.levels[f])));
            a.position.push_back(i < 0 ? nan : n == 1 ? 0.5 : double(i) / (n - 1));
        }
        axes.push_back(a);
    }
    for (const QString& key : metrics) {
        const auto* m = table.find_metric(key.toStdString());
        if (!m) continue;
        ParallelAxis a;
        a.key = key;
        a.title = key;
        a.lo = std::numeric_limits<double>::infinity(), a.hi = -a.lo;
        for (const auto& run : table.runs)
            if (const double v = run.metric(m->key); std::isfinite(v))
                a.lo = std::min(a.lo, v), a.hi = std::max(a.hi, v);
        if (!(a.lo <= a.hi)) a.lo = 0, a.hi = 1;
        if (a.hi == a.lo) a.lo -= 0.5, a.hi += 0.5;
        for (const auto& run : table.runs) {
            const double v = run.metric(m->key);
            a.position.push_back(std::isfinite(v) ? (v - a.lo) / (a.hi - a.lo) : nan);
        }
        axes.push_back(a);
    }
    return axes;
}

std::vector<bool> brushedRuns(const std::vector<ParallelAxis>& axes,
                              const std::vector<AxisBrush>& brushes) {
    const size_t n = axes.empty() ? 0 : axes.front().position.size();
    std::vector<bool> keep(n, true);
    for (const AxisBrush& b : brushes) {
        if (b.axis < 0 || b.axis >= int(axes.size())) continue;
        const double lo = std::min(b.lo, b.hi), hi = std::max(b.lo, b.hi);
        const auto& pos = axes[size_t(b.axis)].position;
        for (size_t i = 0; i < n && i < pos.size(); ++i)
            if (!(pos[i] >= lo - 1e-9 && pos[i] <= hi + 1e-9)) keep[i] = false;
    }
    return keep;
}

std::vector<QColor> runColours(const experiments::FactorTable& table, const QString& metric) {
    std::vector<QColor> out;
    const auto* m = table.find_metric(metric.toStdString());
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& run : table.runs)
        if (const double v = m ? run.metric(m->key) : NAN; std::isfinite(v))
            lo = std::min(lo, v), hi = std::max(hi, v);
    const auto grey = plotting::kNanColor;
    for (const auto& run : table.runs) {
        const double v = m ? run.metric(m->key) : NAN;
        if (!std::isfinite(v)) {
            out.emplace_back(grey.r, grey.g, grey.b);
            continue;
        }
        double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
        if (m->lower_is_better) t = 1 - t;
        out.push_back(paletteColor(plotting::kSequentialPalette, t));
    }
    return out;
}

}  // namespace app
