// The experiments browser's model: experiments -> variants -> runs, with each run's status,
// steps and the last / minimum / best value of one chosen metric, read from the results store;
// and a proxy that filters by text (any column) and status while keeping the tree.
#pragma once

#include <QSortFilterProxyModel>
#include <QStandardItemModel>
#include <cstdint>
#include <string>
#include <vector>

namespace experiments {
class ResultStore;
}

namespace app {

/// One run's row, as plain data.
struct RunRow {
    std::int64_t id = 0, experimentId = 0;
    QString experiment, variant, name, kind, status;
    std::int64_t step = 0, seed = 0;
    int points = 0;  ///< points of the chosen metric; 0 = the run has none
    double last = 0, min = 0, best = 0;
};

/// Every run of every experiment with the metric's summary (best = min for loss-like keys,
/// max otherwise; see lowerIsBetter). Throws experiments::StoreError from the store.
std::vector<RunRow> summarizeRuns(experiments::ResultStore& store, const std::string& metricKey);

/// Item roles and columns of RunTreeModel.
enum RunTreeRole { kRunIdRole = Qt::UserRole + 1, kExperimentIdRole, kNodeKindRole };
enum RunTreeColumn {
    kColName,
    kColKind,
    kColStatus,
    kColSteps,
    kColLast,
    kColMin,
    kColBest,
    kColSeed,
    kColumnCount
};

/// Experiments -> variants -> runs. Node kinds (kNodeKindRole): "experiment", "variant", "run".
/// Finetune runs without a variant sit under their parent's variant ("(none)" otherwise).
class RunTreeModel : public QStandardItemModel {
    Q_OBJECT
  public:
    explicit RunTreeModel(QObject* parent = nullptr);
    void setRuns(const std::vector<RunRow>& rows, const QString& metricKey);
    /// The row of run `id` (nullptr when absent).
    const RunRow* run(std::int64_t id) const;

  private:
    std::vector<RunRow> rows_;
};

/// Keeps rows whose text (any column) contains the search text and whose status matches; a
/// parent stays when a child matches (recursive filtering).
class RunFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT
  public:
    explicit RunFilterProxy(QObject* parent = nullptr);
    void setSearch(const QString& text);
    void setStatus(const QString& status);  ///< "" = any

  protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;
    bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

  private:
    QString search_, status_;
};

}  // namespace app
