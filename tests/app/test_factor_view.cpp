// The factor view on a hand-made factorial store (2 factors x 2 levels x 2 seeds, losses with
// known effects), driven with real mouse events (QTest), offscreen: the lines, the main effects
// and the interaction grid show the core's numbers; dragging along an axis brushes it and
// filters the table; a click on an axis clears the brush; a click on a run's line opens its
// curves in the main window.
#include <gtest/gtest.h>

#include <QApplication>
#include <QListWidget>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTest>
#include <cmath>

#include "app_test_util.h"
#include "core/factor_data.h"
#include "core/store_access.h"
#include "engine/config.h"
#include "experiments/result_store.h"
#include "views/curves_view.h"
#include "views/factor_view.h"
#include "views/main_window.h"
#include "views/parallel_coordinates.h"

using namespace app;

namespace {

double lossOf(bool untie, bool t5, int seed) {
    return 5.0 + 0.1 * untie + 0.3 * t5 + 0.05 * (untie && t5) + (seed == 1 ? -0.01 : 0.01);
}

// Experiment "fact": untie_cls x relative_position x seeds 1, 2, each run with a final
// validation loss and a train/loss curve.
void fillFactorial(const std::string& db) {
    auto store = experiments::ResultStore::open(db);
    const auto exp = store.get_or_create_experiment("fact", "fact.yaml", "name: fact\n");
    for (int untie = 0; untie < 2; ++untie)
        for (int t5 = 0; t5 < 2; ++t5)
            for (int seed = 1; seed <= 2; ++seed) {
                engine::PretrainConfig c;
                c.model = engine::make_model_config("tupe-a", "tiny");
                c.model.untie_cls = untie;
                c.model.relative_position = t5 ? "t5" : "none";
                c.train.seed = uint64_t(seed);
                experiments::RunRecord r;
                r.experiment_id = exp;
                r.name = r.variant =
                    QString("u%1t%2@seed%3").arg(untie).arg(t5).arg(seed).toStdString();
                r.seed = seed;
                r.status = "finished";
                r.config_text = engine::config_to_text(c);
                const auto id = store.upsert_run(r);
                store.add_metrics(id, {{"validation/loss", 20, lossOf(untie, t5, seed), 2.0},
                                       {"train/loss", 10, 7.0, 1.0},
                                       {"train/loss", 20, lossOf(untie, t5, seed), 2.0}});
            }
}

struct Fixture {
    app_test::TempDir dir;
    StoreHandle store;
    Fixture() {
        app_test::ensureApplication();
        fillFactorial(dir.file("db.sqlite"));
        store = openStoreReadOnly(QString::fromStdString(dir.file("db.sqlite")));
    }
};

// Lays the widget out and draws it, so that pixels map to coordinates.
void settle(QWidget* w) {
    w->resize(1400, 950);
    w->show();
    for (int i = 0; i < 5; ++i) QApplication::processEvents();
    for (auto* p : w->findChildren<QCustomPlot*>()) p->replot();
    QApplication::processEvents();
}

int axisIndex(const ParallelCoordinatesPlot* p, const QString& key) {
    for (size_t i = 0; i < p->axes().size(); ++i)
        if (p->axes()[i].key == key) return int(i);
    return -1;
}

}  // namespace

TEST(FactorView, ShowsTheCoresEffectsAsLinesPanelsAndAGrid) {
    Fixture fx;
    ASSERT_TRUE(fx.store.store) << fx.store.error.toStdString();
    FactorView view;
    view.setStore(fx.store.store.get(), fx.store.path);
    ASSERT_TRUE(view.table().has_value());
    ASSERT_EQ(view.table()->factors.size(), 2u);
    EXPECT_EQ(view.metricBox()->currentData().toString(), "val_loss");
    // The same numbers as the core's main effects.
    const auto expected = experiments::main_effects(*view.table(), "val_loss");
    ASSERT_EQ(view.effects().effects.size(), 2u);
    EXPECT_DOUBLE_EQ(view.effects().effects[1].contrast.estimate,
                     expected.effects[1].contrast.estimate);
    // One panel per factor, one pooled graph each, its points the level means.
    EXPECT_EQ(view.effectsPlot()->axisRectCount(), 2);
    ASSERT_EQ(view.effectsPlot()->graphCount(), 2);
    EXPECT_NEAR(view.effectsPlot()->graph(1)->data()->at(1)->value, 5.275, 1e-12);
    // Split by the other factor: two graphs per panel.
    view.withinBox()->setCurrentIndex(view.withinBox()->findData("model.relative_position"));
    EXPECT_EQ(view.effectsPlot()->graphCount(), 2);  // untie_cls within none and within t5
    EXPECT_NEAR(view.effects().effects[1].contrast.estimate, 0.15, 1e-12);
    // The interaction grid: untie_cls rows x relative_position columns of cell means.
    view.interactionBoxA()->setCurrentText("model.untie_cls");
    view.interactionBoxB()->setCurrentText("model.relative_position");
    const auto& grid = view.interactionPlot()->data();
    ASSERT_EQ(grid.values.size(), 4u);
    EXPECT_NEAR(grid.values[3], 5.45, 1e-12);
    EXPECT_EQ(view.runTable()->model()->rowCount(), 8);
    EXPECT_TRUE(view.summaryLabel()->text().contains("8 of 8 runs"))
        << view.summaryLabel()->text().toStdString();
}

TEST(FactorView, DraggingAlongAnAxisBrushesItAndFiltersTheTable) {
    Fixture fx;
    FactorView view;
    view.setStore(fx.store.store.get(), fx.store.path);
    settle(&view);
    ParallelCoordinatesPlot* p = view.parallelPlot();
    const int axis = axisIndex(p, "val_loss");
    ASSERT_GE(axis, 0);
    // Drag from below the loss axis' bottom to 40% of its height: the runs below 5.178.
    QTest::mousePress(p, Qt::LeftButton, {}, p->pixelAt(axis, -0.05));
    QTest::mouseMove(p, p->pixelAt(axis, 0.2));
    QTest::mouseMove(p, p->pixelAt(axis, 0.4));
    QTest::mouseRelease(p, Qt::LeftButton, {}, p->pixelAt(axis, 0.4));
    ASSERT_EQ(p->brushes().size(), 1u);
    int inside = 0;
    for (double pos : p->axes()[size_t(axis)].position) inside += pos <= p->brushes()[0].hi + 1e-9;
    EXPECT_EQ(inside, 4);  // u0t0 and u1t0, both seeds
    EXPECT_EQ(view.runTable()->model()->rowCount(), 4);
    EXPECT_TRUE(view.summaryLabel()->text().contains("4 of 8 runs"));
    // A click on the axis clears its brush.
    QTest::mouseClick(p, Qt::LeftButton, {}, p->pixelAt(axis, 0.7));
    EXPECT_TRUE(p->brushes().empty());
    EXPECT_EQ(view.runTable()->model()->rowCount(), 8);
}

TEST(FactorView, AClickOnARunsLineOpensItsCurves) {
    Fixture fx;
    MainWindow window;
    ASSERT_TRUE(window.openDatabase(QString::fromStdString(fx.dir.file("db.sqlite"))));
    auto* view = window.findChild<FactorView*>();
    auto* tabs = window.findChild<QTabWidget*>();
    auto* curves = window.findChild<CurvesView*>();
    ASSERT_TRUE(view && tabs && curves);
    tabs->setCurrentWidget(view);
    settle(&window);
    ParallelCoordinatesPlot* p = view->parallelPlot();
    const int last = axisIndex(p, "val_loss");
    ASSERT_GE(last, 1);
    // 80% of the way from the last factor axis to the loss axis, on run 5's line (u1t0@seed2):
    // there every run's line is apart from the others.
    const int run = 5;
    const QPoint a = p->pixelAt(last - 1, p->axes()[size_t(last - 1)].position[run]);
    const QPoint b = p->pixelAt(last, p->axes()[size_t(last)].position[run]);
    const QPoint at = a + (b - a) * 0.8;
    QSignalSpy chosen(view, &FactorView::runsChosen);
    QTest::mouseClick(p, Qt::LeftButton, {}, at);
    ASSERT_EQ(chosen.count(), 1);
    const auto ids = chosen[0][0].value<QList<qint64>>();
    ASSERT_EQ(ids.size(), 1);
    EXPECT_EQ(ids[0], view->table()->runs[run].run_id);
    // The main window opened the run's curves.
    EXPECT_EQ(tabs->currentWidget(), curves);
    QStringList checked;
    auto* list = curves->findChild<QListWidget*>();
    for (int i = 0; i < list->count(); ++i)
        if (list->item(i)->checkState() == Qt::Checked) checked << list->item(i)->text();
    EXPECT_EQ(checked, QStringList{"u1t0@seed2"});
}

TEST(FactorData, BrushesKeepTheRunsInsideEveryRangeAndColoursFollowTheMetric) {
    Fixture fx;
    const auto t = experiments::load_factor_table(*fx.store.store, "fact");
    const auto axes = parallelAxes(t, {"val_loss"});
    ASSERT_EQ(axes.size(), 3u);
    EXPECT_TRUE(axes[0].categorical);
    EXPECT_EQ(axes[0].levels, (QStringList{"none", "t5"}));
    EXPECT_DOUBLE_EQ(axes[2].lo, 4.99);
    EXPECT_DOUBLE_EQ(axes[2].position[0], 0.0);  // u0t0@seed1: the lowest loss
    EXPECT_EQ(axes[0].label(1.0), "t5");
    // relative_position = t5 and the upper half of the loss: the four t5 runs.
    const auto keep = brushedRuns(axes, {{0, 0.9, 1.0}, {2, 0.5, 1.0}});
    EXPECT_EQ(std::count(keep.begin(), keep.end(), true), 4);
    const auto colours = runColours(t, "val_loss");
    // Lower is better: the best run is the palette's top (yellow), the worst its bottom.
    EXPECT_EQ(colours[0], QColor(253, 231, 37));
    EXPECT_EQ(colours[7], QColor(68, 1, 84));
}
