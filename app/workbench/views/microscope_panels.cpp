// The ablation and head-type panels (see microscope_panels.h).
#include "views/microscope_panels.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>

#include "plotting/palette.h"

namespace app {

namespace {

const char* const kPanelScoreKeys[] = {"cls_sink", "sep_sink",  "previous", "next",
                                       "self",     "duplicate", "local",    "entropy"};

QString panelNumber(double v, int decimals = 3) {
    return std::isfinite(v) ? QString::number(v, 'f', decimals) : QString("\u2013");
}

QTableWidgetItem* panelItem(const QString& text, bool right = false) {
    auto* item = new QTableWidgetItem(text);
    item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
    if (right) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

}  // namespace

QColor headTypeColor(const QString& type) {
    static const QColor colours[] = {
        QColor(148, 103, 189), QColor(140, 86, 75), QColor(31, 119, 180), QColor(214, 39, 40),
        QColor(227, 119, 194), QColor(44, 160, 44), QColor(255, 127, 14), QColor(127, 127, 127)};
    const int i = int(headTypeOrder().indexOf(type));
    return i >= 0 && i < 8 ? colours[i] : QColor(23, 190, 207);
}

// ---- ablation -------------------------------------------------------------------------------

AblationPanel::AblationPanel(QWidget* parent)
    : QWidget(parent), map_(new HeatmapPlot), table_(new QTableWidget), summary_(new QLabel) {
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    table_->setColumnCount(5);
    table_->setHorizontalHeaderLabels({"head", "\u0394 loss [95%]", "share", "use", "loss"});
    table_->verticalHeader()->setVisible(false);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->setToolTip(
        "tupe ablate: the change in masked-token loss when the head's positional term is "
        "removed (95% bootstrap interval over windows); share: its positional share; use: "
        "'used' when the interval lies above 0");
    map_->setMinimumSize(180, 150);
    map_->clearWithMessage("no ablation");
    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(map_);
    split->addWidget(table_);
    split->setSizes({230, 400});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(summary_);
    layout->addWidget(split, 1);
    connect(map_, &HeatmapPlot::cellClicked, this, [this](int row, int col) {
        markHead(row, col);
        emit headClicked(row, col);
    });
    connect(table_, &QTableWidget::cellClicked, this, [this](int row, int) {
        const QVariant layer = table_->item(row, 0)->data(Qt::UserRole);
        const QVariant head = table_->item(row, 0)->data(Qt::UserRole + 1);
        if (layer.toInt() >= 0 && head.toInt() >= 0) emit headClicked(layer.toInt(), head.toInt());
    });
}

void AblationPanel::setAblation(const AblationResult* result, const QString& label,
                                const QString& message) {
    table_->setRowCount(0);
    if (!result) {
        // One readable line instead of an empty plot whose hint the plot's width clips.
        map_->clearWithMessage({});
        map_->setVisible(false);
        table_->setVisible(false);
        summary_->setText(message.isEmpty() ? QString("No run chosen.") : message);
        return;
    }
    table_->setVisible(true);
    const AblationResult& r = *result;
    const QString step = QFileInfo(r.checkpoint).fileName();
    summary_->setText(
        QString("<b>%1</b>: tupe ablate --mode %2 of %3, %4 masked tokens in %5 windows; "
                "loss %6 with every position; share ~ use: Spearman \u03c1 = %7; %8")
            .arg(label, r.mode, step)
            .arg(r.masked)
            .arg(r.windows)
            .arg(panelNumber(r.loss), panelNumber(r.shareUseSpearman, 2), r.scope));
    // An input table (BERT-A) has only the whole-model row: no map to draw.
    map_->setVisible(!r.heads.empty());
    if (!r.heads.empty()) map_->setData(ablationHeatmap(r, label + ": \u0394 loss per head"));
    // The map's colour scale for the table: diverging around 0 over the heads' largest
    // |change| (the whole model, clamped, is the darkest); the other rows' without heads.
    double m = 0;
    for (const auto* rows : {&r.heads, &r.other}) {
        for (const auto& row : *rows)
            if (std::isfinite(row.delta)) m = std::max(m, std::fabs(row.delta));
        if (m > 0) break;
    }
    ColumnScale scale;
    scale.lo = -m, scale.hi = m, scale.diverging = true, scale.empty = m <= 0;
    auto addRow = [&](const AblationRow& row) {
        const int i = table_->rowCount();
        table_->insertRow(i);
        auto* name = panelItem(row.name());
        name->setData(Qt::UserRole, row.layer);
        name->setData(Qt::UserRole + 1, row.head);
        table_->setItem(i, 0, name);
        auto* delta = panelItem(row.deltaText(), true);
        const QColor bg = scaleColor(scale, row.delta);
        delta->setBackground(bg);
        delta->setForeground(bg.lightnessF() < 0.5 ? Qt::white : Qt::black);
        table_->setItem(i, 1, delta);
        table_->setItem(i, 2, panelItem(panelNumber(row.share), true));
        table_->setItem(i, 3, panelItem(row.verdict()));
        table_->setItem(i, 4, panelItem(panelNumber(row.loss), true));
        if (!row.perHead()) {
            QFont bold = table_->font();
            bold.setBold(true);
            for (int c = 0; c < table_->columnCount(); ++c) table_->item(i, c)->setFont(bold);
        }
    };
    for (const auto& row : r.heads) addRow(row);
    for (const auto& row : r.other) addRow(row);
    table_->resizeColumnsToContents();
}

void AblationPanel::markHead(int layer, int head) {
    for (int i = 0; i < table_->rowCount(); ++i) {
        const QTableWidgetItem* item = table_->item(i, 0);
        if (item->data(Qt::UserRole).toInt() == layer &&
            item->data(Qt::UserRole + 1).toInt() == head) {
            QSignalBlocker block(table_);
            table_->selectRow(i);
            return;
        }
    }
}

// ---- head types -----------------------------------------------------------------------------

HeadTypesPanel::HeadTypesPanel(QWidget* parent)
    : QWidget(parent), summary_(new QLabel), tree_(new QTreeWidget), counts_(makePlot(nullptr)) {
    summary_->setWordWrap(true);
    QStringList header{"head", "type score"};
    for (const char* key : kPanelScoreKeys) header << key;
    tree_->setHeaderLabels(header);
    tree_->setRootIsDecorated(true);
    tree_->header()->setStretchLastSection(false);
    tree_->setToolTip(
        "tupe heads: each head's primary type (the first rule that holds, docs/microscope.md) "
        "at the run's last snapshot, and every score");
    counts_->plotLayout()->insertRow(0);
    countsTitle_ =
        new QCPTextElement(counts_, "", QFont(counts_->font().family(), 10, QFont::Bold));
    counts_->plotLayout()->addElement(0, 0, countsTitle_);
    counts_->xAxis->setLabel("pretraining step");
    counts_->yAxis->setLabel("heads");
    counts_->legend->setVisible(true);
    counts_->legend->setFont(QFont(font().family(), 8));
    counts_->setMinimumHeight(160);
    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(tree_);
    split->addWidget(counts_);
    split->setSizes({640, 420});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(summary_);
    layout->addWidget(split, 1);
}

void HeadTypesPanel::setRun(const HeadTypeRun* run, const QString& label, const QString& message) {
    tree_->clear();
    counts_->clearGraphs();
    if (!run || run->snapshots.empty()) {
        summary_->setText(message);
        countsTitle_->setText("");
        counts_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const HeadTypeSnapshot& last = run->snapshots.back();
    summary_->setText(QString("<b>%1</b>: head types at step %2 (tupe heads, %3 snapshots)")
                          .arg(label)
                          .arg(last.step)
                          .arg(run->snapshots.size()));
    for (const HeadTypeGroup& g : groupHeadsByType(last)) {
        auto* group =
            new QTreeWidgetItem(tree_, {QString("%1 (%2)").arg(g.type).arg(g.heads.size())});
        QFont bold = tree_->font();
        bold.setBold(true);
        group->setFont(0, bold);
        group->setForeground(0, headTypeColor(g.type));
        for (const HeadTypeEntry& h : g.heads) {
            QStringList cells{h.name(), panelNumber(h.typeScore(), 2)};
            for (const char* key : kPanelScoreKeys) {
                const auto it = h.scores.find(key);
                cells << panelNumber(it == h.scores.end() ? NAN : it->second, 2);
            }
            auto* item = new QTreeWidgetItem(group, cells);
            for (int c = 1; c < cells.size(); ++c) item->setTextAlignment(c, Qt::AlignRight);
        }
    }
    tree_->expandAll();
    for (int c = 0; c < tree_->columnCount(); ++c) tree_->resizeColumnToContents(c);

    const HeadTypeCounts counts = headTypeCounts(*run);
    double most = 1;
    for (const auto& [type, values] : counts.counts) {
        QCPGraph* g = counts_->addGraph();
        g->setName(type);
        g->setPen(QPen(headTypeColor(type), 1.8));
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
        for (size_t i = 0; i < values.size(); ++i) {
            g->addData(counts.steps[i], values[i]);
            most = std::max(most, values[i]);
        }
    }
    countsTitle_->setText(
        run->snapshots.size() > 1
            ? QString("%1: heads of each type over pretraining").arg(label)
            : QString("%1: one snapshot (keep more with analysis.keep_every)").arg(label));
    const double first = counts.steps.front(), lastStep = counts.steps.back();
    const double pad = lastStep > first ? (lastStep - first) * 0.04 : 1;
    counts_->xAxis->setRange(first - pad, lastStep + pad);
    counts_->yAxis->setRange(-0.3, most + 0.5);
    counts_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace app
