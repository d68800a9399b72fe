// The claims view (see claims_view.h).
#include "views/claims_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QShowEvent>
#include <QSplitter>
#include <QVBoxLayout>

#include "core/store_access.h"
#include "experiments/result_store.h"
#include "views/plot_util.h"

namespace app {

namespace {

enum Column { kId, kVerdict, kTitle, kEvidence, kColumns };

QColor verdictColour(VerdictKind v) {
    switch (v) {
        case VerdictKind::kSupported: return QColor(30, 130, 60);
        case VerdictKind::kContradicted: return QColor(190, 40, 40);
        case VerdictKind::kInconclusive: return QColor(200, 130, 0);
        case VerdictKind::kPartlyTested: return QColor(40, 100, 170);
        default: return QColor(120, 120, 120);
    }
}

}  // namespace

ClaimsView::ClaimsView(QWidget* parent)
    : WorkbenchView(parent),
      service_(new ClaimsService(this)),
      experiment_(new QComboBox),
      rerun_(new QPushButton("Test again")),
      showRuns_(new QPushButton("Show the runs")),
      table_(new QTableWidget(0, kColumns)),
      details_(new QPlainTextEdit),
      status_(new QLabel),
      rankingOn_(new QComboBox),
      ranking_(new QTableWidget(0, 6)),
      rankingNote_(new QLabel) {
    table_->setHorizontalHeaderLabels({"#", "verdict", "claim (Ke et al., ICLR 2021)", "evidence"});
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setWordWrap(true);
    table_->verticalHeader()->setVisible(false);
    table_->horizontalHeader()->setSectionResizeMode(kId, QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setSectionResizeMode(kVerdict, QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setSectionResizeMode(kTitle, QHeaderView::Stretch);
    table_->horizontalHeader()->setSectionResizeMode(kEvidence, QHeaderView::Stretch);
    // Wrapped rows follow the column widths, which settle only once the table is shown.
    connect(table_->horizontalHeader(), &QHeaderView::sectionResized, table_,
            &QTableWidget::resizeRowsToContents);
    details_->setReadOnly(true);
    details_->setPlaceholderText(
        "Select a claim to see its test and the numbers per pair, seed or head.");
    status_->setWordWrap(true);
    showRuns_->setEnabled(false);

    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("Experiment"));
    bar->addWidget(experiment_, 1);
    bar->addWidget(rerun_);
    bar->addStretch();
    bar->addWidget(showRuns_);
    ranking_->setHorizontalHeaderLabels({"rank", "variant", "seeds", "value", "95% CI", "group"});
    ranking_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    ranking_->verticalHeader()->setVisible(false);
    ranking_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    ranking_->horizontalHeader()->setStretchLastSection(true);
    rankingNote_->setWordWrap(true);
    auto* rankingBox = new QWidget;
    auto* rankingLayout = new QVBoxLayout(rankingBox);
    rankingLayout->setContentsMargins(0, 0, 0, 0);
    auto* rankingBar = new QHBoxLayout;
    rankingBar->addWidget(new QLabel("Ranking on"));
    rankingBar->addWidget(rankingOn_, 1);
    rankingLayout->addLayout(rankingBar);
    rankingLayout->addWidget(ranking_, 1);
    rankingLayout->addWidget(rankingNote_);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(table_);
    split->addWidget(details_);
    split->addWidget(rankingBox);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setStretchFactor(2, 2);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(bar);
    layout->addWidget(split, 1);
    layout->addWidget(status_);

    connect(experiment_, &QComboBox::currentIndexChanged, this, &ClaimsView::refresh);
    connect(rerun_, &QPushButton::clicked, this, &ClaimsView::refresh);
    connect(showRuns_, &QPushButton::clicked, this, &ClaimsView::requestRuns);
    connect(table_, &QTableWidget::itemSelectionChanged, this, &ClaimsView::showDetails);
    connect(rankingOn_, &QComboBox::currentIndexChanged, this, &ClaimsView::showRanking);
    connect(table_, &QTableWidget::cellDoubleClicked, this, &ClaimsView::requestRuns);
    connect(service_, &ClaimsService::ready, this, &ClaimsView::showReport);
    connect(service_, &ClaimsService::failed, this, [this](const QString& message) {
        status_->setText("Could not test the claims: " + message);
        emit errorRaised(message);
    });
}

void ClaimsView::setStore(experiments::ResultStore* store, const QString& dbPath) {
    store_ = store;
    dbPath_ = dbPath;
    {
        const QString current = fillExperimentPicker(experiment_, store_);
        QSignalBlocker block(experiment_);
        // The newest experiment, as `tupe claims` picks by default, unless one was chosen.
        const int i = experiment_->findText(current);
        experiment_->setCurrentIndex(i >= 0 ? i : experiment_->count() - 1);
    }
    showReport({});
    stale_ = true;
    // A child process per store change only when someone looks (or on Test again).
    if (isVisible()) refresh();
}

void ClaimsView::showEvent(QShowEvent* event) {
    WorkbenchView::showEvent(event);
    if (stale_) refresh();
}

void ClaimsView::refresh() {
    stale_ = false;
    if (!store_ || experiment_->currentIndex() < 0) {
        status_->setText(store_ ? "No experiments in this database." : "No database open.");
        return;
    }
    computeRankings();
    status_->setText("Testing the claims on " + experiment_->currentText() + " (tupe claims)...");
    service_->request(dbPath_, experiment_->currentText(), projectRootFor(dbPath_));
}

void ClaimsView::showReport(const ClaimsReport& report) {
    report_ = report;
    table_->setRowCount(0);
    table_->setRowCount(int(report_.claims.size()));
    int counts[6] = {0, 0, 0, 0, 0, 0};
    for (size_t r = 0; r < report_.claims.size(); ++r) {
        const ClaimItem& c = report_.claims[r];
        const VerdictKind kind = verdictKind(c.verdict);
        ++counts[int(kind)];
        auto* id = new QTableWidgetItem(c.id);
        id->setTextAlignment(Qt::AlignCenter);
        auto* verdict = new QTableWidgetItem(c.verdict);
        verdict->setForeground(verdictColour(kind));
        QFont bold = verdict->font();
        bold.setBold(true);
        verdict->setFont(bold);
        auto* title = new QTableWidgetItem(c.title);
        title->setToolTip(c.title);
        auto* evidence = new QTableWidgetItem(c.evidence);
        evidence->setToolTip(c.evidence);
        if (kind == VerdictKind::kNotRun)
            for (auto* item : {id, title, evidence}) item->setForeground(QColor(120, 120, 120));
        table_->setItem(int(r), kId, id);
        table_->setItem(int(r), kVerdict, verdict);
        table_->setItem(int(r), kTitle, title);
        table_->setItem(int(r), kEvidence, evidence);
    }
    table_->resizeRowsToContents();
    if (!report_.claims.empty()) {
        status_->setText(QString("%1: %2 supported, %3 partly tested, %4 contradicted, "
                                 "%5 inconclusive, %6 not run (alpha = %7). A verdict is a fixed "
                                 "test of the stored runs; "
                                 "the test of each claim is below when you select it.")
                             .arg(report_.experiment)
                             .arg(counts[int(VerdictKind::kSupported)])
                             .arg(counts[int(VerdictKind::kPartlyTested)])
                             .arg(counts[int(VerdictKind::kContradicted)])
                             .arg(counts[int(VerdictKind::kInconclusive)])
                             .arg(counts[int(VerdictKind::kNotRun)])
                             .arg(report_.alpha));
        table_->selectRow(0);
    }
    showDetails();
}

void ClaimsView::showDetails() {
    const int r = table_->currentRow();
    if (r < 0 || r >= int(report_.claims.size()) || table_->selectedItems().isEmpty()) {
        details_->clear();
        showRuns_->setEnabled(false);
        return;
    }
    const ClaimItem& c = report_.claims[size_t(r)];
    QStringList lines;
    lines << QString("Claim %1: %2").arg(c.id, c.title);
    lines << "Verdict: " + c.verdict;
    lines << "Evidence: " + c.evidence;
    lines << "Test: " + c.test;
    if (!c.byLr.isEmpty()) {
        lines << ""
              << "Across pretraining learning rates: " + c.lrSummary;
        for (const QString& l : c.byLr) lines << "  lr " + l;
    }
    if (!c.details.isEmpty()) {
        lines << ""
              << "Details:";
        for (const QString& d : c.details) lines << "  - " + d;
    }
    if (!c.runs.isEmpty())
        lines << ""
              << "Runs: " + c.runs.join(", ");
    details_->setPlainText(lines.join("\n"));
    const bool canShow = c.view == "curves" || c.view == "glue" || c.view == "maps";
    showRuns_->setEnabled(canShow);
    showRuns_->setText(c.view == "glue"   ? "Show the runs (GLUE results)"
                       : c.view == "maps" ? "Show the runs (correlation maps)"
                                          : "Show the runs (training curves)");
}

void ClaimsView::computeRankings() {
    rankings_.clear();
    try {
        rankings_ = experiments::rank_variants(*store_, experiment_->currentText().toStdString());
    } catch (const std::exception& e) {
        rankingNote_->setText(QString("No ranking: ") + e.what());
    }
    const int keep = rankingOn_->currentIndex();
    {
        QSignalBlocker block(rankingOn_);
        rankingOn_->clear();
        for (const auto& r : rankings_) rankingOn_->addItem(QString::fromStdString(r.measure));
        rankingOn_->setCurrentIndex(keep >= 0 && keep < rankingOn_->count() ? keep : 0);
    }
    showRanking();
}

void ClaimsView::showRanking() {
    ranking_->setRowCount(0);
    const int i = rankingOn_->currentIndex();
    if (i < 0 || i >= int(rankings_.size())) {
        if (rankings_.empty() && rankingNote_->text().isEmpty())
            rankingNote_->setText("No finished runs to rank.");
        return;
    }
    const experiments::Ranking& r = rankings_[size_t(i)];
    const int digits = r.lower_is_better ? 3 : 2;
    ranking_->setRowCount(int(r.variants.size()));
    for (size_t k = 0; k < r.variants.size(); ++k) {
        const auto& v = r.variants[k];
        const QString ci = v.lo == v.hi ? QString()
                                        : QString("[%1, %2]")
                                              .arg(QString::number(v.lo, 'f', digits),
                                                   QString::number(v.hi, 'f', digits));
        const QStringList cells = {QString::number(k + 1),
                                   QString::fromStdString(v.variant),
                                   QString::number(v.seeds),
                                   QString::number(v.value, 'f', digits),
                                   ci,
                                   QString::fromStdString(v.groups)};
        for (int c = 0; c < cells.size(); ++c)
            ranking_->setItem(int(k), c, new QTableWidgetItem(cells[c]));
    }
    int apart = 0;
    for (const auto& p : r.pairs) apart += p.apart;
    QString note = QString("%1 of %2 pairs told apart; variants sharing a letter are not. %3")
                       .arg(apart)
                       .arg(r.pairs.size())
                       .arg(QString::fromStdString(r.test));
    if (!r.note.empty()) note += " Note: " + QString::fromStdString(r.note);
    rankingNote_->setText(note);
}

QStringList ClaimsView::rankingRows() const {
    QStringList rows;
    for (int r = 0; r < ranking_->rowCount(); ++r) {
        QStringList cells;
        for (int c = 0; c < ranking_->columnCount(); ++c)
            cells << (ranking_->item(r, c) ? ranking_->item(r, c)->text() : QString());
        rows << cells.join(' ');
    }
    return rows;
}

void ClaimsView::requestRuns() {
    const int r = table_->currentRow();
    if (r < 0 || r >= int(report_.claims.size())) return;
    const ClaimItem& c = report_.claims[size_t(r)];
    if (c.view.isEmpty()) return;
    emit runsRequested(c.view, report_.experiment, c.runs);
}

QString ClaimsView::dataCsv() {
    if (report_.claims.empty()) return {};
    QString csv = "id,verdict,title,evidence,test\n";
    for (const ClaimItem& c : report_.claims)
        csv += QStringList{csvField(c.id), csvField(c.verdict), csvField(c.title),
                           csvField(c.evidence), csvField(c.test)}
                   .join(',') +
               "\n";
    return csv;
}

QString ClaimsView::tableText(const QString& format) {
    if (report_.claims.empty()) return {};
    QString out;
    if (format == "latex") {
        auto esc = [](QString s) {
            for (const char* ch : {"&", "%", "$", "#", "_", "{", "}"})
                s.replace(ch, QString("\\") + ch);
            return s;
        };
        out =
            "\\begin{tabular}{llp{6cm}p{6cm}}\n\\toprule\n\\# & verdict & claim & evidence "
            "\\\\\n\\midrule\n";
        for (const ClaimItem& c : report_.claims)
            out += QString("%1 & %2 & %3 & %4 \\\\\n")
                       .arg(esc(c.id), esc(c.verdict), esc(c.title), esc(c.evidence));
        return out + "\\bottomrule\n\\end{tabular}\n";
    }
    out = "| # | claim | verdict | evidence |\n|---|---|---|---|\n";
    for (const ClaimItem& c : report_.claims)
        out += QString("| %1 | %2 | **%3** | %4 |\n").arg(c.id, c.title, c.verdict, c.evidence);
    return out;
}

void ClaimsView::prepareScreenshot() {
    // The quickstart's claims when the store has them (the screenshot in README.md).
    const int i = experiment_->findText("quickstart");
    if (i >= 0 && i != experiment_->currentIndex()) {
        QSignalBlocker block(experiment_);
        experiment_->setCurrentIndex(i);
    }
    refresh();
}

}  // namespace app
