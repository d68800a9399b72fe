// The evidence the views show, on stores built here: the GLUE table's cells with their 95%
// interval, " ~" and grey where the interval reaches chance, and the chance row (the helper
// and the GlueView table itself); the unigram floor read from a pretrain run's params, the
// warning for a run that ends too near it, the curves view's floor line and warning, and the
// claims view's "Show the runs" landing on the curves tab with exactly the claim's runs.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QListWidget>
#include <QTabWidget>
#include <QTableWidget>

#include "app_test_util.h"
#include "core/glue_cells.h"
#include "core/store_access.h"
#include "experiments/report.h"
#include "experiments/result_store.h"
#include "views/claims_view.h"
#include "views/curves_view.h"
#include "views/glue_view.h"
#include "views/main_window.h"

using namespace app;
using experiments::ResultStore;

namespace {

constexpr int kDev = 200;

/// Experiment "ev": pretrain runs bert-a@seed1 and tupe-a@seed1, each fine-tuned once on
/// syn-rte (balanced gold labels, chance 50%): bert-a right on 55% of the examples (its
/// interval reaches 50), tupe-a on 90%.
void fillGlueStore(const std::string& path) {
    ResultStore store = ResultStore::open(path);
    const auto exp = store.get_or_create_experiment("ev", "ev.yaml", "name: ev\n");
    for (const auto& [variant, correctOf20] : {std::pair{"bert-a", 11}, std::pair{"tupe-a", 18}}) {
        experiments::RunRecord pre;
        pre.experiment_id = exp;
        pre.name = pre.variant = std::string(variant) + "@seed1";
        pre.status = "finished";
        pre.step = 100;
        const auto preId = store.upsert_run(pre);
        experiments::RunRecord ft;
        ft.experiment_id = exp;
        ft.kind = "finetune";
        ft.name = pre.name + "/step100/syn-rte/lr0.001/seed1";
        ft.parent_run_id = preId;
        ft.status = "finished";
        const auto ftId = store.upsert_run(ft);
        experiments::PredictionSet p;
        p.run_id = ftId;
        p.split = "dev";
        int correct = 0;
        for (int i = 0; i < kDev; ++i) {
            const double gold = i % 2;
            const bool right = i % 20 < correctOf20;
            p.gold.push_back(gold);
            p.predicted.push_back(right ? gold : 1 - gold);
            correct += right;
        }
        store.set_predictions(p);
        experiments::GlueResultRecord g;
        g.run_id = ftId;
        g.task = "syn-rte";
        g.split = "dev";
        g.metric = "accuracy";
        g.value = 100.0 * correct / kDev;
        g.checkpoint_step = 100;
        g.lr = 1e-3;
        g.seed = 1;
        store.add_glue_result(g);
    }
}

const experiments::ReportCell& cellOf(const experiments::Report& r, const std::string& variant) {
    for (const auto& row : r.rows)
        if (row.variant == variant) return row.cells.at("syn-rte");
    throw std::runtime_error("no row " + variant);
}

}  // namespace

TEST(GlueCells, IntervalShownAndNearChanceMarked) {
    app_test::TempDir dir;
    fillGlueStore(dir.file("db.sqlite"));
    ResultStore store = ResultStore::open(dir.file("db.sqlite"), experiments::OpenMode::kReadOnly);
    const experiments::Report report = experiments::load_report(store, "ev");
    ASSERT_EQ(report.rows.size(), 2u);
    const auto& bert = cellOf(report, "bert-a");
    const auto& tupe = cellOf(report, "tupe-a");
    ASSERT_TRUE(bert.has_interval && bert.has_chance);
    EXPECT_DOUBLE_EQ(bert.chance, 50.0);
    EXPECT_FALSE(bert.above_chance);
    EXPECT_TRUE(tupe.above_chance);

    const GlueCellText near = glueCellText(bert, false);
    EXPECT_TRUE(near.muted);
    EXPECT_TRUE(near.text.startsWith("55.00 [")) << near.text.toStdString();
    EXPECT_TRUE(near.text.endsWith(" ~")) << near.text.toStdString();
    const QString interval = QString(" [%1, %2]").arg(bert.lo, 0, 'f', 1).arg(bert.hi, 0, 'f', 1);
    EXPECT_TRUE(near.text.contains(interval)) << near.text.toStdString();
    EXPECT_TRUE(near.tooltip.contains("n = 1 run (1 pretraining seed)"))
        << near.tooltip.toStdString();
    EXPECT_TRUE(near.tooltip.contains("best lr 0.001")) << near.tooltip.toStdString();
    EXPECT_TRUE(near.tooltip.contains("chance 50.00")) << near.tooltip.toStdString();

    const GlueCellText far = glueCellText(tupe, false, 35.0);
    EXPECT_FALSE(far.muted);
    EXPECT_FALSE(far.text.endsWith("~")) << far.text.toStdString();
    EXPECT_TRUE(far.text.startsWith("90.00 [")) << far.text.toStdString();
    EXPECT_TRUE(far.text.endsWith("  (+35.00)")) << far.text.toStdString();
    // mean +- std (n) keeps the near-chance mark but not the median's interval.
    EXPECT_EQ(glueCellText(bert, true).text, QString("55.00 \u00b1 0.00 (1) ~"));

    // A paper row has no interval: a bare number, never marked.
    experiments::ReportCell paper;
    paper.present = true;
    paper.median = 66.3;
    EXPECT_EQ(glueCellText(paper, false).text, "66.30");
    EXPECT_FALSE(glueCellText(paper, false).muted);

    const auto chance = chanceLevels(report);
    ASSERT_EQ(chance.size(), 2u);  // syn-rte, Avg
    ASSERT_TRUE(chance[0] && chance[1]);
    EXPECT_DOUBLE_EQ(*chance[0], 50.0);
    EXPECT_DOUBLE_EQ(*chance[1], 50.0);
}

TEST(GlueCells, TheViewGreysNearChanceCellsAndAddsAChanceRow) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    fillGlueStore(dir.file("db.sqlite"));
    StoreHandle h = openStoreReadOnly(QString::fromStdString(dir.file("db.sqlite")));
    ASSERT_TRUE(h.store) << h.error.toStdString();
    GlueView view;
    view.setStore(h.store.get(), h.path);
    auto* table = view.findChild<QTableWidget*>();
    ASSERT_TRUE(table);
    ASSERT_EQ(table->columnCount(), 3);  // model, SYN-RTE, Avg
    ASSERT_EQ(table->rowCount(), 3);     // bert-a, tupe-a, chance
    EXPECT_EQ(table->item(0, 0)->text(), "bert-a @ 100");
    const QTableWidgetItem* near = table->item(0, 1);
    EXPECT_TRUE(near->text().endsWith(" ~")) << near->text().toStdString();
    EXPECT_TRUE(near->text().contains("[")) << near->text().toStdString();
    EXPECT_EQ(near->foreground().color(), QColor(125, 125, 125));
    EXPECT_TRUE(near->toolTip().contains("chance 50.00"));
    const QTableWidgetItem* far = table->item(1, 1);
    EXPECT_FALSE(far->text().contains("~")) << far->text().toStdString();
    EXPECT_TRUE(far->text().contains("(+35.00)")) << far->text().toStdString();
    EXPECT_EQ(far->foreground().color(), QColor(20, 130, 50));  // better than the first row
    EXPECT_EQ(table->item(2, 0)->text(), "chance");
    EXPECT_TRUE(table->item(2, 0)->font().italic());
    EXPECT_EQ(table->item(2, 1)->text(), "50.00");
    EXPECT_EQ(table->item(2, 2)->text(), "50.00");
    // The bar chart: bars, the interval's error bars and the dashed chance line.
    QCustomPlot* bars = view.exportablePlot();
    ASSERT_TRUE(bars);
    bool errorBars = false, chanceLine = false;
    for (int i = 0; i < bars->plottableCount(); ++i) {
        if (auto* e = qobject_cast<QCPErrorBars*>(bars->plottable(i)); e && e->dataCount() > 0)
            errorBars = true;
        if (auto* g = qobject_cast<QCPGraph*>(bars->plottable(i)))
            chanceLine =
                chanceLine || (g->name().startsWith("chance") && g->pen().style() == Qt::DashLine &&
                               g->data()->at(0)->value == 50.0);
    }
    EXPECT_TRUE(errorBars);
    EXPECT_TRUE(chanceLine);
}

namespace {

/// Pretrain runs of experiment "fl": near-floor (ends 6.85, floor 6.919214), learned (ends
/// 5.9, same floor) and no-floor (no params).
void fillFloorStore(const std::string& path, std::int64_t ids[3]) {
    ResultStore store = ResultStore::open(path);
    const auto exp = store.get_or_create_experiment("fl", "fl.yaml", "name: fl\n");
    const char* names[] = {"near-floor", "learned", "no-floor"};
    const double finals[] = {6.85, 5.9, 6.0};
    for (int i = 0; i < 3; ++i) {
        experiments::RunRecord run;
        run.experiment_id = exp;
        run.name = run.variant = names[i];
        run.status = "finished";
        run.step = 200;
        ids[i] = store.upsert_run(run);
        store.add_metrics(ids[i], {{"validation/loss", 100, 8.0, 1.0},
                                   {"validation/loss", 200, finals[i], 2.0},
                                   {"train/loss", 200, finals[i], 2.0}});
        if (i < 2)
            store.add_params(ids[i], {{"floor.unigram_nats", i == 0 ? "6.919214" : "6.9192142"},
                                      {"floor.bigram_nats", "5.651824"}});
    }
}

// fillFloorStore's store in dir, opened read-only as the views open it.
StoreHandle openFloorStore(const app_test::TempDir& dir, std::int64_t ids[3]) {
    fillFloorStore(dir.file("db.sqlite"), ids);
    return openStoreReadOnly(QString::fromStdString(dir.file("db.sqlite")));
}

}  // namespace

TEST(LossFloor, ReadFromParamsWithTheWarningNearTheFloor) {
    app_test::TempDir dir;
    std::int64_t ids[3];
    fillFloorStore(dir.file("db.sqlite"), ids);
    ResultStore store = ResultStore::open(dir.file("db.sqlite"), experiments::OpenMode::kReadOnly);
    const LossFloor near = readLossFloor(store, ids[0]);
    ASSERT_TRUE(near.hasUnigram && near.hasBigram && near.hasFinal);
    EXPECT_DOUBLE_EQ(near.unigram, 6.919214);
    EXPECT_DOUBLE_EQ(near.bigram, 5.651824);
    EXPECT_DOUBLE_EQ(near.finalLoss, 6.85);
    EXPECT_EQ(near.finalStep, 200);
    EXPECT_EQ(floorWarning("near-floor", near),
              "near-floor: final loss 6.850 is not 0.1 nats below the unigram floor 6.919: "
              "word frequencies only");
    EXPECT_EQ(floorWarning("learned", readLossFloor(store, ids[1])), "");
    const LossFloor none = readLossFloor(store, ids[2]);
    EXPECT_FALSE(none.hasUnigram);
    EXPECT_TRUE(none.hasFinal);
    EXPECT_EQ(floorWarning("no-floor", none), "");  // no floor, no claim about it
    // Exactly 0.1 below is enough; a hair less is not.
    LossFloor edge = near;
    edge.finalLoss = edge.unigram - 0.1;
    EXPECT_EQ(floorWarning("x", edge), "");
    edge.finalLoss = edge.unigram - 0.099;
    EXPECT_FALSE(floorWarning("x", edge).isEmpty());
    // A run that stored the context-free floor is judged against it: 0.5 nats below the
    // unigram floor is still on it when copying the visible tokens gives 6.30.
    LossFloor copying = near;
    copying.hasContextFree = true;
    copying.contextFree = 6.30;
    copying.finalLoss = 6.42;
    EXPECT_EQ(floorWarning("copy", copying),
              "copy: final loss 6.420 is not 0.1 nats below the context-free floor 6.300: "
              "word frequencies and copying, no context");
    copying.finalLoss = 6.2;
    EXPECT_EQ(floorWarning("copy", copying), "");
    copying.finalLoss = 6.85;  // not below the unigram floor: frequencies only
    EXPECT_NE(floorWarning("copy", copying).indexOf("unigram floor 6.919"), -1);

    const auto lines = mergeFloorLines({{"a", 6.919214}, {"b", 6.9192142}, {"c", 7.5}});
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].runs, (QStringList{"a", "b"}));
    EXPECT_EQ(lines[1].runs, QStringList{"c"});
}

TEST(LossFloor, CurvesViewDrawsOneSharedFloorAndWarns) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::int64_t ids[3];
    StoreHandle h = openFloorStore(dir, ids);
    ASSERT_TRUE(h.store) << h.error.toStdString();
    CurvesView view;
    view.setStore(h.store.get(), h.path);
    view.showRuns({ids[0], ids[1], ids[2]});
    ASSERT_TRUE(view.showMetric("validation/loss"));
    QCustomPlot* plot = view.exportablePlot();
    QStringList floorNames;
    for (int i = 0; i < plot->graphCount(); ++i)
        if (plot->graph(i)->property("floor").toBool()) floorNames << plot->graph(i)->name();
    // The two runs' floors agree to 1e-6: one line, and the bigram line is off by default.
    EXPECT_EQ(floorNames, QStringList{"unigram floor 6.919"});
    EXPECT_EQ(view.floorWarnings(),
              "near-floor: final loss 6.850 is not 0.1 nats below the unigram floor 6.919: "
              "word frequencies only");
}

// File > Export raw data: every stored point of the checked runs, exact and unsmoothed, while
// File > Export data writes what the plot draws (the EMA and the floor lines among it).
TEST(CurvesView, RawCsvHoldsEveryStoredPointUnsmoothed) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::int64_t ids[3];
    fillFloorStore(dir.file("db.sqlite"), ids);
    {
        ResultStore store = ResultStore::open(dir.file("db.sqlite"));
        std::vector<experiments::MetricPoint> many;
        for (int step = 300; step < 1300; ++step)
            many.push_back(
                {"validation/loss", step, 5.0 + 0.5 * ((step * 7919) % 13) / 13.0, double(step)});
        store.add_metrics(ids[1], many);
    }
    StoreHandle h = openStoreReadOnly(QString::fromStdString(dir.file("db.sqlite")));
    ASSERT_TRUE(h.store) << h.error.toStdString();
    CurvesView view;
    view.setStore(h.store.get(), h.path);
    view.showRuns({ids[0], ids[1]});
    ASSERT_TRUE(view.showMetric("validation/loss"));
    view.setSmoothing(0.9);
    const QStringList rows = view.rawDataCsv().split('\n', Qt::SkipEmptyParts);
    ASSERT_EQ(rows.size(), 1 + 2 + 1002);  // header, near-floor's 2 points, learned's 1002
    EXPECT_EQ(rows[0], "run,metric,step,value,wall_time");
    EXPECT_TRUE(rows.contains("near-floor,validation/loss,200,6.8499999999999996,2.000"))
        << rows.mid(0, 4).join(" | ").toStdString();
    // The stored value of every point, read back exactly.
    const auto stored = h.store->metrics(ids[1], "validation/loss");
    int matched = 0;
    for (const auto& p : stored)
        matched += rows.contains(QString("learned,validation/loss,%1,%2,%3")
                                     .arg(p.step)
                                     .arg(QString::number(p.value, 'g', 17))
                                     .arg(QString::number(p.wall_time, 'f', 3)));
    EXPECT_EQ(matched, int(stored.size()));
    // The drawn data differs: smoothed values are not the stored ones.
    EXPECT_NE(view.dataCsv(), view.rawDataCsv());
}

TEST(ClaimsView, ShowTheRunsChecksTheClaimsRunsInTheCurvesView) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::int64_t ids[3];
    fillFloorStore(dir.file("db.sqlite"), ids);
    MainWindow window;
    window.show();  // the banner counts only when visible
    ASSERT_TRUE(window.openDatabase(QString::fromStdString(dir.file("db.sqlite"))));
    auto* claims = window.findChild<ClaimsView*>();
    auto* curves = window.findChild<CurvesView*>();
    auto* tabs = window.findChild<QTabWidget*>();
    ASSERT_TRUE(claims && curves && tabs);
    emit claims->runsRequested("curves", "fl", {"learned", "near-floor"});
    EXPECT_EQ(tabs->currentWidget(), curves);
    QStringList checked;
    auto* list = curves->findChild<QListWidget*>();
    ASSERT_TRUE(list);
    for (int i = 0; i < list->count(); ++i)
        if (list->item(i)->checkState() == Qt::Checked) checked << list->item(i)->text();
    EXPECT_EQ(checked, (QStringList{"near-floor", "learned"}));  // the list's order
    EXPECT_EQ(window.bannerText(), "");
    // A claim about an experiment the store does not hold says so in the banner.
    emit claims->runsRequested("glue", "nope", {});
    EXPECT_TRUE(window.bannerText().contains("nope")) << window.bannerText().toStdString();
    EXPECT_EQ(tabs->currentWidget(), curves);
}

// The Claims view ranks the experiment's variants from the store itself: one seed each, so
// the loss ranking has no test and one group, and says so.
TEST(ClaimsView, RanksTheVariantsOfTheExperimentShown) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::int64_t ids[3];
    StoreHandle h = openFloorStore(dir, ids);
    ASSERT_TRUE(h.store) << h.error.toStdString();
    ClaimsView view;
    view.setStore(h.store.get(), h.path);
    view.show();  // the claims and the ranking are computed when the view is looked at
    ASSERT_EQ(view.rankings().size(), 1u);  // no task results: the loss ranking only
    EXPECT_EQ(view.rankingRows(), (QStringList{"1 learned 1 5.900  a", "2 no-floor 1 6.000  a",
                                               "3 near-floor 1 6.850  a"}));
    EXPECT_NE(view.rankings()[0].note.find("no test"), std::string::npos);
}

// The readout of the paper's 30% claim is withheld, with the reason, on runs that learned
// nothing and on a crossing the curve leaves again; given on a crossing it keeps.
TEST(CurvesView, StepsToReachAreWithheldOnFlatRunsAndOnCrossingsNotKept) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    {
        ResultStore store = ResultStore::open(dir.file("db.sqlite"));
        const auto exp = store.get_or_create_experiment("r", "r.yaml", "name: r\n");
        // base ends at 5.0; keeps reaches 5.0 at step 50 and stays; leaves reaches it at 30 and
        // is back above it at 40; flat ends above its floor (it learned nothing).
        const std::vector<std::pair<const char*, std::vector<double>>> runs = {
            {"base", {8, 7, 6, 5.5, 5.2, 5.1, 5.0}},
            {"keeps", {8, 6, 5.5, 5.3, 5.1, 4.9, 4.8}},
            {"leaves", {8, 6, 5.5, 4.9, 5.2, 5.3, 5.4}},
            {"flat", {8, 7.5, 7.2, 7.0, 4.9, 6.95, 6.9}}};
        for (const auto& [name, losses] : runs) {
            experiments::RunRecord run;
            run.experiment_id = exp;
            run.name = run.variant = name;
            run.status = "finished";
            const auto id = store.upsert_run(run);
            std::vector<experiments::MetricPoint> points;
            for (size_t i = 0; i < losses.size(); ++i)
                points.push_back({"train/loss", std::int64_t(i * 10), losses[i], double(i)});
            points.push_back({"validation/loss", 60, losses.back(), 6.0});
            store.add_metrics(id, points);
            store.add_params(id, {{"floor.unigram_nats", "6.919214"}});
        }
    }
    StoreHandle h = openStoreReadOnly(QString::fromStdString(dir.file("db.sqlite")));
    ASSERT_TRUE(h.store) << h.error.toStdString();
    CurvesView view;
    view.setStore(h.store.get(), h.path);
    view.setSmoothing(0);
    view.showRuns(runIdsByName(*h.store, "r", {}));
    ASSERT_TRUE(view.showMetric("train/loss"));
    auto* baseline = view.findChild<QComboBox*>("baseline");
    ASSERT_TRUE(baseline);
    baseline->setCurrentText("base");
    const QString text = view.readout();
    EXPECT_TRUE(text.contains("keeps: step 50 (83% of the baseline's steps)"))
        << text.toStdString();
    EXPECT_TRUE(
        text.contains("leaves: withheld, it reaches the value at step 30 but is back past "
                      "it at step 40"))
        << text.toStdString();
    EXPECT_TRUE(text.contains("flat: withheld, it learned nothing")) << text.toStdString();
    // A baseline that learned nothing gives no readout at all.
    baseline->setCurrentText("flat");
    EXPECT_TRUE(view.readout().contains("withheld: the baseline flat learned nothing"))
        << view.readout().toStdString();
}
