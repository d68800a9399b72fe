// Two runners on one plan of 12 jobs (two variants x two pretraining seeds, each with its
// analysis and extrapolation, and two fine-tuning seeds each) killed with SIGKILL again and
// again at seeded moments: at random times, inside a store transaction (the test hooks of
// TUPE_TEST_KILL_IN_TRANSACTION: the curve points of a step, the files of an analysis), and
// while an analysis or extrapolation child runs. After a last undisturbed run the store must
// equal an undisturbed study's on every table: runs, params, curves (property metrics
// included), GLUE scores, predictions, checkpoint rows and artifacts with their hashes and
// identities, and the claims. TUPE_CHAOS_SEED and TUPE_CHAOS_KILLS change the seed and the
// number of kills (scripts/chaos.sh runs it longer).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "study_fixture.h"

namespace {

namespace fs = std::filesystem;
using test_support::expect_same_stores;
using test_support::quote;
using test_support::read_file;
using test_support::read_store;
using test_support::Stored;
using ChaosTest = test_support::StudyTest;
using Clock = std::chrono::steady_clock;

long env_or(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return v ? std::strtol(v, nullptr, 10) : fallback;
}

// The live children of `parent` whose command line names `word` (a `tupe analyze` child).
bool has_child_running(pid_t parent, const std::string& word) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator("/proc", error)) {
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
        if (ppid != parent || state == "Z") continue;
        std::ifstream cmd(entry.path() / "cmdline");
        const std::string argv((std::istreambuf_iterator<char>(cmd)), {});
        if (argv.find(word) != std::string::npos) return true;
    }
    return false;
}

struct Runner {
    pid_t pid = -1;
    bool ended = false;
    int status = 0;  // waitpid status once ended
};

bool poll(Runner& r) {
    if (r.ended || r.pid < 0) return r.ended;
    if (waitpid(r.pid, &r.status, WNOHANG) == r.pid) r.ended = true;
    return r.ended;
}

// Kills the runner if it still runs; true when this call (or the runner's own test hook)
// ended it with SIGKILL.
bool kill_runner(Runner& r) {
    if (!poll(r)) {
        kill(r.pid, SIGKILL);
        waitpid(r.pid, &r.status, 0);
        r.ended = true;
    }
    return WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL;
}

TEST_F(ChaosTest, TwoRunnersKilledAtSeededMomentsEndWithTheUndisturbedStore) {
    const unsigned seed = static_cast<unsigned>(env_or("TUPE_CHAOS_SEED", 2026));
    const long wanted = env_or("TUPE_CHAOS_KILLS", 10);
    const std::string extra =
        "pretrain_seeds: [1, 2]\n"
        "analysis: {checkpoints: [1.0], sentences: 4, figures: false, probe_windows: 2}\n"
        "extrapolation: {lengths: \"1,2\", max_tokens: 400}\n";
    // Both studies run in the same folder, one after the other, so every path written into a
    // file (an analysis names its checkpoint) is the same and the files hash the same.
    const fs::path work = dir_ / "s";
    fs::create_directories(work);
    const fs::path file = study(work, "s.yaml", "s", "[bert-a, tupe-a]", 6, extra, "[1, 2]");
    const auto calm_start = Clock::now();
    const auto calm_run = tupe("run " + quote(file.string()) + " --threads 1 --quiet");
    ASSERT_EQ(calm_run.status, 0) << calm_run.err;
    const auto calm_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - calm_start).count();
    const auto claims = [&] {
        const auto r = tupe("claims --db " + quote((work / "s.sqlite").string()) +
                            " --experiment s --format json");
        EXPECT_EQ(r.status, 0) << r.err;
        return r.out;
    };
    const std::string calm_claims = claims();
    fs::rename(work, dir_ / "calm");
    fs::create_directories(work);
    fs::copy_file(dir_ / "calm" / "s.yaml", file);

    std::mt19937 rng(seed);
    const std::vector<std::string> argv = {TUPE_CLI,    "run", file.string(),
                                           "--threads", "1",   "--quiet"};
    // Stale claims of killed runners are taken over at once (their pids are gone); a hung one
    // would be after 3 s.
    const test_support::EnvVars env = {{"TUPE_CLAIM_TIMEOUT", "3"}};
    long kills = 0, in_transaction = 0, in_children = 0, rounds = 0;
    double scale = 1;  // halved when the study ends before enough kills
    // Every kind of kill in turn, their moments and hooks drawn from the seed, until enough
    // kills have landed, at least one inside a transaction and one with a child running.
    while ((kills < wanted || in_transaction < 1 || in_children < 1) && rounds < 8 * wanted) {
        const int kind = static_cast<int>(rounds % 4);
        ++rounds;
        auto env_a = env;
        if (kind == 1)  // dies by itself inside the n-th curve-point transaction
            env_a.push_back(
                {"TUPE_TEST_KILL_IN_TRANSACTION", "metrics:" + std::to_string(1 + rng() % 12)});
        if (kind == 2)  // ... inside the transaction that records an analysis or extrapolation
            env_a.push_back(
                {"TUPE_TEST_KILL_IN_TRANSACTION", "output:" + std::to_string(1 + rng() % 2)});
        Runner a{test_support::start_process(argv, dir_ / "a.log", env_a)};
        Runner b{test_support::start_process(argv, dir_ / "b.log", env)};
        started_ = {a.pid, b.pid};
        const auto limit = std::chrono::milliseconds(static_cast<long long>(
            scale * static_cast<double>(calm_ms / 8 + rng() % (calm_ms / 4 + 1))));
        const auto start = Clock::now();
        const auto deadline = start + (kind == 0 ? limit : 6 * limit);
        bool child_seen = false;
        while (Clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            poll(a);
            poll(b);
            if ((a.ended && b.ended) || ((kind == 1 || kind == 2) && a.ended)) break;
            if (kind == 3 && !a.ended &&
                (has_child_running(a.pid, "analyze") || has_child_running(a.pid, "extrapolate"))) {
                child_seen = true;
                break;
            }
        }
        const auto done = [](const Runner& r) {
            return r.ended && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
        };
        const bool finished = done(a) || done(b);
        const bool hooked = a.ended && WIFSIGNALED(a.status);
        const bool killed_a = kill_runner(a), killed_b = kill_runner(b);
        kills += killed_a + killed_b;
        in_transaction += hooked && (kind == 1 || kind == 2);
        in_children += child_seen && killed_a;
        started_.clear();
        if (finished && (kills < wanted || in_transaction < 1 || in_children < 1)) {
            // The study ended before enough kills: start it over, killing earlier.
            for (const auto& entry : fs::directory_iterator(work))
                if (entry.path() != file) fs::remove_all(entry.path());
            scale /= 2;
        }
    }
    EXPECT_GE(kills, wanted) << "too few kills to test anything";
    EXPECT_GE(in_transaction, 1) << "no kill landed inside a store transaction";
    EXPECT_GE(in_children, 1) << "no kill landed while an analysis child ran";
    const auto last = tupe("run " + quote(file.string()) + " --threads 1");
    ASSERT_EQ(last.status, 0) << last.err << read_file(dir_ / "a.log") << read_file(dir_ / "b.log");

    const Stored calm = read_store(dir_ / "calm" / "s.sqlite", "s");
    const Stored chaos = read_store(work / "s.sqlite", "s");
    ASSERT_EQ(calm.runs.size(), 12u);
    expect_same_stores(calm, chaos);
    EXPECT_EQ(claims(), calm_claims);
    RecordProperty("kills", std::to_string(kills));
    RecordProperty("kills_in_transactions", std::to_string(in_transaction));
    RecordProperty("kills_with_a_child", std::to_string(in_children));
    RecordProperty("rounds", std::to_string(rounds));
}

}  // namespace
