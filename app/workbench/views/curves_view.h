// Training curves: any runs overlaid for one metric, x by step, tokens or wall time,
// TensorBoard's debiased EMA over the faint raw curve, log y, seed groups as mean +- std with
// n, hover values, legend toggles, min/last markers, the "steps to reach the baseline's final
// value" readout, and under a loss the runs' unigram floor (dashed) and bigram reference
// (dotted), with a warning for a run that ends within 0.1 nats of the floor. Live: a timer polls
// the store (metrics after the last step) for running runs; replots are throttled and long curves
// decimated.
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QListWidget>
#include <QSlider>
#include <QTimer>
#include <map>
#include <vector>

#include "core/store_access.h"
#include "views/plot_util.h"
#include "views/workbench_view.h"

namespace app {

class CurvesView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit CurvesView(QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QCustomPlot* exportablePlot() override { return plot_; }
    QString dataCsv() override { return plotCsv(plot_); }
    /// "run,metric,step,value,wall_time" for every stored point of the checked runs' metric.
    QString rawDataCsv() override;
    void prepareScreenshot() override;

    /// Checks exactly these runs (from the browser).
    void showRuns(const QList<qint64>& runIds);
    /// Plots metric `key` when the checked runs have it; false otherwise.
    bool showMetric(const QString& key);
    double smoothing() const;
    void setSmoothing(double weight);
    QString readout() const { return readout_->text(); }
    /// One line per plotted run that ends too near its unigram floor (floorWarning()).
    QString floorWarnings() const { return warnings_->text(); }

  signals:
    void smoothingChanged(double weight);

  private:
    struct RunCurve {
        qint64 id = 0;
        QString name, status;
        std::vector<double> step, value, wall;
        std::int64_t lastStep = std::numeric_limits<std::int64_t>::min();
        std::vector<double> tokenStep, tokens;  ///< train/tokens, for the tokens axis
        LossFloor floor;                        ///< the run's floor params and last validation loss
    };
    void fillRunList();
    void fillMetrics();
    void loadCurves(bool onlyNew);
    void rebuild();
    /// The "steps to reach the baseline's final value" line over the drawn (smoothed) series,
    /// by series name with their steps; withheld, with the reason, for a run or baseline that
    /// learned nothing and for a crossing the curve does not keep.
    QString readoutText(
        const QString& key, bool lower,
        const std::map<QString, std::pair<std::vector<double>, std::vector<double>>>& smoothedBy,
        const std::map<QString, QString>& seriesOfRun) const;
    std::vector<double> xOf(const RunCurve& c) const;
    void onMouseMove(QMouseEvent* event);
    void addFloorLines(const QString& key);

    experiments::ResultStore* store_ = nullptr;
    QListWidget* runs_;
    QComboBox* metric_;
    QComboBox* xAxis_;
    QSlider* smooth_;
    QLabel* smoothLabel_;
    QCheckBox* logY_;
    QCheckBox* groupSeeds_;
    QCheckBox* markers_;
    QComboBox* baseline_;
    QCheckBox* floor_;
    QCheckBox* bigram_;
    QCustomPlot* plot_;
    QLabel* readout_;
    QLabel* warnings_;
    ReplotThrottle* throttle_;
    QTimer poll_;
    std::map<qint64, RunCurve> curves_;  ///< checked runs, for the current metric
};

}  // namespace app
