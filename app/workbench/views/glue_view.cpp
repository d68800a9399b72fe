// The GLUE results view (see glue_view.h).
#include "views/glue_view.h"

#include <QCoreApplication>
#include <QFile>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/glue_cells.h"
#include "experiments/result_store.h"

namespace app {

namespace {

/// resources/paper_table1.tsv: the source tree's (compiled in), else beside the executable.
QString paperTablePath() {
    for (const QString& p : {QString(TUPE_RESOURCES_DIR "/paper_table1.tsv"),
                             QCoreApplication::applicationDirPath() + "/resources/paper_table1.tsv",
                             QString("resources/paper_table1.tsv")})
        if (QFile::exists(p)) return p;
    return {};
}

const QColor kMuted(125, 125, 125);

}  // namespace

GlueView::GlueView(QWidget* parent)
    : WorkbenchView(parent),
      experiment_(new QComboBox),
      median_(new QRadioButton("median over seeds")),
      meanStd_(new QRadioButton("mean \u00b1 std (n)")),
      paper_(new QCheckBox("paper's rows (Table 1)")),
      task_(new QComboBox),
      table_(new QTableWidget),
      bars_(makePlot(nullptr)),
      rule_(new QLabel) {
    median_->setChecked(true);
    rule_->setWordWrap(true);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->verticalHeader()->setVisible(false);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("Experiment"));
    bar->addWidget(experiment_, 1);
    bar->addWidget(median_);
    bar->addWidget(meanStd_);
    bar->addWidget(paper_);
    bar->addStretch();
    bar->addWidget(new QLabel("Bar chart of"));
    bar->addWidget(task_);
    auto* split = new QSplitter(Qt::Vertical);
    auto* top = new QWidget;
    auto* tl = new QVBoxLayout(top);
    tl->setContentsMargins(0, 0, 0, 0);
    tl->addWidget(table_, 1);
    tl->addWidget(rule_);
    split->addWidget(top);
    split->addWidget(bars_);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    split->setSizes({380, 440});
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(bar);
    layout->addWidget(split, 1);
    connect(experiment_, &QComboBox::currentIndexChanged, this, &GlueView::rebuild);
    connect(median_, &QRadioButton::toggled, this, &GlueView::rebuild);
    connect(paper_, &QCheckBox::toggled, this, &GlueView::rebuild);
    connect(task_, &QComboBox::currentIndexChanged, this, &GlueView::drawBars);
}

void GlueView::setStore(experiments::ResultStore* store, const QString&) {
    store_ = store;
    const QString current = fillExperimentPicker(experiment_, store_);
    QSignalBlocker block(experiment_);
    const int i = experiment_->findText(current);
    experiment_->setCurrentIndex(std::max(0, i));
    rebuild();
}

void GlueView::rebuild() {
    report_ = experiments::Report{};
    table_->clear();
    table_->setRowCount(0);
    table_->setColumnCount(0);
    if (!store_ || experiment_->count() == 0) {
        rule_->setText("No experiments in this database.");
        drawBars();
        return;
    }
    const bool meanStd = meanStd_->isChecked();
    try {
        report_ = experiments::load_report(*store_, experiment_->currentText().toStdString());
        if (paper_->isChecked()) {
            const QString path = paperTablePath();
            if (path.isEmpty())
                emit errorRaised("resources/paper_table1.tsv not found: no paper rows");
            else
                experiments::add_paper_rows(report_, path.toStdString());
        }
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
    QStringList headers{"model"};
    for (const auto& c : report_.columns)
        headers << QString::fromStdString(experiments::column_title(c));
    headers << "Avg";
    const auto chance = chanceLevels(report_);
    const bool chanceRow =
        std::any_of(chance.begin(), chance.end(), [](const auto& c) { return c.has_value(); });
    const int nRows = int(report_.rows.size()) + (chanceRow ? 1 : 0);
    table_->setColumnCount(headers.size());
    table_->setHorizontalHeaderLabels(headers);
    table_->setRowCount(nRows);
    // The cells of a row by column (columns, then Avg).
    auto cellsOf = [&](const experiments::ReportRow& row) {
        std::vector<experiments::ReportCell> cells;
        for (const auto& c : report_.columns) {
            auto it = row.cells.find(c);
            cells.push_back(it != row.cells.end() ? it->second : experiments::ReportCell{});
        }
        cells.push_back(averageCell(row));
        return cells;
    };
    // Best per column among this store's rows; deltas against the first row (the baseline).
    std::vector<double> best(headers.size() - 1, -INFINITY);
    for (const auto& row : report_.rows) {
        if (row.reference) continue;
        const auto cells = cellsOf(row);
        for (size_t c = 0; c < cells.size(); ++c)
            if (cells[c].present) best[c] = std::max(best[c], glueCellValue(cells[c], meanStd));
    }
    const experiments::ReportRow* base =
        report_.rows.empty() || report_.rows.front().reference ? nullptr : &report_.rows.front();
    const auto baseCells = base ? cellsOf(*base) : std::vector<experiments::ReportCell>{};
    int nearChanceCells = 0;
    for (size_t r = 0; r < report_.rows.size(); ++r) {
        const auto& row = report_.rows[r];
        auto* label = new QTableWidgetItem(QString::fromStdString(row.label));
        if (row.reference) label->setForeground(kMuted);
        table_->setItem(int(r), 0, label);
        const auto cells = cellsOf(row);
        for (size_t c = 0; c < cells.size(); ++c) {
            const auto& cell = cells[c];
            const double v = glueCellValue(cell, meanStd);
            std::optional<double> delta;
            if (cell.present && base && &row != base && !row.reference && baseCells[c].present)
                delta = v - glueCellValue(baseCells[c], meanStd);
            const GlueCellText t = glueCellText(cell, meanStd, delta);
            auto* item = new QTableWidgetItem(t.text);
            item->setToolTip(t.tooltip);
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            if (cell.present) {
                QFont f = item->font();
                f.setBold(!row.reference && v >= best[c] - 1e-9);
                item->setFont(f);
            }
            if (delta && std::abs(*delta) >= 0.005)
                item->setForeground(*delta > 0 ? QColor(20, 130, 50) : QColor(190, 40, 40));
            // Near chance wins over the delta colour: that difference is not evidence.
            if (t.muted || row.reference) item->setForeground(kMuted);
            nearChanceCells += t.muted ? 1 : 0;
            table_->setItem(int(r), int(c) + 1, item);
        }
    }
    if (chanceRow) {
        const int r = nRows - 1;
        QFont italic = table_->font();
        italic.setItalic(true);
        auto* label = new QTableWidgetItem("chance");
        label->setToolTip(
            "What a model that ignores its input scores on each dev set: the majority "
            "class (accuracy), always-positive F1, 0 for MCC and correlations.");
        table_->setItem(r, 0, label);
        for (size_t c = 0; c < chance.size(); ++c)
            table_->setItem(
                r, int(c) + 1,
                new QTableWidgetItem(chance[c] ? QString::number(*chance[c], 'f', 2) : "\u2013"));
        for (int c = 0; c < headers.size(); ++c)
            if (QTableWidgetItem* item = table_->item(r, c)) {
                item->setFont(italic);
                item->setForeground(kMuted);
                if (c > 0) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            }
    }
    table_->resizeColumnsToContents();
    rule_->setText(QString::fromStdString(report_.average_rule) +
                   (report_.synthetic
                        ? "  SYN-* columns are the built-in synthetic word-order tasks, "
                          "not GLUE: compare variants with each other, not with the paper."
                        : QString()) +
                   "  Bold: best per column; (\u00b1x): difference to the first row; [lo, hi]: 95% "
                   "bootstrap interval over dev examples and seeds; ~ (grey): the interval reaches "
                   "chance, so the cell cannot be told apart from a model that ignores its input" +
                   (nearChanceCells ? QString(" (%1 cells).").arg(nearChanceCells) : QString(".")));
    QSignalBlocker block(task_);
    const QString task = task_->currentText();
    task_->clear();
    for (int c = 1; c < headers.size(); ++c) task_->addItem(headers[c]);
    const int i = task_->findText(task);
    task_->setCurrentIndex(i >= 0 ? i : task_->count() - 1);
    drawBars();
}

void GlueView::drawBars() {
    bars_->clearPlottables();
    bars_->clearItems();
    bars_->legend->setVisible(false);
    const int col = task_->currentIndex();  // 0..columns-1, columns = Avg
    if (col < 0 || report_.rows.empty()) {
        bars_->replot();
        return;
    }
    const bool meanStd = meanStd_->isChecked();
    auto* bars = new QCPBars(bars_->xAxis, bars_->yAxis);
    bars->setWidth(0.6);
    bars->setPen(QPen(QColor(40, 80, 140)));
    bars->setBrush(QColor(90, 140, 210));
    bars->setName(meanStd ? "mean" : "median");
    // Bars whose interval reaches chance are drawn muted, as in the table.
    auto* muted = new QCPBars(bars_->xAxis, bars_->yAxis);
    muted->setWidth(0.6);
    muted->setPen(QPen(QColor(120, 120, 120)));
    muted->setBrush(QColor(195, 195, 195));
    muted->setName("interval reaches chance (~)");
    // Error bars: the 95% bootstrap interval of the median, or +- std in the mean mode.
    auto* errors = new QCPErrorBars(bars_->xAxis, bars_->yAxis);
    errors->setDataPlottable(bars);
    errors->setPen(QPen(QColor(30, 30, 30), 1.2));
    errors->setName(meanStd ? "\u00b1 std over seeds" : "95% bootstrap interval");
    auto* mutedErrors = new QCPErrorBars(bars_->xAxis, bars_->yAxis);
    mutedErrors->setDataPlottable(muted);
    mutedErrors->setPen(QPen(QColor(30, 30, 30), 1.2));
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    QVector<double> keys, values, errLo, errHi, mKeys, mValues, mErrLo, mErrHi;
    double lo = INFINITY, hi = -INFINITY;
    const auto levels = chanceLevels(report_);
    const bool hasChance = size_t(col) < levels.size() && levels[size_t(col)].has_value();
    const double chance = hasChance ? *levels[size_t(col)] : 0.0;
    for (size_t r = 0; r < report_.rows.size(); ++r) {
        const auto& row = report_.rows[r];
        experiments::ReportCell cell;
        if (col < int(report_.columns.size())) {
            if (auto it = row.cells.find(report_.columns[size_t(col)]); it != row.cells.end())
                cell = it->second;
        } else {
            cell = averageCell(row);
        }
        if (!cell.present) continue;
        const double v = glueCellValue(cell, meanStd);
        if (!std::isfinite(v)) continue;
        double eLo = 0, eHi = 0;
        if (meanStd)
            eLo = eHi = cell.stddev;
        else if (cell.has_interval)
            eLo = std::max(0.0, v - cell.lo), eHi = std::max(0.0, cell.hi - v);
        const bool m = nearChance(cell);
        (m ? mKeys : keys) << double(r);
        (m ? mValues : values) << v;
        (m ? mErrLo : errLo) << eLo;
        (m ? mErrHi : errHi) << eHi;
        lo = std::min(lo, v - eLo);
        hi = std::max(hi, v + eHi);
        ticker->addTick(double(r), QString::fromStdString(row.label));
    }
    bars->setData(keys, values);
    errors->setData(errLo, errHi);
    muted->setData(mKeys, mValues);
    mutedErrors->setData(mErrLo, mErrHi);
    mutedErrors->removeFromLegend();
    if (mKeys.isEmpty()) muted->removeFromLegend();
    const bool anyError = std::any_of(errHi.begin(), errHi.end(), [](double e) { return e > 0; }) ||
                          std::any_of(mErrHi.begin(), mErrHi.end(), [](double e) { return e > 0; });
    if (!anyError) errors->removeFromLegend();
    if (hasChance) {
        // The chance line of this task's dev set (the table's chance row).
        auto* line = new QCPGraph(bars_->xAxis, bars_->yAxis);
        line->setPen(QPen(QColor(170, 60, 60), 1.5, Qt::DashLine));
        line->setName(QString("chance %1").arg(chance, 0, 'f', 2));
        line->setData(QVector<double>{-0.7, double(report_.rows.size()) - 0.3},
                      QVector<double>{chance, chance});
        lo = std::min(lo, chance);
        hi = std::max(hi, chance);
    }
    bars_->legend->setVisible(true);
    bars_->legend->setFont(QFont(font().family(), 8));
    bars_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    bars_->xAxis->setTicker(ticker);
    bars_->xAxis->setTickLabelRotation(ticker->ticks().size() > 4 ? 30 : 0);
    bars_->xAxis->setRange(-0.7, double(report_.rows.size()) - 0.3);
    bars_->xAxis->grid()->setVisible(false);
    if (std::isfinite(lo)) {
        // Room above the bars for the legend.
        const double span = hi - std::min(0.0, lo);
        const double pad = std::max(1.0, span * 0.08);
        bars_->yAxis->setRange(std::min(0.0, lo) - (lo < 0 ? pad : 0),
                               hi + std::max(pad, span * 0.25));
    }
    bars_->yAxis->setLabel(task_->currentText() +
                           (meanStd ? " (mean \u00b1 std)" : " (median, 95% interval)"));
    bars_->replot(QCustomPlot::rpQueuedReplot);
}

QString GlueView::tableText(const QString& format) {
    if (report_.rows.empty()) return {};
    return QString::fromStdString(
        experiments::render_report(report_,
                                   format == "latex" ? experiments::ReportFormat::kLatex
                                                     : experiments::ReportFormat::kMarkdown,
                                   meanStd_->isChecked()));
}

QString GlueView::dataCsv() {
    if (report_.rows.empty()) return {};
    return QString::fromStdString(experiments::render_report(
        report_, experiments::ReportFormat::kCsv, meanStd_->isChecked()));
}

bool GlueView::showExperiment(const QString& name) {
    const int i = experiment_->findText(name);
    if (i < 0) return false;
    experiment_->setCurrentIndex(i);  // rebuilds when it changes
    return true;
}

void GlueView::prepareScreenshot() {
    const int i = task_->findText("Avg");
    if (i >= 0) task_->setCurrentIndex(i);
}

}  // namespace app
