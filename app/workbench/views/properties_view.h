// The Properties tab (issue 15, sec. 5): the positional properties `tupe analyze` measured on
// each pretraining run (analysis/properties.h: positional share, monotonicity, translation
// invariance, symmetry, rank, locality, ...) as a runs x properties table with a colour scale
// per column at one layer and head (or the mean of heads); a cell opens the Delta_pos map behind
// it (or the scheme's static positional logit), the layer's singular-value spectrum (map,
// Toeplitz fit, residual; TUPE's Proposition 1), the run's `tupe extrapolate` figure, a
// scatter of a property against a task score across runs with Spearman's rho and n, and, for a
// run with a stored `tupe ablate`, a scatter of a per-head property against each head's change
// in loss when its positions are removed (is the property a proxy for use?). The store
// and the analysis directories are read on a worker thread (core/properties_data.h).
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QPixmap>
#include <QTableView>

#include "core/properties_data.h"
#include "views/plot_util.h"
#include "views/workbench_view.h"

class QThread;

namespace app {

class PropertiesView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit PropertiesView(QWidget* parent = nullptr);
    ~PropertiesView() override;
    /// Reads the runs with properties from `dbPath` on a worker thread (its own connection).
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QCustomPlot* exportablePlot() override { return scatter_; }
    /// The map, the spectrum, the scatter across runs and the per-head scatter.
    QList<QCustomPlot*> exportablePlots() override {
        return {map_, spectrum_, scatter_, headScatter_};
    }
    QString dataCsv() override;
    QString tableText(const QString& format) override;
    void prepareScreenshot() override;
    /// The worker is reading the store.
    bool busy() const { return worker_ != nullptr; }
    /// The table as shown (tests, the screenshots).
    const PropertyTable& table() const { return model_->table(); }
    /// The per-head scatter's title (tests).
    QString headScatterTitle() const { return headScatterTitle_->text(); }

  signals:
    /// The worker's result is in the table.
    void loaded();

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    void reload();
    void collectionArrived(PropertyCollection collection);
    void fillPickers();
    void rebuildTable();
    /// The selected cell changed: the map, the spectrum, the figure and the scatter's highlight.
    void showSelection();
    void drawMap();
    void drawSpectrum();
    void drawScatter();
    void drawHeadScatter();
    void showExtrapolation();
    void scaleExtrapolation();
    /// The run of the selected row; nullptr when none.
    const PropertyRun* selectedRun() const;
    int selectedRow() const;
    QString headName() const;

    QString dbPath_;
    bool haveStore_ = false;
    bool reloadAgain_ = false;
    bool preferAblation_ = false;  ///< --screenshots: select a run with a per-head ablation
    QThread* worker_ = nullptr;
    PropertyCollection data_;
    qint64 selectedRunId_ = -1;

    QComboBox* experiment_;
    QComboBox* layer_;
    QComboBox* head_;
    QComboBox* mapKind_;
    QComboBox* scatterProperty_;
    QComboBox* scatterScore_;
    QLabel* status_;
    QTableView* tableView_;
    PropertyTableModel* model_;
    HeatmapPlot* map_;
    QCustomPlot* spectrum_;
    QCPTextElement* spectrumTitle_;
    QCustomPlot* scatter_;
    QCPTextElement* scatterTitle_;
    QComboBox* headProperty_;
    QCustomPlot* headScatter_;
    QCPTextElement* headScatterTitle_;
    QLabel* extrapolation_;
    QPixmap extrapolationPixmap_;
};

}  // namespace app
