// The interface every tab of the main window implements: it is told when the store changes,
// and offers its plot, its data and its table to the window's export actions.
#pragma once

#include <QList>
#include <QString>
#include <QWidget>

class QComboBox;
class QCustomPlot;

namespace experiments {
class ResultStore;
}

namespace app {

class WorkbenchView : public QWidget {
    Q_OBJECT
  public:
    using QWidget::QWidget;
    /// The open store (nullptr when none) and its path; called on open and reload.
    virtual void setStore(experiments::ResultStore* store, const QString& dbPath) = 0;
    /// The plot that File > Export plot saves; nullptr when the view has none.
    virtual QCustomPlot* exportablePlot() { return nullptr; }
    /// Every plot File > Export plot saves, left to right (side-by-side views: both sides).
    virtual QList<QCustomPlot*> exportablePlots() {
        QCustomPlot* p = exportablePlot();
        return p ? QList<QCustomPlot*>{p} : QList<QCustomPlot*>{};
    }
    /// The view's data as CSV for File > Export data: what the plot draws (smoothed, decimated).
    virtual QString dataCsv();
    /// Every stored point behind the plot, unsmoothed and undecimated, as CSV for File > Export
    /// raw data; empty when the view draws no stored series.
    virtual QString rawDataCsv() { return {}; }
    /// The view's table as "markdown" or "latex"; empty when it has none.
    virtual QString tableText(const QString& format) { return {}; }
    /// Picks defaults that show real data (screenshots); returns false when it cannot.
    virtual void prepareScreenshot() {}

  protected:
    /// Refills an experiment picker from the store (names, ids as item data), with its
    /// signals blocked; a store error goes to the banner. Returns the name that was selected.
    QString fillExperimentPicker(QComboBox* picker, experiments::ResultStore* store);

  signals:
    /// A message for the window's banner (errors never crash the app).
    void errorRaised(const QString& message);
    void statusMessage(const QString& message);
};

}  // namespace app
