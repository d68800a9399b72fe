// "What does this model predict?" and File > Open model folder, against a real tiny model: a
// bert-a pretrained for 10 steps by the real `tupe run` into a store, and its `tupe export`
// HF folder. The fill-mask panel under the correlation maps is driven with QTest's keyboard and
// mouse events and its table compared with the CLI's own JSON; the HF folder opened through the
// main window is analysed by a child `tupe analyze` and drawn in the maps view.
#include <gtest/gtest.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QProcess>
#include <QTabWidget>
#include <QTest>
#include <QThread>
#include <fstream>
#include <functional>
#include <memory>

#include "app_test_util.h"
#include "core/analysis_service.h"
#include "core/fill_mask_service.h"
#include "core/store_access.h"
#include "views/analysis_views.h"
#include "views/fill_mask_panel.h"
#include "views/main_window.h"

using namespace app;

namespace {

/// Runs the real CLI; its stdout, or a failed test with its stderr.
QByteArray runTupe(const QStringList& args) {
    QProcess p;
    p.start(TUPE_CLI, args);
    EXPECT_TRUE(p.waitForFinished(300000));
    EXPECT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
    return p.readAllStandardOutput();
}

/// Replaces a line edit's text as a user does: select all, type.
void replaceText(QLineEdit* edit, const QString& text) {
    edit->setFocus();
    QTest::keyClick(edit, Qt::Key_A, Qt::ControlModifier);
    QTest::keyClicks(edit, text);
}

/// One tiny store for the suite: bert-a, 10 steps on the toy corpus, a checkpoint at step 10,
/// and that checkpoint exported as an HF folder.
class FillMaskTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        app_test::ensureApplication();
        qputenv("TUPE_CLI", TUPE_CLI);
        dir_ = std::make_unique<test_support::TempDir>("tupe_app_fill_mask");
        test_support::write_toy_corpus(dir_->path(), 20, 30, 7, 7);
        const std::string path = dir_->file("tiny.yaml");
        std::ofstream(path)
            << "name: tiny\nvariants: [bert-a]\n"
            << "model: {size: tiny, max_position_embeddings: 32}\n"
            << "data: {corpus: " << dir_->file("corpus.txt")
            << ", vocab: " << dir_->file("vocab.txt") << ", cache_dir: " << dir_->file("cache")
            << ", max_seq_len: 32, validation_fraction: 0.25}\n"
            << "train: {steps: 10, batch_size: 8, eval_interval: 10, checkpoint_interval: 10, "
               "log_interval: 2, threads: 1}\n"
            << "glue: {data: builtin, tasks: [syn-bshift], synthetic_dev: 20}\n"
            << "database: " << dir_->file("db.sqlite") << "\nruns_dir: " << dir_->file("runs")
            << "\n";
        runTupe({"run", QString::fromStdString(path)});
        runTupe({"export", checkpoint(), "--out", hfFolder()});
    }
    static void TearDownTestSuite() { dir_.reset(); }

    static QString db() { return QString::fromStdString(dir_->file("db.sqlite")); }
    static QString checkpoint() {
        return QString::fromStdString(dir_->file("runs/bert-a/checkpoint.pt"));
    }
    static QString hfFolder() { return QString::fromStdString(dir_->file("hf")); }

    static std::unique_ptr<test_support::TempDir> dir_;
};
std::unique_ptr<test_support::TempDir> FillMaskTest::dir_;

/// The CLI's answer for `model`, for comparison with what the panel shows.
std::vector<MaskPrediction> cliPrediction(const QString& model, const QString& text) {
    return parseFillMaskJson(
        runTupe({"fill-mask", model, "--text", text, "--top-k", "5", "--format", "json"}));
}

/// The table's rows as "TOKEN LOGPROB" (the log-prob as shown, 3 decimals).
QStringList tableRows(const QTableWidget* t) {
    QStringList rows;
    for (int r = 0; r < t->rowCount(); ++r)
        rows << t->item(r, 1)->text() + " " + t->item(r, 2)->text();
    return rows;
}

QStringList expectedRows(const std::vector<MaskPrediction>& masks) {
    QStringList rows;
    for (const MaskPrediction& m : masks)
        for (const MaskToken& c : m.top) rows << c.token + " " + QString::number(c.logprob, 'f', 3);
    return rows;
}

}  // namespace

TEST(FillMaskJson, ReadsTheMasksAndRejectsOtherText) {
    const auto masks = parseFillMaskJson(
        R"({"masks":[{"position":2,"top":[{"id":20,"logprob":-2.5,"token":"small"},)"
        R"({"id":6,"logprob":-2.75,"token":"the"}]},{"position":5,"top":[]}]})");
    ASSERT_EQ(masks.size(), 2u);
    EXPECT_EQ(masks[0].position, 2);
    ASSERT_EQ(masks[0].top.size(), 2u);
    EXPECT_EQ(masks[0].top[1].token, "the");
    EXPECT_EQ(masks[0].top[1].id, 6);
    EXPECT_DOUBLE_EQ(masks[0].top[1].logprob, -2.75);
    EXPECT_EQ(masks[1].position, 5);
    EXPECT_THROW(parseFillMaskJson("tupe: error"), std::runtime_error);
    EXPECT_THROW(parseFillMaskJson(R"({"top": []})"), std::runtime_error);
    EXPECT_THROW(parseFillMaskJson(R"({"masks":[{"position":1}]})"), std::runtime_error);
    EXPECT_TRUE(hasMaskToken("the [MASK] sat ."));
    EXPECT_FALSE(hasMaskToken("the cat sat ."));
}

TEST(ModelFolder, NamesWhatAFolderLacks) {
    app_test::TempDir dir;
    const QString d = QString::fromStdString(dir.path().string());
    EXPECT_TRUE(modelFolderProblem(d + "/absent").startsWith("no such folder"));
    EXPECT_TRUE(modelFolderProblem(d).endsWith("has no config.json: not an HF model folder"));
    dir.write("config.json", "{}");
    EXPECT_TRUE(modelFolderProblem(d).contains("has no model.safetensors"));
    dir.write("pytorch_model.bin.index.json", "{}");  // sharded torch.save weights
    EXPECT_TRUE(modelFolderProblem(d).contains("has no vocab.txt"));
    dir.write("vocab.txt", "[PAD]\n");
    EXPECT_EQ(modelFolderProblem(d), "");
}

TEST_F(FillMaskTest, PredictShowsEachMasksTopTokensAsTheCliPrintsThem) {
    StoreHandle store = openStoreReadOnly(db());
    ASSERT_TRUE(store.store) << store.error.toStdString();
    AnalysisService analysis;
    CorrelationMapsView view(&analysis);
    view.setStore(store.store.get(), db());
    view.show();
    FillMaskPanel* panel = view.fillMaskPanel();
    ASSERT_TRUE(panel);

    // No [MASK]: a message, no child, empty tables.
    replaceText(panel->text(), "the old man saw the dog .");
    QTest::keyClick(panel->text(), Qt::Key_Return);
    EXPECT_TRUE(panel->status()->text().contains("no [MASK]"))
        << panel->status()->text().toStdString();
    EXPECT_FALSE(panel->service()->busy());
    EXPECT_EQ(panel->table(0)->rowCount(), 0);

    // Two masks, the Predict button clicked: both sides (the store's only run) answer.
    const QString text = "the old [MASK] saw the [MASK] .";
    replaceText(panel->text(), text);
    QTest::mouseClick(panel->predictButton(), Qt::LeftButton);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return !panel->service()->busy(); }, 120000));
    QCoreApplication::processEvents();
    EXPECT_EQ(panel->status()->text(), "") << panel->status()->text().toStdString();
    const QStringList expected = expectedRows(cliPrediction(checkpoint(), text));
    ASSERT_EQ(expected.size(), 10);  // 2 masks x top 5
    EXPECT_EQ(tableRows(panel->table(0)), expected);
    EXPECT_EQ(tableRows(panel->table(1)), expected);
    EXPECT_TRUE(panel->table(0)->item(0, 0)->text().startsWith("#1 (position 3)"))
        << panel->table(0)->item(0, 0)->text().toStdString();
    EXPECT_TRUE(panel->table(0)->item(5, 0)->text().startsWith("#2 (position 6)"));
}

TEST_F(FillMaskTest, AFailingChildShowsItsErrorLine) {
    app_test::TempDir broken;
    broken.write("config.json", "{\"model_type\": \"bert\"}");
    broken.write("model.safetensors", "not a safetensors file");
    broken.write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
    StoreHandle store = openStoreReadOnly(db());
    ASSERT_TRUE(store.store);
    AnalysisService analysis;
    CorrelationMapsView view(&analysis);
    view.setStore(store.store.get(), db());
    view.show();
    ASSERT_EQ(view.openModelFolder(QString::fromStdString(broken.path().string())), "");
    FillMaskPanel* panel = view.fillMaskPanel();
    replaceText(panel->text(), "the [MASK] saw the dog .");
    QTest::mouseClick(panel->predictButton(), Qt::LeftButton);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return !panel->service()->busy(); }, 120000));
    QCoreApplication::processEvents();
    const QString status = panel->status()->text();
    // The left side (the broken folder) failed with the CLI's one error line; the right still
    // answers.
    EXPECT_TRUE(status.contains("tupe fill-mask failed (exit")) << status.toStdString();
    EXPECT_TRUE(status.contains("tupe fill-mask: error")) << status.toStdString();
    EXPECT_FALSE(status.contains('\n'));
    EXPECT_EQ(panel->table(0)->rowCount(), 0);
    EXPECT_EQ(panel->table(1)->rowCount(), 5);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return !analysis.busy(); }, 120000));
}

TEST_F(FillMaskTest, OpenModelFolderShowsTheFoldersMapsAndPredictions) {
    MainWindow window;
    window.show();
    ASSERT_TRUE(window.openDatabase(db()));
    auto* maps = window.findChild<CorrelationMapsView*>();
    auto* tabs = window.findChild<QTabWidget*>();
    ASSERT_TRUE(maps && tabs);

    // Not a model folder: the banner says why, nothing changes.
    EXPECT_FALSE(window.openModelFolder(QString::fromStdString(dir_->file("runs"))));
    EXPECT_TRUE(window.bannerText().contains("has no config.json"))
        << window.bannerText().toStdString();

    ASSERT_TRUE(window.openModelFolder(hfFolder()));
    EXPECT_EQ(tabs->currentWidget(), maps);
    auto* left = dynamic_cast<HeatmapPlot*>(maps->exportablePlots()[0]);
    auto* right = dynamic_cast<HeatmapPlot*>(maps->exportablePlots()[1]);
    ASSERT_TRUE(left && right);
    ASSERT_TRUE(app_test::processEventsUntil(
        [&] { return left->data().rows > 0 && right->data().rows > 0; }, 180000))
        << window.bannerText().toStdString();
    // The folder (left) is the exported checkpoint (right): the same positional map.
    EXPECT_TRUE(QString::fromStdString(left->data().title).startsWith("folder: hf"))
        << left->data().title;
    EXPECT_EQ(left->data().rows, right->data().rows);
    ASSERT_EQ(left->data().values.size(), right->data().values.size());
    for (size_t i = 0; i < left->data().values.size(); ++i)
        EXPECT_NEAR(left->data().values[i], right->data().values[i], 1e-4) << i;

    // And it predicts as its checkpoint does.
    FillMaskPanel* panel = maps->fillMaskPanel();
    replaceText(panel->text(), "the [MASK] saw the dog .");
    QTest::mouseClick(panel->predictButton(), Qt::LeftButton);
    ASSERT_TRUE(app_test::processEventsUntil([&] { return !panel->service()->busy(); }, 120000));
    QCoreApplication::processEvents();
    EXPECT_EQ(tableRows(panel->table(0)).size(), 5);
    EXPECT_EQ(tableRows(panel->table(0)), tableRows(panel->table(1)));
    EXPECT_EQ(window.bannerText(), "");
}
