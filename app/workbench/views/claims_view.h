// The paper's claims tested on the stored runs of one experiment (`tupe claims`, run as a
// child process by ClaimsService): a table of verdicts (supported green, contradicted red,
// inconclusive amber, not run grey) with the evidence, the selected claim's test and detail
// lines, and "Show the runs", which asks the window for the view behind the claim. Under them,
// the experiment's rankings (`tupe rank`, computed here from the store): every variant on
// validation loss and on the task average, every pair tested and Holm-corrected, with group
// letters for the variants that cannot be told apart.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableWidget>

#include "core/claims_service.h"
#include "experiments/ranking.h"
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
    /// The rankings of the experiment shown (empty without finished runs).
    const std::vector<experiments::Ranking>& rankings() const { return rankings_; }
    /// The ranking table's rows as "rank variant value CI groups" lines (tests, clipboard).
    QStringList rankingRows() const;

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
    void computeRankings();
    void showRanking();

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
    std::vector<experiments::Ranking> rankings_;
    QComboBox* rankingOn_;
    QTableWidget* ranking_;
    QLabel* rankingNote_;
};

}  // namespace app
