// The Properties view's data without widgets: hand-written `tupe analyze` property entries
// (index.json and .npy maps and spectra, as analysis/properties.h describes them) in a temp dir,
// the runs x properties table and its colour scale, the Delta_pos map and spectrum behind a cell,
// a real results store naming the analysis directories as artifacts with fine-tuning scores, and
// Spearman's rank correlation against known answers.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QString>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/npy_format.h"
#include "app_test_util.h"
#include "core/microscope_data.h"
#include "core/properties_data.h"
#include "core/store_access.h"
#include "experiments/report.h"
#include "experiments/result_store.h"
#include "views/plot_util.h"
#include "views/properties_view.h"

using namespace app;
using experiments::ResultStore;

namespace {

namespace fs = std::filesystem;

/// A float32 .npy through the analysis layer's header encoder (numpy's layout).
void writeNpyF4(const fs::path& path, const std::vector<int64_t>& shape,
                const std::vector<float>& values) {
    fs::create_directories(path.parent_path());
    std::ofstream f(path, std::ios::binary);
    f << analysis::encode_npy_header("<f4", shape, path.string());
    f.write(reinterpret_cast<const char*>(values.data()),
            std::streamsize(values.size() * sizeof(float)));
}

/// One "property" entry's statistics: positional_share = base + head / 10 (head -1: base),
/// static_share null, rank90 = 2 + head, the rest fixed.
std::string propertyEntry(int layer, int head, double base, const std::string& label) {
    std::ostringstream s;
    const double share = base + (head < 0 ? 0.0 : head / 10.0);
    s << R"({"file": "properties/properties.csv", "what": "property", "description": "d", )"
      << R"("layer": )" << layer << R"(, "head": )" << (head < 0 ? "null" : std::to_string(head))
      << (label.empty() ? "" : R"(, "label": ")" + label + "\"")
      << R"(, "statistics": {"positional_share": )" << share
      << R"(, "static_share": null, "monotonicity_left": 0.5, "monotonicity_right": -0.25, )"
      << R"("translation_invariance": 0.9, "symmetry": 1, "rank90": )" << (2 + std::max(0, head))
      << R"(, "toeplitz_residual": 0.1, "locality": 0.3, "attention_symmetry": 0.8, )"
      << R"("mean_distance": 0.2, "entropy": 0.7}})";
    return s.str();
}

/// An analysis directory of 2 layers x 2 heads with properties: index.json with "property"
/// entries (per head and head -1) of both layers, delta_pos maps (3, 3) (head h: every value
/// h + 1) and the spectrum (2, 3, 3) of layer 1 (and of layer 0 when `mapsOfLayer0`) and, when
/// `withStatic`, static_pos of (1, 0). `base` shifts positional_share.
void writePropertyAnalysis(const fs::path& dir, const std::string& variant, double base,
                           bool withStatic = false, bool mapsOfLayer0 = false) {
    std::vector<std::string> files;
    for (int l = 0; l < 2; ++l)
        for (int h = -1; h < 2; ++h)
            files.push_back(propertyEntry(l, h, base + l, h < 0 ? "" : h == 0 ? "local" : "broad"));
    for (int l = mapsOfLayer0 ? 0 : 1; l < 2; ++l) {
        const std::string ls = std::to_string(l);
        for (int h = 0; h < 2; ++h) {
            const std::string f = "properties/delta_l" + ls + "_h" + std::to_string(h) + ".npy";
            writeNpyF4(dir / f, {3, 3}, std::vector<float>(9, float(h + 1)));
            files.push_back(R"({"file": ")" + f +
                            R"(", "what": "delta_pos", "description": "d", "layer": )" + ls +
                            R"(, "head": )" + std::to_string(h) + R"(, "shape": [3, 3]})");
        }
        // spectrum (H=2, 3, K=3): head h, line w, k -> 10^(h + 1) * (w + 1) / (k + 1)
        std::vector<float> spectrum;
        for (int h = 0; h < 2; ++h)
            for (int w = 0; w < 3; ++w)
                for (int k = 0; k < 3; ++k)
                    spectrum.push_back(float(std::pow(10.0, h + 1) * (w + 1) / (k + 1)));
        const std::string f = "properties/spectrum_l" + ls + ".npy";
        writeNpyF4(dir / f, {2, 3, 3}, spectrum);
        files.push_back(R"({"file": ")" + f +
                        R"(", "what": "spectrum", "description": "d", "layer": )" + ls +
                        R"(, "head": null, "shape": [2, 3, 3]})");
    }
    if (withStatic) {
        writeNpyF4(dir / "properties/static_l1_h0.npy", {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
        files.push_back(
            R"({"file": "properties/static_l1_h0.npy", "what": "static_pos", "description": "d", )"
            R"("layer": 1, "head": 0, "shape": [3, 3]})");
    }
    std::ostringstream index;
    index << R"({"model": "ckpt.pt", "variant": ")" << variant
          << R"(", "config": {"num_hidden_layers": 2, "num_attention_heads": 2}, )"
          << R"("notes": [], "skipped": [], "files": [)";
    for (size_t i = 0; i < files.size(); ++i) index << (i ? ",\n" : "\n") << files[i];
    index << "]}\n";
    fs::create_directories(dir);
    std::ofstream(dir / "index.json") << index.str();
}

/// An analysis directory from before the properties section: no "property" entry.
void writePlainAnalysis(const fs::path& dir) {
    fs::create_directories(dir);
    std::ofstream(dir / "index.json") << R"({"model": "ckpt.pt", "variant": "bert-a",
 "config": {"num_hidden_layers": 2, "num_attention_heads": 2}, "notes": [], "skipped": [],
 "files": []})";
}

PropertyRun loadRun(const fs::path& dir, const QString& name, qint64 id) {
    PropertyRun r;
    r.runId = id;
    r.experiment = "zoo";
    r.name = name;
    r.analysis = std::make_shared<AnalysisData>(loadAnalysis(QString::fromStdString(dir.string())));
    return r;
}

void addFinetune(ResultStore& store, std::int64_t exp, std::int64_t parent, const std::string& name,
                 std::int64_t step, double lr, std::int64_t seed, double value) {
    experiments::RunRecord run;
    run.experiment_id = exp;
    run.kind = "finetune";
    run.name = name;
    run.parent_run_id = parent;
    run.status = "finished";
    const auto id = store.upsert_run(run);
    experiments::GlueResultRecord g;
    g.run_id = id;
    g.task = "syn-rte";
    g.split = "dev";
    g.metric = "accuracy";
    g.value = value;
    g.checkpoint_step = step;
    g.lr = lr;
    g.seed = seed;
    store.add_glue_result(g);
}

std::int64_t addPretrain(ResultStore& store, std::int64_t exp, const std::string& name) {
    experiments::RunRecord run;
    run.experiment_id = exp;
    run.name = run.variant = name;
    run.status = "finished";
    return store.upsert_run(run);
}

void addArtifact(ResultStore& store, std::int64_t run, const fs::path& path) {
    experiments::ArtifactRecord a;
    a.run_id = run;
    a.kind = "analysis-json";
    a.path = path.string();
    store.add_artifact(a);
}

/// A store of experiment "zoo" under `root` (returns the database's path): tupe-a with a plain
/// analysis at step 5 and one with properties (and a compare/ folder) at step 10, an
/// extrapolation figure and fine-tuning scores; bert-a with a plain analysis and a score; rope
/// with an analysis whose index.json is gone.
std::string fillZooStore(const fs::path& root) {
    const std::string db = (root / "results.sqlite").string();
    // tupe-a: step 5 analysed before the properties section, step 10 with it, an extrapolation.
    writePlainAnalysis(root / "runs/zoo/tupe-a/analysis/step5");
    writePropertyAnalysis(root / "runs/zoo/tupe-a/analysis/step10", "tupe-a", 0.1, false, true);
    writePropertyAnalysis(root / "runs/zoo/tupe-a/analysis/step10/compare", "bert-a", 0.9);
    fs::create_directories(root / "runs/zoo/tupe-a/extrapolation");
    QImage figure(160, 90, QImage::Format_RGB32);
    figure.fill(QColor(240, 200, 120));
    figure.save(QString::fromStdString(
        (root / "runs/zoo/tupe-a/extrapolation/extrapolation.png").string()));
    // tupe-a's stored ablation: shares 0.1, 0.4, 0.3, 0.9 against changes 0, 0.2, 0.5, 0.7
    // (Spearman 0.8) and the whole model.
    fs::create_directories(root / "runs/zoo/tupe-a/ablation");
    std::ofstream(root / "runs/zoo/tupe-a/ablation/ablation.json") << R"({"checkpoints": [{
 "checkpoint": "c.pt", "mode": "zero", "loss": 5, "share_use_spearman": 0.8, "rows": [
 {"layer": 0, "head": 0, "loss": 5, "delta_loss": 0, "ci_lo": 0, "ci_hi": 0, "positional_share": 0.1},
 {"layer": 0, "head": 1, "loss": 5, "delta_loss": 0.2, "ci_lo": 0, "ci_hi": 0, "positional_share": 0.4},
 {"layer": 1, "head": 0, "loss": 5, "delta_loss": 0.5, "ci_lo": 0, "ci_hi": 0, "positional_share": 0.3},
 {"layer": 1, "head": 1, "loss": 5, "delta_loss": 0.7, "ci_lo": 0, "ci_hi": 0, "positional_share": 0.9},
 {"layer": -1, "head": -1, "loss": 6, "delta_loss": 1, "ci_lo": 1, "ci_hi": 1, "positional_share": null}]}]})";
    // bert-a: only a plain analysis. rope: an index.json that is gone.
    writePlainAnalysis(root / "runs/zoo/bert-a/analysis/step10");
    {
        ResultStore store = ResultStore::open(db);
        const auto exp = store.get_or_create_experiment("zoo", "zoo.yaml", "name: zoo\n");
        const auto tupe = addPretrain(store, exp, "tupe-a");
        const auto bert = addPretrain(store, exp, "bert-a");
        const auto rope = addPretrain(store, exp, "rope");
        addArtifact(store, tupe, root / "runs/zoo/tupe-a/analysis/step10/index.json");
        addArtifact(store, tupe, root / "runs/zoo/tupe-a/analysis/step10/compare/index.json");
        addArtifact(store, tupe, root / "runs/zoo/tupe-a/analysis/step5/index.json");
        addArtifact(store, tupe, root / "runs/zoo/tupe-a/extrapolation/extrapolation.png");
        addArtifact(store, tupe, root / "runs/zoo/tupe-a/ablation/ablation.json");
        addArtifact(store, bert, root / "runs/zoo/bert-a/analysis/step10/index.json");
        addArtifact(store, rope, root / "runs/zoo/rope/analysis/step10/index.json");
        // tupe-a fine-tuned from steps 5 and 10; at 10: lr 1e-3 seeds 60, 70, 90 (median 70),
        // lr 1e-4 seed 50; the score is the last checkpoint's best-lr median.
        addFinetune(store, exp, tupe, "tupe-a/5/1", 5, 1e-3, 1, 99);
        addFinetune(store, exp, tupe, "tupe-a/10/1", 10, 1e-3, 1, 60);
        addFinetune(store, exp, tupe, "tupe-a/10/2", 10, 1e-3, 2, 70);
        addFinetune(store, exp, tupe, "tupe-a/10/3", 10, 1e-3, 3, 90);
        addFinetune(store, exp, tupe, "tupe-a/10/4", 10, 1e-4, 1, 50);
        addFinetune(store, exp, bert, "bert-a/10/1", 10, 1e-3, 1, 55);
    }
    return db;
}

}  // namespace

TEST(Spearman, KnownAnswers) {
    // Perfectly monotone (not linear): 1; reversed: -1.
    const std::vector<double> x{1, 2, 3, 4, 5};
    EXPECT_DOUBLE_EQ(spearman(x, {1, 8, 27, 64, 125}).rho, 1.0);
    EXPECT_EQ(spearman(x, {1, 8, 27, 64, 125}).n, 5);
    EXPECT_DOUBLE_EQ(spearman(x, {50, 40, 30, 20, 10}).rho, -1.0);
    // Two swapped pairs: 1 - 6 * 4 / (5 * 24) = 0.8.
    EXPECT_NEAR(spearman(x, {2, 1, 4, 3, 5}).rho, 0.8, 1e-12);
    // A tie: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): sqrt(0.9) (scipy.stats.spearmanr).
    EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}).rho, std::sqrt(0.9), 1e-12);
}

TEST(Spearman, FewerThanThreePairsOrConstantIsNaN) {
    EXPECT_TRUE(std::isnan(spearman({1, 2}, {2, 1}).rho));
    EXPECT_EQ(spearman({1, 2}, {2, 1}).n, 2);
    EXPECT_TRUE(std::isnan(spearman({}, {}).rho));
    EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {4, 4, 4}).rho));  // no ranking on one side
    // Pairs with a NaN on either side are left out: three pairs remain, reversed.
    const RankCorrelation r = spearman({1, NAN, 2, 3, 4}, {9, 1, 8, 7, NAN});
    EXPECT_EQ(r.n, 3);
    EXPECT_DOUBLE_EQ(r.rho, -1.0);
    EXPECT_EQ(spearman({1, NAN, 3}, {1, 2, 3}).n, 2);
    EXPECT_TRUE(std::isnan(spearman({1, NAN, 3}, {1, 2, 3}).rho));
}

TEST(Spearman, AverageRanksShareTies) {
    EXPECT_EQ(averageRanks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
    EXPECT_EQ(averageRanks({7, 7, 7}), (std::vector<double>{2, 2, 2}));
    EXPECT_TRUE(averageRanks({}).empty());
}

TEST(PropertyTable, MeanOfHeadsAndOneHeadFromIndex) {
    app_test::TempDir dir;
    writePropertyAnalysis(dir.path() / "a", "tupe-a", 0.1);
    writePropertyAnalysis(dir.path() / "b", "bert-a", 0.4);
    const std::vector<PropertyRun> runs = {loadRun(dir.path() / "a", "tupe-a", 1),
                                           loadRun(dir.path() / "b", "bert-a", 2)};
    ASSERT_TRUE(hasProperties(*runs[0].analysis));
    EXPECT_EQ(runs[0].analysis->layers, 2);

    const PropertyTable mean = buildPropertyTable(runs, 1, -1);
    EXPECT_EQ(mean.columns, propertyNames());
    EXPECT_EQ(mean.rowNames, (QStringList{"tupe-a", "bert-a"}));  // one experiment: no prefix
    EXPECT_EQ(mean.labels, (QStringList{"", ""}));
    EXPECT_EQ(mean.runIds, (std::vector<qint64>{1, 2}));
    const int share = mean.column("positional_share");
    EXPECT_NEAR(mean.value(0, share), 1.1, 1e-12);  // base 0.1 + layer 1
    EXPECT_NEAR(mean.value(1, share), 1.4, 1e-12);
    EXPECT_TRUE(std::isnan(mean.value(0, mean.column("static_share"))));  // null in the JSON
    EXPECT_DOUBLE_EQ(mean.value(0, mean.column("monotonicity_right")), -0.25);
    EXPECT_TRUE(std::isnan(mean.value(5, 0)));  // outside the table

    const PropertyTable head1 = buildPropertyTable(runs, 0, 1);
    EXPECT_EQ(head1.labels, (QStringList{"broad", "broad"}));
    EXPECT_NEAR(head1.value(0, share), 0.2, 1e-12);  // base 0.1 + head 1 / 10
    EXPECT_DOUBLE_EQ(head1.value(0, head1.column("rank90")), 3.0);
    // A head the analysis does not have: the row stays, every value NaN.
    const PropertyTable head5 = buildPropertyTable(runs, 0, 5);
    ASSERT_EQ(head5.rows(), 2);
    for (int c = 0; c < head5.columns.size(); ++c) EXPECT_TRUE(std::isnan(head5.value(0, c)));

    // Across experiments the rows name their experiment.
    std::vector<PropertyRun> two = runs;
    two[1].experiment = "other";
    EXPECT_EQ(buildPropertyTable(two, 1, -1).rowNames,
              (QStringList{"zoo: tupe-a", "other: bert-a"}));

    // The model: text, NaN dash, integer rank90, tooltip, header label, colour scale.
    app_test::ensureApplication();
    PropertyTableModel model;
    model.setTable(head1);
    ASSERT_EQ(model.rowCount(), 2);
    ASSERT_EQ(model.columnCount(), propertyNames().size());
    EXPECT_EQ(model.index(0, share).data().toString(), "0.200");
    EXPECT_EQ(model.index(0, head1.column("static_share")).data().toString(), "\u2013");
    EXPECT_EQ(model.index(0, head1.column("rank90")).data().toString(), "3");
    EXPECT_DOUBLE_EQ(model.index(1, share).data(Qt::UserRole).toDouble(), 0.5);
    EXPECT_TRUE(model.index(0, share).data(Qt::ToolTipRole).toString().contains("head 1 (broad)"));
    EXPECT_EQ(model.headerData(0, Qt::Vertical).toString(), "tupe-a  [broad]");
    EXPECT_EQ(model.headerData(share, Qt::Horizontal).toString(), "positional_share");
    const auto& lo = plotting::kSequentialPalette.front().color;
    const auto& hi = plotting::kSequentialPalette.back().color;
    EXPECT_EQ(model.index(0, share).data(Qt::BackgroundRole).value<QColor>(),
              QColor(lo.r, lo.g, lo.b));  // the column's minimum
    EXPECT_EQ(model.index(1, share).data(Qt::BackgroundRole).value<QColor>(),
              QColor(hi.r, hi.g, hi.b));  // its maximum
    const auto& nan = plotting::kNanColor;
    EXPECT_EQ(model.index(0, head1.column("static_share")).data(Qt::BackgroundRole).value<QColor>(),
              QColor(nan.r, nan.g, nan.b));

    // CSV and markdown.
    const QString csv = propertyTableCsv(head1);
    EXPECT_TRUE(csv.startsWith("run,label,positional_share,static_share,"));
    EXPECT_TRUE(csv.contains("\ntupe-a,broad,0.2,,0.5,-0.25,"));
    const QString md = propertyTableText(head1, "markdown");
    EXPECT_TRUE(md.startsWith("| run | pattern | positional_share |"));
    EXPECT_TRUE(md.contains("| tupe-a | broad | 0.200 | -- |"));
    EXPECT_TRUE(propertyTableText(head1, "latex").contains("positional\\_share"));
}

TEST(PropertyTable, ColumnScaleAndPalette) {
    PropertyTable t;
    t.columns = {"a", "b", "c"};
    t.rowNames = {"x", "y"};
    t.labels = {"", ""};
    t.values = {{-0.5, 1, NAN}, {0.25, 3, NAN}};
    const ColumnScale signedScale = columnScale(t, 0);
    EXPECT_TRUE(signedScale.diverging);
    EXPECT_DOUBLE_EQ(signedScale.lo, -0.5);
    EXPECT_DOUBLE_EQ(signedScale.hi, 0.5);
    const auto& white = plotting::kDivergingPalette[2].color;
    EXPECT_EQ(scaleColor(signedScale, 0.0), QColor(white.r, white.g, white.b));  // 0 is white
    const ColumnScale seq = columnScale(t, 1);
    EXPECT_FALSE(seq.diverging);
    EXPECT_DOUBLE_EQ(seq.lo, 1);
    EXPECT_DOUBLE_EQ(seq.hi, 3);
    EXPECT_TRUE(columnScale(t, 2).empty);
    // Halfway between two stops: the mean of their colours.
    const auto& s0 = plotting::kSequentialPalette[0].color;
    const auto& s1 = plotting::kSequentialPalette[1].color;
    const QColor mid = paletteColor(plotting::kSequentialPalette, 0.125);
    EXPECT_EQ(mid.red(), int(std::lround((s0.r + s1.r) / 2.0)));
    EXPECT_EQ(mid.blue(), int(std::lround((s0.b + s1.b) / 2.0)));
    EXPECT_EQ(paletteColor(plotting::kSequentialPalette, 7.0),
              paletteColor(plotting::kSequentialPalette, 1.0));  // clamped
}

TEST(PropertyMaps, DeltaPosStaticAndSpectrum) {
    app_test::TempDir dir;
    writePropertyAnalysis(dir.path(), "tupe-a", 0.1, /*withStatic=*/true);
    const AnalysisData d = loadAnalysis(QString::fromStdString(dir.path().string()));

    const plotting::Heatmap h1 = propertyMap(d, "delta_pos", 1, 1, "t");
    ASSERT_EQ(h1.rows, 3);
    EXPECT_EQ(h1.cols, 3);
    EXPECT_EQ(h1.values, std::vector<double>(9, 2.0));
    EXPECT_TRUE(h1.symmetric);
    EXPECT_EQ(h1.row_labels.front(), "1");  // [CLS] removed: index 0 is position 1
    // Mean of heads: (1 + 2) / 2.
    EXPECT_EQ(propertyMap(d, "delta_pos", 1, -1, "t").values, std::vector<double>(9, 1.5));
    // Layer 0 has no maps; static_pos only for head 0.
    EXPECT_EQ(propertyMap(d, "delta_pos", 0, 0, "t").rows, 0);
    EXPECT_EQ(propertyMap(d, "static_pos", 1, 0, "t").values[5], 6.0);
    EXPECT_EQ(propertyMap(d, "static_pos", 1, 1, "t").rows, 0);
    // A position table's row similarity (layer and head null) serves every layer and head.
    writeNpyF4(dir.path() / "properties/table_similarity.npy", {2, 2}, {1, 0.5f, 0.5f, 1});
    AnalysisData table = d;
    AnalysisEntry similarity;
    similarity.file = "properties/table_similarity.npy";
    similarity.what = "static_pos";
    similarity.shape = {2, 2};
    table.entries.push_back(similarity);
    const plotting::Heatmap sim = propertyMap(table, "static_pos", 0, 1, "t");
    EXPECT_EQ(sim.values, (std::vector<double>{1, 0.5, 0.5, 1}));
    EXPECT_EQ(sim.value_label, "cosine similarity of the position table's rows");
    EXPECT_EQ(propertyMap(table, "static_pos", 1, 0, "t").values[5], 6.0);  // its own map first

    const Spectrum s = readSpectrum(d, 1, 1);  // 100 * (w + 1) / (k + 1)
    ASSERT_EQ(s.map.size(), 3u);
    EXPECT_NEAR(s.map[0], 100, 1e-4);
    EXPECT_NEAR(s.toeplitz[1], 100, 1e-4);
    EXPECT_NEAR(s.residual[2], 100, 1e-4);
    const Spectrum mean = readSpectrum(d, 1, -1);  // (10 + 100) / 2 at w = 0, k = 0
    EXPECT_NEAR(mean.map[0], 55, 1e-4);
    EXPECT_TRUE(readSpectrum(d, 0, 0).empty());
    EXPECT_TRUE(readSpectrum(d, 1, 7).empty());

    // A spectrum of the wrong shape names its file.
    writeNpyF4(dir.path() / "properties/spectrum_l1.npy", {2, 9}, std::vector<float>(18, 1.0f));
    try {
        readSpectrum(d, 1, 0);
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("spectrum_l1.npy"), std::string::npos) << e.what();
    }
}

TEST(CollectProperties, RunsFromArtifactsWithScores) {
    app_test::TempDir dir;
    const std::string db = fillZooStore(dir.path());
    const PropertyCollection c = collectProperties(QString::fromStdString(db));
    ASSERT_EQ(c.runs.size(), 1u) << c.errors.join("; ").toStdString();
    const PropertyRun& r = c.runs[0];
    EXPECT_EQ(r.name, "tupe-a");
    EXPECT_EQ(r.experiment, "zoo");
    EXPECT_EQ(r.step, 10);
    EXPECT_EQ(r.analysis->variant, "tupe-a");  // not the compare/ folder's
    EXPECT_TRUE(r.extrapolationPng.endsWith("tupe-a/extrapolation/extrapolation.png"));
    ASSERT_TRUE(r.ablation);
    EXPECT_EQ(r.ablation->heads.size(), 4u);
    EXPECT_EQ(c.layers(), 2);
    EXPECT_EQ(c.heads(), 2);
    // The missing index.json of rope is one error naming the run; bert-a has no properties.
    ASSERT_EQ(c.errors.size(), 1) << c.errors.join("; ").toStdString();
    EXPECT_TRUE(c.errors[0].startsWith("rope: ")) << c.errors[0].toStdString();
    EXPECT_TRUE(c.errors[0].contains("index.json"));

    const QString rte = QString::fromStdString(experiments::column_title("syn-rte"));
    EXPECT_EQ(c.scores.columns, (QStringList{rte, "Avg"}));
    EXPECT_DOUBLE_EQ(c.scores.score(r.runId, rte), 70.0);
    EXPECT_DOUBLE_EQ(c.scores.score(r.runId, "Avg"), 70.0);
    EXPECT_TRUE(std::isnan(c.scores.score(r.runId, "nope")));
    EXPECT_TRUE(std::isnan(c.scores.score(12345, rte)));
    // bert-a has a score but no properties: it still has its score.
    EXPECT_EQ(c.scores.byRun.size(), 2u);

    // One experiment by name; an unknown one is empty; a missing store is one error.
    EXPECT_EQ(collectProperties(QString::fromStdString(db), "zoo").runs.size(), 1u);
    EXPECT_TRUE(collectProperties(QString::fromStdString(db), "nope").runs.empty());
    const PropertyCollection none =
        collectProperties(QString::fromStdString((dir.path() / "missing.sqlite").string()));
    EXPECT_TRUE(none.runs.empty());
    EXPECT_EQ(none.errors.size(), 1);
}

TEST(CollectProperties, AnalysisDirsByStepAndRelativePaths) {
    app_test::TempDir dir;
    fs::create_directories(dir.path() / "results");
    fs::create_directories(dir.path() / "runs/x/analysis/step20");
    fs::create_directories(dir.path() / "runs/x/analysis/step3");
    const QString db = QString::fromStdString((dir.path() / "results/tupe.sqlite").string());
    std::vector<experiments::ArtifactRecord> artifacts(5);
    artifacts[0].path = "runs/x/analysis/step20/index.json";
    artifacts[1].path = "runs/x/analysis/step20/properties/delta_l0_h0.npy";
    artifacts[2].path = "runs/x/analysis/step3/index.json";
    artifacts[3].path = "runs/x/analysis/step3/compare/index.json";
    artifacts[4].path = "runs/x/extrapolation/extrapolation.png";
    const auto dirs = analysisDirsOf(artifacts, db);
    ASSERT_EQ(dirs.size(), 2u);
    EXPECT_EQ(dirs[0].step, 3);
    EXPECT_EQ(dirs[1].step, 20);
    // Relative paths resolve from the project root (the folder above results/).
    EXPECT_EQ(dirs[1].dir,
              QString::fromStdString((dir.path() / "runs/x/analysis/step20").string()));
    EXPECT_EQ(extrapolationPngOf(artifacts, db), "runs/x/extrapolation/extrapolation.png");
    EXPECT_TRUE(extrapolationPngOf({}, db).isEmpty());
}

TEST(PropertiesView, ReadsTheStoreOffTheGuiThreadAndShowsTheFirstCell) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    const QString db = QString::fromStdString(fillZooStore(dir.path()));
    StoreHandle h = openStoreReadOnly(db);
    ASSERT_TRUE(h.store) << h.error.toStdString();
    PropertiesView view;
    view.resize(1400, 900);
    QStringList errors;
    QObject::connect(&view, &WorkbenchView::errorRaised,
                     [&errors](const QString& m) { errors << m; });
    view.setStore(h.store.get(), db);
    EXPECT_TRUE(view.busy());  // the result arrives through the event loop
    QElapsedTimer timer;
    timer.start();
    while (view.busy() && timer.elapsed() < 30000)
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    ASSERT_FALSE(view.busy());
    ASSERT_EQ(view.table().rows(), 1);
    EXPECT_EQ(view.table().rowNames, QStringList{"tupe-a"});
    EXPECT_EQ(view.table().head, -1);  // mean of heads, layer 0
    EXPECT_EQ(view.table().layer, 0);
    ASSERT_EQ(errors.size(), 1);  // rope's missing index.json, in the banner
    EXPECT_TRUE(errors[0].startsWith("rope: "));

    const QList<QCustomPlot*> plots = view.exportablePlots();
    ASSERT_EQ(plots.size(), 4);
    auto* map = qobject_cast<HeatmapPlot*>(plots[0]);
    ASSERT_NE(map, nullptr);
    EXPECT_EQ(map->data().values, std::vector<double>(9, 1.5));  // mean of the heads' maps
    ASSERT_EQ(plots[1]->graphCount(), 3);                        // map, Toeplitz fit, residual
    EXPECT_EQ(plots[1]->graph(0)->dataCount(), 3);
    EXPECT_EQ(plots[1]->yAxis->scaleType(), QCPAxis::stLogarithmic);
    ASSERT_GE(plots[2]->graphCount(), 1);
    EXPECT_EQ(plots[2]->graph(0)->dataCount(), 1);  // one run with a score
    // Per head of tupe-a: the ablation's share against its change, rho as the closed form.
    ASSERT_GE(plots[3]->graphCount(), 1);
    EXPECT_EQ(plots[3]->graph(0)->dataCount(), 4);
    EXPECT_EQ(view.headScatterTitle(), "tupe-a: per head, Spearman \u03c1 = 0.80, n = 4");
    EXPECT_TRUE(view.dataCsv().contains("\ntupe-a,,"));
    EXPECT_TRUE(view.tableText("markdown").startsWith("| run | positional_share |"));
}
