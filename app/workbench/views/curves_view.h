// Training curves: any runs overlaid for one metric, x by step, tokens or wall time,
// TensorBoard's debiased EMA over the faint raw curve, log y, seed groups as mean +- std with
// n, hover values, legend toggles, min/last markers and the "steps to reach the baseline's final
// value" readout. Live: a timer polls the store (metrics after the last step) for running runs;
// replots are throttled and long curves decimated.
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QListWidget>
#include <QSlider>
#include <QTimer>
#include <map>
#include <vector>

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
    void prepareScreenshot() override;

    /// Checks exactly these runs (from the browser).
    void showRuns(const QList<qint64>& runIds);
    double smoothing() const;
    void setSmoothing(double weight);
    QString readout() const { return readout_->text(); }

  signals:
    void smoothingChanged(double weight);

  private:
    struct RunCurve {
        qint64 id = 0;
        QString name, status;
        std::vector<double> step, value, wall;
        std::int64_t lastStep = std::numeric_limits<std::int64_t>::min();
        std::vector<double> tokenStep, tokens;  ///< train/tokens, for the tokens axis
    };
    void fillRunList();
    void fillMetrics();
    void loadCurves(bool onlyNew);
    void rebuild();
    std::vector<double> xOf(const RunCurve& c) const;
    void onMouseMove(QMouseEvent* event);

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
    QCustomPlot* plot_;
    QLabel* readout_;
    ReplotThrottle* throttle_;
    QTimer poll_;
    std::map<qint64, RunCurve> curves_;  ///< checked runs, for the current metric
};

}  // namespace app
