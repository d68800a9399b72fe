// The browser's tree model and filter (see run_tree_model.h).
#include "core/run_tree_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/curve_math.h"
#include "experiments/result_store.h"

namespace app {

std::vector<RunRow> summarizeRuns(experiments::ResultStore& store, const std::string& metricKey) {
    std::vector<RunRow> out;
    const bool lower = lowerIsBetter(metricKey);
    for (const auto& e : store.list_experiments()) {
        const auto runs = store.list_runs(e.id);
        std::map<std::int64_t, std::string> variantOf;
        for (const auto& r : runs) variantOf[r.id] = r.variant;
        for (const auto& r : runs) {
            RunRow row;
            row.id = r.id;
            row.experimentId = e.id;
            row.experiment = QString::fromStdString(e.name);
            std::string variant = r.variant;
            if (variant.empty() && r.parent_run_id) variant = variantOf[*r.parent_run_id];
            row.variant = QString::fromStdString(variant.empty() ? "(none)" : variant);
            row.name = QString::fromStdString(r.name);
            row.kind = QString::fromStdString(r.kind);
            row.status = QString::fromStdString(r.status);
            row.step = r.step;
            row.seed = r.seed;
            if (!metricKey.empty()) {
                const auto points = store.metrics(r.id, metricKey);
                double mn = NAN, mx = NAN;
                for (const auto& p : points) {
                    if (!std::isfinite(p.value)) continue;
                    mn = std::isnan(mn) ? p.value : std::min(mn, p.value);
                    mx = std::isnan(mx) ? p.value : std::max(mx, p.value);
                }
                row.points = static_cast<int>(points.size());
                if (!points.empty()) {
                    row.last = points.back().value;
                    row.min = mn;
                    row.best = lower ? mn : mx;
                }
            }
            out.push_back(std::move(row));
        }
    }
    return out;
}

namespace {

QStandardItem* textItem(const QString& text) {
    auto* item = new QStandardItem(text);
    item->setEditable(false);
    return item;
}

QStandardItem* numberItem(double v, bool present) {
    auto* item = textItem(present ? QString::number(v, 'g', 5) : QString());
    item->setData(present ? QVariant(v) : QVariant(), Qt::UserRole);
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

QList<QStandardItem*> groupRow(const QString& name, const QString& kind, std::int64_t expId) {
    QList<QStandardItem*> items;
    items << textItem(name);
    for (int c = 1; c < kColumnCount; ++c) items << textItem(QString());
    items[0]->setData(kind, kNodeKindRole);
    items[0]->setData(QVariant::fromValue<qlonglong>(expId), kExperimentIdRole);
    return items;
}

}  // namespace

RunTreeModel::RunTreeModel(QObject* parent) : QStandardItemModel(parent) {
    setColumnCount(kColumnCount);
}

void RunTreeModel::setRuns(const std::vector<RunRow>& rows, const QString& metricKey) {
    clear();
    rows_ = rows;
    setColumnCount(kColumnCount);
    setHorizontalHeaderLabels({"run", "kind", "status", "steps", "last " + metricKey,
                               "min " + metricKey, "best " + metricKey, "seed"});
    std::map<std::int64_t, QStandardItem*> experiments;
    std::map<std::pair<std::int64_t, QString>, QStandardItem*> variants;
    for (const RunRow& r : rows_) {
        QStandardItem*& exp = experiments[r.experimentId];
        if (!exp) {
            auto items = groupRow(r.experiment, "experiment", r.experimentId);
            appendRow(items);
            exp = items[0];
        }
        QStandardItem*& var = variants[{r.experimentId, r.variant}];
        if (!var) {
            auto items = groupRow(r.variant, "variant", r.experimentId);
            exp->appendRow(items);
            var = items[0];
        }
        QList<QStandardItem*> items;
        items << textItem(r.name) << textItem(r.kind) << textItem(r.status)
              << numberItem(static_cast<double>(r.step), true) << numberItem(r.last, r.points > 0)
              << numberItem(r.min, r.points > 0) << numberItem(r.best, r.points > 0)
              << numberItem(static_cast<double>(r.seed), true);
        items[0]->setData("run", kNodeKindRole);
        items[0]->setData(QVariant::fromValue<qlonglong>(r.id), kRunIdRole);
        items[0]->setData(QVariant::fromValue<qlonglong>(r.experimentId), kExperimentIdRole);
        if (r.status == "failed") items[kColStatus]->setForeground(QColor(190, 30, 30));
        if (r.status == "running") items[kColStatus]->setForeground(QColor(20, 110, 200));
        var->appendRow(items);
    }
    // A variant row shows how many runs it holds and how many finished.
    for (auto& [key, item] : variants) {
        int finished = 0;
        for (int i = 0; i < item->rowCount(); ++i)
            finished += item->child(i, kColStatus)->text() == "finished";
        QStandardItem* parent = item->parent() ? item->parent() : invisibleRootItem();
        parent->child(item->row(), kColStatus)
            ->setText(QString("%1/%2 finished").arg(finished).arg(item->rowCount()));
    }
}

const RunRow* RunTreeModel::run(std::int64_t id) const {
    for (const RunRow& r : rows_)
        if (r.id == id) return &r;
    return nullptr;
}

RunFilterProxy::RunFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
    setRecursiveFilteringEnabled(true);
    setSortRole(Qt::UserRole);
}

void RunFilterProxy::setSearch(const QString& text) {
    search_ = text.trimmed();
    invalidateFilter();
}

void RunFilterProxy::setStatus(const QString& status) {
    status_ = status;
    invalidateFilter();
}

bool RunFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
    const QModelIndex first = sourceModel()->index(sourceRow, 0, sourceParent);
    if (first.data(kNodeKindRole).toString() != "run")
        return search_.isEmpty() && status_.isEmpty();
    if (!status_.isEmpty() &&
        sourceModel()->index(sourceRow, kColStatus, sourceParent).data().toString() != status_)
        return false;
    if (search_.isEmpty()) return true;
    for (int c = 0; c < sourceModel()->columnCount(sourceParent); ++c)
        if (sourceModel()
                ->index(sourceRow, c, sourceParent)
                .data()
                .toString()
                .contains(search_, Qt::CaseInsensitive))
            return true;
    // The variant and experiment names count too: "tupe-a" finds every tupe-a run.
    for (QModelIndex p = sourceParent; p.isValid(); p = p.parent())
        if (p.data().toString().contains(search_, Qt::CaseInsensitive)) return true;
    return false;
}

bool RunFilterProxy::lessThan(const QModelIndex& left, const QModelIndex& right) const {
    const QVariant l = left.data(Qt::UserRole), r = right.data(Qt::UserRole);
    if (l.isValid() && r.isValid()) return l.toDouble() < r.toDouble();
    return left.data().toString() < right.data().toString();
}

}  // namespace app
