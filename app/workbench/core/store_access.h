// The app's read-only view of the results store: one experiments::ResultStore connection
// opened read-only (the runner writes in WAL mode while the app reads), with every failure
// (missing file, other schema version, locked, not a database) turned into a message for
// the window instead of an exception, and the paths the store records made usable.
#pragma once

#include <QString>
#include <memory>

#include "experiments/result_store.h"

namespace app {

/// An open store or the reason it could not be opened.
struct StoreHandle {
    std::unique_ptr<experiments::ResultStore> store;  ///< null when opening failed
    QString path;
    QString error;  ///< one line, empty on success
};

/// Opens `path` read-only with a short lock timeout (the GUI must not wait 30 s). Never throws.
StoreHandle openStoreReadOnly(const QString& path);

/// A path recorded in the store (checkpoints, out_dir; relative to the runner's working
/// directory, normally the repository root): as is when it exists, else relative to the
/// directory above the database's folder (results/.. = the root), else to the database's
/// folder. Returns the path unchanged when none exists.
QString resolveStorePath(const QString& recorded, const QString& dbPath);

/// The directory `tupe run` should run in for the store at dbPath: the folder above the
/// database's folder when the database sits in "results/", else the database's folder.
QString projectRootFor(const QString& dbPath);

}  // namespace app
