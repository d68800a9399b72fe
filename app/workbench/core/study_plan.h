// The plan the study builder shows before anything runs: the design's experiment file read as
// `tupe run` reads it (experiments::load_experiment), its variants with their factor levels,
// the jobs counted as the runner plans them and their wall time estimated from the cost model
// at the FLOP/s `tupe bench` measured on this machine (experiments/plan_cost.h); and
// BenchService, which runs that `tupe bench` as a child process. No widgets.
#pragma once

#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <vector>

#include "experiments/study_design.h"

namespace app {

/// One variant of the plan (a cell; its seeds run as V@seedN).
struct StudyPlanRow {
    QString variant;     ///< named by its levels, as the loader names it
    QStringList levels;  ///< one per factor
    int seeds = 1;       ///< pretraining runs of the variant
};

/// The plan of a design, or where its file fails the loader.
struct StudyPlanInfo {
    bool ok = false;
    int line = 0, column = 0;  ///< of the loader's error in the written YAML; 0 when unknown
    QString message;           ///< the loader's message
    std::vector<StudyPlanRow> rows;
    int pretrain = 0, finetune = 0, zeroShot = 0, analyses = 0;
    bool everyTask = false;  ///< glue.tasks empty: the task jobs are known at run time only
    /// Estimated seconds of pretraining and of task jobs (-1: no bench figures), and where the
    /// rate comes from.
    double pretrainSeconds = -1, taskSeconds = -1;
    QString rateSource;
    /// "8 variants x 2 seeds: 16 pretraining jobs, ...; estimated ..." (or the error).
    QString summary() const;
};

/// "45 s", "23 min", "1 h 05 min".
QString formatDuration(double seconds);

/// Reads the design's file as `tupe run` would and plans it. `benchJson`: `tupe bench --format
/// json`'s output (empty: no estimate); `benchNote` is appended to the rate's source ("measured
/// 2026-12-07"). Never throws.
StudyPlanInfo planStudy(const experiments::StudyDesign& design, const QString& benchJson = {},
                        const QString& benchNote = {});

/// `tupe bench` arguments that measure the design's models: the bench size closest to the
/// resolved hidden size (quickstart = tiny with hidden 64), its presets, its sequence length
/// and batch, a few steps. Empty when the design does not load.
QStringList benchArguments(const experiments::StudyDesign& design);

/// Runs `tupe bench --format json ...` as a child process, one at a time.
class BenchService : public QObject {
    Q_OBJECT
  public:
    explicit BenchService(QObject* parent = nullptr);
    ~BenchService() override;
    /// Starts `tupe ARGS` (benchArguments) in workingDir; false when one runs already.
    bool start(const QStringList& args, const QString& workingDir = {});
    bool busy() const { return process_->state() != QProcess::NotRunning; }
    /// The CLI to run; empty: findTupeCli() (tests point it elsewhere).
    void setProgram(const QString& program) { program_ = program; }

  signals:
    void finished(const QString& json);
    void failed(const QString& message);

  private:
    QProcess* process_;
    QString program_;
};

}  // namespace app
