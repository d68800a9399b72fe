// The GLUE table's cell text, as the view shows it and the tests read it: a report cell
// (experiments::ReportCell) as "66.30 [60.9, 71.4]" (the median and its 95% bootstrap
// interval) or "mean ± std (n)", the delta to the baseline row, a trailing " ~" when the
// interval reaches the task's chance level, and the tooltip with n, seeds, lr, interval, chance.
#pragma once

#include <QString>
#include <QStringList>
#include <optional>
#include <vector>

#include "experiments/report.h"

namespace app {

/// One cell, ready to render. `muted` asks for a grey foreground (near chance).
struct GlueCellText {
    QString text;
    QString tooltip;
    bool muted = false;
};

/// The interval reaches chance: the cell cannot be told apart from an input-blind model.
bool nearChance(const experiments::ReportCell& cell);

/// The number the table ranks and the bar chart draws: the median, or the mean.
double glueCellValue(const experiments::ReportCell& cell, bool meanStd);

/// The text of a present cell; `delta` (vs the baseline row) is appended as "  (+1.20)".
/// The median mode shows the interval when there is one; both modes end in " ~" when
/// nearChance(cell).
GlueCellText glueCellText(const experiments::ReportCell& cell, bool meanStd,
                          std::optional<double> delta = std::nullopt);

/// The Avg column of a row as a cell: its average_cell when it has one, else a bare cell
/// with the average (no interval); present false when the row has no average.
experiments::ReportCell averageCell(const experiments::ReportRow& row);

/// Each column's chance level (report.columns, then Avg), from the first run row that has
/// one; nullopt where none does (paper rows never do).
std::vector<std::optional<double>> chanceLevels(const experiments::Report& report);

}  // namespace app
