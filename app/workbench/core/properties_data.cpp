// The Properties view's data (see properties_data.h).
#include "core/properties_data.h"

#include <QFileInfo>
#include <QRegularExpression>
#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <string>
#include <utility>

#include "analysis/metrics.h"
#include "analysis/property_names.h"
#include "analysis/text_format.h"
#include "core/microscope_data.h"
#include "core/store_access.h"
#include "experiments/report.h"
#include "experiments/result_store.h"

namespace app {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

QString qstr(const std::string& s) { return QString::fromStdString(s); }

/// Text of one cell: rank90 is a count, the rest fractions or correlations.
QString cellText(const QString& column, double v, const QString& nan) {
    if (!std::isfinite(v)) return nan;
    return QString::number(v, 'f', column == "rank90" ? 0 : 3);
}

/// The entry of `kind` at (layer, head), else the one shared by all layers (layer -1).
const AnalysisEntry* findLayered(const AnalysisData& d, const QString& kind, int layer, int head) {
    if (const AnalysisEntry* e = d.find(kind, layer, head)) return e;
    return d.find(kind, -1, head);
}

[[noreturn]] void failArray(const AnalysisData& d, const AnalysisEntry& e, const QString& why) {
    throw std::runtime_error((d.dir + "/" + e.file + ": " + why).toStdString());
}

/// The square matrix of an entry.
NpyArray squareMatrix(const AnalysisData& d, const AnalysisEntry& e) {
    NpyArray a = d.matrix(e);
    if (a.shape.size() != 2 || a.shape[0] != a.shape[1])
        failArray(d, e,
                  QString("a %1-d array of %2 values, expected a square matrix")
                      .arg(a.shape.size())
                      .arg(a.size()));
    return a;
}

}  // namespace

const QStringList& propertyNames() {
    // The analysis layer's list (analysis/property_names.h, torch-free), once as Qt strings.
    static const QStringList names = [] {
        QStringList out;
        for (const auto& name : analysis::property_names()) out << QString::fromStdString(name);
        return out;
    }();
    return names;
}

QString propertyDescription(const QString& name) {
    // The definitions of analysis/properties.h, one line each.
    static const std::map<QString, QString> text = {
        {"positional_share",
         "variance of \u0394pos over the variance of the logit, within rows (can exceed 1)"},
        {"static_share",
         "variance of the input-independent positional logit over that of the logit (NaN "
         "without one)"},
        {"monotonicity_left",
         "Spearman of -|j-i| with \u0394pos over the 8 keys left of each query (Wang et al.)"},
        {"monotonicity_right",
         "Spearman of -|j-i| with \u0394pos over the 8 keys right of each query (Wang et al.)"},
        {"translation_invariance",
         "share of \u0394pos's variance its best Toeplitz fit explains (1: depends on j-i only)"},
        {"symmetry", "correlation of \u0394pos(i, i+k) with \u0394pos(i, i-k)"},
        {"rank90", "singular values needed for 90% of \u0394pos's energy (TUPE, Prop. 1)"},
        {"toeplitz_residual", "|\u0394pos - Toeplitz fit| / |\u0394pos| (Frobenius)"},
        {"locality", "mean over rows of sum_j A_ij 2^-|i-j| (Chen et al.; 1: the diagonal)"},
        {"attention_symmetry", "correlation of A(i, i+k) with A(i, i-k)"},
        {"mean_distance", "mean attended distance |i-j| / n"},
        {"entropy", "attention entropy / ln n"}};
    const auto it = text.find(name);
    return it == text.end() ? QString() : it->second;
}

bool hasProperties(const AnalysisData& data) {
    return std::any_of(data.entries.begin(), data.entries.end(),
                       [](const AnalysisEntry& e) { return e.what == "property"; });
}

const AnalysisEntry* propertyEntry(const AnalysisData& data, int layer, int head) {
    return data.find("property", layer, head);
}

std::vector<AnalysisDirRef> analysisDirsOf(
    const std::vector<experiments::ArtifactRecord>& artifacts, const QString& dbPath) {
    static const QRegularExpression stepDir("^step(\\d+)$");
    std::vector<AnalysisDirRef> dirs;
    std::set<QString> seen;
    for (const auto& a : artifacts) {
        const QString path = qstr(a.path);
        if (!path.endsWith("/index.json") && path != "index.json") continue;
        const QString recordedDir = QFileInfo(path).path();
        if (QFileInfo(recordedDir).fileName() == "compare") continue;  // a --compare analysis
        if (!seen.insert(recordedDir).second) continue;
        AnalysisDirRef ref;
        const auto m = stepDir.match(QFileInfo(recordedDir).fileName());
        if (m.hasMatch()) ref.step = m.captured(1).toLongLong();
        ref.dir = resolveStorePath(recordedDir, dbPath);
        dirs.push_back(ref);
    }
    std::stable_sort(
        dirs.begin(), dirs.end(),
        [](const AnalysisDirRef& a, const AnalysisDirRef& b) { return a.step < b.step; });
    return dirs;
}

QString extrapolationPngOf(const std::vector<experiments::ArtifactRecord>& artifacts,
                           const QString& dbPath) {
    QString found;
    for (const auto& a : artifacts) {
        const QString path = qstr(a.path);
        if (path == "extrapolation/extrapolation.png" ||
            path.endsWith("/extrapolation/extrapolation.png"))
            found = path;
    }
    return found.isEmpty() ? found : resolveStorePath(found, dbPath);
}

double TaskScores::score(qint64 runId, const QString& column) const {
    const auto run = byRun.find(runId);
    if (run == byRun.end()) return kNaN;
    const auto it = run->second.find(column);
    return it == run->second.end() ? kNaN : it->second;
}

TaskScores readTaskScores(experiments::ResultStore& store, const QString& experiment) {
    TaskScores out;
    const auto e = store.find_experiment(experiment.toStdString());
    if (!e) return out;
    std::map<std::int64_t, std::int64_t> parentOf;  // fine-tuning run -> pretraining run
    for (const auto& r : store.list_runs(e->id))
        if (r.parent_run_id) parentOf[r.id] = *r.parent_run_id;
    // One report per pretraining run: its own variant name keeps its seeds apart (build_report
    // would merge "tupe-a@seed1" and "tupe-a@seed2" into one row).
    std::map<std::int64_t, std::vector<experiments::GlueResultRecord>> byParent;
    for (experiments::GlueResultRecord r : store.glue_results(e->id)) {
        const auto p = parentOf.find(r.run_id);
        if (p == parentOf.end()) continue;
        r.variant = "run" + std::to_string(p->second);
        byParent[p->second].push_back(std::move(r));
    }
    bool anyAverage = false;
    for (const auto& [parent, results] : byParent) {
        const experiments::Report report = experiments::build_report(e->name, results);
        const experiments::ReportRow* last = nullptr;
        for (const auto& row : report.rows)
            if (!row.reference && (!last || row.step > last->step)) last = &row;
        if (!last) continue;
        auto& scores = out.byRun[qint64(parent)];
        for (const std::string& key : report.columns) {
            const auto cell = last->cells.find(key);
            if (cell == last->cells.end() || !cell->second.present) continue;
            const QString title = qstr(experiments::column_title(key));
            scores[title] = cell->second.median;
            if (!out.columns.contains(title)) out.columns << title;
        }
        if (last->has_average) {
            scores["Avg"] = last->average;
            anyAverage = true;
        }
    }
    if (anyAverage) out.columns << "Avg";
    return out;
}

int PropertyCollection::layers() const {
    int n = 0;
    for (const PropertyRun& r : runs) {
        n = std::max(n, r.analysis->layers);
        for (const AnalysisEntry& e : r.analysis->entries)
            if (e.what == "property") n = std::max(n, e.layer + 1);
    }
    return n;
}

int PropertyCollection::heads() const {
    int n = 0;
    for (const PropertyRun& r : runs) {
        n = std::max(n, r.analysis->heads);
        for (const AnalysisEntry& e : r.analysis->entries)
            if (e.what == "property") n = std::max(n, e.head + 1);
    }
    return n;
}

PropertyCollection collectProperties(experiments::ResultStore& store, const QString& dbPath,
                                     const QString& experiment) {
    PropertyCollection out;
    try {
        for (const auto& e : store.list_experiments()) {
            const QString expName = qstr(e.name);
            if (!experiment.isEmpty() && expName != experiment) continue;
            bool any = false;
            for (const auto& r : store.list_runs(e.id)) {
                if (r.kind != "pretrain") continue;
                const auto artifacts = store.artifacts(r.id);
                const auto dirs = analysisDirsOf(artifacts, dbPath);
                // The latest analysed step with properties (an older analysis may have none).
                for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
                    std::shared_ptr<AnalysisData> data;
                    try {
                        data = std::make_shared<AnalysisData>(loadAnalysis(it->dir));
                    } catch (const std::exception& ex) {
                        out.errors << qstr(r.name) + ": " + QString::fromUtf8(ex.what());
                        continue;
                    }
                    if (!hasProperties(*data)) continue;
                    PropertyRun run;
                    run.runId = r.id;
                    run.experiment = expName;
                    run.name = qstr(r.name);
                    run.variant = data->variant.isEmpty() ? qstr(r.variant) : data->variant;
                    run.step = it->step;
                    run.extrapolationPng = extrapolationPngOf(artifacts, dbPath);
                    RunMicroscope stored = readRunMicroscope(artifacts, dbPath);
                    for (const QString& error : stored.errors)
                        out.errors << qstr(r.name) + ": " + error;
                    if (stored.hasAblation)
                        run.ablation = std::make_shared<AblationResult>(std::move(stored.ablation));
                    run.analysis = std::move(data);
                    out.runs.push_back(std::move(run));
                    any = true;
                    break;
                }
            }
            if (!any) continue;
            TaskScores scores = readTaskScores(store, expName);
            for (const QString& c : scores.columns)
                if (!out.scores.columns.contains(c)) out.scores.columns << c;
            // "Avg" last however the experiments' columns interleave.
            if (out.scores.columns.removeAll("Avg") > 0) out.scores.columns << "Avg";
            for (auto& [id, s] : scores.byRun) out.scores.byRun[id] = std::move(s);
        }
    } catch (const std::exception& ex) {
        out.errors << QString::fromUtf8(ex.what());
    }
    return out;
}

PropertyCollection collectProperties(const QString& dbPath, const QString& experiment) {
    StoreHandle h = openStoreReadOnly(dbPath);
    if (!h.store) {
        PropertyCollection out;
        out.errors << h.error;
        return out;
    }
    return collectProperties(*h.store, dbPath, experiment);
}

double PropertyTable::value(int row, int col) const {
    if (row < 0 || row >= rows() || col < 0 || col >= columns.size()) return kNaN;
    return values[size_t(row)][size_t(col)];
}

PropertyTable buildPropertyTable(const std::vector<PropertyRun>& runs, int layer, int head) {
    PropertyTable t;
    t.layer = layer;
    t.head = head;
    t.columns = propertyNames();
    std::set<QString> extra;
    std::set<QString> experiments;
    for (const PropertyRun& r : runs) {
        experiments.insert(r.experiment);
        for (const AnalysisEntry& e : r.analysis->entries)
            if (e.what == "property")
                for (const auto& [name, v] : e.statistics)
                    if (!t.columns.contains(name)) extra.insert(name);
    }
    for (const QString& name : extra) t.columns << name;
    const bool prefix = experiments.size() > 1;
    for (size_t i = 0; i < runs.size(); ++i) {
        const PropertyRun& r = runs[i];
        const AnalysisEntry* e = propertyEntry(*r.analysis, layer, head);
        std::vector<double> row(size_t(t.columns.size()), kNaN);
        if (e)
            for (int c = 0; c < t.columns.size(); ++c) {
                const auto it = e->statistics.find(t.columns[c]);
                if (it != e->statistics.end()) row[size_t(c)] = it->second;
            }
        t.rowNames << (prefix ? r.experiment + ": " + r.name : r.name);
        t.labels << (e && head >= 0 ? e->label : QString());
        t.runIndex.push_back(int(i));
        t.runIds.push_back(r.runId);
        t.values.push_back(std::move(row));
    }
    return t;
}

QString propertyTableCsv(const PropertyTable& t) {
    const auto field = [](const QString& s) {
        return QString::fromStdString(analysis::csv_field(s.toStdString()));
    };
    QString out = "run,label";
    for (const QString& c : t.columns) out += "," + field(c);
    out += "\n";
    for (int r = 0; r < t.rows(); ++r) {
        out += field(t.rowNames[r]) + "," + field(t.labels[r]);
        // Every digit that reads back; empty where nothing was measured.
        for (int c = 0; c < t.columns.size(); ++c)
            out += "," + QString::fromStdString(analysis::exact_number(t.value(r, c)));
        out += "\n";
    }
    return out;
}

QString propertyTableText(const PropertyTable& t, const QString& format) {
    if (t.rows() == 0) return {};
    const bool latex = format == "latex";
    const bool labels = std::any_of(t.labels.begin(), t.labels.end(),
                                    [](const QString& l) { return !l.isEmpty(); });
    QStringList header{"run"};
    if (labels) header << "pattern";
    header << t.columns;
    auto esc = [latex](QString s) { return latex ? s.replace("_", "\\_") : s; };
    QString out;
    if (latex) {
        out += "\\begin{tabular}{l" + QString(labels ? "l" : "") + QString(t.columns.size(), 'r') +
               "}\n\\hline\n";
        QStringList h;
        for (const QString& s : header) h << esc(s);
        out += h.join(" & ") + " \\\\\n\\hline\n";
    } else {
        out += "| " + header.join(" | ") + " |\n|";
        for (int i = 0; i < header.size(); ++i) out += i < (labels ? 2 : 1) ? "---|" : "---:|";
        out += "\n";
    }
    for (int r = 0; r < t.rows(); ++r) {
        QStringList cells{esc(t.rowNames[r])};
        if (labels) cells << t.labels[r];
        for (int c = 0; c < t.columns.size(); ++c)
            cells << cellText(t.columns[c], t.value(r, c), "--");
        out += latex ? cells.join(" & ") + " \\\\\n" : "| " + cells.join(" | ") + " |\n";
    }
    if (latex) out += "\\hline\n\\end{tabular}\n";
    return out;
}

ColumnScale columnScale(const PropertyTable& table, int col) {
    ColumnScale s;
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < table.rows(); ++r) {
        const double v = table.value(r, col);
        if (!std::isfinite(v)) continue;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    if (!std::isfinite(lo)) return s;
    s.empty = false;
    if (lo < 0 && hi > 0) {
        const double m = std::max(-lo, hi);
        s.lo = -m;
        s.hi = m;
        s.diverging = true;
    } else {
        s.lo = lo;
        s.hi = hi;
    }
    return s;
}

QColor paletteColor(const plotting::Palette& palette, double t) {
    if (!std::isfinite(t)) t = 0.5;
    t = std::clamp(t, palette.front().position, palette.back().position);
    for (size_t i = 1; i < palette.size(); ++i) {
        const plotting::PaletteStop& a = palette[i - 1];
        const plotting::PaletteStop& b = palette[i];
        if (t > b.position) continue;
        const double span = b.position - a.position;
        const double f = span > 0 ? (t - a.position) / span : 0.0;
        auto mix = [f](int x, int y) { return int(std::lround(x + (y - x) * f)); };
        return QColor(mix(a.color.r, b.color.r), mix(a.color.g, b.color.g),
                      mix(a.color.b, b.color.b));
    }
    const plotting::Rgb& c = palette.back().color;
    return QColor(c.r, c.g, c.b);
}

QColor scaleColor(const ColumnScale& scale, double value) {
    if (scale.empty || !std::isfinite(value))
        return QColor(plotting::kNanColor.r, plotting::kNanColor.g, plotting::kNanColor.b);
    const double span = scale.hi - scale.lo;
    const double t = span > 0 ? (value - scale.lo) / span : 0.5;
    return paletteColor(
        scale.diverging ? plotting::kDivergingPalette : plotting::kSequentialPalette, t);
}

void PropertyTableModel::setTable(PropertyTable table) {
    beginResetModel();
    table_ = std::move(table);
    scales_.clear();
    for (int c = 0; c < table_.columns.size(); ++c) scales_.push_back(columnScale(table_, c));
    endResetModel();
    // The row labels changed width ("run  [pattern]"): a header caches its size hint.
    if (table_.rows() > 0) emit headerDataChanged(Qt::Vertical, 0, table_.rows() - 1);
}

int PropertyTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : table_.rows();
}

int PropertyTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(table_.columns.size());
}

QVariant PropertyTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= table_.rows() || index.column() >= columnCount())
        return {};
    const int r = index.row(), c = index.column();
    const double v = table_.value(r, c);
    const QString& column = table_.columns[c];
    switch (role) {
        case Qt::DisplayRole: return cellText(column, v, "\u2013");
        case Qt::UserRole: return v;
        case Qt::TextAlignmentRole: return int(Qt::AlignRight | Qt::AlignVCenter);
        case Qt::BackgroundRole: return scaleColor(scales_[size_t(c)], v);
        case Qt::ForegroundRole: {
            const QColor bg = scaleColor(scales_[size_t(c)], v);
            const double luma = 0.299 * bg.red() + 0.587 * bg.green() + 0.114 * bg.blue();
            return luma < 128 ? QColor(Qt::white) : QColor(Qt::black);
        }
        case Qt::ToolTipRole: {
            QString where =
                table_.rowNames[r] + QString(", layer %1, ").arg(table_.layer) +
                (table_.head < 0 ? QString("mean of heads") : QString("head %1").arg(table_.head));
            if (!table_.labels[r].isEmpty()) where += " (" + table_.labels[r] + ")";
            QString tip = where + "\n" + column + " = " +
                          (std::isfinite(v) ? QString::number(v, 'g', 4)
                                            : QString("not defined for this scheme"));
            const QString about = propertyDescription(column);
            if (!about.isEmpty()) tip += "\n" + about;
            return tip + "\nclick: the \u0394pos map behind this cell";
        }
        default: return {};
    }
}

QVariant PropertyTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation == Qt::Horizontal) {
        if (section < 0 || section >= table_.columns.size()) return {};
        if (role == Qt::DisplayRole) return table_.columns[section];
        if (role == Qt::ToolTipRole) {
            const ColumnScale& s = scales_[size_t(section)];
            QString tip = propertyDescription(table_.columns[section]);
            if (!s.empty)
                tip += QString("\ncolour: %1 to %2 (%3)")
                           .arg(s.lo, 0, 'g', 3)
                           .arg(s.hi, 0, 'g', 3)
                           .arg(s.diverging ? "diverging, 0 white" : "sequential");
            return tip;
        }
        return {};
    }
    if (section < 0 || section >= table_.rows()) return {};
    if (role == Qt::DisplayRole)
        return table_.labels[section].isEmpty()
                   ? table_.rowNames[section]
                   : table_.rowNames[section] + "  [" + table_.labels[section] + "]";
    return {};
}

plotting::Heatmap propertyMap(const AnalysisData& data, const QString& kind, int layer, int head,
                              const QString& title) {
    plotting::Heatmap h;
    h.title = title.toStdString();
    std::vector<const AnalysisEntry*> entries;
    if (head >= 0) {
        if (const AnalysisEntry* e = findLayered(data, kind, layer, head)) entries.push_back(e);
    } else {
        for (int k = 0; k < data.heads; ++k)
            if (const AnalysisEntry* e = findLayered(data, kind, layer, k)) entries.push_back(e);
    }
    // A map of no one head serves every head: a position table's row similarity
    // ("static_pos", properties/table_similarity, layer and head null).
    bool shared = false;
    if (entries.empty())
        if (const AnalysisEntry* e = findLayered(data, kind, layer, -1)) {
            entries.push_back(e);
            shared = true;
        }
    if (entries.empty()) return h;
    std::vector<double> sum;
    long long n = 0;
    for (const AnalysisEntry* e : entries) {
        const NpyArray a = squareMatrix(data, *e);
        if (sum.empty()) {
            n = a.shape[0];
            sum.assign(a.values.size(), 0.0);
        } else if (a.shape[0] != n) {
            failArray(
                data, *e,
                QString("%1 x %1, but the layer's other heads are %2 x %2").arg(a.shape[0]).arg(n));
        }
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += a.values[i];
    }
    for (double& v : sum) v /= double(entries.size());
    h.rows = h.cols = int(n);
    h.values = std::move(sum);
    // [CLS]'s row and column are removed: index 0 is position 1.
    for (long long i = 0; i < n; ++i) h.row_labels.push_back(std::to_string(i + 1));
    h.col_labels = h.row_labels;
    h.symmetric = true;  // signed logits: 0 is white
    h.x_label = "key position";
    h.y_label = "query position";
    h.value_label = kind == "delta_pos" ? "\u0394pos logit"
                    : shared            ? "cosine similarity of the position table's rows"
                                        : "static positional logit";
    return h;
}

Spectrum readSpectrum(const AnalysisData& data, int layer, int head) {
    Spectrum s;
    const AnalysisEntry* e = findLayered(data, "spectrum", layer, -1);
    if (!e) return s;
    QString rel = e->file;
    rel.replace(QRegularExpression("\\.(csv|npy)$"), "");
    const NpyArray a = data.array(rel);  // (H, 3, K)
    if (a.shape.size() != 3 || a.shape[1] != 3)
        failArray(data, *e, QString("a %1-d array, expected (heads, 3, K)").arg(a.shape.size()));
    const long long H = a.shape[0], K = a.shape[2];
    if (head >= H || H == 0) return s;
    auto at = [&](long long h, int which, long long k) {
        return a.values[size_t((h * 3 + which) * K + k)];
    };
    std::vector<double>* lines[3] = {&s.map, &s.toeplitz, &s.residual};
    for (int w = 0; w < 3; ++w) {
        lines[w]->assign(size_t(K), 0.0);
        for (long long k = 0; k < K; ++k) {
            if (head >= 0) {
                (*lines[w])[size_t(k)] = at(head, w, k);
                continue;
            }
            double sum = 0;
            for (long long h = 0; h < H; ++h) sum += at(h, w, k);
            (*lines[w])[size_t(k)] = sum / double(H);
        }
    }
    return s;
}

std::vector<double> averageRanks(const std::vector<double>& values) {
    return analysis::average_ranks(values);
}

RankCorrelation spearman(const std::vector<double>& x, const std::vector<double>& y) {
    RankCorrelation out;
    std::vector<double> xs, ys;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
        if (std::isfinite(x[i]) && std::isfinite(y[i])) {
            xs.push_back(x[i]);
            ys.push_back(y[i]);
        }
    out.n = int(xs.size());
    if (out.n < 3) return out;
    // analysis::spearman gives 0 for a constant side; here that is "no ranking": NaN.
    const auto constant = [](const std::vector<double>& v) {
        return std::all_of(v.begin(), v.end(), [&](double e) { return e == v.front(); });
    };
    if (constant(xs) || constant(ys)) return out;
    out.rho = analysis::spearman(xs, ys);
    return out;
}

}  // namespace app
