// A stored result is what its study file says, through the real CLI (TUPE_CLI) on tiny
// studies: a rerun with a changed config is refused in one line (and run beside the stored runs
// with --new-runs, never pooled with them); a second study cannot adopt or rewrite the first
// one's run folders; claims and reports read the same from any directory and after the store
// and its runs move; a lost store is rebuilt from the run folders with the real steps and
// curves; `tupe pretrain` locks its folder; a study without data or with a malformed GLUE file
// fails before anything is stored; a diverged pretraining blocks its fine-tuning while the plan
// goes on (test_chaos.cpp kills runners at random moments).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/run_folder.h"
#include "engine/sha256.h"
#include "experiments/result_store.h"
#include "study_fixture.h"
#include "support/test_support.h"

using test_support::has;

using namespace experiments;
namespace fs = std::filesystem;
using test_support::quote;
using test_support::read_file;
using test_support::run_cli;
using test_support::run_tupe;
using test_support::write_file;

namespace {

using test_support::file_hashes;
using test_support::read_store;
using test_support::Stored;
using ReliabilityTest = test_support::StudyTest;

// A rerun whose config differs is refused in one line naming the change, writing nothing;
// --new-runs runs the changed jobs beside the stored ones, and the report never pools them.
TEST_F(ReliabilityTest, ChangedConfigIsRefusedAndRunsBesideWithNewRuns) {
    const fs::path file = study(dir_, "a.yaml", "a", "[bert-a]", 4);
    const auto first = tupe("run " + quote(file.string()) + " --quiet");
    ASSERT_EQ(first.status, 0) << first.err;
    const Stored before = read_store(dir_ / "a.sqlite", "a");
    ASSERT_EQ(before.runs.size(), 2u);
    for (const auto& [name, r] : before.runs) EXPECT_EQ(r.fingerprint.size(), 16u) << name;

    const auto refused = tupe("run " + quote(file.string()) + " --set train.lr=2e-3");
    EXPECT_NE(refused.status, 0);
    EXPECT_TRUE(has(refused.err, "2 of its 2 jobs differ from the runs stored in")) << refused.err;
    EXPECT_TRUE(has(refused.err, "train.lr: 0.0005 -> 0.002 (2 jobs)")) << refused.err;
    EXPECT_TRUE(has(refused.err, "--new-runs")) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    const Stored untouched = read_store(dir_ / "a.sqlite", "a");
    EXPECT_EQ(untouched.runs.size(), 2u);
    EXPECT_EQ(untouched.curves, before.curves);

    // Other task data is another fine-tuning too; its pretraining is unchanged.
    const fs::path more = study(dir_, "more.yaml", "a", "[bert-a]", 4);
    std::string text = read_file(more);
    text.replace(text.find("synthetic_train: 32"), 19, "synthetic_train: 40");
    write_file(more, text);
    const auto data_changed = tupe("run " + quote(more.string()));
    EXPECT_NE(data_changed.status, 0);
    EXPECT_TRUE(has(data_changed.err, "1 of its 2 jobs differ")) << data_changed.err;
    EXPECT_TRUE(has(data_changed.err, "finetune.task_data")) << data_changed.err;

    const auto beside =
        tupe("run " + quote(file.string()) + " --set train.lr=2e-3 --new-runs --quiet");
    ASSERT_EQ(beside.status, 0) << beside.err;
    const Stored after = read_store(dir_ / "a.sqlite", "a");
    ASSERT_EQ(after.runs.size(), 4u);
    std::string renamed;
    for (const auto& [name, r] : after.runs)
        if (r.kind == "pretrain" && name != "bert-a") renamed = name;
    ASSERT_EQ(renamed.rfind("bert-a~", 0), 0u) << renamed;
    const RunRecord& b = after.runs.at(renamed);
    EXPECT_TRUE(has(b.identity, "train.lr=0.002\n")) << b.identity;
    EXPECT_EQ(fs::path(b.out_dir).filename().string(), renamed);
    EXPECT_EQ(after.runs.at("bert-a").fingerprint, before.runs.at("bert-a").fingerprint);
    EXPECT_NE(after.runs.at("bert-a").cell, b.cell);
    // The stored runs' curves are untouched.
    for (const auto& [key, points] : before.curves) EXPECT_EQ(after.curves.at(key), points);

    // Two rows for bert-a in the report, each saying which config it stands for.
    const auto report = tupe("report --db " + quote((dir_ / "a.sqlite").string()) +
                             " --experiment a --format json");
    ASSERT_EQ(report.status, 0) << report.err;
    const auto json = nlohmann::json::parse(report.out);
    std::set<std::string> labels;
    for (const auto& row : json.at("rows"))
        if (!row.value("reference", false)) labels.insert(row.at("label").get<std::string>());
    EXPECT_EQ(labels.size(), 2u) << report.out;
    EXPECT_TRUE(std::any_of(labels.begin(), labels.end(), [](const std::string& l) {
        return has(l, "train.lr=0.002");
    })) << report.out;

    // Now both configs are stored: either one reruns as already done, without --new-runs.
    const auto again = tupe("run " + quote(file.string()) + " --set train.lr=2e-3");
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_TRUE(has(again.err, "0 finished, 2 already done")) << again.err;
    const auto status = tupe("status " + quote(file.string()));
    EXPECT_FALSE(has(status.out, "changed")) << status.out;
    const auto status_other = tupe("status " + quote(more.string()));
    EXPECT_TRUE(has(status_other.out, "changed")) << status_other.out;
}

// A second study sharing runs_dir finds the first one's folders owned by it: a different
// pretraining is refused in one line; the same pretraining (same fingerprint, finished) is
// read as it is (quickstart_bow reads the quickstart's runs). Either way not one of the first
// study's files changes.
TEST_F(ReliabilityTest, SecondStudyCannotTakeTheFirstStudysRunFolders) {
    const fs::path first = study(dir_, "first.yaml", "first", "[bert-a]", 4);
    ASSERT_EQ(tupe("run " + quote(first.string()) + " --quiet").status, 0);
    const auto files = file_hashes(dir_ / "runs" / "bert-a");
    EXPECT_TRUE(engine::read_run_owner((dir_ / "runs" / "bert-a").string()).has_value());

    const fs::path second = study(dir_, "second.yaml", "second", "[bert-a]", 6, "", "[1]",
                                  (dir_ / "first.sqlite").string());
    const auto refused = tupe("run " + quote(second.string()));
    EXPECT_NE(refused.status, 0);
    EXPECT_TRUE(has(refused.err, (dir_ / "runs" / "bert-a").string())) << refused.err;
    EXPECT_TRUE(has(refused.err, "belongs to experiment 'first'")) << refused.err;
    EXPECT_EQ(file_hashes(dir_ / "runs" / "bert-a"), files);

    const fs::path same = study(dir_, "same.yaml", "same", "[bert-a]", 4, "", "[1]",
                                (dir_ / "first.sqlite").string());
    const auto shared = tupe("run " + quote(same.string()));
    EXPECT_EQ(shared.status, 0) << shared.err;
    EXPECT_TRUE(has(shared.err, "(shared, read only)")) << shared.err;
    EXPECT_EQ(file_hashes(dir_ / "runs" / "bert-a"), files);
    EXPECT_EQ(engine::read_run_owner((dir_ / "runs" / "bert-a").string())->experiment, "first");
    {
        auto store = ResultStore::open((dir_ / "first.sqlite").string(), OpenMode::kReadOnly);
        const auto e = store.find_experiment("same");
        ASSERT_TRUE(e);
        const auto run = store.find_run(e->id, "bert-a");
        ASSERT_TRUE(run);
        EXPECT_EQ(run->status, "finished");
        EXPECT_FALSE(store.metrics(run->id, "validation/loss").empty());
        int finetuned = 0;
        for (const auto& r : store.list_runs(e->id))
            finetuned += r.kind == "finetune" && r.status == "finished";
        EXPECT_GT(finetuned, 0);
    }
    // Nor may `tupe pretrain` write into it.
    write_file(dir_ / "p.yaml", "data: {corpus: " + (dir_ / "corpus.txt").string() +
                                    ", vocab: " + (dir_ / "vocab.txt").string() + "}\n");
    const auto pretrain = tupe("pretrain --config " + quote((dir_ / "p.yaml").string()) +
                               " --out " + quote((dir_ / "runs" / "bert-a").string()));
    EXPECT_NE(pretrain.status, 0);
    EXPECT_TRUE(has(pretrain.err, "belongs to job bert-a of experiment 'first'")) << pretrain.err;
    EXPECT_EQ(file_hashes(dir_ / "runs" / "bert-a"), files);
}

// Claims and reports name their files relative to the store: the same verdicts from any
// working directory, and after the store and the runs move together.
TEST_F(ReliabilityTest, ClaimsAreTheSameFromAnyDirectoryAndAfterAMove) {
    const fs::path work = dir_ / "work";
    fs::create_directories(work);
    const fs::path file = study(work, "c.yaml", "c", "[bert-a, tupe-a]", 4,
                                "analysis: {checkpoints: [1.0], sentences: 8, figures: false}\n");
    // Relative paths as a user types them, from the project folder.
    const auto ran = run_cli("cd " + quote(work.string()) + " && " + TUPE_CLI, "run c.yaml --quiet",
                             dir_ / "stderr.txt");
    ASSERT_EQ(ran.status, 0) << ran.err;
    const auto claims_from = [&](const fs::path& cwd, const fs::path& db) {
        const auto r =
            run_cli("cd " + quote(cwd.string()) + " && " + TUPE_CLI,
                    "claims --db " + quote(db.string()) + " --experiment c --format json",
                    dir_ / "stderr.txt");
        EXPECT_EQ(r.status, 0) << r.err;
        return r.out;
    };
    const std::string here = claims_from(work, work / "c.sqlite");
    const auto verdicts = nlohmann::json::parse(here);
    std::map<std::string, std::string> by_id;
    for (const auto& c : verdicts.at("claims"))
        by_id[c.at("id").get<std::string>()] = c.at("verdict").get<std::string>();
    EXPECT_NE(by_id.at("5"), "not run") << here;  // read bert-a's analysis files
    EXPECT_NE(by_id.at("6"), "not run") << here;
    EXPECT_EQ(claims_from("/", work / "c.sqlite"), here);
    fs::rename(work, dir_ / "moved");
    // The same verdicts and numbers; the files they name are where they are now.
    std::string moved = here;
    for (size_t at = 0; (at = moved.find(work.string(), at)) != std::string::npos;)
        moved.replace(at, work.string().size(), (dir_ / "moved").string());
    EXPECT_EQ(claims_from(dir_, dir_ / "moved" / "c.sqlite"), moved);
}

// The store is lost, the run folders are kept: the rerun resumes each pretraining at its final
// step and records the real step and the curve its folder holds, not step 0 and nothing.
TEST_F(ReliabilityTest, LostStoreIsRebuiltFromTheRunFolders) {
    const fs::path file = study(dir_, "r.yaml", "r", "[bert-a]", 4);
    ASSERT_EQ(tupe("run " + quote(file.string()) + " --quiet").status, 0);
    const Stored before = read_store(dir_ / "r.sqlite", "r");
    for (const char* suffix : {"", "-wal", "-shm"})
        fs::remove(dir_ / (std::string("r.sqlite") + suffix));
    const auto rerun = tupe("run " + quote(file.string()));
    ASSERT_EQ(rerun.status, 0) << rerun.err;
    EXPECT_TRUE(has(rerun.err, "at step 4")) << rerun.err;
    const Stored after = read_store(dir_ / "r.sqlite", "r");
    EXPECT_EQ(after.runs.at("bert-a").step, 4);
    EXPECT_EQ(after.runs.at("bert-a").status, "finished");
    for (const char* key : {"validation/loss", "train/loss"}) {
        const auto& a = before.curves.at({"bert-a", key});
        const auto& b = after.curves.at({"bert-a", key});
        ASSERT_EQ(a.size(), b.size()) << key;
        for (size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].first, b[i].first) << key;
            EXPECT_NEAR(a[i].second, b[i].second, 1e-6 * std::abs(a[i].second)) << key;
        }
    }
    EXPECT_EQ(after.glue, before.glue);  // the fine-tuning redone from the same snapshot
}

// A second `tupe pretrain` on a folder in use fails at once, naming the first one.
TEST_F(ReliabilityTest, PretrainLocksItsOutFolder) {
    test_support::write_tiny_pretraining(dir_);
    const std::string out = (dir_ / "out").string();
    const pid_t first = test_support::start_process(
        {TUPE_CLI, "pretrain", "--config", (dir_ / "tiny.yaml").string(), "--out", out, "--set",
         "train.steps=1000000"},
        dir_ / "first.log");
    started_.push_back(first);
    std::optional<std::string> holder;
    for (int i = 0; i < 600 && !holder; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        holder = engine::RunFolderLock::holder(out);
    }
    ASSERT_TRUE(holder.has_value()) << read_file(dir_ / "first.log");
    EXPECT_TRUE(has(*holder, ":" + std::to_string(first))) << *holder;
    const auto second =
        tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) + " --out " + quote(out));
    EXPECT_NE(second.status, 0);
    EXPECT_TRUE(has(second.err, "is in use by " + *holder)) << second.err;
}

// A study that names no data, and one whose GLUE file is malformed, stop before the store or
// any run folder exists, in one line naming the key or the file and line.
TEST_F(ReliabilityTest, MissingDataAndBadGlueFilesFailBeforeAnythingIsStored) {
    write_file(dir_ / "only.yaml", "name: only\ndatabase: " + (dir_ / "only.sqlite").string() +
                                       "\nruns_dir: " + (dir_ / "runs-only").string() + "\n");
    const auto only = tupe("run " + quote((dir_ / "only.yaml").string()));
    EXPECT_NE(only.status, 0);
    EXPECT_TRUE(has(only.err, "data.corpus")) << only.err;
    EXPECT_TRUE(has(only.err, "is not set")) << only.err;
    EXPECT_EQ(std::count(only.err.begin(), only.err.end(), '\n'), 1) << only.err;
    EXPECT_FALSE(fs::exists(dir_ / "only.sqlite"));
    EXPECT_FALSE(fs::exists(dir_ / "runs-only"));

    write_file(dir_ / "glue" / "RTE" / "train.tsv",
               "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta b\tnot_entailment\n");
    write_file(dir_ / "glue" / "RTE" / "dev.tsv",
               "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n");
    const fs::path file = study(dir_, "g.yaml", "g", "[bert-a]", 4);
    std::string text = read_file(file);
    text.replace(text.find("glue: {data: builtin, tasks: [syn-cola]"), 39,
                 "glue: {data: " + (dir_ / "glue").string() + ", tasks: [rte]");
    write_file(file, text);
    const auto bad = tupe("run " + quote(file.string()));
    EXPECT_NE(bad.status, 0);
    EXPECT_TRUE(has(bad.err, "RTE/train.tsv:3")) << bad.err;
    EXPECT_FALSE(fs::exists(dir_ / "g.sqlite"));
    EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

// A pretraining whose loss turns non-finite fails; its fine-tuning jobs are marked blocked
// with the reason, and the other variant runs to the end.
TEST_F(ReliabilityTest, DivergedPretrainingBlocksItsFineTuningAndThePlanGoesOn) {
    const fs::path file =
        study(dir_, "d.yaml", "d",
              "[{name: exploding, preset: bert-a, set: {train.lr: 1.0e+30}}, bert-a]", 4);
    const auto r = tupe("run " + quote(file.string()));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(has(r.err, "1 blocked")) << r.err;
    const Stored s = read_store(dir_ / "d.sqlite", "d");
    EXPECT_EQ(s.runs.at("exploding").status, "failed");
    const std::string blocked = "exploding/step4/syn-cola/lr0.001/seed1";
    ASSERT_TRUE(s.runs.count(blocked));
    EXPECT_EQ(s.runs.at(blocked).status, "blocked");
    EXPECT_TRUE(has(s.runs.at(blocked).error_message, "its pretraining exploding failed"));
    EXPECT_EQ(s.runs.at("bert-a").status, "finished");
    EXPECT_EQ(s.runs.at("bert-a/step4/syn-cola/lr0.001/seed1").status, "finished");
    EXPECT_TRUE(has(tupe("status " + quote(file.string())).out, "blocked"));
}

// A pair-task run stored before its task data was named by the dev split alone (train=N above
// dev) holds the scores today's job would compute: it is adopted, neither changed nor run again.
TEST_F(ReliabilityTest, PairTaskRunsStoredUnderTheirOlderTaskDataNameAreAdopted) {
    const fs::path file = study(dir_, "z.yaml", "z", "[bert-a]", 4);
    std::string text = read_file(file);
    text.replace(text.find("[syn-cola]"), 10, "[syn-bshift]");
    write_file(file, text);
    ASSERT_EQ(tupe("run " + quote(file.string()) + " --quiet").status, 0);
    const std::string job = "bert-a/step4/syn-bshift/lr0.001/seed1";
    const Stored before = read_store(dir_ / "z.sqlite", "z");
    const RunRecord run = before.runs.at(job);
    ASSERT_TRUE(has(run.identity, "train=16 dev=16")) << run.identity;
    {
        std::string old = run.identity;
        old.replace(old.find("train=16 dev=16"), 8, "train=32");
        auto store = ResultStore::open((dir_ / "z.sqlite").string(), OpenMode::kReadWrite);
        store.set_run_identity(run.id, old, "0123456789abcdef", run.cell);
    }
    const auto status = tupe("status " + quote(file.string()));
    EXPECT_FALSE(has(status.out, "changed")) << status.out;
    const auto again = tupe("run " + quote(file.string()));
    ASSERT_EQ(again.status, 0) << again.err;
    const Stored after = read_store(dir_ / "z.sqlite", "z");
    EXPECT_EQ(after.runs.size(), before.runs.size());
    EXPECT_EQ(after.runs.at(job).id, run.id);
    EXPECT_EQ(after.runs.at(job).identity, run.identity);
    EXPECT_EQ(after.runs.at(job).fingerprint, run.fingerprint);
    EXPECT_EQ(after.glue, before.glue);
}

}  // namespace
