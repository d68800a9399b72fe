// The study builder: an ablation study built in a form (experiments/study_design.h) instead
// of typed as YAML. A base preset and size, the factors (any model field, the scheme fields with
// the scheme table's values, train.lr, ...) with their levels, the seeds, the full product or
// chosen cells, the tasks and the analysis blocks, every other key from the field tables
// (views/field_form.h). Before anything runs it shows the plan: the variants named by their
// levels, the jobs, the wall time estimated from the cost model at this machine's `tupe bench`
// figures, and the YAML it writes, which the Launch & queue editor opens and queues. Reading a
// file back says what the form cannot edit.
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <vector>

#include "core/study_plan.h"
#include "experiments/study_design.h"
#include "views/workbench_view.h"

namespace app {

class FieldForm;

/// One factor row of the form: its key, its levels ("true, false") and a remove button.
class FactorRow : public QWidget {
    Q_OBJECT
  public:
    explicit FactorRow(QWidget* parent = nullptr);
    QComboBox* key() const { return key_; }
    QLineEdit* levels() const { return levels_; }
    QPushButton* remove() const { return remove_; }
    /// The levels as typed, trimmed, empty ones dropped.
    QStringList levelList() const;
    /// Shows factor `key` with `levels` without announcing an edit.
    void setKey(const QString& key, const QStringList& levels);

  signals:
    void edited();
    void removeRequested(FactorRow* row);

  private:
    void describe();
    QComboBox* key_;
    QLineEdit* levels_;
    QPushButton* remove_;
};

class StudyBuilderView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit StudyBuilderView(QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QString tableText(const QString& format) override;
    void prepareScreenshot() override;

    /// The design the form holds now.
    const experiments::StudyDesign& design() const { return design_; }
    /// Fills the form with `design` (the file `path`, "" for a new one).
    void setDesign(const experiments::StudyDesign& design, const QString& path = {});
    /// Reads `text` (the file `path`) into the form; its notes say what it could not edit.
    /// Returns false (and says why in the banner) for YAML the form cannot read at all.
    bool loadText(const QString& path, const QString& text);
    /// The YAML the form writes now.
    QString yaml() const;
    /// The plan of the design (after the form's last change is applied).
    const StudyPlanInfo& plan();
    /// Writes the YAML to `path`; false (banner) on failure.
    bool saveTo(const QString& path);
    /// Uses `json` (tupe bench --format json) as this machine's figures, noted as `note`.
    void setBenchFigures(const QString& json, const QString& note);

    QLineEdit* nameEdit() const { return name_; }
    QComboBox* presetBox() const { return preset_; }
    QPushButton* addFactorButton() const { return addFactor_; }
    std::vector<FactorRow*> factorRows() const { return rows_; }
    QLineEdit* seedsEdit() const { return seeds_; }
    QRadioButton* chosenCellsButton() const { return chosen_; }
    QListWidget* taskList() const { return tasks_; }
    QCheckBox* analysisBox() const { return analysis_; }
    FieldForm* studyForm() const { return studyForm_; }
    FieldForm* baseForm() const { return baseForm_; }
    QTableWidget* planTable() const { return planTable_; }
    QLabel* summaryLabel() const { return summary_; }
    QLabel* notesLabel() const { return notes_; }
    QPlainTextEdit* yamlPreview() const { return preview_; }
    QPushButton* queueButton() const { return queue_; }
    QPushButton* editorButton() const { return toEditor_; }

  signals:
    /// Open `text` as the file `path` in the Launch & queue editor.
    void openInEditor(const QString& path, const QString& text);
    /// Put the saved file `path` in the Launch & queue view's queue.
    void queueRequested(const QString& path);
    /// The Launch & queue editor's text is wanted (the window calls loadText with it).
    void editorTextRequested();

  private:
    QWidget* buildFormPane();
    QWidget* buildStudyBox();
    QWidget* buildFactorBox();
    QWidget* buildSettingsBoxes(QVBoxLayout* into);
    QWidget* buildPlanPane();
    void connectButtons(QPushButton* open, QPushButton* fromEditor, QPushButton* save,
                        QPushButton* measure);
    FactorRow* appendFactorRow();
    void removeFactorRow(FactorRow* row);
    void scheduleRefresh();
    void readForm();
    void refresh();
    void fillPlanTable();
    void checkLevels();
    void measureMachine();
    void saveAs();
    void queueStudy();

    experiments::StudyDesign design_;
    StudyPlanInfo plan_;
    QString path_, workDir_, benchJson_, benchNote_;
    bool loading_ = false;
    QTimer refreshTimer_;
    BenchService* bench_;

    QLineEdit* name_;
    QPlainTextEdit* comment_;
    QComboBox* preset_;
    QComboBox* size_;
    QVBoxLayout* factorLayout_ = nullptr;
    std::vector<FactorRow*> rows_;
    QPushButton* addFactor_;
    QLineEdit* seeds_;
    QRadioButton* full_;
    QRadioButton* chosen_;
    QListWidget* tasks_;
    QCheckBox* analysis_;
    QCheckBox* extrapolation_;
    FieldForm* baseForm_ = nullptr;
    FieldForm* studyForm_ = nullptr;
    QTableWidget* planTable_;
    QLabel* summary_;
    QLabel* notes_;
    QLabel* fileLabel_;
    QPlainTextEdit* preview_;
    QPushButton* toEditor_;
    QPushButton* queue_;
    QPushButton* measure_ = nullptr;
};

}  // namespace app
