// The factor view: any stored experiment read as a factorial (experiments/factors.h: factor
// levels from the runs' stored configs, their metrics). A parallel-coordinates plot, one line
// per run coloured by the chosen metric, whose brushed axes filter the runs (a click on a line
// opens the run's curves); the main effect of every factor on the metric, one panel per factor
// with the level means and their 95% intervals over seeds, pooled or split by another factor's
// levels; the interaction of two chosen factors as a grid of cell means; and a sortable table
// of the runs under the same filter. `tupe factors` prints the same main effects.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStandardItemModel>
#include <QTableView>
#include <optional>
#include <set>

#include "experiments/factors.h"
#include "views/plot_util.h"
#include "views/workbench_view.h"

namespace app {

class ParallelCoordinatesPlot;

/// Keeps the table's rows whose run id (Qt::UserRole of column 0) is in the accepted set.
class RunFilterModel : public QSortFilterProxyModel {
    Q_OBJECT
  public:
    using QSortFilterProxyModel::QSortFilterProxyModel;
    void setAccepted(const std::set<qint64>& ids);

  protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override;

  private:
    std::set<qint64> accepted_;
};

class FactorView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit FactorView(QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QList<QCustomPlot*> exportablePlots() override;
    QString dataCsv() override;
    QString tableText(const QString& format) override;
    void prepareScreenshot() override;

    /// Shows experiment `name` (false when the store has no such experiment).
    bool showExperiment(const QString& name);
    const std::optional<experiments::FactorTable>& table() const { return table_; }
    const experiments::FactorEffects& effects() const { return effects_; }
    ParallelCoordinatesPlot* parallelPlot() const { return parallel_; }
    QCustomPlot* effectsPlot() const { return effectsPlot_; }
    HeatmapPlot* interactionPlot() const { return interaction_; }
    QTableView* runTable() const { return tableView_; }
    QComboBox* metricBox() const { return metric_; }
    QComboBox* withinBox() const { return within_; }
    QComboBox* interactionBoxA() const { return interA_; }
    QComboBox* interactionBoxB() const { return interB_; }
    QLabel* summaryLabel() const { return summary_; }

  signals:
    /// The runs whose curves the user asked for (a click on a line).
    void runsChosen(const QList<qint64>& runIds);

  private:
    QWidget* buildControls();
    void loadExperiment();
    void fillPickers();
    void showMetric();
    void drawEffects();
    void drawInteraction();
    void fillTable();
    void applyFilter();

    experiments::ResultStore* store_ = nullptr;
    std::optional<experiments::FactorTable> table_;
    experiments::FactorEffects effects_;
    QComboBox* experiment_;
    QComboBox* metric_;
    QComboBox* within_;
    QComboBox* interA_;
    QComboBox* interB_;
    QPushButton* clear_;
    QLabel* summary_;
    ParallelCoordinatesPlot* parallel_;
    QCustomPlot* effectsPlot_;
    HeatmapPlot* interaction_;
    QStandardItemModel* model_;
    RunFilterModel* proxy_;
    QTableView* tableView_;
};

}  // namespace app
