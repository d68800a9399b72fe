// GLUE results in the paper's Table 1 layout, built by experiments::load_report (the TUPE
// reporting rule: median over seeds per lr, then the best lr) with 95% bootstrap intervals and
// chance levels: median [lo, hi] or mean +- std (n), " ~" and grey where the interval reaches
// chance, a chance row, the best per column in bold, deltas against the first row coloured,
// the paper's rows as a toggle, and a bar chart of one task with error bars and chance lines.
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QRadioButton>
#include <QTableWidget>

#include "experiments/report.h"
#include "views/plot_util.h"
#include "views/workbench_view.h"

namespace app {

class GlueView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit GlueView(QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QCustomPlot* exportablePlot() override { return bars_; }
    QString dataCsv() override;
    QString tableText(const QString& format) override;
    void prepareScreenshot() override;
    /// Shows experiment `name` (from the claims view); false when the store has none.
    bool showExperiment(const QString& name);

  private:
    void rebuild();
    void drawBars();

    experiments::ResultStore* store_ = nullptr;
    QComboBox* experiment_;
    QRadioButton* median_;
    QRadioButton* meanStd_;
    QCheckBox* paper_;
    QComboBox* task_;
    QTableWidget* table_;
    QCustomPlot* bars_;
    QLabel* rule_;
    experiments::Report report_;
};

}  // namespace app
