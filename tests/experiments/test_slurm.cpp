// The Slurm executor against a real two-node Slurm: munged, MariaDB with slurmdbd, slurmctld
// and two slurmd (tupe-node1, tupe-node2, each in network, PID and UTS namespaces of its own)
// started once for this executable by tests/support/slurm_cluster.sh. A study through the
// executor stores what the same study run locally stores, each job gathered once; a node lost
// mid-pretraining requeues its job onto the other node, which resumes it; Slurm's warning
// signal before a time limit makes a job checkpoint and requeue itself; two submitters submit
// each job once; a pretraining on two ranks, one per node, follows the one-process curve; a
// job Slurm lost track of is named and cancelled; a restarted controller's reused ids are read
// from accounting. A machine where the cluster cannot start fails these tests with the
// script's reason; they are never skipped.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "experiments/result_store.h"
#include "study_fixture.h"
#include "support/test_support.h"

using namespace experiments;
namespace fs = std::filesystem;
using test_support::has;
using test_support::quote;
using test_support::read_file;
using test_support::run_cli;
using test_support::run_tupe;
using test_support::write_file;

namespace {

// The gathered_jobs rows of a store, counted per job.
std::map<std::string, int> gathered_counts(const fs::path& db) {
    std::map<std::string, int> out;
    sqlite3* handle = nullptr;
    if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(handle);
        ADD_FAILURE() << "cannot open " << db;
        return out;
    }
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(handle, "SELECT job FROM gathered_jobs", -1, &stmt, nullptr) ==
        SQLITE_OK)
        while (sqlite3_step(stmt) == SQLITE_ROW)
            ++out[reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))];
    sqlite3_finalize(stmt);
    sqlite3_close(handle);
    return out;
}

// The pid, as the host sees it, of the first process of the cluster in `cluster_dir` (in its
// nodes' network namespaces: another test cluster on the machine has ids of its own) whose
// command line (arguments joined by NULs) starts with `prefix` and contains `part`; 0 when
// none.
pid_t cluster_pid(const fs::path& cluster_dir, const std::string& prefix,
                  const std::string& part = "") {
    const std::string slot = read_file(cluster_dir / "slot");
    std::set<ino_t> nodes;
    struct stat st {};
    for (const std::string n : {"1", "2"})
        if (::stat(("/run/netns/tupe" + slot.substr(0, slot.find('\n')) + "-node" + n).c_str(),
                   &st) == 0)
            nodes.insert(st.st_ino);
    std::error_code ec;
    for (const auto& p : fs::directory_iterator("/proc", ec)) {
        const std::string name = p.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const std::string cmdline = read_file(p.path() / "cmdline");
        if (cmdline.rfind(prefix, 0) != 0 || cmdline.find(part) == std::string::npos) continue;
        if (::stat((p.path() / "ns" / "net").c_str(), &st) == 0 && nodes.count(st.st_ino))
            return std::stoi(name);
    }
    return 0;
}

class SlurmTest : public test_support::TempDirTest {
  protected:
    SlurmTest() : TempDirTest(test_support::per_test_name("tupe_slurm")) {}

    // The cluster starts once for the executable; a watcher stops it should this process die
    // before TearDownTestSuite. On a tmpfs with room for it (~100 MB, most of it MariaDB's)
    // it starts in ~4 s instead of ~13 s: MariaDB's first start syncs ~1,000 times.
    static void SetUpTestSuite() {
        std::error_code ec;
        const bool shm = fs::space("/dev/shm", ec).available > (512u << 20) && !ec;
        cluster_ = (shm ? fs::path("/dev/shm") : fs::temp_directory_path()) /
                   ("tupe_slurm_cluster_" + test_support::process_id());
        script_ = fs::path(TUPE_SOURCE_DIR) / "tests" / "support" / "slurm_cluster.sh";
        const auto started = std::chrono::steady_clock::now();
        const auto r = cluster("start", test_support::process_id());
        start_error_ = r.status == 0   ? ""
                       : r.err.empty() ? "exit " + std::to_string(r.status)
                                       : r.err;
        std::cout
            << "[ slurm    ] two-node cluster started in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
            << " s\n";
        ::setenv("SLURM_CONF", (cluster_ / "slurm.conf").c_str(), 1);
    }
    static void TearDownTestSuite() {
        cluster("stop");
        std::error_code ignored;
        fs::remove_all(cluster_, ignored);
    }

    static test_support::CliResult cluster(const std::string& command,
                                           const std::string& arg = "") {
        return run_cli(quote(script_.string()),
                       command + " " + quote(cluster_.string()) + (arg.empty() ? "" : " " + arg),
                       fs::temp_directory_path() /
                           ("tupe_slurm_" + command + "_" + test_support::process_id() + ".err"));
    }

    void SetUp() override {
        ASSERT_TRUE(start_error_.empty())
            << "the test Slurm cluster did not start (tests/support/slurm_cluster.sh): "
            << start_error_;
        test_support::write_toy_corpus(dir_, 16, 30, 7, 11);
    }

    // A tiny study in dir/FOLDER (study.yaml, study.sqlite, runs/): `variants`, hidden 16,
    // `steps` steps (checkpoints every 2), fine-tuned from the half-way and the final snapshot
    // on syn-cola (1 lr, 2 seeds) and scored zero-shot on syn-bshift. `model` adds model keys.
    fs::path study_in(const std::string& folder, const std::string& variants, int steps,
                      const std::string& model = "",
                      const std::string& tasks =
                          "syn-cola, "
                          "syn-bshift",
                      const std::string& seeds = "1, 2") const {
        const fs::path root = dir_ / folder;
        fs::create_directories(root);
        const fs::path path = root / "study.yaml";
        write_file(path, "name: study\nvariants: " + variants +
                             "\nmodel: {size: tiny, hidden_size: 16, intermediate_size: 32, "
                             "max_position_embeddings: 32" +
                             model +
                             "}\n"
                             "data: {corpus: " +
                             (dir_ / "corpus.txt").string() +
                             ", vocab: " + (dir_ / "vocab.txt").string() +
                             ", cache_dir: " + (dir_ / "cache").string() +
                             ", max_seq_len: 32, validation_fraction: 0.25}\n"
                             "train: {steps: " +
                             std::to_string(steps) +
                             ", batch_size: 8, eval_interval: 2, checkpoint_interval: 2, "
                             "log_interval: 1, threads: 1}\n"
                             "checkpoints: [0.5, 1.0]\n"
                             "glue: {data: builtin, tasks: [" +
                             tasks +
                             "], synthetic_train: 32, synthetic_dev: 16}\n"
                             "finetune: {lrs: [1.0e-3], seeds: [" +
                             seeds +
                             "], batch_size: 8, epochs: 1, max_seq_len: 32}\n"
                             "database: " +
                             (root / "study.sqlite").string() +
                             "\nruns_dir: " + (root / "runs").string() + "\n");
        return path;
    }
    fs::path study(const std::string& name, const std::string& variants, int steps) const {
        return study_in(name, variants, steps);
    }
    // The study in dir/FOLDER, done through Slurm, against the same study run undisturbed in
    // one local process in the same folder (the cluster's moved aside first: checkpoints hold
    // their paths), on every table.
    void expect_undisturbed_store(const std::string& folder, const std::string& variants,
                                  int steps) const {
        const fs::path moved = dir_ / (folder + "-slurm");
        fs::rename(dir_ / folder, moved);
        const fs::path calm = study_in(folder, variants, steps);
        const auto r = tupe("run " + quote(calm.string()) + " --quiet --threads 1");
        ASSERT_EQ(r.status, 0) << r.err;
        test_support::expect_same_stores(
            test_support::read_store(dir_ / folder / "study.sqlite", "study"),
            test_support::read_store(moved / "study.sqlite", "study"));
    }

    test_support::CliResult tupe(const std::string& args) const {
        return run_tupe(args, dir_ / "stderr.txt");
    }
    // `tupe ARGS` with environment variables VARS ("A=1 B=2") in front.
    test_support::CliResult tupe_with(const std::string& vars, const std::string& args,
                                      const std::string& log) const {
        return run_cli(vars + " " + quote(TUPE_CLI), args, dir_ / log);
    }
    test_support::CliResult shell(const std::string& command) const {
        return run_cli("bash", "-c " + quote(command), dir_ / "shell.err");
    }
    nlohmann::json status_json(const fs::path& file) const {
        return nlohmann::json::parse(tupe("status " + quote(file.string()) + " --format json").out);
    }
    // The Slurm entry of `job` in `tupe status --format json` (null when absent).
    nlohmann::json slurm_entry(const fs::path& file, const std::string& job) const {
        const auto j = status_json(file);
        if (j.contains("slurm"))
            for (const auto& e : j.at("slurm"))
                if (e.at("job") == job) return e;
        return nullptr;
    }
    // Polls `ready` every 0.5 s for up to `seconds`; its last answer.
    static bool wait_until(const std::function<bool()>& ready, double seconds) {
        const auto until =
            std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < until) {
            if (ready()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        return ready();
    }
    // Both nodes idle again (after a test that took one down).
    void bring_back_node(const std::string& node) const {
        cluster("start-node", node);
        shell("scontrol update nodename=" + node + " state=resume");
        EXPECT_TRUE(wait_until(
            [&] { return has(shell("sinfo -h -n " + node + " -o %t").out, "idle"); }, 60))
            << node << " did not come back";
    }
    // `tupe status` (claims time out after 3 s) once it shows a job Slurm still runs as LOST for
    // `reason`, polled for up to 60 s; the last status either way.
    std::string status_once_lost(const fs::path& file, const std::string& reason) const {
        std::string status;
        EXPECT_TRUE(wait_until(
            [&] {
                status = tupe_with("TUPE_CLAIM_TIMEOUT=3", "status " + quote(file.string()),
                                   "status.err")
                             .out;
                return has(status, "RUNNING on tupe-node") && has(status, reason);
            },
            60))
            << status;
        return status;
    }
    static std::vector<std::string> ledger_lines(const fs::path& file) {
        std::vector<std::string> out;
        std::istringstream in(read_file(file.parent_path() / "runs" / "slurm" / "ledger.tsv"));
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) out.push_back(line);
        return out;
    }

    static fs::path cluster_, script_;
    static std::string start_error_;
};

fs::path SlurmTest::cluster_;
fs::path SlurmTest::script_;
std::string SlurmTest::start_error_;

// 2 pretraining jobs and 2 x 2 arrays of 3 fine-tuning jobs (2 seeds of syn-cola, syn-bshift).
constexpr size_t kStudyJobs = 14;

}  // namespace

TEST_F(SlurmTest, StudyThroughSlurmStoresWhatALocalRunStoresEachJobOnce) {
    const fs::path cluster = study("cluster", "[bert-a, tupe-a]", 6);
    // A second after each step: the first pretraining still runs when Slurm places the
    // second (sbatch and scheduling take ~1 s under load), so each gets a node of its own.
    const auto r = tupe_with(
        "TUPE_TEST_STEP_DELAY=1",
        "run " + quote(cluster.string()) + " --executor slurm --wait --poll 1 --threads 1",
        "run.err");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "as an array after Slurm job")) << r.err;
    EXPECT_TRUE(has(r.err, "14 finished, 0 already done, 0 failed")) << r.err;
    const auto counts = gathered_counts(dir_ / "cluster" / "study.sqlite");
    EXPECT_EQ(counts.size(), kStudyJobs);
    for (const auto& [job, n] : counts) EXPECT_EQ(n, 1) << job;

    // Gathering again stores nothing twice; status shows Slurm's side beside the store's.
    const auto again = tupe("gather " + quote(cluster.string()));
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_TRUE(has(again.out, "0 jobs gathered")) << again.out;
    EXPECT_TRUE(has(again.out, "14 gathered before")) << again.out;
    const auto status = tupe("status " + quote(cluster.string()));
    EXPECT_TRUE(has(status.out, "finished 14")) << status.out;
    EXPECT_TRUE(has(status.out, "Slurm (14 jobs submitted, newest attempt each): COMPLETED 14"))
        << status.out;
    // Every result is gathered: no line about job folders (it once counted every folder with
    // a result, gathered or not).
    EXPECT_FALSE(has(status.out, "job folders")) << status.out;
    std::set<std::string> nodes;
    const auto jobs = status_json(cluster).at("slurm");
    for (const auto& job : jobs) {
        EXPECT_EQ(job.at("state"), "COMPLETED") << job;
        EXPECT_EQ(job.at("result"), "finished") << job;
        nodes.insert(job.at("node").get<std::string>());
    }
    // One CPU per node: the two pretraining jobs ran side by side, one on each node.
    EXPECT_TRUE(nodes.count("tupe-node1") && nodes.count("tupe-node2")) << jobs.dump(1);
    // A job's log says what it did: the attempt header, then tupe's own lines.
    const auto e = slurm_entry(cluster, "bert-a");
    const std::string log = read_file(dir_ / "cluster" / "runs" / "slurm" / "logs" /
                                      (e.at("slurm_id").get<std::string>() + ".out"));
    EXPECT_TRUE(has(log, "== tupe: attempt 1 of Slurm job ")) << log;
    EXPECT_TRUE(has(log, "study: 1 finished, 0 already done, 0 failed")) << log;
    expect_undisturbed_store("cluster", "[bert-a, tupe-a]", 6);
}

TEST_F(SlurmTest, KilledPretrainingIsSubmittedAgainAndTheStudyEndsWithEveryJobOnce) {
    const fs::path file = study("killed", "[tupe-a]", 8);
    // The first submission's pretraining kills itself right after step 4 (its checkpoint and
    // curves stored); its fine-tuning arrays can then never start, and Slurm cancels them.
    const auto first =
        tupe_with("TUPE_TEST_RAISE_AT_STEP=4:KILL",
                  "run " + quote(file.string()) + " --executor slurm --threads 1", "first.err");
    ASSERT_EQ(first.status, 0) << read_file(dir_ / "first.err");
    std::string status;
    wait_until(
        [&] {
            status = tupe("status " + quote(file.string())).out;
            return has(status, "FAILED");
        },
        60);
    ASSERT_TRUE(has(status, "tupe-a  slurm ")) << status;
    EXPECT_TRUE(has(status, "exit code 0, signal 9")) << status;

    const auto rest =
        tupe("run " + quote(file.string()) + " --executor slurm --wait --poll 1 --threads 1");
    ASSERT_EQ(rest.status, 0) << rest.err;
    EXPECT_TRUE(has(rest.err, "submitted tupe-a as Slurm job")) << rest.err;
    for (const auto& [job, n] : gathered_counts(dir_ / "killed" / "study.sqlite"))
        EXPECT_EQ(n, 1) << job;
    EXPECT_EQ(gathered_counts(dir_ / "killed" / "study.sqlite").size(), 7u);

    // Every table equals an undisturbed local run of the same study.
    expect_undisturbed_store("killed", "[tupe-a]", 8);
}

TEST_F(SlurmTest, CancelCancelsTheStudysPendingJobs) {
    const fs::path file = study("cancelled", "[bert-a]", 4);
    // Held back an hour: every job of the study is pending when it is cancelled.
    const auto r = tupe("run " + quote(file.string()) +
                        " --executor slurm --sbatch-arg=--begin=now+3600 --threads 1");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto pending = tupe("status " + quote(file.string()));
    // 1 pretraining job and 2 arrays of 3 fine-tuning jobs.
    EXPECT_TRUE(has(pending.out, "PENDING 7")) << pending.out;
    const auto cancel = tupe("cancel " + quote(file.string()));
    EXPECT_EQ(cancel.status, 0) << cancel.err;
    EXPECT_TRUE(has(cancel.out, "7 Slurm jobs cancelled")) << cancel.out;
    const auto after = tupe("status " + quote(file.string()));
    EXPECT_TRUE(has(after.out, "CANCELLED 7")) << after.out;
    EXPECT_TRUE(has(tupe("cancel " + quote(file.string())).out, "0 Slurm jobs cancelled"));
}

TEST_F(SlurmTest, TwoNodesNodeLossRequeuesOntoTheOther) {
    const fs::path file = study("lost", "[bert-a, tupe-a]", 8);
    // 1.5 s of sleep after each step: the node can be lost mid-pretraining.
    const auto r =
        tupe_with("TUPE_TEST_STEP_DELAY=1.5",
                  "run " + quote(file.string()) + " --executor slurm --threads 1", "submit.err");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "submit.err");
    // One pretraining runs on each node (one CPU each); wait for node1's first checkpoint.
    std::string victim, victim_id;
    ASSERT_TRUE(wait_until(
        [&] {
            for (const std::string job : {"bert-a", "tupe-a"}) {
                const auto e = slurm_entry(file, job);
                if (!e.is_null() && e.at("state") == "RUNNING" && e.at("node") == "tupe-node1") {
                    victim = job;
                    victim_id = e.at("slurm_id").get<std::string>();
                }
            }
            return !victim.empty() && fs::exists(dir_ / "lost" / "runs" / victim / "checkpoint.pt");
        },
        120))
        << tupe("status " + quote(file.string())).out;

    // The node dies (slurmd, the job's slurmstepd and tupe at once); the admin sets it DOWN.
    ASSERT_EQ(cluster("kill-node", "tupe-node1").status, 0);
    ASSERT_EQ(shell("scontrol update nodename=tupe-node1 state=down reason=lost-in-test").status,
              0);
    EXPECT_TRUE(wait_until([&] { return slurm_entry(file, victim).at("state") != "RUNNING"; }, 60))
        << tupe("status " + quote(file.string())).out;

    // Slurm requeues the job (same id) onto tupe-node2, which resumes it; --wait stays until
    // the study is stored.
    const auto rest =
        tupe("run " + quote(file.string()) + " --executor slurm --wait --poll 1 --threads 1");
    bring_back_node("tupe-node1");
    ASSERT_EQ(rest.status, 0) << rest.err;
    const auto e = slurm_entry(file, victim);
    EXPECT_EQ(e.at("slurm_id"), victim_id) << "requeued by Slurm, not submitted again";
    EXPECT_EQ(e.at("node"), "tupe-node2") << e;
    const std::string log =
        read_file(dir_ / "lost" / "runs" / "slurm" / "logs" / (victim_id + ".out"));
    EXPECT_TRUE(has(log, "== tupe: attempt 1 of Slurm job " + victim_id + " on tupe-node1")) << log;
    EXPECT_TRUE(has(log, "== tupe: attempt 2 of Slurm job " + victim_id + " on tupe-node2")) << log;
    EXPECT_TRUE(has(log, "resumed from")) << log;

    const auto counts = gathered_counts(dir_ / "lost" / "study.sqlite");
    EXPECT_EQ(counts.size(), kStudyJobs);
    for (const auto& [job, n] : counts) EXPECT_EQ(n, 1) << job;
    expect_undisturbed_store("lost", "[bert-a, tupe-a]", 8);
}

TEST_F(SlurmTest, PreemptionSignalCheckpointsAndRequeues) {
    const fs::path file = study("preempted", "[tupe-a]", 10);
    // 10 steps with 6.5 s of sleep each: 65 s of work under a 1-minute limit, with SIGUSR1
    // 20 s before it (Slurm looks every 30 s, so it comes 20-50 s into an attempt).
    const auto r = tupe_with(
        "TUPE_TEST_STEP_DELAY=6.5",
        "run " + quote(file.string()) + " --executor slurm --time 1 --signal-before 20 --threads 1",
        "submit.err");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "submit.err");
    // Nothing but Slurm and the jobs themselves from here: this test only gathers.
    std::string status;
    ASSERT_TRUE(wait_until(
        [&] {
            tupe("gather " + quote(file.string()));
            status = tupe("status " + quote(file.string())).out;
            return has(status, "finished 7");
        },
        900))
        << status;
    const auto ledger = ledger_lines(file);
    EXPECT_EQ(ledger.size(), 7u) << "each job submitted once";
    const auto e = slurm_entry(file, "tupe-a");
    EXPECT_EQ(e.at("state"), "COMPLETED") << e;
    const std::string log = read_file(dir_ / "preempted" / "runs" / "slurm" / "logs" /
                                      (e.at("slurm_id").get<std::string>() + ".out"));
    EXPECT_TRUE(has(log, "== tupe: attempt 2 of Slurm job")) << log;
    EXPECT_TRUE(has(log, "requeued Slurm job " + e.at("slurm_id").get<std::string>())) << log;
    EXPECT_TRUE(has(log, "resumed from")) << log;
    EXPECT_FALSE(has(log, "DUE TO TIME LIMIT")) << log;
    for (const auto& [job, n] : gathered_counts(dir_ / "preempted" / "study.sqlite"))
        EXPECT_EQ(n, 1) << job;
    expect_undisturbed_store("preempted", "[tupe-a]", 10);
}

TEST_F(SlurmTest, TwoSubmittersSubmitEachJobOnce) {
    const fs::path file = study("twice", "[bert-a]", 4);
    // sbatch takes a second more per call here, so the two submitters overlap for certain.
    const fs::path shim = dir_ / "shim";
    fs::create_directories(shim);
    write_file(shim / "sbatch", "#!/bin/bash\nsleep 1\nexec /usr/bin/sbatch \"$@\"\n");
    fs::permissions(shim / "sbatch", fs::perms::owner_all, fs::perm_options::add);
    const std::string one = "PATH=" + quote(shim.string()) + ":$PATH " + quote(TUPE_CLI) + " run " +
                            quote(file.string()) +
                            " --executor slurm --sbatch-arg=--begin=now+3600 --threads 1";
    const auto both = shell(one + " 2>" + quote((dir_ / "a.err").string()) + " & " + one + " 2>" +
                            quote((dir_ / "b.err").string()) + " & wait");
    EXPECT_EQ(both.status, 0);
    const std::string a = read_file(dir_ / "a.err"), b = read_file(dir_ / "b.err");
    EXPECT_TRUE(has(a + b, "is submitting; waiting for it, then submitting only what it left"))
        << a << b;
    const auto ledger = ledger_lines(file);
    EXPECT_EQ(ledger.size(), 7u) << a << b;
    std::set<std::string> jobs;
    for (const auto& line : ledger) jobs.insert(line.substr(line.find('\t') + 1));
    EXPECT_EQ(jobs.size(), ledger.size()) << "a job submitted twice";
    // Slurm holds 1 pretraining job and 2 arrays of 3: nothing twice.
    const auto names = shell("squeue --me -h -t PENDING -o %j | grep -c '^tupe:study:'");
    EXPECT_EQ(names.out, "3\n") << names.out;
    EXPECT_TRUE(has(tupe("status " + quote(file.string())).out, "PENDING 7"));
    EXPECT_TRUE(has(tupe("cancel " + quote(file.string())).out, "7 Slurm jobs cancelled"));
}

TEST_F(SlurmTest, DataParallelAcrossTwoNodesMatchesOneProcess) {
    // Dropout off: both runs then train on the same global batches with the same masks.
    const std::string model = ", hidden_dropout_prob: 0, attention_probs_dropout_prob: 0";
    const fs::path two = study_in("two", "[tupe-a]", 6, model, "syn-cola", "1");
    const auto r = tupe("run " + quote(two.string()) +
                        " --executor slurm --nodes 2 --ranks-per-node 1 --wait --poll 1 "
                        "--threads 1");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto e = slurm_entry(two, "tupe-a");
    EXPECT_EQ(e.at("node"), "tupe-node[1-2]") << e;
    const fs::path one = study_in("one", "[tupe-a]", 6, model, "syn-cola", "1");
    ASSERT_EQ(tupe("run " + quote(one.string()) + " --quiet --threads 1").status, 0);

    // Tolerance: 1e-5 of each loss value. The ranks sum their gradients over Gloo in another
    // order than one process sums its batch, so the curves agree to float32 rounding, not
    // bit for bit: 4.3e-8 here, and the parameters of the loopback tests drift to 3.4e-6 of
    // their largest value in a few AdamW steps (docs/distributed.md#tests); the transport
    // between the namespaces adds nothing. A wrong batch split is far outside it: one process
    // on half the global batch (what a rank sees alone) differs from this curve by 1.3e-2.
    const auto a = test_support::read_store(dir_ / "one" / "study.sqlite", "study");
    const auto b = test_support::read_store(dir_ / "two" / "study.sqlite", "study");
    double worst = 0;
    size_t compared = 0;
    for (const std::string key : {"train/loss", "validation/loss"}) {
        const auto& p = a.curves.at({"tupe-a", key});
        ASSERT_TRUE(b.curves.count({"tupe-a", key})) << key;
        const auto& q = b.curves.at({"tupe-a", key});
        ASSERT_EQ(q.size(), p.size()) << key;
        for (size_t i = 0; i < p.size(); ++i) {
            EXPECT_EQ(q[i].first, p[i].first) << key;
            EXPECT_NEAR(q[i].second, p[i].second, 1e-5 * std::fabs(p[i].second))
                << key << " step " << p[i].first;
            worst = std::max(worst, std::fabs(q[i].second - p[i].second) / std::fabs(p[i].second));
            ++compared;
        }
    }
    EXPECT_GE(compared, 9u);
    std::cout << "[ slurm    ] 2 ranks on 2 nodes vs 1 process: largest relative loss difference "
              << worst << " over " << compared << " points\n";
}

TEST_F(SlurmTest, MaxInFlightCapsPretrainingAndThrottlesArrays) {
    const fs::path file = study("capped", "[bert-a, tupe-a]", 4);
    const std::string submit = "run " + quote(file.string()) +
                               " --executor slurm --max-in-flight 1 "
                               "--sbatch-arg=--begin=now+3600 --threads 1";
    const auto r = tupe(submit);
    ASSERT_EQ(r.status, 0) << r.err;
    // One pretraining and its two arrays; the other variant's 7 jobs wait for the slot.
    EXPECT_TRUE(has(r.err, "7 jobs wait for a slot (--max-in-flight 1)")) << r.err;
    EXPECT_EQ(ledger_lines(file).size(), 7u);
    const auto arrays = shell(
        "squeue --me -h -t PENDING -o %i -n tupe:study:bert-a-step2,"
        "tupe:study:bert-a-step4,tupe:study:tupe-a-step2,"
        "tupe:study:tupe-a-step4");
    EXPECT_TRUE(has(arrays.out, "%1]")) << arrays.out;
    // Again: the slot is still taken, nothing more is submitted.
    const auto again = tupe(submit);
    EXPECT_TRUE(has(again.err, "7 jobs wait for a slot")) << again.err;
    EXPECT_EQ(ledger_lines(file).size(), 7u);
    EXPECT_TRUE(has(tupe("cancel " + quote(file.string())).out, "7 Slurm jobs cancelled"));
}

TEST_F(SlurmTest, StatusAndWaitTellAJobSlurmLostTrackOf) {
    const fs::path file = study("stepd", "[bert-a]", 8);
    const auto r =
        tupe_with("TUPE_TEST_STEP_DELAY=1",
                  "run " + quote(file.string()) + " --executor slurm --threads 1", "submit.err");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "submit.err");
    std::string id;
    ASSERT_TRUE(wait_until(
        [&] {
            const auto e = slurm_entry(file, "bert-a");
            if (e.is_null() || e.at("state") != "RUNNING") return false;
            id = e.at("slurm_id").get<std::string>();
            return true;
        },
        120));
    // kill -9 of the job's slurmstepd: tupe goes on and stores its result, while Slurm never
    // hears that the job ended.
    // Its command line reads "slurmstepd: [ID.batch]".
    const auto stepd = cluster_pid(cluster_, "slurmstepd: [" + id + ".batch]");
    ASSERT_GT(stepd, 0) << "no slurmstepd of job " << id;
    ASSERT_EQ(::kill(stepd, SIGKILL), 0);
    const fs::path done_folder = dir_ / "stepd" / "runs" / "slurm" / "jobs";
    ASSERT_TRUE(wait_until(
        [&] {
            std::error_code ec;
            for (const auto& d : fs::directory_iterator(done_folder, ec))
                if (fs::exists(d.path() / "done.json")) return true;
            return false;
        },
        120));
    const std::string status = status_once_lost(file, "LOST, its result was written");
    // Its result waits in its folder, not yet gathered: status counts it.
    EXPECT_TRUE(has(status, "1 job result is in job folders but not yet in the store")) << status;

    // --wait cancels it, submits its fine-tuning again without the dependency, and ends.
    const auto rest =
        tupe_with("TUPE_CLAIM_TIMEOUT=3",
                  "run " + quote(file.string()) + " --executor slurm --wait --poll 1 --threads 1",
                  "rest.err");
    const std::string err = read_file(dir_ / "rest.err");
    ASSERT_EQ(rest.status, 0) << err;
    EXPECT_TRUE(has(err, "bert-a: Slurm job " + id + ": its result was written")) << err;
    EXPECT_TRUE(has(err, "cancelled it (its result is stored")) << err;
    EXPECT_TRUE(has(tupe("status " + quote(file.string())).out, "finished 7"));
}

TEST_F(SlurmTest, StatusAndWaitTellAJobWhoseHeartbeatStopped) {
    const fs::path file = study("silent", "[bert-a]", 8);
    const auto r =
        tupe_with("TUPE_TEST_STEP_DELAY=1",
                  "run " + quote(file.string()) + " --executor slurm --threads 1", "submit.err");
    ASSERT_EQ(r.status, 0) << read_file(dir_ / "submit.err");
    // The job's tupe, once its first checkpoint is written (its claim and heartbeat are in its
    // store by then).
    ASSERT_TRUE(wait_until(
        [&] { return fs::exists(dir_ / "silent" / "runs" / "bert-a" / "checkpoint.pt"); }, 120));
    const pid_t job = cluster_pid(cluster_, test_support::tupe_cli(), "--job-store");
    ASSERT_GT(job, 0);
    // SIGSTOP: a process that hangs (a dead mount, a node that stopped answering). Slurm
    // still shows it running; only its heartbeat says otherwise.
    ASSERT_EQ(::kill(job, SIGSTOP), 0);
    const std::string status = status_once_lost(file, "LOST, its heartbeat stopped");

    // --wait cancels it (Slurm kills the stopped process) and submits it again; the new
    // attempt resumes and the study ends.
    const auto rest =
        tupe_with("TUPE_CLAIM_TIMEOUT=3",
                  "run " + quote(file.string()) + " --executor slurm --wait --poll 1 --threads 1",
                  "rest.err");
    const std::string err = read_file(dir_ / "rest.err");
    ::kill(job, SIGKILL);  // should Slurm have left it
    ASSERT_EQ(rest.status, 0) << err;
    EXPECT_TRUE(has(err, "its heartbeat stopped")) << err;
    EXPECT_TRUE(has(err, "cancelled it (it is submitted again)")) << err;
    EXPECT_TRUE(has(tupe("status " + quote(file.string())).out, "finished 7"));
}

TEST_F(SlurmTest, RestartedControllerReusedIdsAreReadFromAccounting) {
    const fs::path file = study("acct", "[bert-a]", 4);
    std::string since = shell("date +%Y-%m-%dT%H:%M:%S").out;  // this study's jobs only
    since = since.substr(0, since.find('\n'));
    ASSERT_EQ(tupe("run " + quote(file.string()) + " --executor slurm --wait --poll 1 --threads 1")
                  .status,
              0);
    const auto entry = slurm_entry(file, "bert-a");
    const long pretraining = std::stol(entry.at("slurm_id").get<std::string>());
    // slurmctld sends a job's end to slurmdbd asynchronously: wait until accounting holds all
    // seven, or a record still in flight is lost with the controller's state (seen once under
    // load: one array task UNKNOWN after the restart).
    for (int tries = 0; tries < 60; ++tries) {
        const std::string states = shell("sacct -n -X -P -o State -S " + since).out;
        size_t completed = 0;
        for (size_t at = states.find("COMPLETED"); at != std::string::npos;
             at = states.find("COMPLETED", at + 1))
            ++completed;
        if (completed >= 7) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }

    // The controller comes back without its state: squeue forgets every job, ids start at 1
    // again, and only accounting (sacct) remembers the study's jobs.
    ASSERT_EQ(cluster("restart-controller").status, 0);
    EXPECT_EQ(shell("squeue --me -h -t all -o %i").out, "");
    // Until the restarted controller has registered with slurmdbd, accounting may answer for
    // part of the jobs (seen under load: two array tasks UNKNOWN); it must answer for all
    // seven within 30 s.
    std::string after_restart;
    for (int tries = 0; tries < 60; ++tries) {
        after_restart = tupe("status " + quote(file.string())).out;
        if (has(after_restart, "COMPLETED 7")) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    EXPECT_TRUE(has(after_restart, "COMPLETED 7")) << after_restart;
    // Another job gets the pretraining's id: the ledger's id alone would now name it.
    std::vector<std::string> others;
    for (long id = 0; id < pretraining && others.size() < 400;) {
        const auto s = shell("sbatch --parsable --hold -J other --wrap true");
        ASSERT_EQ(s.status, 0) << s.out;
        others.push_back(s.out.substr(0, s.out.find('\n')));
        id = std::stol(others.back());
    }
    ASSERT_EQ(others.back(), std::to_string(pretraining));
    const auto status = tupe("status " + quote(file.string()));
    EXPECT_TRUE(has(status.out, "COMPLETED 7")) << status.out;
    EXPECT_FALSE(has(status.out, "PENDING")) << status.out;
    EXPECT_EQ(slurm_entry(file, "bert-a").at("state"), "COMPLETED");
    shell("scancel --me -n other");
}
