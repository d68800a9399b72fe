// `tupe factors`' table, JSON and CSV (see factors.h, render_factor_effects).
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "analysis/text_format.h"
#include "experiments/factors.h"

namespace experiments {

namespace factor_render {

using analysis::csv_record;
using analysis::exact_number;

// Percent columns with 2 decimals, losses and shares with 4.
int digits_of(const FactorMetric& m) { return m.title.find("(%)") != std::string::npos ? 2 : 4; }

std::string num(double v, int digits) {
    return std::isfinite(v) ? analysis::fixed_number(v, digits) : "n/a";
}

std::string interval(double lo, double hi, int digits) {
    if (!std::isfinite(lo) || !std::isfinite(hi)) return "";
    return "[" + num(lo, digits) + ", " + num(hi, digits) + "]";
}

std::string pad(std::string s, size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
}

std::string p_text(double p) {
    if (!std::isfinite(p)) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, p < 0.001 ? "p < 0.001" : "p = %.3f", p);
    return buf;
}

std::string render_table(const FactorTable& t, const FactorEffects& e, const FactorMetric& m) {
    const int d = digits_of(m);
    std::string out = "experiment " + t.experiment + ": " + std::to_string(e.runs) + " runs in " +
                      std::to_string(e.cells) + " cells; metric " + m.key + ", " + m.title +
                      (m.lower_is_better ? ", lower is better" : "") + "\n";
    out += e.df > 0 ? "95% t-intervals from the pooled seed-to-seed spread within cells: sd " +
                          num(e.residual_sd, d) + ", df " + std::to_string(e.df) + "\n"
                    : "";
    for (const auto& note : e.notes) out += "note: " + note + "\n";
    for (const auto& note : t.notes) out += "note: " + note + "\n";
    size_t width = 6;
    for (const auto& f : t.factors) width = std::max(width, f.key.size());
    out += "\n" + pad("factor", width + 2) + pad("level", 16) + pad("mean", 12) +
           pad("95% interval", 26) + "runs\n";
    for (const auto& eff : e.effects) {
        std::string head = eff.factor;
        if (!eff.within_factor.empty())
            head += " (" + eff.within_factor + "=" + eff.within_level + ")";
        out += head + "\n";
        for (const auto& l : eff.levels)
            out += pad("", width + 2) + pad(l.level, 16) + pad(num(l.mean, d), 12) +
                   pad(interval(l.lo, l.hi, d), 26) + std::to_string(l.runs) + "\n";
        if (eff.levels.size() == 2 && std::isfinite(eff.contrast.estimate)) {
            const Contrast& c = eff.contrast;
            out += pad("", width + 2) + eff.levels[1].level + " - " + eff.levels[0].level + ": " +
                   (c.estimate >= 0 ? "+" : "") + num(c.estimate, d);
            if (c.valid) out += " " + interval(c.lo, c.hi, d) + ", " + p_text(c.p);
            out += "\n";
        }
    }
    for (const auto& f : t.factors)
        if (!f.aliases.empty()) {
            std::string aliases;
            for (const auto& a : f.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
            out += "\n" + f.key + " changes with " + aliases + " in every run";
        }
    return out + (out.back() == '\n' ? "" : "\n");
}

nlohmann::json number_json(double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

std::string render_json(const FactorTable& t, const FactorEffects& e, const FactorMetric& m) {
    nlohmann::json j;
    j["experiment"] = t.experiment;
    j["metric"] = m.key;
    j["title"] = m.title;
    j["lower_is_better"] = m.lower_is_better;
    j["runs"] = e.runs;
    j["cells"] = e.cells;
    j["df"] = e.df;
    j["residual_sd"] = number_json(e.residual_sd);
    j["factors"] = nlohmann::json::array();
    for (const auto& f : t.factors)
        j["factors"].push_back({{"key", f.key}, {"levels", f.levels}, {"aliases", f.aliases}});
    j["effects"] = nlohmann::json::array();
    for (const auto& eff : e.effects) {
        nlohmann::json levels = nlohmann::json::array();
        for (const auto& l : eff.levels)
            levels.push_back({{"level", l.level},
                              {"mean", number_json(l.mean)},
                              {"lo", number_json(l.lo)},
                              {"hi", number_json(l.hi)},
                              {"runs", l.runs},
                              {"cells", l.cells}});
        nlohmann::json item = {{"factor", eff.factor}, {"levels", levels}};
        if (!eff.within_factor.empty())
            item["within"] = {{"factor", eff.within_factor}, {"level", eff.within_level}};
        if (std::isfinite(eff.contrast.estimate))
            item["contrast"] = {{"estimate", number_json(eff.contrast.estimate)},
                                {"lo", number_json(eff.contrast.lo)},
                                {"hi", number_json(eff.contrast.hi)},
                                {"p", number_json(eff.contrast.p)}};
        j["effects"].push_back(item);
    }
    j["notes"] = e.notes;
    for (const auto& n : t.notes) j["notes"].push_back(n);
    return j.dump(2) + "\n";
}

std::string render_csv(const FactorEffects& e) {
    std::string out = csv_record({"factor", "within_factor", "within_level", "level", "mean", "lo",
                                  "hi", "p", "runs", "cells"}) +
                      "\n";
    for (const auto& eff : e.effects) {
        for (const auto& l : eff.levels)
            out += csv_record({eff.factor, eff.within_factor, eff.within_level, l.level,
                               exact_number(l.mean), exact_number(l.lo), exact_number(l.hi), "",
                               std::to_string(l.runs), std::to_string(l.cells)}) +
                   "\n";
        if (eff.levels.size() == 2 && std::isfinite(eff.contrast.estimate))
            out +=
                csv_record({eff.factor, eff.within_factor, eff.within_level,
                            eff.levels[1].level + " - " + eff.levels[0].level,
                            exact_number(eff.contrast.estimate), exact_number(eff.contrast.lo),
                            exact_number(eff.contrast.hi), exact_number(eff.contrast.p), "", ""}) +
                "\n";
    }
    return out;
}

}  // namespace factor_render

std::string render_factor_effects(const FactorTable& t, const FactorEffects& e,
                                  const std::string& format) {
    const FactorMetric* m = t.find_metric(e.metric);
    if (!m) throw std::invalid_argument("no metric '" + e.metric + "' in " + t.experiment);
    if (format == "table") return factor_render::render_table(t, e, *m);
    if (format == "json") return factor_render::render_json(t, e, *m);
    if (format == "csv") return factor_render::render_csv(e);
    throw std::invalid_argument("unknown format '" + format + "' (expected table, json or csv)");
}

}  // namespace experiments
