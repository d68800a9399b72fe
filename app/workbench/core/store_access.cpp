// Read-only store access for the app (see store_access.h).
#include "core/store_access.h"

#include <QDir>
#include <QFileInfo>

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

}  // namespace app
