// The paper's claims as `tupe claims --db FILE --experiment NAME --format json` reports them
// (experiments/claims.h: supported / contradicted / inconclusive / not run, with the numbers
// and the test behind each), parsed from the CLI's JSON; ClaimsService runs that command as a
// child process (the claims count model parameters with torch, which no Qt file may include).
#pragma once

#include <QByteArray>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <vector>

namespace app {

enum class VerdictKind {
    kSupported,
    kContradicted,
    kInconclusive,
    kNotRun,
    kPartlyTested,
    kUnknown
};
/// "supported", "contradicted", "inconclusive", "not run", "partly tested"; anything else is
/// kUnknown.
VerdictKind verdictKind(const QString& verdict);

/// One claim as the CLI prints it.
struct ClaimItem {
    QString id;  ///< "1", "3a", ...
    QString title;
    QString verdict;   ///< as printed; see verdictKind()
    QString evidence;  ///< the numbers, one line
    QString test;      ///< the test and its decision rule
    QStringList details;
    QString view;      ///< "curves", "glue", "maps" or empty
    QStringList runs;  ///< pretrain run names the claim reads
    /// With an lr grid: whether the verdict holds at every lr ("supported at every lr tried",
    /// "depends on the lr: ..."), and the verdict at each lr as "LR: verdict". Empty otherwise.
    QString lrSummary;
    QStringList byLr;
};

struct ClaimsReport {
    QString experiment;
    double alpha = 0.05;
    std::vector<ClaimItem> claims;
};

/// Parses `tupe claims --format json`. Throws std::runtime_error with a one-line reason when
/// the text is not JSON or lacks "claims"; missing optional fields are left empty.
ClaimsReport parseClaimsJson(const QByteArray& json);

/// Two runs to put side by side for a maps claim: the first run, and the first after it of
/// another variant group ("bert-a@seed1" vs "tupe-a@seed1"); fewer when there are fewer.
QStringList sideBySidePair(const QStringList& runs);

/// Runs `tupe claims` one request at a time; a newer request replaces a queued one.
class ClaimsService : public QObject {
    Q_OBJECT
  public:
    explicit ClaimsService(QObject* parent = nullptr);
    ~ClaimsService() override;

    /// Starts `tupe claims --db dbPath --experiment experiment --format json` in workingDir.
    void request(const QString& dbPath, const QString& experiment, const QString& workingDir = {});
    bool busy() const { return process_->state() != QProcess::NotRunning || pending_; }
    /// The CLI to run; empty: findTupeCli() (tests point it elsewhere).
    void setProgram(const QString& program) { program_ = program; }

  signals:
    void ready(const app::ClaimsReport& report);
    void failed(const QString& message);

  private:
    void startPending();
    QProcess* process_;
    QString program_;
    bool pending_ = false;
    QString dbPath_, experiment_, workingDir_;
};

}  // namespace app
