// The paper's claims tested on the stored runs of one experiment (`tupe claims`, run as a
// child process by ClaimsService): a table of verdicts (supported green, contradicted red,
// inconclusive amber, not run grey) with the evidence, the selected claim's test and detail
// lines, and "Show the runs", which asks the window for the view behind the claim.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableWidget>

#include "core/claims_service.h"
#include "views/workbench_view.h"

namespace app {

class ClaimsView : public WorkbenchView {
    Q_OBJECT
  public:
    explicit ClaimsView(QWidget* parent = nullptr);
    void setStore(experiments::ResultStore* store, const QString& dbPath) override;
    QString dataCsv() override;
    QString tableText(const QString& format) override;
    void prepareScreenshot() override;
    /// A `tupe claims` child is running or queued.
    bool busy() const { return service_->busy(); }
    const ClaimsReport& report() const { return report_; }

  signals:
    /// The user wants the evidence of a claim: `view` is "curves", "glue" or "maps".
    void runsRequested(const QString& view, const QString& experiment, const QStringList& runs);

  protected:
    void showEvent(QShowEvent* event) override;

  private:
    void refresh();
    void showReport(const ClaimsReport& report);
    void showDetails();
    void requestRuns();

    experiments::ResultStore* store_ = nullptr;
    QString dbPath_;
    bool stale_ = true;
    ClaimsService* service_;
    ClaimsReport report_;
    QComboBox* experiment_;
    QPushButton* rerun_;
    QPushButton* showRuns_;
    QTableWidget* table_;
    QPlainTextEdit* details_;
    QLabel* status_;
};

}  // namespace app
