// What `tupe ablate` and `tupe heads` store beside a pretraining run (docs/microscope.md), read
// for the app: ablation.json (per head the change in masked-token loss when its positional
// term is removed, with a 95% bootstrap interval, and its positional share; the whole-model
// row) and heads.json (every head's type and scores at every snapshot). The files' schema is
// the CLI's (cli/cmd_ablate.cpp, cli/cmd_heads.cpp); the type order is analysis/head_types.h's.
// Plain data and Qt strings, no widgets. Shapes: layers x heads per checkpoint.
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "core/properties_data.h"
#include "plotting/plotting.h"

namespace experiments {
struct ArtifactRecord;
}  // namespace experiments

namespace app {

/// One row of `tupe ablate`: layer and head (-1 = every layer / every head), the loss with that
/// positional term removed, its change from the intact loss (nats) and the change's 95%
/// interval, and the head's positional share (NaN for the whole model).
struct AblationRow {
    int layer = -1, head = -1;
    double loss = 0, delta = 0, lo = 0, hi = 0;
    double share = std::numeric_limits<double>::quiet_NaN();
    bool perHead() const { return layer >= 0 && head >= 0; }
    /// "L0.H2", "layer 1" or "whole model".
    QString name() const;
    /// "+0.123 [+0.100, +0.150]".
    QString deltaText() const;
    /// "used" (interval above 0), "hurts" (below 0) or "~" (reaches 0), as the CLI's table.
    QString verdict() const;
};

/// One checkpoint's ablation.
struct AblationResult {
    QString checkpoint, variant, mode, scope, positions, text;
    std::int64_t length = 0, windows = 0, masked = 0;
    double loss = std::numeric_limits<double>::quiet_NaN();  ///< nothing removed
    /// Spearman's rho of share and change over the heads, as the CLI computed it.
    double shareUseSpearman = std::numeric_limits<double>::quiet_NaN();
    std::vector<AblationRow> heads;  ///< the per-head rows, layer-major
    std::vector<AblationRow> other;  ///< every other row (whole model last), in file order
    int layers() const;              ///< 1 + the largest layer of `heads`; 0 without heads
    int headsPerLayer() const;       ///< 1 + the largest head
    const AblationRow* find(int layer, int head) const;  ///< nullptr when absent
    const AblationRow* wholeModel() const;               ///< layer -1, head -1; or nullptr
};

/// The checkpoints of an ablation.json text. Throws std::runtime_error "SOURCE: reason" for
/// malformed JSON or a row without its numbers; null numbers are NaN.
std::vector<AblationResult> parseAblationJson(const QByteArray& text, const QString& source);
/// The file at `path` parsed; throws std::runtime_error naming it.
std::vector<AblationResult> readAblationJson(const QString& path);

/// Layers x heads of the change in loss (row = layer, column = head; NaN where no row),
/// diverging around 0, titled `title`.
plotting::Heatmap ablationHeatmap(const AblationResult& result, const QString& title);

/// One head in `tupe heads`' output: its primary type and every score (null scores NaN).
struct HeadTypeEntry {
    int layer = 0, head = 0;
    QString type;
    std::map<QString, double> scores;
    std::int64_t rows = 0;
    QString name() const { return QString("L%1.H%2").arg(layer).arg(head); }
    /// The score the rule of its type tests (local for local, entropy for broad); NaN for mixed.
    double typeScore() const;
};

/// One scanned checkpoint.
struct HeadTypeSnapshot {
    std::int64_t step = 0;
    QString checkpoint;
    std::vector<HeadTypeEntry> heads;
};

/// One scanned run: its checkpoints in step order.
struct HeadTypeRun {
    QString run, text;
    std::vector<HeadTypeSnapshot> snapshots;
};

/// A heads.json: the rule in words and every run.
struct HeadTypesFile {
    QString rule;
    std::vector<HeadTypeRun> runs;
};

/// Throws std::runtime_error "SOURCE: reason" for malformed JSON or a head without its type.
HeadTypesFile parseHeadTypesJson(const QByteArray& text, const QString& source);
HeadTypesFile readHeadTypesJson(const QString& path);

/// The type names in the rule's order (analysis::head_types(): cls_sink ... broad, mixed).
const QStringList& headTypeOrder();
/// The score key the rule of `type` tests ("local" -> "local", "broad" -> "entropy"); empty for
/// mixed or an unknown type.
QString headTypeScoreKey(const QString& type);

/// The heads of one type.
struct HeadTypeGroup {
    QString type;
    std::vector<HeadTypeEntry> heads;  ///< by descending type score, then layer and head
};
/// A snapshot's heads grouped by type in headTypeOrder() (types not in it after, by name);
/// empty groups left out.
std::vector<HeadTypeGroup> groupHeadsByType(const HeadTypeSnapshot& snapshot);

/// How many heads have each type at every snapshot of a run.
struct HeadTypeCounts {
    std::vector<double> steps;
    /// One entry per type in headTypeOrder() that some snapshot has, counts per step.
    std::vector<std::pair<QString, std::vector<double>>> counts;
};
HeadTypeCounts headTypeCounts(const HeadTypeRun& run);

/// The recorded path of a run's last artifact whose path ends in "/NAME" (e.g.
/// "ablation/ablation.json", "heads/heads.json"), resolved with resolveStorePath; empty when
/// there is none.
QString artifactPathOf(const std::vector<experiments::ArtifactRecord>& artifacts,
                       const QString& name, const QString& dbPath);

/// A pretraining run's stored ablation and head types (either may be absent).
struct RunMicroscope {
    bool hasAblation = false, hasHeadTypes = false;
    AblationResult ablation;  ///< its first checkpoint
    HeadTypeRun headTypes;    ///< its first run
    QString ablationPath, headTypesPath;
    QStringList errors;  ///< an unreadable file, one line each
};
/// Reads both files of a run from its artifacts. Never throws: an unreadable file goes to
/// `errors`.
RunMicroscope readRunMicroscope(const std::vector<experiments::ArtifactRecord>& artifacts,
                                const QString& dbPath);

/// The x property of the per-head scatter that comes from the ablation itself (its share on
/// the same windows as the change in loss).
inline const char* kAblationShare = "positional_share (ablation)";

/// Per head of one ablation: a property (x) against the change in loss (y), with Spearman's
/// rho over the heads where both are finite.
struct HeadScatter {
    std::vector<double> x, y;
    QStringList names;  ///< "L0.H2" per point
    RankCorrelation rho;
};
/// x = the ablation's positional share for kAblationShare, else the "property" entry
/// `property` of (layer, head) in `analysis` (nullptr: NaN).
HeadScatter headScatter(const AblationResult& ablation, const AnalysisData* analysis,
                        const QString& property);

}  // namespace app
