// The app's store-facing pieces on a real results store built here with
// experiments::ResultStore: the browser's tree model and filter, read-only opening with its
// error paths (missing file, newer schema, not a database), and the YAML check's line numbers.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <QString>
#include <fstream>

#include "app_test_util.h"
#include "core/experiment_check.h"
#include "core/run_tree_model.h"
#include "core/store_access.h"
#include "experiments/result_store.h"

using namespace app;
using experiments::MetricPoint;
using experiments::ResultStore;

namespace {

/// One experiment with two pretrain runs (loss curves) and a finetune of the first.
void fillStore(const std::string& path) {
    ResultStore store = ResultStore::open(path);
    const auto exp = store.get_or_create_experiment("study", "study.yaml", "name: study\n");
    experiments::RunRecord run;
    run.experiment_id = exp;
    run.name = run.variant = "bert-a";
    run.status = "finished";
    run.step = 30;
    const auto bert = store.upsert_run(run);
    run.name = run.variant = "tupe-a";
    run.status = "running";
    run.step = 20;
    const auto tupe = store.upsert_run(run);
    run.kind = "finetune";
    run.name = "bert-a/step30/syn-cola/lr0.001/seed1";
    run.variant = "";
    run.parent_run_id = bert;
    run.status = "failed";
    run.step = 0;
    store.upsert_run(run);
    store.add_metrics(
        bert,
        {{"train/loss", 10, 5.0, 1.0}, {"train/loss", 20, 3.0, 2.0}, {"train/loss", 30, 4.0, 3.0}});
    store.add_metrics(tupe, {{"train/loss", 10, 4.5, 1.0}, {"train/loss", 20, 2.5, 2.0}});
}

QModelIndex findChild(const QAbstractItemModel& m, const QModelIndex& parent, const QString& text) {
    for (int r = 0; r < m.rowCount(parent); ++r)
        if (m.index(r, 0, parent).data().toString() == text) return m.index(r, 0, parent);
    return {};
}

}  // namespace

TEST(RunTreeModel, ExperimentsVariantsRunsWithMetricSummary) {
    app_test::TempDir dir;
    fillStore(dir.file("db.sqlite"));
    StoreHandle h = openStoreReadOnly(QString::fromStdString(dir.file("db.sqlite")));
    ASSERT_TRUE(h.store) << h.error.toStdString();
    const auto rows = summarizeRuns(*h.store, "train/loss");
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].points, 3);
    EXPECT_DOUBLE_EQ(rows[0].last, 4.0);
    EXPECT_DOUBLE_EQ(rows[0].min, 3.0);
    EXPECT_DOUBLE_EQ(rows[0].best, 3.0);   // loss: lower is better
    EXPECT_EQ(rows[2].variant, "bert-a");  // a finetune sits under its parent's variant
    EXPECT_EQ(rows[2].points, 0);

    RunTreeModel model;
    model.setRuns(rows, "train/loss");
    ASSERT_EQ(model.rowCount(), 1);
    const QModelIndex exp = model.index(0, 0);
    EXPECT_EQ(exp.data().toString(), "study");
    EXPECT_EQ(model.rowCount(exp), 2);  // variants bert-a and tupe-a
    const QModelIndex bert = findChild(model, exp, "bert-a");
    ASSERT_TRUE(bert.isValid());
    EXPECT_EQ(model.rowCount(bert), 2);  // the pretrain run and its finetune
    EXPECT_EQ(model.index(0, kColLast, bert).data().toString(), "4");
    EXPECT_EQ(model.index(0, kColMin, bert).data().toString(), "3");
    EXPECT_EQ(model.index(1, kColStatus, bert).data().toString(), "failed");
    EXPECT_EQ(model.index(1, kColLast, bert).data().toString(), "");  // no curve, no number
    EXPECT_EQ(model.index(bert.row(), kColStatus, exp).data().toString(), "1/2 finished");
    EXPECT_EQ(model.index(0, 0, bert).data(kRunIdRole).toLongLong(), rows[0].id);

    RunFilterProxy proxy;
    proxy.setSourceModel(&model);
    proxy.setSearch("syn-cola");
    const QModelIndex pexp = proxy.index(0, 0);
    ASSERT_EQ(proxy.rowCount(pexp), 1);  // tupe-a has no match and disappears
    const QModelIndex pbert = proxy.index(0, 0, pexp);
    EXPECT_EQ(pbert.data().toString(), "bert-a");
    ASSERT_EQ(proxy.rowCount(pbert), 1);
    proxy.setSearch("tupe-a");  // a variant's name finds its runs
    EXPECT_EQ(proxy.rowCount(proxy.index(0, 0)), 1);
    proxy.setSearch("");
    proxy.setStatus("running");
    ASSERT_EQ(proxy.rowCount(proxy.index(0, 0)), 1);
    EXPECT_EQ(proxy.index(0, 0, proxy.index(0, 0)).data().toString(), "tupe-a");
}

TEST(StoreAccess, MissingDatabaseIsAMessage) {
    app_test::TempDir dir;
    StoreHandle h = openStoreReadOnly(QString::fromStdString(dir.file("none.sqlite")));
    EXPECT_FALSE(h.store);
    EXPECT_TRUE(h.error.contains("none.sqlite")) << h.error.toStdString();
    EXPECT_FALSE(openStoreReadOnly("").error.isEmpty());
}

TEST(StoreAccess, NewerSchemaIsRefusedWithAMessage) {
    app_test::TempDir dir;
    const std::string path = dir.file("db.sqlite");
    fillStore(path);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql =
        "PRAGMA user_version = " + std::to_string(ResultStore::latest_schema_version() + 1);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    StoreHandle h = openStoreReadOnly(QString::fromStdString(path));
    EXPECT_FALSE(h.store);
    EXPECT_TRUE(h.error.contains("schema", Qt::CaseInsensitive) ||
                h.error.contains("version", Qt::CaseInsensitive))
        << h.error.toStdString();
}

TEST(StoreAccess, NotADatabaseIsAMessage) {
    app_test::TempDir dir;
    std::ofstream(dir.file("junk.sqlite"))
        << "this is not sqlite, just text that goes on for a while\n";
    StoreHandle h = openStoreReadOnly(QString::fromStdString(dir.file("junk.sqlite")));
    EXPECT_FALSE(h.store);
    EXPECT_FALSE(h.error.isEmpty());
}

TEST(StoreAccess, ResolvesRecordedPathsFromTheProjectRoot) {
    app_test::TempDir dir;
    std::filesystem::create_directories(dir.path() / "results");
    std::filesystem::create_directories(dir.path() / "runs/x");
    std::ofstream(dir.file("runs/x/checkpoint-3.pt")) << "x";
    const QString db = QString::fromStdString(dir.file("results/tupe.sqlite"));
    const QString resolved = resolveStorePath("runs/x/checkpoint-3.pt", db);
    EXPECT_EQ(resolved.toStdString(), dir.file("runs/x/checkpoint-3.pt"));
    EXPECT_EQ(projectRootFor(db).toStdString(), dir.path().string());
}

TEST(ExperimentCheck, ReportsTheLineOfAnUnknownKey) {
    const ExperimentCheck bad = checkExperimentYaml(
        "name: t\nvariants: [bert-a]\ntrain:\n  steps: 3\n  stpes: 4\n", "t.yaml");
    EXPECT_FALSE(bad.ok);
    EXPECT_EQ(bad.line, 5);
    EXPECT_TRUE(bad.message.contains("stpes")) << bad.message.toStdString();

    const ExperimentCheck malformed = checkExperimentYaml("name: t\nvariants: [bert-a\n", "t.yaml");
    EXPECT_FALSE(malformed.ok);
    EXPECT_GT(malformed.line, 0);

    const ExperimentCheck good = checkExperimentYaml(
        "variants: [bert-a, {preset: tupe-a, finetune_seeds: [1, 2, 3]}]\n"
        "checkpoints: [0.5, 1.0]\nglue: {tasks: [syn-cola, syn-bshift]}\n"
        "finetune: {lrs: [1.0e-3], seeds: [1, 2]}\n",
        "mine.yaml");
    ASSERT_TRUE(good.ok) << good.message.toStdString();
    EXPECT_EQ(good.name, "mine");  // the file's stem names an unnamed experiment
    EXPECT_EQ(good.pretrainJobs, 2);
    // Per snapshot: syn-cola once per fine-tuning seed (bert-a 2, tupe-a its own 3), the
    // zero-shot syn-bshift once.
    EXPECT_EQ(good.finetuneJobs, 2 * (2 + 1) + 2 * (3 + 1));
}
