// The GLUE results view (see glue_view.h).
#include "views/glue_view.h"

#include <QCoreApplication>
#include <QFile>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>

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

double cellValue(const experiments::ReportCell& c, bool meanStd) {
    return meanStd ? c.mean : c.median;
}

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
    QSignalBlocker block(experiment_);
    const QString current = experiment_->currentText();
    experiment_->clear();
    if (store_) {
        try {
            for (const auto& e : store_->list_experiments())
                experiment_->addItem(QString::fromStdString(e.name),
                                     QVariant::fromValue<qlonglong>(e.id));
        } catch (const std::exception& e) {
            emit errorRaised(QString::fromUtf8(e.what()));
        }
    }
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
        const auto results = store_->glue_results(experiment_->currentData().toLongLong());
        report_ = experiments::build_report(experiment_->currentText().toStdString(), results);
        if (paper_->isChecked()) {
            const QString path = paperTablePath();
            if (path.isEmpty()) emit errorRaised("resources/paper_table1.tsv not found: no paper rows");
            else experiments::add_paper_rows(report_, path.toStdString());
        }
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
    QStringList headers{"model"};
    for (const auto& c : report_.columns) headers << QString::fromStdString(experiments::column_title(c));
    headers << "Avg";
    table_->setColumnCount(headers.size());
    table_->setHorizontalHeaderLabels(headers);
    table_->setRowCount(int(report_.rows.size()));
    // Best per column among this store's rows; deltas against the first row (the baseline).
    std::vector<double> best(report_.columns.size() + 1, -INFINITY);
    for (const auto& row : report_.rows) {
        if (row.reference) continue;
        for (size_t c = 0; c < report_.columns.size(); ++c)
            if (auto it = row.cells.find(report_.columns[c]); it != row.cells.end() && it->second.present)
                best[c] = std::max(best[c], cellValue(it->second, meanStd));
        if (row.has_average) best.back() = std::max(best.back(), row.average);
    }
    const experiments::ReportRow* base = report_.rows.empty() || report_.rows.front().reference
                                             ? nullptr : &report_.rows.front();
    for (size_t r = 0; r < report_.rows.size(); ++r) {
        const auto& row = report_.rows[r];
        auto* label = new QTableWidgetItem(QString::fromStdString(row.label));
        if (row.reference) label->setForeground(QColor(110, 110, 110));
        table_->setItem(int(r), 0, label);
        auto put = [&](int col, double v, const QString& text, bool isBest, double baseV, bool hasBase) {
            auto* item = new QTableWidgetItem(text);
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            QFont f = item->font();
            f.setBold(isBest && !row.reference);
            item->setFont(f);
            if (hasBase && &row != base && !row.reference) {
                const double d = v - baseV;
                item->setText(text + QString("  (%1%2)").arg(d >= 0 ? "+" : "").arg(d, 0, 'f', 2));
                if (std::abs(d) >= 0.005)
                    item->setForeground(d > 0 ? QColor(20, 130, 50) : QColor(190, 40, 40));
            }
            if (row.reference) item->setForeground(QColor(110, 110, 110));
            table_->setItem(int(r), col, item);
        };
        for (size_t c = 0; c < report_.columns.size(); ++c) {
            auto it = row.cells.find(report_.columns[c]);
            if (it == row.cells.end() || !it->second.present) {
                table_->setItem(int(r), int(c) + 1, new QTableWidgetItem("\u2013"));
                continue;
            }
            const auto& cell = it->second;
            const double v = cellValue(cell, meanStd);
            const QString text = meanStd ? QString("%1 \u00b1 %2 (%3)").arg(cell.mean, 0, 'f', 2)
                                               .arg(cell.stddev, 0, 'f', 2).arg(cell.n)
                                         : QString::number(cell.median, 'f', 2);
            bool hasBase = false;
            double baseV = 0;
            if (base)
                if (auto b = base->cells.find(report_.columns[c]); b != base->cells.end() && b->second.present)
                    hasBase = true, baseV = cellValue(b->second, meanStd);
            put(int(c) + 1, v, text, v >= best[c] - 1e-9, baseV, hasBase);
        }
        if (row.has_average)
            put(headers.size() - 1, row.average, QString::number(row.average, 'f', 2),
                row.average >= best.back() - 1e-9, base && base->has_average ? base->average : 0,
                base && base->has_average);
    }
    table_->resizeColumnsToContents();
    table_->horizontalHeader()->setStretchLastSection(true);
    rule_->setText(QString::fromStdString(report_.average_rule) +
                   (report_.synthetic ? "  SYN-* columns are the built-in synthetic word-order tasks, "
                                        "not GLUE: compare variants with each other, not with the paper."
                                      : QString()) +
                   "  Bold: best per column; (\u00b1x): difference to the first row.");
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
    auto* errors = new QCPErrorBars(bars_->xAxis, bars_->yAxis);
    errors->setDataPlottable(bars);
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    QVector<double> keys, values, err;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t r = 0; r < report_.rows.size(); ++r) {
        const auto& row = report_.rows[r];
        double v = NAN, e = 0;
        if (col < int(report_.columns.size())) {
            auto it = row.cells.find(report_.columns[size_t(col)]);
            if (it != row.cells.end() && it->second.present) {
                v = cellValue(it->second, meanStd);
                e = meanStd ? it->second.stddev : 0;
            }
        } else if (row.has_average) {
            v = row.average;
        }
        if (!std::isfinite(v)) continue;
        keys << double(r);
        values << v;
        err << e;
        lo = std::min(lo, v - e);
        hi = std::max(hi, v + e);
        ticker->addTick(double(r), QString::fromStdString(row.label));
    }
    bars->setData(keys, values);
    errors->setData(err);
    errors->setVisible(meanStd);
    bars_->xAxis->setTicker(ticker);
    bars_->xAxis->setTickLabelRotation(keys.size() > 4 ? 30 : 0);
    bars_->xAxis->setRange(-0.7, double(report_.rows.size()) - 0.3);
    bars_->xAxis->grid()->setVisible(false);
    if (std::isfinite(lo)) {
        const double pad = std::max(1.0, (hi - std::min(0.0, lo)) * 0.08);
        bars_->yAxis->setRange(std::min(0.0, lo) - (lo < 0 ? pad : 0), hi + pad);
    }
    bars_->yAxis->setLabel(task_->currentText() + (meanStd ? " (mean \u00b1 std)" : " (median)"));
    bars_->replot(QCustomPlot::rpQueuedReplot);
}

QString GlueView::tableText(const QString& format) {
    if (report_.rows.empty()) return {};
    return QString::fromStdString(experiments::render_report(
        report_, format == "latex" ? experiments::ReportFormat::kLatex
                                   : experiments::ReportFormat::kMarkdown,
        meanStd_->isChecked()));
}

QString GlueView::dataCsv() {
    if (report_.rows.empty()) return {};
    return QString::fromStdString(
        experiments::render_report(report_, experiments::ReportFormat::kCsv, meanStd_->isChecked()));
}

void GlueView::prepareScreenshot() {
    const int i = task_->findText("Avg");
    if (i >= 0) task_->setCurrentIndex(i);
}

}  // namespace app
