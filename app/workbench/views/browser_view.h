// The experiments browser: experiments -> variants -> runs from the store with status, steps
// and last / min / best of a chosen metric; text and status filters; the YAML or resolved
// config behind the selection; buttons that send runs to the curves view and an experiment's
// YAML to the launcher.
#pragma once

#include <QComboBox>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QTreeView>
#include <cstdint>

#include "core/run_tree_model.h"
#include "views/workbench_view.h"

namespace app {

class BrowserView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit BrowserView(QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QString tableText(const QString& format) override;
    void prepareScreenshot() override;
    void reload();

  signals:
    void runsChosen(const QList<qint64>& runIds);
    void yamlOpened(const QString& path, const QString& text);

  private:
    void showSelection();
    QList<qint64> selectedRuns() const;

    experiments::ResultStore* store_ = nullptr;
    QString dbPath_;
    RunTreeModel* model_;
    RunFilterProxy* proxy_;
    QTreeView* tree_;
    QLineEdit* search_;
    QComboBox* status_;
    QComboBox* metric_;
    QPlainTextEdit* details_;
    QString yamlPath_, yamlText_;
};

}  // namespace app
