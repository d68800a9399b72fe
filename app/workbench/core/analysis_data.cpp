// .npy and index.json readers for `tupe analyze` output (see analysis_data.h).
#include "core/analysis_data.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <cmath>
#include <cstring>
#include <set>

namespace app {

namespace {

[[noreturn]] void fail(const QString& path, const QString& why) {
    throw std::runtime_error((path + ": " + why).toStdString());
}

template <typename T>
void convert(const QByteArray& raw, qsizetype offset, long long count, std::vector<double>& out) {
    out.resize(static_cast<size_t>(count));
    for (long long i = 0; i < count; ++i) {
        T v;
        std::memcpy(&v, raw.constData() + offset + i * static_cast<qsizetype>(sizeof(T)), sizeof(T));
        out[static_cast<size_t>(i)] = static_cast<double>(v);
    }
}

}  // namespace

NpyArray readNpy(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) fail(path, "cannot open: " + f.errorString());
    const QByteArray raw = f.readAll();
    if (raw.size() < 10 || !raw.startsWith("\x93NUMPY")) fail(path, "not a .npy file");
    const int major = static_cast<unsigned char>(raw[6]);
    qsizetype headerLen = 0, start = 0;
    if (major == 1) {
        headerLen = static_cast<unsigned char>(raw[8]) | (static_cast<unsigned char>(raw[9]) << 8);
        start = 10;
    } else if (major == 2 || major == 3) {
        if (raw.size() < 12) fail(path, "truncated header");
        quint32 len = 0;
        for (int i = 0; i < 4; ++i) len |= static_cast<quint32>(static_cast<unsigned char>(raw[8 + i])) << (8 * i);
        headerLen = static_cast<qsizetype>(len);
        start = 12;
    } else {
        fail(path, QString("unsupported .npy version %1").arg(major));
    }
    if (start + headerLen > raw.size()) fail(path, "truncated header");
    const QString header = QString::fromLatin1(raw.mid(start, headerLen));
    const auto descr = QRegularExpression("'descr'\\s*:\\s*'([^']+)'").match(header);
    const auto fortran = QRegularExpression("'fortran_order'\\s*:\\s*(True|False)").match(header);
    const auto shapeM = QRegularExpression("'shape'\\s*:\\s*\\(([^)]*)\\)").match(header);
    if (!descr.hasMatch() || !fortran.hasMatch() || !shapeM.hasMatch())
        fail(path, "malformed header: " + header.trimmed());
    if (fortran.captured(1) == "True") fail(path, "Fortran-order arrays are not supported");
    NpyArray a;
    long long count = 1;
    for (const QString& part : shapeM.captured(1).split(',', Qt::SkipEmptyParts)) {
        bool ok = false;
        const long long d = part.trimmed().toLongLong(&ok);
        if (!ok || d < 0) fail(path, "bad shape in header: " + shapeM.captured(1));
        a.shape.push_back(d);
        count *= d;
    }
    const QString type = descr.captured(1);
    const qsizetype offset = start + headerLen;
    auto need = [&](int bytes) {
        if (raw.size() - offset < count * bytes)
            fail(path, QString("holds %1 bytes of data, the header promises %2")
                           .arg(raw.size() - offset).arg(count * bytes));
    };
    if (type == "<f4") need(4), convert<float>(raw, offset, count, a.values);
    else if (type == "<f8") need(8), convert<double>(raw, offset, count, a.values);
    else if (type == "<i8") need(8), convert<qint64>(raw, offset, count, a.values);
    else if (type == "<i4") need(4), convert<qint32>(raw, offset, count, a.values);
    else if (type == "|u1") need(1), convert<quint8>(raw, offset, count, a.values);
    else if (type == "|b1") need(1), convert<quint8>(raw, offset, count, a.values);
    else fail(path, "unsupported dtype " + type);
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
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &error);
    if (doc.isNull() || !doc.isObject())
        fail(indexPath, "not JSON: " + error.errorString() +
                            QString(" at offset %1").arg(error.offset));
    const QJsonObject o = doc.object();
    AnalysisData d;
    d.dir = dir;
    d.model = o.value("model").toString();
    d.variant = o.value("variant").toString();
    const QJsonObject config = o.value("config").toObject();
    d.layers = config.value("num_hidden_layers").toInt();
    d.heads = config.value("num_attention_heads").toInt();
    for (const QJsonValue& n : o.value("notes").toArray()) d.notes << n.toString();
    for (const QJsonValue& s : o.value("skipped").toArray())
        d.skipped << s.toObject().value("what").toString() + ": " +
                         s.toObject().value("reason").toString();
    for (const QJsonValue& v : o.value("files").toArray()) {
        const QJsonObject fo = v.toObject();
        AnalysisEntry e;
        e.file = fo.value("file").toString();
        e.what = fo.value("what").toString();
        e.description = fo.value("description").toString();
        e.layer = fo.value("layer").isNull() ? -1 : fo.value("layer").toInt(-1);
        e.head = fo.value("head").isNull() ? -1 : fo.value("head").toInt(-1);
        for (const QJsonValue& s : fo.value("shape").toArray())
            e.shape.push_back(static_cast<long long>(s.toDouble()));
        e.label = fo.value("label").toString();
        const QJsonObject stats = fo.value("statistics").toObject();
        for (auto it = stats.begin(); it != stats.end(); ++it)
            e.statistics[it.key()] = it.value().isNull() ? std::nan("") : it.value().toDouble();
        if (e.file.isEmpty() || e.what.isEmpty()) fail(indexPath, "a file entry without file/what");
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
