// The factor view's interaction grid, runs table, filter and exports (see factor_view.h).
#include <QDir>
#include <cmath>

#include "views/factor_view.h"
#include "views/parallel_coordinates.h"

namespace app {

namespace {

QString factorCellText(double v, int digits) {
    return std::isfinite(v) ? QString::number(v, 'f', digits) : QString("\u2013");
}

int metricDigits(const experiments::FactorMetric* m) {
    return m && m->title.find("(%)") != std::string::npos ? 2 : 4;
}

}  // namespace

void FactorView::drawInteraction() {
    for (int i = interaction_->itemCount() - 1; i >= 0; --i)
        if (interaction_->item(i)->property("cellText").toBool())
            interaction_->removeItem(interaction_->item(i));
    if (table_->factors.size() < 2 || interA_->currentText() == interB_->currentText()) {
        interaction_->clearWithMessage(table_->factors.size() < 2
                                           ? "one factor: no interaction to show"
                                           : "choose two different factors");
        return;
    }
    experiments::Interaction x;
    try {
        x = experiments::interaction(*table_, effects_.metric, interA_->currentText().toStdString(),
                                     interB_->currentText().toStdString());
    } catch (const std::exception& e) {
        interaction_->clearWithMessage(QString::fromUtf8(e.what()));
        return;
    }
    const auto* m = table_->find_metric(effects_.metric);
    const int digits = metricDigits(m);
    plotting::Heatmap h;
    h.rows = int(x.a_levels.size());
    h.cols = int(x.b_levels.size());
    h.row_labels = x.a_levels;
    h.col_labels = x.b_levels;
    h.y_label = x.a;
    h.x_label = x.b;
    h.value_label = effects_.metric;
    for (const auto& row : x.cells)
        for (const auto& c : row) h.values.push_back(c.mean);
    h.title = effects_.metric + ": " + x.a + " x " + x.b;
    if (x.contrast.valid)
        h.title += " (interaction " + factorCellText(x.contrast.estimate, digits).toStdString() +
                   " [" + factorCellText(x.contrast.lo, digits).toStdString() + ", " +
                   factorCellText(x.contrast.hi, digits).toStdString() + "])";
    interaction_->setData(h);
    for (int r = 0; r < h.rows; ++r)
        for (int c = 0; c < h.cols; ++c) {
            const auto& cell = x.cells[size_t(r)][size_t(c)];
            auto* text = new QCPItemText(interaction_);
            text->setProperty("cellText", true);
            text->position->setCoords(c, r);
            text->setText(factorCellText(cell.mean, digits) +
                          (std::isfinite(cell.lo) ? "\n[" + factorCellText(cell.lo, digits) + ", " +
                                                        factorCellText(cell.hi, digits) + "]"
                                                  : QString()));
            text->setFont(QFont(font().family(), 8));
            text->setBrush(QColor(255, 255, 255, 170));
            text->setPadding(QMargins(2, 1, 2, 1));
        }
    interaction_->replot();
}

void FactorView::fillTable() {
    model_->clear();
    QStringList headers = {"run", "seed"};
    for (const auto& f : table_->factors) headers << QString::fromStdString(f.key);
    for (const auto& m : table_->metrics) headers << QString::fromStdString(m.key);
    model_->setHorizontalHeaderLabels(headers);
    for (const auto& r : table_->runs) {
        QList<QStandardItem*> row;
        auto* name = new QStandardItem(QString::fromStdString(r.name));
        name->setData(QVariant::fromValue<qlonglong>(r.run_id), Qt::UserRole);
        name->setData(QString::fromStdString(r.name), Qt::UserRole + 1);
        row << name;
        auto* seed = new QStandardItem(QString::number(r.seed));
        seed->setData(double(r.seed), Qt::UserRole + 1);
        row << seed;
        for (const auto& level : r.levels) {
            auto* item = new QStandardItem(QString::fromStdString(level));
            item->setData(QString::fromStdString(level), Qt::UserRole + 1);
            row << item;
        }
        for (const auto& m : table_->metrics) {
            const double v = r.metric(m.key);
            auto* item = new QStandardItem(factorCellText(v, metricDigits(&m)));
            item->setData(std::isfinite(v) ? v : -INFINITY, Qt::UserRole + 1);
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            row << item;
        }
        model_->appendRow(row);
    }
    tableView_->resizeColumnsToContents();
}

void FactorView::applyFilter() {
    if (!table_) return;
    const auto& kept = parallel_->kept();
    std::set<qint64> ids;
    for (size_t i = 0; i < table_->runs.size(); ++i)
        if (i >= kept.size() || kept[i]) ids.insert(table_->runs[i].run_id);
    proxy_->setAccepted(ids);
    QStringList factors;
    for (const auto& f : table_->factors) factors << QString::fromStdString(f.key);
    QString text = QString(
                       "<b>%1</b>: %2 runs in %3 cells; factors %4 (levels read from the "
                       "runs' stored configs). ")
                       .arg(QString::fromStdString(table_->experiment))
                       .arg(effects_.runs)
                       .arg(effects_.cells)
                       .arg(factors.isEmpty() ? QString("none: every run has the same config")
                                              : factors.join(", "));
    text +=
        effects_.df > 0
            ? QString("Intervals: 95%, from the seed-to-seed spread within cells (sd %1, df %2). ")
                  .arg(factorCellText(effects_.residual_sd, 4))
                  .arg(effects_.df)
            : QString("One run per cell: no interval. ");
    text += QString("%1 of %2 runs inside the brushes.").arg(ids.size()).arg(table_->runs.size());
    for (const auto& n : table_->notes) text += " " + QString::fromStdString(n) + ".";
    summary_->setText(text);
}

QList<QCustomPlot*> FactorView::exportablePlots() {
    return {parallel_, effectsPlot_, interaction_};
}

QString FactorView::dataCsv() {
    QStringList lines;
    QStringList header;
    for (int c = 0; c < proxy_->columnCount(); ++c)
        header << csvField(proxy_->headerData(c, Qt::Horizontal).toString());
    lines << header.join(',');
    for (int r = 0; r < proxy_->rowCount(); ++r) {
        QStringList cells;
        for (int c = 0; c < proxy_->columnCount(); ++c)
            cells << csvField(proxy_->data(proxy_->index(r, c)).toString());
        lines << cells.join(',');
    }
    return lines.join('\n') + '\n';
}

QString FactorView::tableText(const QString& format) {
    if (!table_) return {};
    const bool latex = format == "latex";
    QStringList lines;
    for (int r = -1; r < proxy_->rowCount(); ++r) {
        QStringList cells;
        for (int c = 0; c < proxy_->columnCount(); ++c)
            cells << (r < 0 ? proxy_->headerData(c, Qt::Horizontal).toString()
                            : proxy_->data(proxy_->index(r, c)).toString());
        lines << (latex ? cells.join(" & ") + " \\\\" : "| " + cells.join(" | ") + " |");
        if (r < 0 && !latex) lines << "|" + QString(" --- |").repeated(int(cells.size()));
    }
    return lines.join('\n') + '\n';
}

void FactorView::prepareScreenshot() {
    // The shipped factorial when the store has it, else the experiment with the most factors.
    if (showExperiment("tupe_factorial")) return;
    int best = -1, most = 0;
    for (int i = 0; i < experiment_->count() && store_; ++i) {
        try {
            const auto t =
                experiments::load_factor_table(*store_, experiment_->itemText(i).toStdString());
            if (int(t.factors.size()) > most) most = int(t.factors.size()), best = i;
        } catch (const std::exception&) {
            // No finished run: not a candidate.
        }
    }
    if (best >= 0) experiment_->setCurrentIndex(best);
}

}  // namespace app
