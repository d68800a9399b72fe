// The GLUE table's cell text (see glue_cells.h).
#include "core/glue_cells.h"

namespace app {

bool nearChance(const experiments::ReportCell& cell) {
    return cell.present && cell.has_interval && cell.has_chance && !cell.above_chance;
}

double glueCellValue(const experiments::ReportCell& cell, bool meanStd) {
    return meanStd ? cell.mean : cell.median;
}

GlueCellText glueCellText(const experiments::ReportCell& cell, bool meanStd,
                          std::optional<double> delta) {
    GlueCellText out;
    if (!cell.present) {
        out.text = "\u2013";
        return out;
    }
    if (meanStd && cell.n > 0)
        out.text = QString("%1 \u00b1 %2 (%3)")
                       .arg(cell.mean, 0, 'f', 2)
                       .arg(cell.stddev, 0, 'f', 2)
                       .arg(cell.n);
    else
        out.text = QString::number(glueCellValue(cell, meanStd), 'f', 2);
    if (!meanStd && cell.has_interval)
        out.text += QString(" [%1, %2]").arg(cell.lo, 0, 'f', 1).arg(cell.hi, 0, 'f', 1);
    if (delta) out.text += QString("  (%1%2)").arg(*delta >= 0 ? "+" : "").arg(*delta, 0, 'f', 2);
    out.muted = nearChance(cell);
    if (out.muted) out.text += " ~";

    QStringList tip;
    if (cell.n > 0) {
        QString runs = QString("n = %1 run%2").arg(cell.n).arg(cell.n == 1 ? "" : "s");
        if (cell.pretrain_seeds > 0)
            runs += QString(" (%1 pretraining seed%2)")
                        .arg(cell.pretrain_seeds)
                        .arg(cell.pretrain_seeds == 1 ? "" : "s");
        tip << runs;
        tip << QString("best lr %1").arg(cell.best_lr, 0, 'g', 3);
        tip << QString("median %1, mean %2 \u00b1 %3")
                   .arg(cell.median, 0, 'f', 2)
                   .arg(cell.mean, 0, 'f', 2)
                   .arg(cell.stddev, 0, 'f', 2);
    }
    tip << (cell.has_interval ? QString("95% bootstrap interval [%1, %2]")
                                    .arg(cell.lo, 0, 'f', 2)
                                    .arg(cell.hi, 0, 'f', 2)
                              : QString("no interval (no stored predictions)"));
    if (cell.has_chance)
        tip << QString("chance %1%2")
                   .arg(cell.chance, 0, 'f', 2)
                   .arg(!cell.has_interval  ? QString()
                        : cell.above_chance ? QString(": the interval is above it")
                                            : QString(": the interval reaches it (~)"));
    out.tooltip = tip.join("\n");
    return out;
}

experiments::ReportCell averageCell(const experiments::ReportRow& row) {
    if (!row.has_average) return {};
    experiments::ReportCell c = row.average_cell;
    c.present = true;
    c.median = c.mean = row.average;
    return c;
}

std::vector<std::optional<double>> chanceLevels(const experiments::Report& report) {
    std::vector<std::optional<double>> out(report.columns.size() + 1);
    for (const auto& row : report.rows) {
        if (row.reference) continue;
        for (size_t c = 0; c < report.columns.size(); ++c) {
            const auto it = row.cells.find(report.columns[c]);
            if (!out[c] && it != row.cells.end() && it->second.has_chance)
                out[c] = it->second.chance;
        }
        if (!out.back() && row.has_average && row.average_cell.has_chance)
            out.back() = row.average_cell.chance;
    }
    return out;
}

}  // namespace app
