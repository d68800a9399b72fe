// `tupe run --jobs N`: parallel fine-tuning in child processes (`tupe run FILE --job NAME`)
// gives the same finished runs, GLUE rows and curves as one job at a time, with no duplicated
// points, and a rerun of the parallel study skips everything. Both studies run through the
// real CLI (TUPE_CLI) with one intra-op thread per process, so the jobs are deterministic.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli_fixture.h"
#include "experiments/result_store.h"

using namespace experiments;
namespace fs = std::filesystem;

namespace {

class RunnerJobsTest : public test_support::TempDirTest {
  protected:
    RunnerJobsTest() : TempDirTest("tupe_jobs_" + test_support::process_id()) {}
    void SetUp() override { test_support::write_toy_corpus(dir_, 16, 30, 7, 11); }

    // The same study, with its own database and runs folder per `tag`.
    fs::path study(const std::string& tag) const {
        const fs::path path = dir_ / (tag + ".yaml");
        std::ofstream(path)
            << "name: jobs\nvariants: [bert-a, tupe-r]\n"
               "model: {size: tiny, max_position_embeddings: 32}\n"
               "data: {corpus: "
            << (dir_ / "corpus.txt").string() << ", vocab: " << (dir_ / "vocab.txt").string()
            << ", cache_dir: " << (dir_ / ("cache-" + tag)).string()
            << ", max_seq_len: 32, validation_fraction: 0.25}\n"
               "train: {steps: 8, batch_size: 8, eval_interval: 4, checkpoint_interval: 4, "
               "log_interval: 2, threads: 1}\n"
               "checkpoints: [1.0]\n"
               "glue: {data: builtin, tasks: [syn-cola, syn-stsb], synthetic_train: 32, "
               "synthetic_dev: 16}\n"
               "finetune: {lrs: [1.0e-3], seeds: [1, 2], batch_size: 8, epochs: 2, max_seq_len: "
               "32}\n"
               "database: "
            << (dir_ / (tag + ".sqlite")).string()
            << "\nruns_dir: " << (dir_ / ("runs-" + tag)).string() << "\n";
        return path;
    }

    // Runs `tupe run FILE --jobs N --threads 1` and returns its exit status and output.
    std::pair<int, std::string> tupe_run(const fs::path& file, int jobs) const {
        const fs::path log = dir_ / (file.stem().string() + ".log");
        const std::string tupe = TUPE_CLI;
        const std::string jobs_text = std::to_string(jobs);
        const pid_t pid = fork();
        if (pid == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 1);
            dup2(fd, 2);
            execl(tupe.c_str(), tupe.c_str(), "run", file.c_str(), "--jobs", jobs_text.c_str(),
                  "--threads", "1", static_cast<char*>(nullptr));
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                test_support::read_file(log)};
    }
};

// What a study left in its database, keyed so that two databases can be compared.
struct StudyResults {
    std::map<std::string, std::string> run_status;  // run name -> status
    // (run, task, split, metric) -> (value, checkpoint step, lr, seed)
    std::map<std::tuple<std::string, std::string, std::string, std::string>,
             std::tuple<double, int64_t, double, int64_t>>
        glue;
    size_t glue_rows = 0;
    // (run, key) -> (step, value) by step, as stored (duplicates kept, to be caught)
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, double>>> curves;
};

StudyResults read_results(const fs::path& database) {
    StudyResults out;
    auto store = ResultStore::open(database.string(), OpenMode::kReadOnly);
    const auto exp = store.find_experiment("jobs");
    if (!exp) return out;
    for (const auto& run : store.list_runs(exp->id)) {
        EXPECT_TRUE(out.run_status.emplace(run.name, run.status).second)
            << "run twice: " << run.name;
        for (const auto& key : store.metric_keys(run.id))
            for (const auto& p : store.metrics(run.id, key))
                out.curves[{run.name, key}].emplace_back(p.step, p.value);
    }
    for (const auto& g : store.glue_results(exp->id)) {
        ++out.glue_rows;
        out.glue[{g.run_name, g.task, g.split, g.metric}] = {g.value, g.checkpoint_step, g.lr,
                                                             g.seed};
    }
    return out;
}

}  // namespace

TEST_F(RunnerJobsTest, ParallelFineTuningMatchesOneJobAtATime) {
    const auto [serial_rc, serial_log] = tupe_run(study("serial"), 1);
    ASSERT_EQ(serial_rc, 0) << serial_log;
    const auto [parallel_rc, parallel_log] = tupe_run(study("parallel"), 2);
    ASSERT_EQ(parallel_rc, 0) << parallel_log;
    // The fine-tuning jobs really went through child processes, two at a time.
    EXPECT_NE(parallel_log.find("2 at a time"), std::string::npos) << parallel_log;

    const StudyResults serial = read_results(dir_ / "serial.sqlite");
    const StudyResults parallel = read_results(dir_ / "parallel.sqlite");

    // 2 pretraining runs + 2 variants x 1 checkpoint x 2 tasks x 1 lr x 2 seeds.
    ASSERT_EQ(serial.run_status.size(), 2u + 8u);
    ASSERT_EQ(parallel.run_status.size(), serial.run_status.size());
    for (const auto& [name, status] : serial.run_status) {
        EXPECT_EQ(status, "finished") << name;
        ASSERT_TRUE(parallel.run_status.count(name)) << "missing in the parallel study: " << name;
        EXPECT_EQ(parallel.run_status.at(name), "finished") << name;
    }

    // 8 fine-tuning runs: syn-cola gives mcc, syn-stsb pearson and spearman.
    EXPECT_EQ(serial.glue_rows, 4u * 1 + 4u * 2);
    EXPECT_EQ(parallel.glue_rows, serial.glue_rows);
    EXPECT_EQ(parallel.glue.size(), parallel.glue_rows) << "duplicated GLUE rows";
    for (const auto& [key, want] : serial.glue) {
        const auto it = parallel.glue.find(key);
        ASSERT_NE(it, parallel.glue.end()) << std::get<0>(key) << " " << std::get<3>(key);
        const auto& got = it->second;
        // Same inputs, same seeds, one thread per process: the same numbers.
        EXPECT_NEAR(std::get<0>(got), std::get<0>(want), 1e-6)
            << std::get<0>(key) << " " << std::get<3>(key);
        EXPECT_EQ(std::get<1>(got), std::get<1>(want));
        EXPECT_DOUBLE_EQ(std::get<2>(got), std::get<2>(want));
        EXPECT_EQ(std::get<3>(got), std::get<3>(want));
    }

    // Every curve point once, at the same steps with the same values.
    ASSERT_EQ(parallel.curves.size(), serial.curves.size());
    for (const auto& [key, points] : parallel.curves) {
        std::set<int64_t> steps;
        for (const auto& p : points)
            EXPECT_TRUE(steps.insert(p.first).second)
                << key.first << " " << key.second << " step " << p.first << " twice";
        const auto it = serial.curves.find(key);
        ASSERT_NE(it, serial.curves.end()) << key.first << " " << key.second;
        ASSERT_EQ(points.size(), it->second.size()) << key.first << " " << key.second;
        for (size_t i = 0; i < points.size(); ++i) {
            EXPECT_EQ(points[i].first, it->second[i].first);
            if (key.second.find("time") == std::string::npos &&
                key.second.find("tok") == std::string::npos)
                EXPECT_NEAR(points[i].second, it->second[i].second, 1e-6)
                    << key.first << " " << key.second;
        }
    }

    // A rerun of the parallel study finds everything finished and starts no job.
    const auto [rerun_rc, rerun_log] = tupe_run(dir_ / "parallel.yaml", 2);
    ASSERT_EQ(rerun_rc, 0) << rerun_log;
    const StudyResults rerun = read_results(dir_ / "parallel.sqlite");
    EXPECT_EQ(rerun.run_status, parallel.run_status);
    EXPECT_EQ(rerun.glue_rows, parallel.glue_rows);
    size_t points_before = 0, points_after = 0;
    for (const auto& c : parallel.curves) points_before += c.second.size();
    for (const auto& c : rerun.curves) points_after += c.second.size();
    EXPECT_EQ(points_after, points_before);
}
