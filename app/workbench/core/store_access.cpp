// Read-only store access for the app (see store_access.h).
#include "core/store_access.h"

#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <cmath>

namespace app {

StoreHandle openStoreReadOnly(const QString& path) {
    StoreHandle h;
    h.path = path;
    if (path.isEmpty()) {
        h.error = "no results database chosen (File > Open database...)";
        return h;
    }
    if (!QFileInfo::exists(path)) {
        h.error = "no results database at " + path +
                  " (run `tupe run EXPERIMENT.yaml` first, or open another file)";
        return h;
    }
    try {
        experiments::StoreOptions options;
        options.lock_timeout = std::chrono::milliseconds(2000);
        h.store = std::make_unique<experiments::ResultStore>(experiments::ResultStore::open(
            path.toStdString(), experiments::OpenMode::kReadOnly, options));
    } catch (const std::exception& e) {
        h.store.reset();
        h.error = QString::fromStdString(e.what());
    }
    return h;
}

QString resolveStorePath(const QString& recorded, const QString& dbPath) {
    if (recorded.isEmpty() || QFileInfo(recorded).isAbsolute() || QFileInfo::exists(recorded))
        return recorded;
    const QDir dbDir = QFileInfo(dbPath).absoluteDir();
    const QString fromRoot = QDir(dbDir.absolutePath() + "/..").absoluteFilePath(recorded);
    if (QFileInfo::exists(fromRoot)) return QDir::cleanPath(fromRoot);
    const QString fromDb = dbDir.absoluteFilePath(recorded);
    if (QFileInfo::exists(fromDb)) return QDir::cleanPath(fromDb);
    return recorded;
}

QString projectRootFor(const QString& dbPath) {
    const QDir dbDir = QFileInfo(dbPath).absoluteDir();
    if (dbDir.dirName() == "results") return QDir::cleanPath(dbDir.absolutePath() + "/..");
    return dbDir.absolutePath();
}

QList<qint64> runIdsByName(experiments::ResultStore& store, const QString& experiment,
                           const QStringList& names) {
    QList<qint64> ids;
    const auto e = store.find_experiment(experiment.toStdString());
    if (!e) return ids;
    if (names.isEmpty()) {
        for (const auto& r : store.list_runs(e->id))
            if (r.kind == "pretrain") ids << r.id;
        return ids;
    }
    for (const QString& n : names)
        if (const auto r = store.find_run(e->id, n.toStdString())) ids << r->id;
    return ids;
}

CheckpointRuns listCheckpointRuns(experiments::ResultStore& store, const QString& dbPath) {
    CheckpointRuns out;
    try {
        for (const auto& e : store.list_experiments())
            for (const auto& r : store.list_runs(e.id)) {
                if (r.kind != "pretrain") continue;
                CheckpointRun run;
                run.runId = r.id;
                run.name = QString::fromStdString(r.name);
                for (const auto& c : store.checkpoints(r.id))
                    run.checkpoints.push_back(
                        {c.step, resolveStorePath(QString::fromStdString(c.path), dbPath)});
                if (!run.checkpoints.empty()) out.runs.push_back(std::move(run));
            }
    } catch (const std::exception& e) {
        out.error = "cannot list the checkpoints: " + QString::fromUtf8(e.what());
    }
    return out;
}

namespace {

bool parseDouble(const std::map<std::string, std::string>& params, const std::string& key,
                 double& out) {
    const auto it = params.find(key);
    if (it == params.end()) return false;
    bool ok = false;
    const double v = QString::fromStdString(it->second).trimmed().toDouble(&ok);
    if (!ok || !std::isfinite(v)) return false;
    out = v;
    return true;
}

}  // namespace

LossFloor readLossFloor(experiments::ResultStore& store, std::int64_t runId) {
    LossFloor f;
    const auto params = store.params(runId);
    f.hasUnigram = parseDouble(params, "floor.unigram_nats", f.unigram);
    f.hasBigram = parseDouble(params, "floor.bigram_nats", f.bigram);
    f.hasContextFree = parseDouble(params, "floor.context_free_nats", f.contextFree);
    const auto curve = store.metrics(runId, "validation/loss");
    // The last finite point: a diverged NaN at the end says nothing about the floor.
    for (auto it = curve.rbegin(); it != curve.rend(); ++it)
        if (std::isfinite(it->value)) {
            f.hasFinal = true;
            f.finalLoss = it->value;
            f.finalStep = it->step;
            break;
        }
    return f;
}

QString floorWarning(const QString& runName, const LossFloor& floor) {
    if (!floor.hasUnigram || !floor.hasFinal) return {};
    // The context-free floor where the run stored it (the lower one), as the engine's warning.
    // Below the unigram floor, a run that stored the context-free floor is judged against it.
    const bool free = floor.hasContextFree && floor.finalLoss <= floor.unigram - kFloorMarginNats;
    const double level = free ? floor.contextFree : floor.unigram;
    if (floor.finalLoss <= level - kFloorMarginNats) return {};
    return QString("%1: final loss %2 is not %3 nats below the %4 %5: %6")
        .arg(runName)
        .arg(floor.finalLoss, 0, 'f', 3)
        .arg(kFloorMarginNats, 0, 'f', 1)
        .arg(free ? "context-free floor" : "unigram floor")
        .arg(level, 0, 'f', 3)
        .arg(free ? "word frequencies and copying, no context" : "word frequencies only");
}

std::vector<FloorLine> mergeFloorLines(const std::vector<std::pair<QString, double>>& values,
                                       double tolerance) {
    std::vector<FloorLine> lines;
    for (const auto& [run, v] : values) {
        auto it = std::find_if(lines.begin(), lines.end(), [&](const FloorLine& l) {
            return std::abs(l.value - v) <= tolerance;
        });
        if (it == lines.end())
            lines.push_back({v, {run}});
        else
            it->runs << run;
    }
    return lines;
}

}  // namespace app
