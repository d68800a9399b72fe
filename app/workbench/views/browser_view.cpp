// The experiments browser (see browser_view.h).
#include "views/browser_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>
#include <set>

#include "experiments/result_store.h"

namespace app {

BrowserView::BrowserView(QWidget* parent)
    : WorkbenchView(parent),
      model_(new RunTreeModel(this)),
      proxy_(new RunFilterProxy(this)),
      tree_(new QTreeView),
      search_(new QLineEdit),
      status_(new QComboBox),
      metric_(new QComboBox),
      details_(new QPlainTextEdit) {
    proxy_->setSourceModel(model_);
    tree_->setModel(proxy_);
    tree_->setSortingEnabled(false);
    tree_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    tree_->setAlternatingRowColors(true);
    tree_->setUniformRowHeights(true);
    search_->setPlaceholderText("filter: run, variant, task, status...");
    search_->setClearButtonEnabled(true);
    status_->addItems({"any status", "pending", "running", "finished", "failed", "stopped"});
    metric_->setMinimumContentsLength(18);
    details_->setReadOnly(true);
    details_->setFont(QFont("monospace", 9));
    details_->setPlaceholderText(
        "Select an experiment or a run to see its YAML or resolved config.");

    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("Search"));
    bar->addWidget(search_, 2);
    bar->addWidget(status_);
    bar->addWidget(new QLabel("Metric"));
    bar->addWidget(metric_, 1);
    auto* refresh = new QPushButton("Refresh");
    bar->addWidget(refresh);

    auto* plot = new QPushButton("Plot selected runs");
    auto* open = new QPushButton("Open YAML in launcher");
    auto* right = new QWidget;
    auto* rl = new QVBoxLayout(right);
    rl->setContentsMargins(0, 0, 0, 0);
    rl->addWidget(details_);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(plot);
    buttons->addWidget(open);
    rl->addLayout(buttons);

    auto* split = new QSplitter;
    split->addWidget(tree_);
    split->addWidget(right);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    split->setSizes({1050, 420});
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    connect(search_, &QLineEdit::textChanged, proxy_, &RunFilterProxy::setSearch);
    connect(search_, &QLineEdit::textChanged, tree_, [this] { tree_->expandToDepth(1); });
    connect(status_, &QComboBox::currentIndexChanged, this, [this](int i) {
        proxy_->setStatus(i == 0 ? QString() : status_->itemText(i));
        tree_->expandToDepth(1);
    });
    connect(metric_, &QComboBox::currentTextChanged, this, [this] { reload(); });
    connect(refresh, &QPushButton::clicked, this, [this] { reload(); });
    connect(tree_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &BrowserView::showSelection);
    connect(plot, &QPushButton::clicked, this, [this] {
        const auto ids = selectedRuns();
        if (!ids.isEmpty()) emit runsChosen(ids);
    });
    connect(open, &QPushButton::clicked, this, [this] {
        if (!yamlText_.isEmpty()) emit yamlOpened(yamlPath_, yamlText_);
    });
}

void BrowserView::setStore(experiments::ResultStore* store, const QString& dbPath) {
    store_ = store;
    dbPath_ = dbPath;
    const QString current = metric_->currentText();
    QSignalBlocker block(metric_);
    metric_->clear();
    if (store_) {
        try {
            std::set<std::string> keys;
            for (const auto& e : store_->list_experiments())
                for (const auto& r : store_->list_runs(e.id))
                    for (const auto& k : store_->metric_keys(r.id)) keys.insert(k);
            for (const auto& k : keys) metric_->addItem(QString::fromStdString(k));
        } catch (const std::exception& e) {
            emit errorRaised(QString::fromUtf8(e.what()));
        }
    }
    const int keep = metric_->findText(current.isEmpty() ? "validation/loss" : current);
    metric_->setCurrentIndex(keep >= 0 ? keep : 0);
    reload();
}

void BrowserView::reload() {
    // Keep the expansion of the tree across reloads (the live refresh runs every few seconds).
    std::vector<RunRow> rows;
    if (store_) {
        try {
            rows = summarizeRuns(*store_, metric_->currentText().toStdString());
        } catch (const std::exception& e) {
            emit errorRaised(QString::fromUtf8(e.what()));
        }
    }
    model_->setRuns(rows, metric_->currentText());
    tree_->expandToDepth(0);
    tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
    tree_->header()->setStretchLastSection(false);
    emit statusMessage(QString("%1 runs in %2").arg(rows.size()).arg(dbPath_));
}

QList<qint64> BrowserView::selectedRuns() const {
    QList<qint64> ids;
    std::function<void(const QModelIndex&)> collect = [&](const QModelIndex& idx) {
        if (idx.data(kNodeKindRole).toString() == "run") {
            const qint64 id = idx.data(kRunIdRole).toLongLong();
            if (!ids.contains(id)) ids << id;
            return;
        }
        for (int r = 0; r < proxy_->rowCount(idx); ++r) collect(proxy_->index(r, 0, idx));
    };
    for (const QModelIndex& idx : tree_->selectionModel()->selectedRows(0)) collect(idx);
    return ids;
}

void BrowserView::showSelection() {
    const auto rows = tree_->selectionModel()->selectedRows(0);
    if (rows.isEmpty() || !store_) return;
    const QModelIndex idx = rows.front();
    try {
        const qint64 expId = idx.data(kExperimentIdRole).toLongLong();
        for (const auto& e : store_->list_experiments())
            if (e.id == expId) {
                yamlPath_ = QString::fromStdString(e.yaml_path);
                yamlText_ = QString::fromStdString(e.yaml_text);
            }
        if (idx.data(kNodeKindRole).toString() == "run") {
            const auto run = store_->get_run(idx.data(kRunIdRole).toLongLong());
            if (!run) return;
            QString text =
                QString("# run %1 (%2, seed %3): %4, step %5\n")
                    .arg(QString::fromStdString(run->name), QString::fromStdString(run->kind))
                    .arg(run->seed)
                    .arg(QString::fromStdString(run->status))
                    .arg(run->step);
            text +=
                QString("# started %1, ended %2, host %3, torch %4, commit %5\n")
                    .arg(QString::fromStdString(run->start_time),
                         QString::fromStdString(run->end_time), QString::fromStdString(run->host),
                         QString::fromStdString(run->torch_version),
                         QString::fromStdString(run->git_commit));
            if (!run->blas.empty()) text += "# blas " + QString::fromStdString(run->blas) + "\n";
            if (!run->error_message.empty())
                text += "# error: " + QString::fromStdString(run->error_message) + "\n";
            const auto ckpts = store_->checkpoints(run->id);
            for (const auto& c : ckpts)
                text += QString("# checkpoint step %1: %2\n")
                            .arg(c.step)
                            .arg(QString::fromStdString(c.path));
            text += "\n" + QString::fromStdString(run->config_text);
            details_->setPlainText(text);
        } else {
            details_->setPlainText("# " + yamlPath_ + "\n" + yamlText_);
        }
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
}

QString BrowserView::tableText(const QString& format) {
    const bool latex = format == "latex";
    QStringList headers;
    for (int c = 0; c < model_->columnCount(); ++c)
        headers << model_->headerData(c, Qt::Horizontal).toString();
    QString out = latex ? "\\begin{tabular}{" + QString("l").repeated(headers.size()) + "}\n" +
                              headers.join(" & ") + " \\\\\n\\hline\n"
                        : "| experiment | variant | " + headers.join(" | ") + " |\n|" +
                              QString("---|").repeated(headers.size() + 2) + "\n";
    std::function<void(const QModelIndex&, QStringList)> walk = [&](const QModelIndex& p,
                                                                    QStringList path) {
        for (int r = 0; r < proxy_->rowCount(p); ++r) {
            const QModelIndex idx = proxy_->index(r, 0, p);
            if (idx.data(kNodeKindRole).toString() != "run") {
                walk(idx, path + QStringList{idx.data().toString()});
                continue;
            }
            QStringList cells;
            for (int c = 0; c < proxy_->columnCount(p); ++c)
                cells << proxy_->index(r, c, p).data().toString();
            if (latex) {
                for (QString& cell : cells) cell.replace("_", "\\_");
                out += cells.join(" & ") + " \\\\\n";
            } else {
                out += "| " + path.join(" | ") + " | " + cells.join(" | ") + " |\n";
            }
        }
    };
    walk(QModelIndex(), {});
    if (latex) out += "\\end{tabular}\n";
    return out;
}

void BrowserView::prepareScreenshot() {
    const int i = metric_->findText("validation/loss");
    if (i >= 0) metric_->setCurrentIndex(i);
    tree_->expandToDepth(1);
    // Select the first pretrain run so the config panel shows something real.
    const QModelIndex exp = proxy_->index(0, 0);
    const QModelIndex variant = proxy_->index(0, 0, exp);
    const QModelIndex run = proxy_->index(0, 0, variant);
    if (run.isValid())
        tree_->selectionModel()->select(
            run, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

}  // namespace app
