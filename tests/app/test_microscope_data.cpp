// The stored ablation and head types in the app (core/microscope_data.h,
// views/microscope_panels.h): a hand-written ablation.json (2 layers x 2 heads and the whole model)
// and heads.json (three snapshots out of order) parsed to their values, the heads grouped in the
// rule's order, the type counts over steps, the per-head Spearman against its closed form, and the
// correlation maps and head gallery showing both from a store that records them as artifacts.
#include <gtest/gtest.h>

#include <QApplication>
#include <QTableWidget>
#include <QTest>
#include <QTreeWidget>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "app_test_util.h"
#include "core/analysis_service.h"
#include "core/microscope_data.h"
#include "core/store_access.h"
#include "experiments/result_store.h"
#include "views/analysis_views.h"
#include "views/microscope_panels.h"

using namespace app;
namespace fs = std::filesystem;

namespace {

// Shares 0.1, 0.4, 0.3, 0.9 and changes 0, 0.2, 0.5, 0.7: ranks (1, 3, 2, 4) and (1, 2, 3, 4),
// sum d^2 = 2, so Spearman's rho = 1 - 6 * 2 / (4 * (16 - 1)) = 0.8.
const char* const kAblationJson = R"({"checkpoints": [{
  "checkpoint": "runs/s/tupe-a/checkpoint-6.pt", "variant": "tupe-a", "text": "held-out",
  "positions": "TUPE-A", "mode": "zero", "patch_from": null, "scope": "per head: untied",
  "length": 24, "windows": 9, "masked_tokens": 31, "loss": 5.5, "share_use_spearman": 0.8,
  "rows": [
    {"layer": 0, "head": 0, "loss": 5.5, "delta_loss": 0.0, "ci_lo": -0.01, "ci_hi": 0.01, "positional_share": 0.1},
    {"layer": 0, "head": 1, "loss": 5.7, "delta_loss": 0.2, "ci_lo": 0.1, "ci_hi": 0.3, "positional_share": 0.4},
    {"layer": 1, "head": 0, "loss": 6.0, "delta_loss": 0.5, "ci_lo": 0.4, "ci_hi": 0.6, "positional_share": 0.3},
    {"layer": 1, "head": 1, "loss": 6.2, "delta_loss": 0.7, "ci_lo": 0.6, "ci_hi": 0.8, "positional_share": 0.9},
    {"layer": -1, "head": -1, "loss": 6.8, "delta_loss": 1.3, "ci_lo": 1.2, "ci_hi": 1.4, "positional_share": null}
  ]}]})";

std::string headJson(int layer, int head, const char* type, double prev, double local,
                     double entropy) {
    return "{\"layer\": " + std::to_string(layer) + ", \"head\": " + std::to_string(head) +
           ", \"type\": \"" + type + "\", \"rows\": 40, \"duplicate_rows\": 0, \"scores\": " +
           "{\"cls_sink\": 0.05, \"sep_sink\": null, \"previous\": " + std::to_string(prev) +
           ", \"next\": 0.1, \"local\": " + std::to_string(local) +
           ", \"entropy\": " + std::to_string(entropy) + "}}";
}

std::string snapshotJson(int step, const std::vector<std::string>& heads) {
    std::string s = "{\"checkpoint\": \"c-" + std::to_string(step) +
                    ".pt\", \"step\": " + std::to_string(step) + ", \"heads\": [";
    for (size_t i = 0; i < heads.size(); ++i) s += (i ? ", " : "") + heads[i];
    return s + "]}";
}

// Steps 6, 0, 3 (out of order). At step 6: L0.H1 and L1.H0 previous (0.8, 0.6), L0.H0
// local, L1.H1 mixed.
std::string headTypesJson() {
    const std::string broad = "broad";
    return "{\"rule\": \"first that holds\", \"runs\": [{\"run\": \"tupe-a\", \"text\": \"t\", "
           "\"checkpoints\": [" +
           snapshotJson(6, {headJson(0, 0, "local", 0.1, 0.7, 0.5),
                            headJson(0, 1, "previous", 0.8, 0.9, 0.2),
                            headJson(1, 0, "previous", 0.6, 0.8, 0.3),
                            headJson(1, 1, "mixed", 0.2, 0.3, 0.6)}) +
           ", " +
           snapshotJson(0, {headJson(0, 0, "broad", 0.04, 0.2, 0.95),
                            headJson(0, 1, "broad", 0.04, 0.2, 0.95),
                            headJson(1, 0, "broad", 0.04, 0.2, 0.95),
                            headJson(1, 1, "broad", 0.04, 0.2, 0.95)}) +
           ", " +
           snapshotJson(
               3,
               {headJson(0, 0, "broad", 0.1, 0.3, 0.9), headJson(0, 1, "previous", 0.55, 0.6, 0.6),
                headJson(1, 0, "mixed", 0.2, 0.4, 0.7), headJson(1, 1, "broad", 0.1, 0.3, 0.85)}) +
           "]}]}";
}

void writeText(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

}  // namespace

TEST(AblationJson, RowsIntervalsSharesAndTheWholeModel) {
    const auto all = parseAblationJson(kAblationJson, "a.json");
    ASSERT_EQ(all.size(), 1u);
    const AblationResult& r = all[0];
    EXPECT_EQ(r.mode, "zero");
    EXPECT_EQ(r.masked, 31);
    EXPECT_DOUBLE_EQ(r.loss, 5.5);
    EXPECT_DOUBLE_EQ(r.shareUseSpearman, 0.8);
    ASSERT_EQ(r.heads.size(), 4u);
    ASSERT_EQ(r.other.size(), 1u);
    EXPECT_EQ(r.layers(), 2);
    EXPECT_EQ(r.headsPerLayer(), 2);
    const AblationRow* h = r.find(1, 0);
    ASSERT_NE(h, nullptr);
    EXPECT_DOUBLE_EQ(h->delta, 0.5);
    EXPECT_DOUBLE_EQ(h->share, 0.3);
    EXPECT_EQ(h->deltaText(), "+0.500 [+0.400, +0.600]");
    EXPECT_EQ(h->verdict(), "used");
    EXPECT_EQ(r.find(0, 0)->verdict(), "~");
    const AblationRow* whole = r.wholeModel();
    ASSERT_NE(whole, nullptr);
    EXPECT_EQ(whole->name(), "whole model");
    EXPECT_TRUE(std::isnan(whole->share));
    const plotting::Heatmap map = ablationHeatmap(r, "t");
    EXPECT_EQ(map.rows, 2);
    EXPECT_EQ(map.cols, 2);
    EXPECT_EQ(map.values, (std::vector<double>{0.0, 0.2, 0.5, 0.7}));
    EXPECT_TRUE(map.symmetric);
    // Spearman over the heads against its closed form (above); the ablation's own share.
    const HeadScatter s = headScatter(r, nullptr, kAblationShare);
    EXPECT_EQ(s.rho.n, 4);
    EXPECT_NEAR(s.rho.rho, 0.8, 1e-12);
    EXPECT_EQ(s.names, (QStringList{"L0.H0", "L0.H1", "L1.H0", "L1.H1"}));
    // A property without an analysis is NaN everywhere: no correlation.
    EXPECT_EQ(headScatter(r, nullptr, "symmetry").rho.n, 0);
    // Malformed text names the file.
    try {
        parseAblationJson("{\"checkpoints\": [", "bad.json");
        ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("bad.json: malformed JSON", 0), 0u) << e.what();
    }
    EXPECT_THROW(parseAblationJson("{\"runs\": []}", "heads.json"), std::runtime_error);
}

TEST(HeadTypesJson, SnapshotsByStepGroupsInRuleOrderAndCounts) {
    const HeadTypesFile f = parseHeadTypesJson(QByteArray::fromStdString(headTypesJson()), "h");
    ASSERT_EQ(f.runs.size(), 1u);
    const HeadTypeRun& run = f.runs[0];
    ASSERT_EQ(run.snapshots.size(), 3u);
    EXPECT_EQ(run.snapshots[0].step, 0);
    EXPECT_EQ(run.snapshots[2].step, 6);
    const HeadTypeEntry& prev = run.snapshots[2].heads[1];
    EXPECT_EQ(prev.type, "previous");
    EXPECT_DOUBLE_EQ(prev.typeScore(), 0.8);
    EXPECT_TRUE(std::isnan(prev.scores.at("sep_sink")));             // null
    EXPECT_DOUBLE_EQ(run.snapshots[0].heads[0].typeScore(), 0.95);   // broad: entropy
    EXPECT_TRUE(std::isnan(run.snapshots[2].heads[3].typeScore()));  // mixed: none

    const auto groups = groupHeadsByType(run.snapshots.back());
    ASSERT_EQ(groups.size(), 3u);
    EXPECT_EQ(groups[0].type, "previous");
    ASSERT_EQ(groups[0].heads.size(), 2u);
    EXPECT_EQ(groups[0].heads[0].name(), "L0.H1");  // 0.8 before 0.6
    EXPECT_EQ(groups[0].heads[1].name(), "L1.H0");
    EXPECT_EQ(groups[1].type, "local");
    EXPECT_EQ(groups[2].type, "mixed");

    const HeadTypeCounts c = headTypeCounts(run);
    EXPECT_EQ(c.steps, (std::vector<double>{0, 3, 6}));
    ASSERT_EQ(c.counts.size(), 4u);  // previous, local, broad, mixed
    EXPECT_EQ(c.counts[0].first, "previous");
    EXPECT_EQ(c.counts[0].second, (std::vector<double>{0, 1, 2}));
    EXPECT_EQ(c.counts[1].first, "local");
    EXPECT_EQ(c.counts[2].first, "broad");
    EXPECT_EQ(c.counts[2].second, (std::vector<double>{4, 2, 0}));
    EXPECT_EQ(c.counts[3].second, (std::vector<double>{0, 1, 1}));
    EXPECT_EQ(headTypeOrder().front(), "cls_sink");
    EXPECT_EQ(headTypeOrder().back(), "mixed");
}

// A store whose tupe-a run has a checkpoint and both files as artifacts: the correlation maps
// show its ablation rows (a click on the map marks the head), the gallery its types and counts.
TEST(MicroscopeViews, MapsShowTheAblationAndTheGalleryTheHeadTypes) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    const fs::path runDir = dir.path() / "runs" / "tupe-a";
    writeText(runDir / "ablation" / "ablation.json", kAblationJson);
    writeText(runDir / "heads" / "heads.json", headTypesJson());
    writeText(runDir / "checkpoint-6.pt", "not a real checkpoint");
    const std::string db = (dir.path() / "results.sqlite").string();
    {
        auto store = experiments::ResultStore::open(db);
        const auto exp = store.get_or_create_experiment("s", "s.yaml", "name: s\n");
        experiments::RunRecord run;
        run.experiment_id = exp;
        run.name = run.variant = "tupe-a";
        run.status = "finished";
        const auto id = store.upsert_run(run);
        experiments::CheckpointRecord c;
        c.run_id = id;
        c.step = 6;
        c.path = (runDir / "checkpoint-6.pt").string();
        store.add_checkpoint(c);
        for (const char* file : {"ablation/ablation.json", "heads/heads.json"}) {
            experiments::ArtifactRecord a;
            a.run_id = id;
            a.kind = "x-json";
            a.path = (runDir / file).string();
            store.add_artifact(a);
        }
    }
    StoreHandle h = openStoreReadOnly(QString::fromStdString(db));
    ASSERT_TRUE(h.store) << h.error.toStdString();
    QStringList errors;
    AnalysisService service;
    CorrelationMapsView maps(&service);
    QObject::connect(&maps, &WorkbenchView::errorRaised, [&](const QString& m) { errors << m; });
    maps.resize(1200, 900);
    maps.setStore(h.store.get(), h.path);
    AblationPanel* panel = maps.ablationPanel(0);
    ASSERT_EQ(panel->table()->rowCount(), 5);
    EXPECT_EQ(panel->table()->item(4, 0)->text(), "whole model");
    EXPECT_EQ(panel->table()->item(4, 1)->text(), "+1.300 [+1.200, +1.400]");
    EXPECT_EQ(panel->table()->item(3, 2)->text(), "0.900");
    EXPECT_EQ(panel->heatmap()->data().values, (std::vector<double>{0.0, 0.2, 0.5, 0.7}));
    EXPECT_TRUE(panel->summary()->text().contains("0.80"));
    // A click on cell (layer 1, head 0) of the map, as the user clicks it.
    maps.show();
    QApplication::processEvents();
    HeatmapPlot* map = panel->heatmap();
    map->replot();
    const QPoint cell(int(map->xAxis->coordToPixel(0)), int(map->yAxis->coordToPixel(1)));
    QTest::mouseClick(map, Qt::LeftButton, {}, cell);
    ASSERT_EQ(panel->table()->selectionModel()->selectedRows().size(), 1);
    EXPECT_EQ(panel->table()->selectionModel()->selectedRows().front().row(), 2);  // L1.H0

    HeadGalleryView gallery(&service);
    QObject::connect(&gallery, &WorkbenchView::errorRaised, [&](const QString& m) { errors << m; });
    gallery.setStore(h.store.get(), h.path);
    QTreeWidget* tree = gallery.headTypesPanel()->tree();
    ASSERT_EQ(tree->topLevelItemCount(), 3);
    EXPECT_EQ(tree->topLevelItem(0)->text(0), "previous (2)");
    EXPECT_EQ(tree->topLevelItem(0)->child(0)->text(0), "L0.H1");
    EXPECT_EQ(tree->topLevelItem(0)->child(0)->text(1), "0.80");
    EXPECT_EQ(gallery.headTypesPanel()->counts()->graphCount(), 4);
    EXPECT_TRUE(errors.isEmpty()) << errors.join("; ").toStdString();
}

// Without a stored ablation the panel says so in one readable line: no empty plot whose hint
// its width clips.
TEST(MicroscopeViews, AnAblationPanelWithoutAnAblationShowsOneReadableLine) {
    app_test::ensureApplication();
    AblationPanel panel;
    panel.resize(400, 300);
    panel.show();
    const QString line =
        "No ablation stored for bert-a: add analysis.ablation (zero, mean or shuffle) to its "
        "study and run it again, or run tupe ablate on its checkpoint.";
    panel.setAblation(nullptr, "bert-a", line);
    EXPECT_EQ(panel.summary()->text(), line);
    EXPECT_TRUE(panel.summary()->isVisible());
    EXPECT_TRUE(panel.summary()->wordWrap());
    EXPECT_FALSE(panel.heatmap()->isVisible());
    EXPECT_FALSE(panel.table()->isVisible());
}
