// Several `tupe run` processes on one plan, through the real CLI (TUPE_CLI) on a tiny study (two
// tiny variants, a few steps, one intra-op thread per process): three runners started at once
// (one of them with `--jobs 2` children) run every job exactly once, with the results of one
// runner; a runner that hangs mid-job
// (SIGSTOP, as a frozen machine) has its claim go stale after a short TUPE_CLAIM_TIMEOUT and a
// second runner takes the job over and finishes it; a runner killed with SIGKILL mid-job shows
// as stale in `tupe status` (its pid gone) and the next runner finishes its job at once; a
// runner that finds the rest of the plan held by a live runner waits, and takes the job over
// when that runner dies. The runners crash and hang themselves at a known step through
// TUPE_TEST_RAISE_AT_STEP. Also the runner's heartbeat thread (ClaimKeeper) on its own.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cli_fixture.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"
#include "runner_internal.h"  // ClaimKeeper

using test_support::has;

using namespace experiments;
namespace fs = std::filesystem;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

class RunnerClaimsTest : public test_support::TempDirTest {
  protected:
    RunnerClaimsTest() : TempDirTest(test_support::per_test_name("tupe_claims")) {}
    void SetUp() override { test_support::write_toy_corpus(dir_, 16, 30, 7, 11); }
    // A runner left frozen or running by a failed assertion must not outlive the test.
    void TearDown() override {
        for (const pid_t pid : std::set<pid_t>(started_)) kill_and_reap(pid);
    }

    // 2 pretraining jobs of `steps` steps (checkpoints every 4) + 2 variants x 1 snapshot x
    // 2 tasks x 1 lr x 2 seeds = 10 jobs, with its own database and runs folder per `tag`.
    fs::path study(const std::string& tag, int steps) const {
        return test_support::write_claims_study(dir_, tag, steps);
    }

    // Starts `tupe run FILE --threads 1 EXTRA...` with stdout and stderr to dir_/LOG and `env`
    // set on top of this environment (test_support::start_process); returns its pid.
    pid_t start_run(const fs::path& file, const std::string& log, const Env& env = {},
                    const std::vector<std::string>& extra = {}) const {
        std::vector<std::string> args = {TUPE_CLI, "run", file.string(), "--threads", "1"};
        args.insert(args.end(), extra.begin(), extra.end());
        const pid_t pid = test_support::start_process(args, dir_ / log, env);
        if (pid > 0) started_.insert(pid);
        return pid;
    }

    // A shell's exit code for the child `pid`, once it ends.
    int wait_exit(pid_t pid) const {
        int status = 0;
        waitpid(pid, &status, 0);
        started_.erase(pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    // SIGKILL (which also ends a stopped process), then reap.
    void kill_and_reap(pid_t pid) const {
        kill(pid, SIGKILL);
        wait_exit(pid);
    }

    // Waits until `pid` stops itself (SIGSTOP); false when it ended instead.
    bool wait_stopped(pid_t pid) const {
        int status = 0;
        if (waitpid(pid, &status, WUNTRACED) != pid) return false;
        if (WIFSTOPPED(status)) return true;
        started_.erase(pid);
        return false;
    }

    // True while `pid` runs (neither ended nor reaped).
    bool running(pid_t pid) const {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == 0) return true;
        started_.erase(pid);
        return false;
    }

    // `tupe status FILE` with TUPE_CLAIM_TIMEOUT = `timeout` when given.
    std::string status(const fs::path& file, const char* timeout = nullptr) const {
        if (timeout) setenv(kClaimTimeoutEnv, timeout, 1);
        const auto r = test_support::run_tupe("status " + test_support::quote(file.string()),
                                              dir_ / "status.err");
        if (timeout) unsetenv(kClaimTimeoutEnv);
        EXPECT_EQ(r.status, 0) << r.err;
        return r.out;
    }

    std::string log(const std::string& name) const { return test_support::read_file(dir_ / name); }

    mutable std::set<pid_t> started_;  // children not reaped yet
};

// "claims: 3 finished, 7 already done, 0 failed" of a runner's log, as (finished, done,
// failed); (-1, -1, -1) when the line is missing.
std::tuple<int, int, int> counts_of(const std::string& log) {
    static const std::regex line(R"((\d+) finished, (\d+) already done, (\d+) failed)");
    std::smatch m;
    if (!std::regex_search(log, m, line)) return {-1, -1, -1};
    return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

struct Stored {
    std::map<std::string, RunRecord> runs;
    std::map<std::string, JobClaim> claims;
    // (run, task, split, metric) -> value
    std::map<std::tuple<std::string, std::string, std::string, std::string>, double> glue;
    // (run, key) -> (step, value) by step, duplicates kept (to be caught)
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, double>>> curves;
};

Stored read_store(const fs::path& database) {
    Stored out;
    auto store = ResultStore::open(database.string(), OpenMode::kReadOnly);
    const auto exp = store.find_experiment("claims");
    if (!exp) return out;
    for (const auto& run : store.list_runs(exp->id)) {
        out.runs[run.name] = run;
        for (const auto& key : store.metric_keys(run.id))
            for (const auto& p : store.metrics(run.id, key))
                out.curves[{run.name, key}].emplace_back(p.step, p.value);
    }
    for (const auto& c : store.list_claims(exp->id)) out.claims[c.job] = c;
    for (const auto& g : store.glue_results(exp->id))
        out.glue[{g.run_name, g.task, g.split, g.metric}] = g.value;
    return out;
}

// Every job of the 10-job study finished, its claim released, no curve point twice.
void expect_all_finished_once(const Stored& s) {
    ASSERT_EQ(s.runs.size(), 10u);
    for (const auto& [name, run] : s.runs) EXPECT_EQ(run.status, "finished") << name;
    ASSERT_EQ(s.claims.size(), 10u);
    for (const auto& [job, claim] : s.claims) EXPECT_FALSE(claim.held()) << job;
    for (const auto& [key, points] : s.curves) {
        std::set<int64_t> steps;
        for (const auto& p : points)
            EXPECT_TRUE(steps.insert(p.first).second)
                << key.first << " " << key.second << " step " << p.first << " twice";
    }
}

}  // namespace

// Runners started together on a new store: one creates the file, and until its schema is
// written the file is empty. Another runner, which first reads what is stored, sees no store
// yet, never an error ("empty database").
TEST_F(RunnerClaimsTest, AStoreBeingCreatedIsReadAsNoStoreYet) {
    const fs::path file = study("new", 16);
    const ExperimentSpec spec = load_experiment(file.string());
    test_support::write_file(spec.database, "");
    EXPECT_FALSE(ResultStore::holds_data(spec.database));
    EXPECT_FALSE(ResultStore::holds_data((dir_ / "missing.sqlite").string()));
    const auto statuses = job_statuses(spec);
    ASSERT_EQ(statuses.size(), 10u);
    for (const auto& s : statuses) EXPECT_EQ(s.status, "pending") << s.job;
    EXPECT_TRUE(has(status(file), "pending"));
    EXPECT_EQ(fs::file_size(spec.database), 0u);  // reading wrote nothing
    ResultStore::open(spec.database).get_or_create_experiment("s", "", "");
    EXPECT_TRUE(ResultStore::holds_data(spec.database));
}

TEST_F(RunnerClaimsTest, ThreeRunnersAtOnceRunEveryJobOnce) {
    const pid_t one = start_run(study("one", 16), "one.log");
    ASSERT_EQ(wait_exit(one), 0) << log("one.log");

    // The first runs its fine-tuning jobs in two child processes (`--jobs 2`), which take
    // over the claims it made for them.
    const fs::path shared = study("shared", 16);
    std::vector<pid_t> runners;
    for (int i = 0; i < 3; ++i)
        runners.push_back(start_run(
            shared, "runner" + std::to_string(i) + ".log", {},
            i == 0 ? std::vector<std::string>{"--jobs", "2"} : std::vector<std::string>{}));
    int finished = 0, failed = 0;
    for (int i = 0; i < 3; ++i) {
        const std::string name = "runner" + std::to_string(i) + ".log";
        ASSERT_EQ(wait_exit(runners[static_cast<size_t>(i)]), 0) << log(name);
        const auto [f, done, fail] = counts_of(log(name));
        ASSERT_GE(f, 0) << log(name);
        EXPECT_EQ(f + done, 10) << log(name);  // every job is run here or by another runner
        finished += f;
        failed += fail;
    }
    // Each job ran in exactly one runner: the runners' counts add up to the plan, and each
    // job was claimed to be run once (a handoff to a child is not a second attempt).
    EXPECT_EQ(finished, 10);
    EXPECT_EQ(failed, 0);
    const Stored a = read_store(dir_ / "one.sqlite");
    const Stored b = read_store(dir_ / "shared.sqlite");
    expect_all_finished_once(b);
    for (const auto& [job, claim] : b.claims) EXPECT_EQ(claim.attempts, 1) << job;

    // The same numbers as one runner: same inputs and seeds, one thread per process.
    ASSERT_EQ(a.glue.size(), 4u * 1 + 4u * 2);  // syn-cola: mcc; syn-stsb: pearson, spearman
    ASSERT_EQ(b.glue.size(), a.glue.size());
    for (const auto& [key, value] : a.glue) {
        ASSERT_TRUE(b.glue.count(key)) << std::get<0>(key) << " " << std::get<3>(key);
        EXPECT_NEAR(b.glue.at(key), value, 1e-6) << std::get<0>(key) << " " << std::get<3>(key);
    }
    ASSERT_EQ(b.curves.size(), a.curves.size());
    for (const auto& [key, points] : a.curves) {
        if (has(key.second, "time") || has(key.second, "tok")) continue;  // wall-clock
        ASSERT_TRUE(b.curves.count(key)) << key.first << " " << key.second;
        const auto& other = b.curves.at(key);
        ASSERT_EQ(other.size(), points.size()) << key.first << " " << key.second;
        for (size_t i = 0; i < points.size(); ++i) {
            EXPECT_EQ(other[i].first, points[i].first);
            EXPECT_NEAR(other[i].second, points[i].second, 1e-6)
                << key.first << " " << key.second << " step " << points[i].first;
        }
    }
}

TEST_F(RunnerClaimsTest, HungRunnersClaimGoesStaleAndAnotherRunnerFinishesItsJob) {
    const fs::path file = study("hang", 24);
    const std::string host = ClaimOwner::self().host;
    // The first runner freezes itself right after step 10 of its first job, bert-a (last
    // checkpoint: step 8), holding the claim with heartbeats that no longer come.
    const pid_t hung = start_run(file, "hung.log", {{kRaiseAtStepEnv, "10:STOP"}});
    ASSERT_TRUE(wait_stopped(hung))
        << "the runner was to stop itself at step 10: " << log("hung.log");
    const std::string owner = host + ":" + std::to_string(hung);

    // Within the default 60 s it is a live runner: running, with its owner and heartbeat.
    const std::string live = status(file);
    EXPECT_TRUE(has(live, "running   bert-a  (step 8)  (" + owner + ", heartbeat ")) << live;
    EXPECT_FALSE(has(live, "stale")) << live;
    // With a 2 s timeout, once its heartbeat is older than that, it is stale (its process
    // still exists: only the heartbeat tells).
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    const std::string stale = status(file, "2");
    EXPECT_TRUE(has(stale, "stale     bert-a  (step 8)  (owner " + owner + ", last heartbeat "))
        << stale;
    EXPECT_FALSE(has(stale, "no such process")) << stale;
    EXPECT_FALSE(has(stale, "running")) << stale;

    // A second runner with that timeout takes bert-a over and finishes the whole plan.
    const pid_t second = start_run(file, "second.log", {{kClaimTimeoutEnv, "2"}});
    const int rc = wait_exit(second);
    kill_and_reap(hung);  // still frozen: end it
    ASSERT_EQ(rc, 0) << log("second.log");
    EXPECT_TRUE(has(log("second.log"), "taking over job bert-a from " + owner + " (last heartbeat"))
        << log("second.log");
    EXPECT_EQ(counts_of(log("second.log")), std::make_tuple(10, 0, 0)) << log("second.log");

    const Stored s = read_store(dir_ / "hang.sqlite");
    expect_all_finished_once(s);
    EXPECT_EQ(s.runs.at("bert-a").step, 24);
    EXPECT_EQ(s.claims.at("bert-a").attempts, 2);  // the hung runner's, then the second's
    EXPECT_EQ(s.claims.at("bert-a").owner.pid, second);
    for (const auto& [job, claim] : s.claims)
        if (job != "bert-a") EXPECT_EQ(claim.attempts, 1) << job;
    // Resumed from the checkpoint at 8: the point at 10 was dropped and logged again, once.
    EXPECT_EQ(s.curves.at({"bert-a", "train/loss"}).size(), 12u);  // every 2 steps, 2..24
    EXPECT_TRUE(has(status(file), "finished 10")) << status(file);
}

TEST_F(RunnerClaimsTest, KilledRunnerShowsStaleAndTheNextRunnerFinishesItsJob) {
    const fs::path file = study("kill", 24);
    const std::string host = ClaimOwner::self().host;
    // Killed (SIGKILL, by itself) right after step 10 of bert-a: no chance to release.
    const pid_t killed = start_run(file, "killed.log", {{kRaiseAtStepEnv, "10:KILL"}});
    ASSERT_EQ(wait_exit(killed), 128 + SIGKILL) << log("killed.log");
    const std::string owner = host + ":" + std::to_string(killed);

    // Its pid is gone on this host: stale at once, whatever the timeout.
    const std::string after_kill = status(file);
    EXPECT_TRUE(
        has(after_kill, "stale     bert-a  (step 8)  (owner " + owner + ", last heartbeat "))
        << after_kill;
    EXPECT_TRUE(has(after_kill, ", no such process)")) << after_kill;
    EXPECT_TRUE(has(after_kill, " stale 1")) << after_kill;
    EXPECT_FALSE(has(after_kill, "running")) << after_kill;

    const pid_t next = start_run(file, "next.log");
    ASSERT_EQ(wait_exit(next), 0) << log("next.log");
    EXPECT_TRUE(has(log("next.log"), "taking over job bert-a from " + owner + " (no such process"))
        << log("next.log");
    const Stored s = read_store(dir_ / "kill.sqlite");
    expect_all_finished_once(s);
    EXPECT_EQ(s.runs.at("bert-a").step, 24);
    EXPECT_EQ(s.claims.at("bert-a").attempts, 2);
    EXPECT_EQ(s.curves.at({"bert-a", "train/loss"}).size(), 12u);
    const std::string done = status(file);
    EXPECT_TRUE(has(done, "finished 10")) << done;
    EXPECT_FALSE(has(done, "stale")) << done;
}

TEST_F(RunnerClaimsTest, RunnerWaitsForAJobHeldByALiveRunnerAndTakesItOverWhenItDies) {
    const fs::path file = study("wait", 24);
    const std::string host = ClaimOwner::self().host;
    const pid_t hung = start_run(file, "hung.log", {{kRaiseAtStepEnv, "10:STOP"}});
    ASSERT_TRUE(wait_stopped(hung))
        << "the runner was to stop itself at step 10: " << log("hung.log");
    const std::string owner = host + ":" + std::to_string(hung);

    // With the default 60 s timeout the frozen runner still counts as alive: the second
    // runner does everything else, then waits for bert-a and the fine-tuning after it.
    const pid_t second = start_run(file, "second.log");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!has(log("second.log"), "waiting for other runners") &&
           std::chrono::steady_clock::now() < deadline && running(second))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string waiting = log("second.log");
    ASSERT_TRUE(has(waiting, "waiting for other runners: 5 jobs left, bert-a on " + owner))
        << waiting;
    ASSERT_TRUE(running(second)) << "the second runner ended instead of waiting: " << waiting;
    const Stored meanwhile = read_store(dir_ / "wait.sqlite");
    EXPECT_EQ(meanwhile.runs.at("tupe-r").status, "finished");
    EXPECT_EQ(meanwhile.runs.at("bert-a").status, "running");
    EXPECT_EQ(meanwhile.runs.size(), 2u + 4u);  // no fine-tuning of bert-a before its pretraining

    // The frozen runner dies: its pid is gone, and the waiting runner takes bert-a over.
    kill_and_reap(hung);
    ASSERT_EQ(wait_exit(second), 0) << log("second.log");
    EXPECT_TRUE(
        has(log("second.log"), "taking over job bert-a from " + owner + " (no such process"))
        << log("second.log");
    EXPECT_EQ(counts_of(log("second.log")), std::make_tuple(10, 0, 0)) << log("second.log");
    const Stored s = read_store(dir_ / "wait.sqlite");
    expect_all_finished_once(s);
    EXPECT_EQ(s.claims.at("bert-a").attempts, 2);
}

namespace {

// Polls `condition` for up to 10 s.
bool eventually(const std::function<bool()>& condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

}  // namespace

TEST(ClaimKeeper, BeatsMirrorsTheStopFlagAndNoticesALostClaim) {
    test_support::TempDir dir("tupe_keeper_" + test_support::process_id() + "_" +
                              test_support::random_tag());
    const std::string path = dir.file("results.db");
    auto store = ResultStore::open(path);
    const auto id = store.get_or_create_experiment("e", "", "");
    const ClaimOwner me = ClaimOwner::self();
    ASSERT_EQ(store.claim_job(id, "bert-a", me).outcome, ClaimResult::Outcome::kClaimed);
    const double claimed = store.list_claims(id).at(0).heartbeat_time;
    std::atomic<bool> user_stop{false}, job_stop{false};
    experiments::detail::ClaimKeeper keeper(ResultStore::open(path), me,
                                            std::chrono::milliseconds(100), &user_stop, job_stop);
    keeper.watch(id, "bert-a");

    // The heartbeat moves on while the job runs.
    EXPECT_TRUE(eventually([&] { return store.list_claims(id).at(0).heartbeat_time > claimed; }));
    EXPECT_FALSE(keeper.lost());
    EXPECT_FALSE(job_stop.load());

    // Ctrl-C reaches the executors' flag.
    user_stop = true;
    EXPECT_TRUE(eventually([&] { return job_stop.load(); }));
    user_stop = false;
    keeper.watch(id, "bert-a");  // the next job starts with the flag cleared
    EXPECT_FALSE(job_stop.load());

    // Another runner takes the claim over (as after stalled heartbeats): the job is stopped.
    ClaimOptions from_me;
    from_me.handoff_from = me;
    const ClaimOwner other{"node-x.test", 4242};
    ASSERT_EQ(store.claim_job(id, "bert-a", other, from_me).outcome,
              ClaimResult::Outcome::kClaimed);
    EXPECT_TRUE(eventually([&] { return keeper.lost(); }));
    EXPECT_TRUE(job_stop.load());

    // A job unwatched and then released is not lost.
    ASSERT_EQ(store.claim_job(id, "tupe-a", me).outcome, ClaimResult::Outcome::kClaimed);
    keeper.watch(id, "tupe-a");
    EXPECT_FALSE(keeper.lost());
    keeper.unwatch();
    EXPECT_TRUE(store.release_claim(id, "tupe-a", me));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(keeper.lost());
    EXPECT_FALSE(job_stop.load());
}
