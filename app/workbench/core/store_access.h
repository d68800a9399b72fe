// The app's read-only view of the results store: one experiments::ResultStore connection
// opened read-only (the runner writes in WAL mode while the app reads), with every failure
// (missing file, other schema version, locked, not a database) turned into a message for
// the window instead of an exception, and the paths the store records made usable.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <memory>
#include <vector>

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

/// The ids of the runs of experiment `experiment` called `names`, in that order (unknown names
/// skipped); all its pretrain runs when `names` is empty. Empty for an unknown experiment.
QList<qint64> runIdsByName(experiments::ResultStore& store, const QString& experiment,
                           const QStringList& names);

/// One checkpoint of a run: its step and its file, resolved with resolveStorePath.
struct CheckpointRef {
    std::int64_t step = 0;
    QString path;
};

/// A pretrain run that has checkpoints, with them by step.
struct CheckpointRun {
    qint64 runId = 0;
    QString name;
    std::vector<CheckpointRef> checkpoints;
};

/// The runs a checkpoint picker offers, or why the walk stopped.
struct CheckpointRuns {
    std::vector<CheckpointRun> runs;  ///< what was read before a failure, in store order
    QString error;                    ///< one line, empty on success
};

/// Every pretrain run of every experiment that has at least one checkpoint, its checkpoint
/// paths resolved against the store at `dbPath`. Never throws: a store error (locked, other
/// schema) ends the walk and goes to `error`.
CheckpointRuns listCheckpointRuns(experiments::ResultStore& store, const QString& dbPath);

/// How far below the unigram floor a final validation loss must be to show the model learned
/// more than word frequencies (the engine's kFloorMargin; engine headers pull in torch).
inline constexpr double kFloorMarginNats = 0.1;

/// A pretrain run's loss floor, from its params "floor.unigram_nats", "floor.context_free_nats"
/// and "floor.bigram_nats" (nats per masked token on its validation split), and its last
/// validation/loss.
struct LossFloor {
    bool hasUnigram = false, hasBigram = false, hasFinal = false, hasContextFree = false;
    double unigram = 0;      ///< the MLM loss of predicting word frequencies only
    double contextFree = 0;  ///< frequencies and copying the scored token (engine/corpus.h)
    double bigram = 0;       ///< a left-context bigram reference
    double finalLoss = 0;    ///< the last validation/loss point
    std::int64_t finalStep = 0;
};

/// Reads the floor params and last validation loss of run `runId`; a run without them gets
/// has* false. Unparseable floor text counts as absent. Throws StoreError like the store.
LossFloor readLossFloor(experiments::ResultStore& store, std::int64_t runId);

/// "RUN: final loss X is not 0.1 nats below the unigram floor Y: word frequencies only" when
/// the run's final validation loss is above floor - kFloorMarginNats; empty otherwise or when
/// the floor or the final loss is unknown.
QString floorWarning(const QString& runName, const LossFloor& floor);

/// One horizontal reference line: a value and the runs that share it.
struct FloorLine {
    double value = 0;
    QStringList runs;
};

/// Merges (run, value) pairs whose values agree within `tolerance` into one line each, in
/// order of first appearance (runs on one corpus share one floor).
std::vector<FloorLine> mergeFloorLines(const std::vector<std::pair<QString, double>>& values,
                                       double tolerance = 1e-6);

}  // namespace app
