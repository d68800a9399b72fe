// Reading ablation.json and heads.json for the app (see microscope_data.h).
#include "core/microscope_data.h"

#include <QFile>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "analysis/head_types.h"
#include "core/store_access.h"
#include "experiments/result_store.h"

namespace app {

namespace {

constexpr double kMicroNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void microscopeFail(const QString& source, const std::string& why) {
    throw std::runtime_error(source.toStdString() + ": " + why);
}

// A number field; null (the CLI's NaN) or absent -> NaN; another type is an error.
double microNumber(const nlohmann::json& j, const char* key, const QString& source) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return kMicroNaN;
    if (!it->is_number()) microscopeFail(source, std::string("'") + key + "' is not a number");
    return it->get<double>();
}

QString microString(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>())
                                            : QString();
}

std::int64_t microInt(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<std::int64_t>() : 0;
}

int requiredIndex(const nlohmann::json& j, const char* key, const QString& source) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer())
        microscopeFail(source, std::string("a row without an integer '") + key + "'");
    return it->get<int>();
}

nlohmann::json parseMicroJson(const QByteArray& text, const QString& source) {
    try {
        return nlohmann::json::parse(text.constData(), text.constData() + text.size());
    } catch (const nlohmann::json::exception& e) {
        microscopeFail(source, std::string("malformed JSON: ") + e.what());
    }
}

QByteArray readMicroFile(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        microscopeFail(path, "cannot read: " + f.errorString().toStdString());
    return f.readAll();
}

QString signedNumber(double v) {
    if (!std::isfinite(v)) return "nan";
    return (v >= 0 ? "+" : "") + QString::number(v, 'f', 3);
}

}  // namespace

QString AblationRow::name() const {
    if (perHead()) return QString("L%1.H%2").arg(layer).arg(head);
    if (layer >= 0) return QString("layer %1").arg(layer);
    return "whole model";
}

QString AblationRow::deltaText() const {
    return QString("%1 [%2, %3]").arg(signedNumber(delta), signedNumber(lo), signedNumber(hi));
}

QString AblationRow::verdict() const {
    if (lo > 0) return "used";
    if (hi < 0) return "hurts";
    return "~";
}

int AblationResult::layers() const {
    int n = 0;
    for (const auto& r : heads) n = std::max(n, r.layer + 1);
    return n;
}

int AblationResult::headsPerLayer() const {
    int n = 0;
    for (const auto& r : heads) n = std::max(n, r.head + 1);
    return n;
}

const AblationRow* AblationResult::find(int layer, int head) const {
    for (const auto* rows : {&heads, &other})
        for (const auto& r : *rows)
            if (r.layer == layer && r.head == head) return &r;
    return nullptr;
}

const AblationRow* AblationResult::wholeModel() const { return find(-1, -1); }

std::vector<AblationResult> parseAblationJson(const QByteArray& text, const QString& source) {
    const nlohmann::json root = parseMicroJson(text, source);
    if (!root.is_object() || !root.contains("checkpoints") || !root["checkpoints"].is_array())
        microscopeFail(source, "no 'checkpoints' list (not tupe ablate's JSON)");
    std::vector<AblationResult> out;
    for (const auto& c : root["checkpoints"]) {
        AblationResult r;
        r.checkpoint = microString(c, "checkpoint");
        r.variant = microString(c, "variant");
        r.mode = c.contains("patch_from") && c["patch_from"].is_string()
                     ? "patch from " + microString(c, "patch_from")
                     : microString(c, "mode");
        r.scope = microString(c, "scope");
        r.positions = microString(c, "positions");
        r.text = microString(c, "text");
        r.length = microInt(c, "length");
        r.windows = microInt(c, "windows");
        r.masked = microInt(c, "masked_tokens");
        r.loss = microNumber(c, "loss", source);
        r.shareUseSpearman = microNumber(c, "share_use_spearman", source);
        if (!c.contains("rows") || !c["rows"].is_array())
            microscopeFail(source, "a checkpoint without 'rows'");
        for (const auto& j : c["rows"]) {
            AblationRow row;
            row.layer = requiredIndex(j, "layer", source);
            row.head = requiredIndex(j, "head", source);
            row.loss = microNumber(j, "loss", source);
            row.delta = microNumber(j, "delta_loss", source);
            row.lo = microNumber(j, "ci_lo", source);
            row.hi = microNumber(j, "ci_hi", source);
            row.share = microNumber(j, "positional_share", source);
            (row.perHead() ? r.heads : r.other).push_back(row);
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<AblationResult> readAblationJson(const QString& path) {
    return parseAblationJson(readMicroFile(path), path);
}

plotting::Heatmap ablationHeatmap(const AblationResult& result, const QString& title) {
    plotting::Heatmap h;
    h.title = title.toStdString();
    h.rows = result.layers();
    h.cols = result.headsPerLayer();
    h.values.assign(size_t(h.rows) * size_t(h.cols), kMicroNaN);
    for (const auto& r : result.heads)
        h.values[size_t(r.layer) * size_t(h.cols) + r.head] = r.delta;
    for (int l = 0; l < h.rows; ++l) h.row_labels.push_back("L" + std::to_string(l));
    for (int c = 0; c < h.cols; ++c) h.col_labels.push_back("H" + std::to_string(c));
    h.symmetric = true;
    h.x_label = "head";
    h.y_label = "layer";
    h.value_label = "\u0394 loss (nats)";
    return h;
}

double HeadTypeEntry::typeScore() const {
    const QString key = headTypeScoreKey(type);
    const auto it = scores.find(key);
    return key.isEmpty() || it == scores.end() ? kMicroNaN : it->second;
}

HeadTypesFile parseHeadTypesJson(const QByteArray& text, const QString& source) {
    const nlohmann::json root = parseMicroJson(text, source);
    if (!root.is_object() || !root.contains("runs") || !root["runs"].is_array())
        microscopeFail(source, "no 'runs' list (not tupe heads' JSON)");
    HeadTypesFile out;
    out.rule = microString(root, "rule");
    for (const auto& jr : root["runs"]) {
        HeadTypeRun run;
        run.run = microString(jr, "run");
        run.text = microString(jr, "text");
        if (!jr.contains("checkpoints") || !jr["checkpoints"].is_array())
            microscopeFail(source, "a run without 'checkpoints'");
        for (const auto& jc : jr["checkpoints"]) {
            HeadTypeSnapshot snap;
            snap.step = microInt(jc, "step");
            snap.checkpoint = microString(jc, "checkpoint");
            if (!jc.contains("heads") || !jc["heads"].is_array())
                microscopeFail(source, "a checkpoint without 'heads'");
            for (const auto& jh : jc["heads"]) {
                HeadTypeEntry e;
                e.layer = requiredIndex(jh, "layer", source);
                e.head = requiredIndex(jh, "head", source);
                e.type = microString(jh, "type");
                if (e.type.isEmpty()) microscopeFail(source, "a head without its 'type'");
                e.rows = microInt(jh, "rows");
                if (jh.contains("scores") && jh["scores"].is_object())
                    for (const auto& [key, value] : jh["scores"].items())
                        e.scores[QString::fromStdString(key)] =
                            value.is_number() ? value.get<double>() : kMicroNaN;
                snap.heads.push_back(std::move(e));
            }
            run.snapshots.push_back(std::move(snap));
        }
        std::stable_sort(run.snapshots.begin(), run.snapshots.end(),
                         [](const auto& a, const auto& b) { return a.step < b.step; });
        out.runs.push_back(std::move(run));
    }
    return out;
}

HeadTypesFile readHeadTypesJson(const QString& path) {
    return parseHeadTypesJson(readMicroFile(path), path);
}

const QStringList& headTypeOrder() {
    static const QStringList order = [] {
        QStringList names;
        for (analysis::HeadType t : analysis::head_types())
            names << QString::fromLatin1(analysis::head_type_name(t));
        return names;
    }();
    return order;
}

QString headTypeScoreKey(const QString& type) {
    if (type == "broad") return "entropy";
    if (type == "mixed" || !headTypeOrder().contains(type)) return {};
    return type;  // cls_sink, sep_sink, previous, next, duplicate, local: the score of that name
}

std::vector<HeadTypeGroup> groupHeadsByType(const HeadTypeSnapshot& snapshot) {
    std::map<QString, std::vector<HeadTypeEntry>> byType;
    for (const auto& h : snapshot.heads) byType[h.type].push_back(h);
    QStringList order = headTypeOrder();
    for (const auto& [type, heads] : byType)
        if (!order.contains(type)) order << type;  // a newer CLI's type: after the known ones
    std::vector<HeadTypeGroup> groups;
    for (const QString& type : order) {
        auto it = byType.find(type);
        if (it == byType.end()) continue;
        auto heads = it->second;
        std::stable_sort(heads.begin(), heads.end(), [](const auto& a, const auto& b) {
            const double sa = a.typeScore(), sb = b.typeScore();
            if (std::isfinite(sa) && std::isfinite(sb) && sa != sb) return sa > sb;
            return std::make_pair(a.layer, a.head) < std::make_pair(b.layer, b.head);
        });
        groups.push_back({type, std::move(heads)});
    }
    return groups;
}

HeadTypeCounts headTypeCounts(const HeadTypeRun& run) {
    HeadTypeCounts out;
    for (const auto& s : run.snapshots) out.steps.push_back(double(s.step));
    QStringList order = headTypeOrder();
    for (const auto& s : run.snapshots)
        for (const auto& h : s.heads)
            if (!order.contains(h.type)) order << h.type;
    for (const QString& type : order) {
        std::vector<double> counts;
        bool any = false;
        for (const auto& s : run.snapshots) {
            const auto n = std::count_if(s.heads.begin(), s.heads.end(),
                                         [&](const auto& h) { return h.type == type; });
            counts.push_back(double(n));
            any = any || n > 0;
        }
        if (any) out.counts.emplace_back(type, std::move(counts));
    }
    return out;
}

QString artifactPathOf(const std::vector<experiments::ArtifactRecord>& artifacts,
                       const QString& name, const QString& dbPath) {
    QString found;
    for (const auto& a : artifacts) {
        const QString path = QString::fromStdString(a.path);
        if (path == name || path.endsWith("/" + name)) found = path;
    }
    return found.isEmpty() ? found : resolveStorePath(found, dbPath);
}

RunMicroscope readRunMicroscope(const std::vector<experiments::ArtifactRecord>& artifacts,
                                const QString& dbPath) {
    RunMicroscope out;
    out.ablationPath = artifactPathOf(artifacts, "ablation/ablation.json", dbPath);
    out.headTypesPath = artifactPathOf(artifacts, "heads/heads.json", dbPath);
    if (!out.ablationPath.isEmpty()) {
        try {
            auto all = readAblationJson(out.ablationPath);
            if (!all.empty()) out.ablation = std::move(all.front()), out.hasAblation = true;
        } catch (const std::exception& e) {
            out.errors << QString::fromUtf8(e.what());
        }
    }
    if (!out.headTypesPath.isEmpty()) {
        try {
            auto file = readHeadTypesJson(out.headTypesPath);
            if (!file.runs.empty() && !file.runs.front().snapshots.empty())
                out.headTypes = std::move(file.runs.front()), out.hasHeadTypes = true;
        } catch (const std::exception& e) {
            out.errors << QString::fromUtf8(e.what());
        }
    }
    return out;
}

HeadScatter headScatter(const AblationResult& ablation, const AnalysisData* analysis,
                        const QString& property) {
    HeadScatter out;
    for (const auto& r : ablation.heads) {
        double x = kMicroNaN;
        if (property == kAblationShare) {
            x = r.share;
        } else if (analysis) {
            if (const AnalysisEntry* e = propertyEntry(*analysis, r.layer, r.head)) {
                const auto it = e->statistics.find(property);
                if (it != e->statistics.end()) x = it->second;
            }
        }
        out.x.push_back(x);
        out.y.push_back(r.delta);
        out.names << r.name();
    }
    out.rho = spearman(out.x, out.y);
    return out;
}

}  // namespace app
