// `tupe analyze` output as the map views' data (see analysis_data.h).
#include "core/analysis_data.h"

#include <QFile>
#include <QRegularExpression>
#include <set>
#include <utility>

#include "analysis/analysis_index.h"
#include "analysis/npy_format.h"

namespace app {

namespace {

[[noreturn]] void fail(const QString& path, const QString& why) {
    throw std::runtime_error((path + ": " + why).toStdString());
}

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

NpyArray readNpy(const QString& path) {
    // engine::InputError is a std::runtime_error whose what() is "PATH: reason".
    analysis::NpyArray read = analysis::read_npy_array(QFile::encodeName(path).toStdString());
    NpyArray a;
    a.shape.assign(read.shape.begin(), read.shape.end());
    a.values = std::move(read.values);
    return a;
}

const AnalysisEntry* AnalysisData::find(const QString& what, int layer, int head) const {
    for (const AnalysisEntry& e : entries)
        if (e.what == what && e.head == head && e.layer == layer) return &e;
    return nullptr;
}

QStringList AnalysisData::perHeadKinds() const {
    QStringList kinds;
    for (const AnalysisEntry& e : entries)
        if (e.head >= 0 && !kinds.contains(e.what)) kinds << e.what;
    return kinds;
}

std::vector<int> AnalysisData::layersOf(const QString& what) const {
    std::set<int> layers;
    for (const AnalysisEntry& e : entries)
        if (e.what == what && e.head >= 0) layers.insert(e.layer);
    return {layers.begin(), layers.end()};
}

NpyArray AnalysisData::matrix(const AnalysisEntry& entry) const {
    QString rel = entry.file;
    rel.replace(QRegularExpression("\\.(csv|npy)$"), "");
    NpyArray a = array(rel);
    if (a.shape.size() == 1) a.shape.insert(a.shape.begin(), 1);
    return a;
}

NpyArray AnalysisData::array(const QString& relativeNoExt) const {
    return readNpy(dir + "/" + relativeNoExt + ".npy");
}

AnalysisData loadAnalysis(const QString& dir) {
    const QString indexPath = dir + "/index.json";
    QFile f(indexPath);
    if (!f.open(QIODevice::ReadOnly)) fail(indexPath, "cannot open: " + f.errorString());
    const QByteArray text = f.readAll();
    const analysis::AnalysisIndex index = analysis::parse_index_json(
        std::string(text.constData(), size_t(text.size())), indexPath.toStdString());
    AnalysisData d;
    d.dir = dir;
    d.model = qs(index.model);
    d.variant = qs(index.variant);
    d.layers = int(index.config.num_hidden_layers);
    d.heads = int(index.config.num_attention_heads);
    for (const std::string& n : index.notes) d.notes << qs(n);
    for (const auto& s : index.skipped) d.skipped << qs(s.what) + ": " + qs(s.reason);
    for (const analysis::AnalysisIndexFile& file : index.files) {
        AnalysisEntry e;
        e.file = qs(file.file);
        e.what = qs(file.what);
        e.description = qs(file.description);
        e.layer = int(file.layer);
        e.head = int(file.head);
        e.shape.assign(file.shape.begin(), file.shape.end());
        e.label = qs(file.label);
        for (const auto& [name, value] : file.statistics) e.statistics[qs(name)] = value;
        d.entries.push_back(std::move(e));
    }
    QFile tokens(dir + "/input/tokens.txt");
    if (tokens.open(QIODevice::ReadOnly)) {
        const QString first = QString::fromUtf8(tokens.readLine()).trimmed();
        d.tokens = first.split(' ', Qt::SkipEmptyParts);
    }
    return d;
}

}  // namespace app
