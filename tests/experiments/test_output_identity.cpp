// One identity for every stored result, through the real CLI on tiny studies: an analysis or
// extrapolation recorded under other settings is refused in one line and replaced only with
// --redo; the store named through a symlink is the same store; a study of the same name in
// another store cannot take the first one's folders; a runner killed while its analysis is
// being recorded loses nothing (files, identity and property metrics are one transaction) and
// its child dies with it; a resumed run records the snapshot it resumed at; a study that
// shares another's finished runs reads their analysis when its settings agree; and bad study
// settings stop in one line before anything is stored.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "engine/run_folder.h"
#include "experiments/result_store.h"
#include "study_fixture.h"

namespace {

namespace fs = std::filesystem;
using experiments::OpenMode;
using experiments::ResultStore;
using test_support::has;
using test_support::quote;
using test_support::read_file;
using test_support::read_store;
using test_support::write_file;
using OutputIdentityTest = test_support::StudyTest;

const char* kAnalysis =
    "analysis: {checkpoints: [1.0], sentences: 4, figures: false, probe_windows: 2}\n"
    "extrapolation: {lengths: \"1,2\", max_tokens: 400}\n";

int lines(const std::string& text) {
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// The number of artifact rows of the experiment, straight from the table.
int artifact_rows(const fs::path& db) {
    auto store = ResultStore::open(db.string(), OpenMode::kReadOnly);
    int n = 0;
    for (const auto& e : store.list_experiments())
        for (const auto& r : store.list_runs(e.id))
            n += static_cast<int>(store.artifacts(r.id).size());
    return n;
}

// A changed analysis or extrapolation setting is another result: `tupe run` refuses in one
// line naming each change and the outputs it touches, writing nothing; --redo computes them
// again and records them with the new settings; then the study is done.
TEST_F(OutputIdentityTest, ChangedAnalysisSettingIsRefusedAndReplacedWithRedo) {
    const fs::path file = study(dir_, "s.yaml", "s", "[bert-a, tupe-a]", 4, kAnalysis);
    ASSERT_EQ(tupe("run " + quote(file.string()) + " --quiet").status, 0);
    const auto before = read_store(dir_ / "s.sqlite", "s");
    std::string text = read_file(file);
    text.replace(text.find("sentences: 4"), 12, "sentences: 6");
    text.replace(text.find("\"1,2\""), 5, "\"1,3\"");
    write_file(file, text);

    const auto refused = tupe("run " + quote(file.string()));
    EXPECT_NE(refused.status, 0);
    EXPECT_EQ(lines(refused.err), 1) << refused.err;
    EXPECT_TRUE(has(refused.err, "analysis.sentences: 4 -> 6 (2 snapshots)")) << refused.err;
    EXPECT_TRUE(has(refused.err, "extrapolation.lengths: 1,2 -> 1,3 (2 runs)")) << refused.err;
    EXPECT_TRUE(has(refused.err, "--redo analysis --redo extrapolation")) << refused.err;
    EXPECT_EQ(read_store(dir_ / "s.sqlite", "s").artifacts, before.artifacts);
    const auto status = tupe("status " + quote(file.string()));
    EXPECT_TRUE(has(status.out, "analysis.sentences: 4 -> 6")) << status.out;

    const auto redone =
        tupe("run " + quote(file.string()) + " --redo analysis --redo extrapolation --quiet");
    ASSERT_EQ(redone.status, 0) << redone.err;
    const auto after = read_store(dir_ / "s.sqlite", "s");
    const auto index =
        nlohmann::json::parse(read_file(dir_ / "runs/bert-a/analysis/step4/index.json"));
    EXPECT_TRUE(has(index.dump(), "\"sentences\":6")) << index.dump().substr(0, 400);
    int marked = 0;
    for (const auto& [key, value] : after.artifacts) {
        if (has(key.second, "analysis/step4/")) {
            EXPECT_TRUE(has(value.second, "analysis.sentences=6\n")) << key.second;
            ++marked;
        }
        if (has(key.second, "extrapolation/"))
            EXPECT_TRUE(has(value.second, "extrapolation.lengths=1,3\n")) << key.second;
    }
    EXPECT_GT(marked, 2);
    // The property metrics were recomputed beside the files: same keys, at the same step.
    for (const auto& [key, points] : before.curves)
        if (key.second.rfind("property/", 0) == 0)
            EXPECT_TRUE(after.curves.count(key)) << key.second;
    const auto again = tupe("run " + quote(file.string()));
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_TRUE(has(again.err, "0 finished, 4 already done")) << again.err;
}

// The store named through a symlinked folder is the same store: the same claims from either
// name, and running the study through the link adds no row.
TEST_F(OutputIdentityTest, StoreNamedThroughASymlinkIsTheSameStore) {
    const fs::path project = dir_ / "project";
    fs::create_directories(project);
    fs::create_directories(dir_ / "elsewhere" / "results");
    fs::create_directory_symlink(dir_ / "elsewhere" / "results", project / "results");
    const std::string extra = std::string(kAnalysis);
    const fs::path file = study(project, "c.yaml", "c", "[bert-a, tupe-a]", 4, extra, "[1]",
                                (project / "results" / "c.sqlite").string());
    ASSERT_EQ(tupe("run " + quote(file.string()) + " --quiet").status, 0);
    const fs::path real = dir_ / "elsewhere" / "results" / "c.sqlite";
    const fs::path link = project / "results" / "c.sqlite";
    const int rows = artifact_rows(real);
    const auto claims = [&](const fs::path& db) {
        const auto r = tupe("claims --db " + quote(db.string()) + " --experiment c --format json");
        EXPECT_EQ(r.status, 0) << r.err;
        return r.out;
    };
    const std::string through_link = claims(link);
    std::map<std::string, std::string> verdicts;
    const auto parsed = nlohmann::json::parse(through_link);
    for (const auto& c : parsed.at("claims"))
        verdicts[c.at("id").get<std::string>()] = c.at("verdict").get<std::string>();
    ASSERT_TRUE(verdicts.count("5") && verdicts.count("6")) << through_link;
    EXPECT_NE(verdicts.at("5"), "not run") << through_link;
    EXPECT_NE(verdicts.at("6"), "not run") << through_link;
    EXPECT_EQ(claims(real), through_link);
    // The study rerun with its store named by the real path: already done, no row added.
    std::string text = read_file(file);
    text.replace(text.find(link.string()), link.string().size(), real.string());
    write_file(file, text);
    const auto again = tupe("run " + quote(file.string()));
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_TRUE(has(again.err, "already done")) << again.err;
    EXPECT_EQ(artifact_rows(real), rows);
}

// A study of the same name in another store is another study: it may not resume in, rewrite
// or re-point the first one's run folders.
TEST_F(OutputIdentityTest, SameNameInAnotherStoreCannotTakeTheRunFolders) {
    const fs::path first = study(dir_, "a.yaml", "a", "[bert-a]", 4);
    ASSERT_EQ(tupe("run " + quote(first.string()) + " --quiet").status, 0);
    const auto files = test_support::file_hashes(dir_ / "runs" / "bert-a");
    const fs::path second =
        study(dir_, "b.yaml", "a", "[bert-a]", 6, "", "[1]", (dir_ / "other.sqlite").string());
    const auto refused = tupe("run " + quote(second.string()));
    EXPECT_NE(refused.status, 0);
    EXPECT_EQ(lines(refused.err), 1) << refused.err;
    EXPECT_TRUE(has(refused.err, "of the store " + fs::canonical(dir_ / "a.sqlite").string()))
        << refused.err;
    EXPECT_EQ(test_support::file_hashes(dir_ / "runs" / "bert-a"), files);
    EXPECT_FALSE(fs::exists(dir_ / "other.sqlite"));
    const auto owner = engine::read_run_owner((dir_ / "runs" / "bert-a").string());
    ASSERT_TRUE(owner);
    EXPECT_EQ(owner->store, "../../a.sqlite");
}

// A runner killed inside the transaction that records an analysis (the child has written its
// files) leaves nothing recorded; the next run records the files, their identity and the
// property metrics together.
TEST_F(OutputIdentityTest, KillWhileRecordingAnAnalysisLosesNoMetric) {
    const fs::path file = study(dir_, "k.yaml", "k", "[bert-a]", 4, kAnalysis);
    const auto killed =
        test_support::run_cli("TUPE_TEST_KILL_IN_TRANSACTION=output:1 " + std::string(TUPE_CLI),
                              "run " + quote(file.string()) + " --quiet", dir_ / "stderr.txt");
    EXPECT_NE(killed.status, 0);
    EXPECT_TRUE(has(killed.err, "SIGKILL inside the transaction that records")) << killed.err;
    auto stored = read_store(dir_ / "k.sqlite", "k");
    for (const auto& [key, value] : stored.artifacts)
        EXPECT_FALSE(has(key.second, "analysis/step4/")) << key.second;
    for (const auto& [key, points] : stored.curves)
        EXPECT_NE(key.second.rfind("property/", 0), 0u) << key.second;

    const auto rerun = tupe("run " + quote(file.string()) + " --quiet");
    ASSERT_EQ(rerun.status, 0) << rerun.err;
    stored = read_store(dir_ / "k.sqlite", "k");
    int properties = 0;
    for (const auto& [key, points] : stored.curves)
        if (key.second.rfind("property/", 0) == 0) {
            ++properties;
            ASSERT_EQ(points.size(), 1u) << key.second;
            EXPECT_EQ(points[0].first, 4) << key.second;
        }
    EXPECT_GT(properties, 0);
    EXPECT_TRUE(stored.artifacts.count({"bert-a", "runs/bert-a/analysis/step4/index.json"}));
    EXPECT_EQ(tupe("status " + quote(file.string())).out.find("changed"), std::string::npos);
}

// The runner's children die with it: kill -9 of a runner while its `tupe analyze` child runs
// leaves no child behind.
TEST_F(OutputIdentityTest, AnalysisChildDiesWithItsRunner) {
    const fs::path file =
        study(dir_, "p.yaml", "p", "[bert-a]", 4,
              "analysis: {checkpoints: [1.0], sentences: 400, figures: false, probe_windows: 64, "
              "order_probe: true}\n");
    const pid_t runner = test_support::start_process({TUPE_CLI, "run", file.string(), "--quiet"},
                                                     dir_ / "runner.log");
    started_.push_back(runner);
    // The child is the process whose parent is the runner.
    const auto child_of = [](pid_t parent) -> pid_t {
        for (const auto& entry : fs::directory_iterator("/proc")) {
            const std::string pid = entry.path().filename().string();
            if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
            std::ifstream stat(entry.path() / "stat");
            std::string line;
            std::getline(stat, line);
            const auto close = line.rfind(')');
            if (close == std::string::npos) continue;
            std::istringstream rest(line.substr(close + 2));
            std::string state;
            long ppid = 0;
            rest >> state >> ppid;
            if (ppid == parent && state != "Z") return static_cast<pid_t>(std::stol(pid));
        }
        return -1;
    };
    pid_t child = -1;
    for (int i = 0; i < 1200 && child < 0 && test_support::process_running(runner); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        child = child_of(runner);
    }
    ASSERT_GT(child, 0) << read_file(dir_ / "runner.log");
    kill(runner, SIGKILL);
    test_support::wait_process(runner);
    started_.clear();
    // Gone: no such process, or a zombie (killed, waiting for whoever adopted it to reap it).
    const auto gone_now = [&] {
        std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
        std::string line;
        if (!std::getline(stat, line)) return true;
        const auto close = line.rfind(')');
        return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
    };
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        gone = gone_now();
    }
    EXPECT_TRUE(gone) << "child " << child << " outlived its runner";
    if (!gone) kill(child, SIGKILL);
}

// A pretraining resumed at a snapshot step (its row lost with the process that wrote the
// snapshot) records that snapshot's checkpoints row.
TEST_F(OutputIdentityTest, ResumeAtASnapshotRecordsItsCheckpointRow) {
    const fs::path file = study(dir_, "r.yaml", "r", "[bert-a]", 4);
    ASSERT_EQ(tupe("run " + quote(file.string()) + " --quiet").status, 0);
    const auto before = read_store(dir_ / "r.sqlite", "r");
    ASSERT_TRUE(before.checkpoints.count({"bert-a", 4}));
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open((dir_ / "r.sqlite").c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db,
                               "DELETE FROM checkpoints; UPDATE runs SET status = 'running' "
                               "WHERE kind = 'pretrain'",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    const auto resumed = tupe("run " + quote(file.string()) + " --quiet");
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_EQ(read_store(dir_ / "r.sqlite", "r").checkpoints, before.checkpoints);
}

// A study that shares another's finished runs (same runs_dir, same jobs) and has the same
// analysis block reads the owner's analysis: claims 5 and 6 are decided, not "not run".
TEST_F(OutputIdentityTest, SharedRunsBringTheirAnalysisWhenTheSettingsAgree) {
    const std::string db = (dir_ / "one.sqlite").string();
    const fs::path first =
        study(dir_, "first.yaml", "first", "[bert-a, tupe-a]", 4, kAnalysis, "[1]", db);
    ASSERT_EQ(tupe("run " + quote(first.string()) + " --quiet").status, 0);
    const fs::path second =
        study(dir_, "second.yaml", "second", "[bert-a, tupe-a]", 4, kAnalysis, "[1]", db);
    const auto shared = tupe("run " + quote(second.string()));
    ASSERT_EQ(shared.status, 0) << shared.err;
    const auto claims = tupe("claims --db " + quote(db) + " --experiment second --format json");
    ASSERT_EQ(claims.status, 0) << claims.err;
    const auto parsed = nlohmann::json::parse(claims.out);
    for (const auto& c : parsed.at("claims")) {
        const std::string id = c.at("id").get<std::string>();
        if (id == "5" || id == "6") EXPECT_NE(c.at("verdict"), "not run") << claims.out;
    }
    // Another analysis of those folders is not this study's to write.
    std::string text = read_file(second);
    text.replace(text.find("sentences: 4"), 12, "sentences: 5");
    write_file(second, text);
    const auto refused = tupe("run " + quote(second.string()));
    EXPECT_NE(refused.status, 0);
    EXPECT_TRUE(has(refused.err, "is experiment 'first''s run, read only here")) << refused.err;
}

// Settings that would store nothing, count a job twice, write outside the runs folder or grow
// without bound stop in one line naming the key, before any file exists.
TEST_F(OutputIdentityTest, BadStudySettingsStopBeforeAnythingIsStored) {
    struct Case {
        std::string from, to, key;
    };
    const std::vector<Case> cases = {
        {"database: " + (dir_ / "x.sqlite").string(), "database: \":memory:\"", "database"},
        {"database: " + (dir_ / "x.sqlite").string(), "database: \"file:x?mode=memory\"",
         "database"},
        {"seeds: [1]", "seeds: [1, 1]", "finetune.seeds"},
        {"tasks: [syn-cola]", "tasks: [syn-mrpc, SYN-MRPC]", "glue.tasks"},
        {"name: x", "name: ../escape", "name"},
        {"variants: [bert-a]", "variants: [{name: a/b, preset: bert-a}]", "variants"},
        {"batch_size: 8, eval", "batch_size: 1000000000, eval", "train.batch_size"},
    };
    for (const auto& c : cases) {
        const fs::path file = study(dir_, "x.yaml", "x", "[bert-a]", 4);
        std::string text = read_file(file);
        ASSERT_NE(text.find(c.from), std::string::npos) << c.from;
        text.replace(text.find(c.from), c.from.size(), c.to);
        write_file(file, text);
        const auto r = tupe("run " + quote(file.string()));
        EXPECT_NE(r.status, 0) << c.to;
        EXPECT_EQ(lines(r.err), 1) << c.to << ": " << r.err;
        EXPECT_TRUE(has(r.err, c.key)) << c.to << ": " << r.err;
        EXPECT_FALSE(fs::exists(dir_ / "runs")) << c.to;
        EXPECT_FALSE(fs::exists(dir_ / "x.sqlite")) << c.to;
        EXPECT_FALSE(fs::exists(dir_ / "escape")) << c.to;
    }
}

// One naming rule: a variant whose seeds are listed carries @seedN however many there are, so
// a study of seed 2 alone names the job a study of seeds 1 and 2 names; a run stored under the
// older name of a lone seed (no suffix) is adopted, not pretrained again.
TEST_F(OutputIdentityTest, ListedSeedsAlwaysNameTheVariant) {
    const fs::path two = study(dir_, "two.yaml", "two", "[bert-a]", 4, "pretrain_seeds: [2]\n");
    const auto plan = tupe("status " + quote(two.string()));
    EXPECT_TRUE(has(plan.out, "bert-a@seed2")) << plan.out;

    const fs::path one = study(dir_, "one.yaml", "one", "[bert-a]", 4);  // no seeds listed
    ASSERT_EQ(tupe("run " + quote(one.string()) + " --quiet").status, 0);
    // The same study with its seed listed (the older rule named it "bert-a" too).
    std::string text = read_file(one) + "pretrain_seeds: [1]\n";
    write_file(one, text);
    const auto again = tupe("run " + quote(one.string()));
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_TRUE(has(again.err, "0 finished, 2 already done")) << again.err;
}

}  // namespace
