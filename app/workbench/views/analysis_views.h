// The attention views, fed by `tupe analyze` run as a child process on a checkpoint of a run
// (AnalysisService) for a typed sentence: correlation maps (pick run, checkpoint, layer, head
// and term; two runs side by side on the same input), [CLS] attention (layers x positions,
// per-head lines, TUPE's theta values; two variants side by side) and the head gallery (every
// head's positional correlation with its taxonomy label, the paper's Fig. 6).
#pragma once

#include <QComboBox>
#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>
#include <memory>
#include <vector>

#include "core/analysis_data.h"
#include "core/microscope_data.h"
#include "core/store_access.h"
#include "views/plot_util.h"
#include "views/workbench_view.h"

namespace app {

class AnalysisService;
class AblationPanel;
class FillMaskPanel;
class HeadTypesPanel;

/// A run (pretraining runs with checkpoints) and one of its checkpoints, read from the store by
/// listCheckpointRuns (core/store_access.h) when the store is set.
class CheckpointPicker : public QWidget {
    Q_OBJECT
  public:
    explicit CheckpointPicker(const QString& title, QWidget* parent = nullptr);
    /// Refills the runs from `store` (nullptr: none); a store error goes to errorRaised.
    void setStore(experiments::ResultStore* store, const QString& dbPath);
    QString checkpointPath() const;  ///< resolved; empty when none
    QString label() const;           ///< "tupe-a @ 600"
    qint64 runId() const;            ///< the selected run's id; 0 when none
    QString runName() const;         ///< the selected run's name
    /// Selects the run called `runName` (and its last checkpoint), else its first seed
    /// ("tupe-a" -> "tupe-a@seed1"); false when absent.
    bool select(const QString& runName);
    /// Offers an HF model folder (config.json + model.safetensors + vocab.txt) beside the
    /// store's runs as "folder: NAME", kept when the store changes; returns that name.
    QString addModelFolder(const QString& dir);

  signals:
    void changed();
    /// A message for the window's banner (the view forwards it as its errorRaised).
    void errorRaised(const QString& message);

  private:
    void fillCheckpoints();
    std::vector<CheckpointRun> runs_;     ///< what run_ lists, in its order
    std::vector<CheckpointRun> folders_;  ///< HF folders, listed after the store's runs
    QComboBox* run_;
    QComboBox* checkpoint_;
};

/// The default sentence of the analysis views.
QString defaultSentence();

/// Two checkpoints side by side on one typed sentence: the two pickers, the sentence bar, the
/// requests to the AnalysisService and the two results it returns. Subclasses lay out their
/// plots below header() and draw in dataArrived().
class SideBySideView : public WorkbenchView {
    Q_OBJECT
  public:
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    /// Both sides' main plots, left then right.
    QList<QCustomPlot*> exportablePlots() override;
    /// Puts runs[0] on the left and runs[1] on the right (by run name) and recomputes; a
    /// missing name leaves that side as it was. Returns how many were found.
    int showPair(const QStringList& runs);

  protected:
    SideBySideView(AnalysisService* service, QWidget* parent);
    /// Adds the picker row and the sentence bar to `layout`.
    void addHeader(QVBoxLayout* layout);
    /// Drops both results and asks the service for the checkpoints on the sentence.
    void recompute();
    /// bert-a on the left, tupe-a on the right, then recompute (for --screenshots).
    void showDefaultPair();
    /// The plot of `side` that carries the "computing" and failure messages.
    virtual HeatmapPlot* mainPlot(int side) = 0;
    /// Called when data_[0] or data_[1] changed.
    virtual void dataArrived() = 0;

    AnalysisService* service_;
    CheckpointPicker* pickers_[2];
    std::shared_ptr<const AnalysisData> data_[2];
    QLineEdit* sentence_;
    QPushButton* go_;
    QLabel* status_;
};

/// The two maps and, under each, the run's stored ablation (`tupe ablate`, analysis.ablation):
/// clicking a head there selects it in the maps.
class CorrelationMapsView : public SideBySideView {
    Q_OBJECT
  public:
    explicit CorrelationMapsView(AnalysisService* service, QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QCustomPlot* exportablePlot() override { return plots_[0]; }
    QString dataCsv() override;
    void prepareScreenshot() override;
    AblationPanel* ablationPanel(int side) const { return ablation_[side]; }
    FillMaskPanel* fillMaskPanel() const { return fillMask_; }
    /// Puts the HF folder `dir` on the left (both pickers offer it from now on) and analyses
    /// it with `tupe analyze DIR` beside the right side's run; the reason when `dir` is not an
    /// HF model folder, else empty.
    QString openModelFolder(const QString& dir);
    /// Shows (layer, head) in the maps (the layer when the term has per-layer maps).
    void selectHead(int layer, int head);

  private:
    /// Reads side `side`'s run's ablation.json from the store's artifacts.
    void loadAblation(int side);
    HeatmapPlot* mainPlot(int side) override { return plots_[side]; }
    void dataArrived() override;
    void fillChoices();
    void redraw();
    HeatmapPlot* plots_[2];
    AblationPanel* ablation_[2];
    FillMaskPanel* fillMask_;
    experiments::ResultStore* store_ = nullptr;
    QString dbPath_;
    RunMicroscope microscope_[2];
    QComboBox* term_;
    QComboBox* layer_;
    QComboBox* head_;
};

class ClsAttentionView : public SideBySideView {
    Q_OBJECT
  public:
    explicit ClsAttentionView(AnalysisService* service, QWidget* parent = nullptr);
    QCustomPlot* exportablePlot() override { return maps_[0]; }
    QString dataCsv() override;
    void prepareScreenshot() override;

  private:
    HeatmapPlot* mainPlot(int side) override { return maps_[side]; }
    void dataArrived() override;
    void redraw();
    HeatmapPlot* maps_[2];
    QCustomPlot* lines_[2];
    QLabel* theta_[2];
    QComboBox* direction_;
    QComboBox* layer_;
};

/// Every head's map, grouped by the head types the run's stored `tupe heads` scan gave its last
/// snapshot (analysis.heads), with the types and their counts over the snapshots above.
class HeadGalleryView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit HeadGalleryView(AnalysisService* service, QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QCustomPlot* exportablePlot() override;
    void prepareScreenshot() override;
    HeadTypesPanel* headTypesPanel() const { return types_; }

  private:
    void recompute();
    void redraw();
    /// Reads the picked run's heads.json from the store's artifacts.
    void loadHeadTypes();
    AnalysisService* service_;
    CheckpointPicker* picker_;
    QComboBox* kind_;
    QLineEdit* sentence_;
    QLabel* status_;
    QGridLayout* grid_;
    QWidget* gridHost_;
    HeadTypesPanel* types_;
    std::shared_ptr<const AnalysisData> data_;
    experiments::ResultStore* store_ = nullptr;
    QString dbPath_;
    RunMicroscope microscope_;
};

}  // namespace app
