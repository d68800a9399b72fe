// The Launch & queue view's starting points and its plot after a study: a new file starts from
// the field tables' documented defaults (and checks as `tupe run` reads it); after a real tiny
// study run from the queue by the real CLI, the live plot shows the plan's pretraining curves,
// not the last task job's empty axis.
#include <gtest/gtest.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QPushButton>
#include <QTest>
#include <QThread>
#include <fstream>
#include <functional>

#include "app_test_util.h"
#include "experiments/result_store.h"
#include "views/launch_view.h"

using namespace app;

TEST(LaunchView, ANewFileStartsFromTheDocumentedDefaults) {
    app_test::ensureApplication();
    LaunchView view;
    const QString text = view.text();
    EXPECT_TRUE(text.startsWith("# A new study: every key of the field tables"))
        << text.toStdString();
    EXPECT_TRUE(text.contains("  # hidden_size: 32   # Width C of every token's vector"));
    EXPECT_TRUE(text.contains("# finetune:\n#   lrs: [2e-5, 3e-5, 4e-5, 5e-5]"))
        << text.toStdString();
    // It is a study `tupe run` reads: the check under the editor says OK.
    const auto labels = view.findChildren<QLabel*>();
    bool ok = false;
    for (QLabel* l : labels) ok = ok || l->text().startsWith("OK: experiment \"new_study\"");
    EXPECT_TRUE(ok);
}

TEST(LaunchView, AfterAStudyTheLivePlotShowsItsPretrainingCurves) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    test_support::write_toy_corpus(dir.path(), 20, 30, 7, 7);
    const std::string path = dir.file("tiny.yaml");
    std::ofstream(path)
        << "name: tiny\nvariants: [bert-a, tupe-a]\n"
        << "model: {size: tiny, max_position_embeddings: 32}\n"
        << "data: {corpus: " << dir.file("corpus.txt") << ", vocab: " << dir.file("vocab.txt")
        << ", cache_dir: " << dir.file("cache") << ", max_seq_len: 32, validation_fraction: 0.25}\n"
        << "train: {steps: 20, batch_size: 8, eval_interval: 10, checkpoint_interval: 20, "
           "log_interval: 2, threads: 1}\n"
        << "glue: {data: builtin, tasks: [syn-bshift], synthetic_dev: 20}\n"
        << "database: " << dir.file("db.sqlite") << "\nruns_dir: " << dir.file("runs") << "\n";
    qputenv("TUPE_CLI", TUPE_CLI);
    LaunchView view;
    ASSERT_TRUE(view.enqueueFile(QString::fromStdString(path)));
    auto buttons = view.findChildren<QPushButton*>();
    QPushButton* start = nullptr;
    for (QPushButton* b : buttons)
        if (b->text() == "Start queue") start = b;
    ASSERT_TRUE(start);
    QTest::mouseClick(start, Qt::LeftButton);
    auto status = [&] { return view.queueTable()->item(0, 1)->text(); };
    ASSERT_TRUE(app_test::processEventsUntil(
        [&] { return status() != "queued" && status() != "running"; }, 300000))
        << status().toStdString();
    ASSERT_EQ(status(), "finished");
    // The plan's two pretraining runs, with their train/loss points; the last job (a pair task)
    // has no curve of its own.
    QCustomPlot* live = view.livePlot();
    ASSERT_EQ(live->graphCount(), 2);
    EXPECT_EQ(live->graph(0)->name(), "bert-a");
    EXPECT_EQ(live->graph(1)->name(), "tupe-a");
    auto store =
        experiments::ResultStore::open(dir.file("db.sqlite"), experiments::OpenMode::kReadOnly);
    const auto exp = store.find_experiment("tiny");
    ASSERT_TRUE(exp);
    const auto run = store.find_run(exp->id, "tupe-a");
    ASSERT_TRUE(run);
    const auto points = store.metrics(run->id, "train/loss");
    ASSERT_FALSE(points.empty());
    EXPECT_EQ(live->graph(1)->dataCount(), int(points.size()));
    EXPECT_EQ(live->graph(1)->data()->at(0)->value, points.front().value);
    EXPECT_TRUE(live->yAxis->label().contains("pretraining runs"));
}
