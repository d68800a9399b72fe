// The app reading a results store while three `tupe run` runners (the real CLI, TUPE_CLI) write
// into it: every load the views make (the run tree's summaries, the curves, the GLUE table's
// cells, the job claims, the checkpoint picker, the task scores, the loss floors) is repeated
// until the runners end, through the app's own read-only opening (core/store_access). No load
// may fail (a locked or busy store included), and at the end the app's view equals what the
// store holds, read through a connection of its own.
#include <gtest/gtest.h>

#include <QString>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app_test_util.h"
#include "core/glue_cells.h"
#include "core/properties_data.h"
#include "core/run_tree_model.h"
#include "core/store_access.h"
#include "experiments/report.h"
#include "experiments/result_store.h"

using namespace app;
namespace fs = std::filesystem;

namespace {

// Everything the views load from the store, as lines of text (one per run, curve, GLUE cell,
// claim, checkpoint, score and floor). Throws what the loads throw.
std::vector<std::string> loadEverything(experiments::ResultStore& store, const QString& dbPath) {
    std::vector<std::string> out;
    for (const RunRow& r : summarizeRuns(store, "train/loss"))
        out.push_back("run " + r.name.toStdString() + " " + r.status.toStdString() + " step " +
                      std::to_string(r.step) + " points " + std::to_string(r.points) + " last " +
                      std::to_string(r.last));
    for (const auto& e : store.list_experiments()) {
        for (const auto& run : store.list_runs(e.id)) {
            for (const auto& key : store.metric_keys(run.id)) {
                const auto points = store.metrics(run.id, key);
                out.push_back("curve " + run.name + " " + key + " " +
                              std::to_string(points.size()) + " points, last step " +
                              (points.empty() ? "-" : std::to_string(points.back().step)));
            }
            if (run.kind == "pretrain") {
                const LossFloor floor = readLossFloor(store, run.id);
                out.push_back("floor " + run.name + " " + std::to_string(floor.hasFinal) + " " +
                              std::to_string(floor.finalStep));
            }
        }
        const auto report = experiments::load_report(store, e.name);
        for (const auto& row : report.rows)
            for (const auto& [column, cell] : row.cells)
                if (cell.present)
                    out.push_back("glue " + row.label + " " + column + " " +
                                  glueCellText(cell, false).text.toStdString());
        for (const auto& c : store.list_claims(e.id))
            out.push_back("claim " + c.job + (c.held() ? " held" : " released") + " attempts " +
                          std::to_string(c.attempts));
        const TaskScores scores = readTaskScores(store, QString::fromStdString(e.name));
        for (const auto& [run, byColumn] : scores.byRun)
            for (const auto& [column, value] : byColumn)
                out.push_back("score " + std::to_string(run) + " " + column.toStdString() + " " +
                              std::to_string(value));
    }
    const CheckpointRuns checkpoints = listCheckpointRuns(store, dbPath);
    if (!checkpoints.error.isEmpty()) throw std::runtime_error(checkpoints.error.toStdString());
    for (const auto& run : checkpoints.runs)
        for (const auto& c : run.checkpoints)
            out.push_back("checkpoint " + run.name.toStdString() + " " + std::to_string(c.step));
    return out;
}

}  // namespace

TEST(StoreConcurrency, AppLoadsNeverFailWhileThreeRunnersWrite) {
    app_test::TempDir dir;
    test_support::write_toy_corpus(dir.path(), 16, 30, 7, 11);
    // The runner-claims study: 2 pretraining jobs of 16 steps + 2 variants x 2 tasks x 2 seeds.
    const fs::path study = test_support::write_claims_study(dir.path(), "shared", 16);
    const std::string db = (dir.path() / "shared.sqlite").string();
    const QString dbPath = QString::fromStdString(db);
    // The store exists (with its schema) before the app looks: opening a file that a runner
    // is still creating is not what this test is about.
    experiments::ResultStore::open(db);

    std::vector<pid_t> runners;
    for (int i = 0; i < 3; ++i)
        runners.push_back(
            test_support::start_process({TUPE_CLI, "run", study.string(), "--threads", "1"},
                                        dir.path() / ("runner" + std::to_string(i) + ".log")));
    std::vector<bool> ended(3, false);
    std::vector<int> status(3, -1);
    auto anyRunning = [&] {
        bool any = false;
        for (size_t i = 0; i < runners.size(); ++i) {
            if (!ended[i] && !test_support::process_running(runners[i])) ended[i] = true;
            any = any || !ended[i];
        }
        return any;
    };

    // The app keeps one handle open and reopens from time to time (File > Open, a refresh).
    std::vector<std::string> failures;
    int loads = 0, loadsWhileRunning = 0;
    StoreHandle h = openStoreReadOnly(dbPath);
    ASSERT_TRUE(h.store) << h.error.toStdString();
    while (anyRunning()) {
        if (loads % 5 == 4) {
            h = openStoreReadOnly(dbPath);
            if (!h.store) {
                failures.push_back("open: " + h.error.toStdString());
                continue;
            }
        }
        try {
            loadEverything(*h.store, dbPath);
            ++loads;
            if (anyRunning()) ++loadsWhileRunning;
        } catch (const std::exception& e) {
            failures.push_back(std::string("load ") + std::to_string(loads) + ": " + e.what());
            ++loads;
        }
        if (failures.size() > 20) break;  // enough to tell what goes wrong
    }
    for (size_t i = 0; i < runners.size(); ++i) {
        if (!ended[i]) status[i] = test_support::wait_process(runners[i]);
    }
    RecordProperty("loads", loads);
    RecordProperty("loads_while_running", loadsWhileRunning);
    for (const auto& f : failures) ADD_FAILURE() << f;
    EXPECT_GT(loadsWhileRunning, 0) << "the runners ended before the app loaded anything";
    for (int i = 0; i < 3; ++i) {
        const std::string log =
            test_support::read_file(dir.path() / ("runner" + std::to_string(i) + ".log"));
        EXPECT_TRUE(log.find(" 0 failed") != std::string::npos) << log;
    }

    // At the end, the app's view is the store's: the same loads through the app's handle and
    // through a connection of the store's own, and the whole plan done.
    h = openStoreReadOnly(dbPath);
    ASSERT_TRUE(h.store) << h.error.toStdString();
    const auto appView = loadEverything(*h.store, dbPath);
    auto direct = experiments::ResultStore::open(db, experiments::OpenMode::kReadOnly);
    EXPECT_EQ(appView, loadEverything(direct, dbPath));
    const auto exp = direct.find_experiment("claims");
    ASSERT_TRUE(exp);
    const auto runs = direct.list_runs(exp->id);
    EXPECT_EQ(runs.size(), 10u);
    for (const auto& r : runs) EXPECT_EQ(r.status, "finished") << r.name;
    size_t runLines = 0, glueLines = 0, releasedClaims = 0;
    for (const auto& line : appView) {
        runLines += line.rfind("run ", 0) == 0 && line.find(" finished ") != std::string::npos;
        glueLines += line.rfind("glue ", 0) == 0;
        releasedClaims +=
            line.rfind("claim ", 0) == 0 && line.find(" released ") != std::string::npos;
    }
    EXPECT_EQ(runLines, 10u);
    EXPECT_EQ(releasedClaims, 10u);
    EXPECT_EQ(glueLines, 2u * 2u);  // 2 variants x (syn-cola, syn-stsb)
}
