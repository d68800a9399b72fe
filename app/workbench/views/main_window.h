// The workbench's main window: one tab per view over the results store, a banner for errors
// (a missing, locked or newer database, a bad YAML, a checkpoint that will not load: a message,
// never a crash), File actions to open a database and export plots, data and tables, settings
// kept in QSettings (last database, window layout, smoothing), the --screenshots renderer, and
// the claims view's "Show the runs" routed to the curves, GLUE or correlation-maps tab.
#pragma once

#include <QLabel>
#include <QMainWindow>
#include <QTabWidget>
#include <vector>

#include "core/store_access.h"

namespace app {

class AnalysisService;
class WorkbenchView;
class BrowserView;
class CurvesView;
class LaunchView;
class GlueView;
class CorrelationMapsView;
class ClaimsView;
class PropertiesView;
class StudyBuilderView;
class FactorView;

class MainWindow : public QMainWindow {
    Q_OBJECT
  public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Opens `path` read-only; on failure the banner says why and the views are emptied.
    bool openDatabase(const QString& path);
    QString databasePath() const { return store_.path; }
    QString bannerText() const;
    /// File > Open model folder: shows the HF folder `dir` in the correlation maps (analysed
    /// by a child `tupe analyze DIR`); false, with the reason in the banner, when it is not one.
    bool openModelFolder(const QString& dir);

    /// Renders every tab to DIR/workbench-NAME.png (waiting up to `waitMs` for child analyses);
    /// with `modelFolder`, then that HF folder opened in the correlation maps beside the store's
    /// tupe-a and asked the fill-mask panel's sentence, as DIR/workbench-model-folder.png.
    /// Returns the files written.
    QStringList renderScreenshots(const QString& dir, int waitMs = 240000,
                                  const QString& modelFolder = {});

  protected:
    void closeEvent(QCloseEvent* event) override;

  private:
    void connectStudyViews();
    void showError(const QString& message);
    void clearError();
    void exportPlot();
    void exportData();
    void exportRawData();  ///< every stored point behind the plot, unsmoothed, undecimated
    void copyTable(const QString& format);
    WorkbenchView* currentView() const;
    void showClaimRuns(const QString& view, const QString& experiment, const QStringList& runs);

    StoreHandle store_;
    QLabel* banner_;
    QTabWidget* tabs_;
    AnalysisService* analysis_;
    BrowserView* browser_;
    CurvesView* curves_;
    LaunchView* launch_;
    GlueView* glue_;
    CorrelationMapsView* maps_;
    ClaimsView* claims_;
    PropertiesView* properties_;
    StudyBuilderView* builder_;
    FactorView* factors_;
    std::vector<WorkbenchView*> views_;
    QStringList screenshotNames_;  ///< per tab, for renderScreenshots
};

}  // namespace app
