// Experiment files (variants as a list or a grid, protocol, errors with positions), the plan,
// the Table 1 report layout, and the runner end to end on a tiny study: idempotent reruns and
// a `tupe run` child process killed with SIGKILL mid-pretraining (by itself, at a known step)
// and resumed from its checkpoint with nothing lost or duplicated.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/threads.h"
#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "experiments/job_identity.h"
#include "experiments/report.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"
#include "support/test_support.h"

extern char** environ;

using namespace experiments;
namespace fs = std::filesystem;

namespace {

class ExperimentTest : public test_support::TempDirTest {
  protected:
    ExperimentTest() : TempDirTest(test_support::per_test_name("tupe_exp")) {}
    void SetUp() override { test_support::write_toy_corpus(dir_, 20, 30, 7, 7); }

    std::string tiny_study(int steps = 12) const {
        return "name: tiny\nvariants: [bert-a, tupe-a]\n"
               "model: {size: tiny, max_position_embeddings: 32}\n"
               "data: {corpus: " +
               (dir_ / "corpus.txt").string() + ", vocab: " + (dir_ / "vocab.txt").string() +
               ", cache_dir: " + (dir_ / "cache").string() +
               ", max_seq_len: 32, validation_fraction: 0.25}\n"
               "train: {steps: " +
               std::to_string(steps) +
               ", batch_size: 8, eval_interval: 6, "
               "checkpoint_interval: 4, log_interval: 2, threads: 1}\n"
               "checkpoints: [0.5, 1.0]\n"
               "glue: {data: builtin, tasks: [syn-cola, syn-stsb], synthetic_train: 40, "
               "synthetic_dev: 20}\n"
               "finetune: {lrs: [1.0e-3], seeds: [1, 2], batch_size: 8, epochs: 1, max_seq_len: "
               "32}\n"
               "database: " +
               (dir_ / "db.sqlite").string() + "\nruns_dir: " + (dir_ / "runs").string() + "\n";
    }
};

}  // namespace

TEST_F(ExperimentTest, ListAndGridVariants) {
    auto path = write("e.yaml",
                      "variants:\n  - bert-a\n  - name: tupe-a-per-layer\n    preset: tupe-a\n"
                      "    set: {model.shared_pos_term: false}\n"
                      "grid:\n  model.preset: [tupe-r, bert-r]\n  train.lr: [1.0e-4, 2.0e-4]\n"
                      "model: {hidden_size: 16}\n");
    auto spec = load_experiment(path.string());
    EXPECT_EQ(spec.name, "e");
    ASSERT_EQ(spec.variants.size(), 6u);
    EXPECT_EQ(spec.variants[0].config.model.preset, "bert-a");
    EXPECT_EQ(spec.variants[1].name, "tupe-a-per-layer");
    EXPECT_FALSE(spec.variants[1].config.model.shared_pos_term);
    EXPECT_TRUE(spec.variants[1].config.model.untie_cls);
    EXPECT_EQ(spec.variants[1].config.model.hidden_size, 16);  // base keys kept per variant
    EXPECT_EQ(spec.variants[2].name, "tupe-r,lr=1.0e-4");
    EXPECT_DOUBLE_EQ(spec.variants[5].config.train.lr, 2e-4);
    EXPECT_EQ(spec.variants[5].config.model.preset, "bert-r");
    EXPECT_EQ(spec.variants[0].config.out_dir, (fs::path("runs") / "e" / "bert-a").string());
    // Defaults: the paper's protocol.
    EXPECT_EQ(spec.finetune.lrs.size(), 4u);
    EXPECT_EQ(spec.finetune.seeds.size(), 5u);
    EXPECT_EQ(spec.finetune.batch_size, 32);
}

TEST_F(ExperimentTest, ErrorsNameKeyAndPosition) {
    auto expect_error = [&](const std::string& text, const std::string& needle) {
        auto path = write("bad.yaml", text);
        try {
            load_experiment(path.string());
            FAIL() << "no error for: " << text;
        } catch (const ConfigError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("bad.yaml"), std::string::npos) << e.what();
        }
    };
    expect_error("finetune:\n  lr: [1]\n",
                 "bad.yaml:2:3: finetune.lr: unknown key, did you mean 'lrs'?");
    expect_error("checkpoints: [0.3, 1.5]\n", "fractions must be in (0, 1]");
    expect_error("variants:\n  - tupe-z\n", "bad.yaml:2");
    expect_error("finetune: {seeds: [a]}\n", "finetune.seeds");
    expect_error("varients: [bert-a]\n", "did you mean 'variants'");
    expect_error("variants: [bert-a, bert-a]\n", "duplicate variant name");
    expect_error("out_dir: x\n", "runs_dir");
    expect_error("variants: [\n", "malformed YAML");
    // Ranges come from the field table, with the value's line:column.
    expect_error("glue:\n  synthetic_train: 0\n",
                 "bad.yaml:2:20: glue.synthetic_train: must be >= 1");
    expect_error("finetune:\n  lrs: [1e-3, 0]\n", "finetune.lrs: learning rates must be > 0");
    expect_error("finetune:\n  warmup_ratio: 1.5\n", "finetune.warmup_ratio: must be in [0, 1]");
    expect_error("analysis:\n  sentences: many\n",
                 "bad.yaml:2:14: analysis.sentences: expected an integer");
    expect_error("extrapolation: {lengths: '1,,2'}\n", "extrapolation.lengths: expected factors");
    expect_error("analysis: {ablation: random}\n", "analysis.ablation: expected zero, mean or");
    expect_error("analysis: {keep_every: -1}\n", "analysis.keep_every: must be >= 0");
    expect_error("analysis: {heads: often}\n", "analysis.heads: expected true or false");
    expect_error("glue: builtin\n", "glue: expected a mapping");
    expect_error("analysis: {corpus: a.txt, text: b}\n", "give corpus or text, not both");
}

TEST_F(ExperimentTest, EveryStudySectionKeyIsReadIntoTheSpec) {
    const auto path = write("all.yaml",
                            "name: all\n"
                            "jobs: 2\n"
                            "checkpoints: [0.5, 1.0]\n"
                            "glue: {data: builtin, tasks: [syn-cola], synthetic_train: 10000, "
                            "synthetic_dev: 700}\n"
                            "analysis: {checkpoints: [0, 1], sentences: 8, max_tokens: 0, "
                            "batch_size: 4, figures: false, probe_windows: 3, order_probe: true, "
                            "ablation: shuffle, keep_every: 5, heads: true}\n"
                            "extrapolation: {lengths: '1,2', max_tokens: 500}\n"
                            "finetune: {lrs: [1e-3], seeds: [7], batch_size: 16, epochs: 2, "
                            "warmup_ratio: 0.1, weight_decay: 0, max_seq_len: 64, "
                            "classifier_dropout: 0, shuffle_words: true, save: best}\n");
    const auto spec = load_experiment(path.string());
    EXPECT_EQ(spec.name, "all");
    EXPECT_EQ(spec.runs_dir, (fs::path("runs") / "all").string());
    EXPECT_EQ(spec.jobs, 2);
    EXPECT_EQ(spec.checkpoints, (std::vector<double>{0.5, 1.0}));
    EXPECT_EQ(spec.glue.tasks, (std::vector<std::string>{"syn-cola"}));
    EXPECT_EQ(spec.glue.synthetic_train, 10000);
    EXPECT_EQ(spec.glue.synthetic_dev, 700);
    EXPECT_TRUE(spec.analysis.enabled);
    EXPECT_EQ(spec.analysis.checkpoints, (std::vector<double>{0, 1}));
    EXPECT_EQ(spec.analysis.sentences, 8);
    EXPECT_EQ(spec.analysis.batch_size, 4);
    EXPECT_FALSE(spec.analysis.figures);
    EXPECT_EQ(spec.analysis.probe_windows, 3);
    EXPECT_TRUE(spec.analysis.order_probe);
    EXPECT_EQ(spec.analysis.ablation, "shuffle");
    EXPECT_EQ(spec.analysis.keep_every, 5);
    EXPECT_TRUE(spec.analysis.heads);
    EXPECT_TRUE(spec.extrapolation.enabled);
    EXPECT_EQ(spec.extrapolation.lengths, "1,2");
    EXPECT_EQ(spec.extrapolation.max_tokens, 500);
    EXPECT_EQ(spec.finetune.lrs, (std::vector<double>{1e-3}));
    EXPECT_EQ(spec.finetune.seeds, (std::vector<uint64_t>{7}));
    EXPECT_EQ(spec.finetune.batch_size, 16);
    EXPECT_EQ(spec.finetune.epochs, 2);
    EXPECT_DOUBLE_EQ(spec.finetune.warmup_ratio, 0.1);
    EXPECT_DOUBLE_EQ(spec.finetune.weight_decay, 0);
    EXPECT_EQ(spec.finetune.max_seq_len, 64);
    EXPECT_DOUBLE_EQ(spec.finetune.classifier_dropout, 0);
    EXPECT_TRUE(spec.finetune.shuffle_words);
    EXPECT_EQ(spec.finetune.save, "best");
    // Without the optional sections nothing is switched on.
    const auto plain = load_experiment(write("plain.yaml", "variants: [bert-a]\n").string());
    EXPECT_FALSE(plain.analysis.enabled);
    EXPECT_FALSE(plain.extrapolation.enabled);
    EXPECT_EQ(plain.name, "plain");
}

TEST_F(ExperimentTest, ACommandLineSetErrorNamesTheOptionNotAVariantLine) {
    const auto path = write("sets.yaml", "variants:\n  - bert-a\n  - tupe-a\n").string();
    auto error_of = [&](const std::vector<std::string>& overrides) -> std::string {
        try {
            load_experiment(path, overrides);
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.line(), 0) << e.what();
            return e.what();
        }
        ADD_FAILURE() << "no error for --set " << overrides.front();
        return "";
    };
    EXPECT_EQ(error_of({"train.lr=abc"}), "--set train.lr=abc: not a number: 'abc'");
    EXPECT_EQ(error_of({"trian.lr=1"}),
              "--set trian.lr=1: unknown key 'trian.lr', did you mean 'train.lr'?");
    EXPECT_EQ(error_of({"train.warmup_steps=-5"}),
              "--set train.warmup_steps=-5: train.warmup_steps must be >= 0 (0 = no warm-up), "
              "got -5");
    // A variant's own bad `set:` still points at the variant's line.
    const auto own = write("own.yaml", "variants:\n  - name: x\n    set: {train.lr: abc}\n");
    try {
        load_experiment(own.string());
        FAIL() << "a variant's bad set accepted";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.line(), 2) << e.what();
        EXPECT_NE(std::string(e.what()).find("variant 'x'"), std::string::npos) << e.what();
    }
}

TEST_F(ExperimentTest, PlanCoversVariantsCheckpointsTasksLrsSeeds) {
    auto spec = load_experiment(write("t.yaml", tiny_study(10)).string());
    EXPECT_EQ(spec.checkpoint_steps(spec.variants[0]), (std::vector<int64_t>{5, 10}));
    auto plan = make_plan(spec);
    // 2 pretraining + 2 variants x 2 checkpoints x 2 tasks x 1 lr x 2 seeds.
    ASSERT_EQ(plan.size(), 2u + 16u);
    EXPECT_EQ(plan[0].kind, Job::Kind::kPretrain);
    EXPECT_EQ(plan[2].name, "bert-a/step5/syn-cola/lr0.001/seed1");
    std::set<std::string> names;
    for (const auto& j : plan) EXPECT_TRUE(names.insert(j.name).second) << j.name;
}

TEST(Report, TupeRuleMedianOverSeedsThenBestLr) {
    std::vector<GlueResultRecord> rs;
    auto add = [&](const std::string& variant, int64_t step, const std::string& task,
                   const std::string& metric, double lr, int64_t seed, double v) {
        GlueResultRecord r;
        r.variant = variant, r.checkpoint_step = step, r.task = task, r.metric = metric;
        r.lr = lr, r.seed = seed, r.value = v;
        rs.push_back(r);
    };
    // bert-a cola: lr 1 -> seeds {50, 60, 10} median 50; lr 2 -> {55, 54, 0} median 54.
    for (auto [lr, s, v] : std::vector<std::tuple<double, int, double>>{
             {1, 1, 50}, {1, 2, 60}, {1, 3, 10}, {2, 1, 55}, {2, 2, 54}, {2, 3, 0}})
        add("bert-a", 100, "cola", "mcc", lr, s, v);
    add("bert-a", 100, "cola", "accuracy", 1, 1, 99);  // not the selection metric: ignored
    add("bert-a", 100, "stsb", "pearson", 1, 1, 80);
    add("tupe-a", 100, "cola", "mcc", 1, 1, 58);
    add("tupe-a", 100, "stsb", "pearson", 1, 1, 85);
    auto report = build_report("x", rs);
    ASSERT_EQ(report.rows.size(), 2u);
    EXPECT_EQ(report.columns, (std::vector<std::string>{"cola", "stsb"}));
    const auto& cola = report.rows[0].cells.at("cola");
    EXPECT_DOUBLE_EQ(cola.median, 54);
    EXPECT_DOUBLE_EQ(cola.best_lr, 2);
    EXPECT_EQ(cola.n, 3);
    EXPECT_NEAR(cola.mean, 109.0 / 3, 1e-9);
    EXPECT_DOUBLE_EQ(report.rows[0].average, (54 + 80) / 2.0);
    EXPECT_NE(report.average_rule.find("not a GLUE average"), std::string::npos);
    const auto md = render_report(report, ReportFormat::kMarkdown);
    EXPECT_NE(md.find("| tupe-a @ 100 | **58.00 (+4.00)** | **85.00 (+5.00)** | 71.50 |"),
              std::string::npos)
        << md;
    const auto csv = render_report(report, ReportFormat::kCsv);
    EXPECT_NE(csv.find("model,CoLA,STS,Avg"), std::string::npos) << csv;
    EXPECT_NE(render_report(report, ReportFormat::kLatex).find("\\textbf{58.00}"),
              std::string::npos);
    EXPECT_NE(render_report(report, ReportFormat::kJson).find("\"best_lr\": 2.0"),
              std::string::npos);
}

TEST(Report, PairTaskScoresJoinTheRowOfMoreTrainingExamplesAndTheOldRowKeepsThem) {
    const std::string data = "builtin v1 corpus=c0ffee fraction=0.1 train=1000 dev=1000";
    const std::string more = "builtin v2 corpus=c0ffee fraction=0.1 train=10000 dev=1000";
    EXPECT_EQ(zero_shot_task_data(more), data);
    EXPECT_EQ(zero_shot_task_data(data), data);
    EXPECT_EQ(zero_shot_task_data("builtin v1 corpus=c0ffee fraction=0.1 train=500 dev=1000"),
              "builtin v1 corpus=c0ffee fraction=0.1 train=500 dev=1000");
    EXPECT_EQ(zero_shot_task_data("folder 1234"), "folder 1234");
    // The identities the runner stores: the pair task with the canonical data.
    const auto identity = [](const std::string& task, const std::string& task_data) {
        JobIdentity id;
        id.set("pretrain.model.preset", "tupe-a");
        id.set("finetune.task", task);
        id.set("finetune.task_data", task_data);
        if (task == "syn-bshift") id.set("finetune.protocol", "zero-shot pseudo-log-likelihood v1");
        return id;
    };
    const auto old_cell = identity("syn-cola", data).cell(pooled_keys(true));
    const auto new_cell = identity("syn-cola", more).cell(pooled_keys(true));
    const auto pair_cell = identity("syn-bshift", data).cell(pooled_keys(true));
    ASSERT_EQ(pair_cell, old_cell);  // stored before: one row
    ASSERT_NE(new_cell, old_cell);
    std::vector<GlueResultRecord> rs;
    auto add = [&](const std::string& task, const std::string& metric, const std::string& cell,
                   double v) {
        GlueResultRecord r;
        r.variant = "tupe-a", r.checkpoint_step = 3000, r.task = task, r.metric = metric;
        r.lr = 1e-3, r.seed = 1, r.value = v, r.cell = cell;
        rs.push_back(r);
    };
    add("syn-cola", "mcc", old_cell, 2);
    add("syn-bshift", "accuracy", pair_cell, 88);
    add("syn-cola", "mcc", new_cell, 38);
    const std::map<std::string, std::string> identity_of_cell = {
        {old_cell, identity("syn-cola", data).text()},
        {new_cell, identity("syn-cola", more).text()}};
    const auto report = build_report("x", rs, {}, {}, identity_of_cell);
    ASSERT_EQ(report.rows.size(), 2u);
    EXPECT_EQ(report.rows[0].cell, old_cell);  // in the order of their first results
    EXPECT_EQ(report.rows[1].cell, new_cell);
    EXPECT_DOUBLE_EQ(report.rows[0].cells.at("syn-cola").median, 2);
    EXPECT_DOUBLE_EQ(report.rows[1].cells.at("syn-cola").median, 38);
    for (const auto& row : report.rows) EXPECT_DOUBLE_EQ(row.cells.at("syn-bshift").median, 88);
    EXPECT_NE(report.rows[1].label.find("train=10000"), std::string::npos) << report.rows[1].label;
    // Another dev set is other data: its pair-task scores stay in a row of their own.
    add("syn-bshift", "accuracy",
        identity("syn-bshift", "builtin v1 corpus=c0ffee fraction=0.1 train=500 dev=500")
            .cell(pooled_keys(true)),
        70);
    EXPECT_EQ(build_report("x", rs, {}, {}, identity_of_cell).rows.size(), 3u);
}

TEST(Report, PaperRowsAndTheTupeAverage) {
    auto report = build_report("x", {});
    add_paper_rows(report, std::string(TUPE_SOURCE_DIR) + "/resources/paper_table1.tsv");
    ASSERT_EQ(report.rows.size(), 8u);
    EXPECT_EQ(report.columns.size(), 9u);
    EXPECT_EQ(report.rows[0].label, "BERT-A (paper, 1M)");
    EXPECT_DOUBLE_EQ(report.rows[3].cells.at("cola").median, 63.56);
    EXPECT_EQ(report.rows[4].label, "TUPE-A (paper, 300k)");
    double sum = 0;
    for (const auto& [k, c] : report.rows[0].cells) sum += c.median;
    EXPECT_NEAR(sum / 9, report.rows[0].average, 0.005);  // the paper's Avg is the mean of 9
}

TEST_F(ExperimentTest, RunnerRecordsEverythingAndRerunsSkipFinishedJobs) {
    auto spec = load_experiment(write("t.yaml", tiny_study()).string());
    RunnerOptions options;
    options.threads = 1;  // `tupe run --threads 1`: the pretraining too, not only fine-tuning
    auto first = run_experiment(spec, options, {});
    EXPECT_EQ(first.failed, 0);
    const std::string used =
        test_support::read_file(fs::path(spec.variants[0].config.out_dir) / "config.yaml");
    EXPECT_NE(used.find("threads: 1\n"), std::string::npos) << used;
    EXPECT_EQ(first.finished, static_cast<int64_t>(make_plan(spec).size()));
    auto again = run_experiment(spec, options, {});
    EXPECT_EQ(again.finished, 0);
    EXPECT_EQ(again.skipped, first.finished);

    auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
    auto exp = store.find_experiment("tiny");
    ASSERT_TRUE(exp.has_value());
    auto runs = store.list_runs(exp->id);
    EXPECT_EQ(runs.size(), make_plan(spec).size());
    for (const auto& r : runs) {
        EXPECT_EQ(r.status, "finished") << r.name;
        EXPECT_FALSE(r.git_commit.empty());
        // The BLAS the run multiplied with, as this process sees it.
        EXPECT_EQ(r.blas, engine::blas_description()) << r.name;
    }
    EXPECT_FALSE(engine::blas_description().empty());
    auto pre = store.find_run(exp->id, "tupe-a");
    ASSERT_TRUE(pre.has_value());
    auto val = store.metrics(pre->id, "validation/loss");
    ASSERT_EQ(val.size(), 3u);  // steps 0, 6, 12
    EXPECT_EQ(val.back().step, 12);
    // The snapshots at 50% and 100% of the steps, the files fine-tuning starts from.
    ASSERT_EQ(store.checkpoints(pre->id).size(), 2u);
    EXPECT_EQ(store.checkpoints(pre->id)[0].path,
              (fs::path(spec.runs_dir) / "tupe-a" / "checkpoint-6.pt").string());
    EXPECT_TRUE(fs::exists(fs::path(spec.runs_dir) / "tupe-a" / "checkpoint-6.pt"));
    auto results = store.glue_results(exp->id);
    // 2 variants x 2 checkpoints x 2 seeds x (syn-cola: mcc; syn-stsb: pearson, spearman).
    EXPECT_EQ(results.size(), 2u * 2 * 2 * 3);
    auto report = build_report("tiny", results);
    EXPECT_EQ(report.rows.size(), 4u);
    EXPECT_TRUE(report.synthetic);
    EXPECT_NE(experiment_status(spec).find("finished 18"), std::string::npos)
        << experiment_status(spec);
}

TEST_F(ExperimentTest, KilledRunnerProcessResumesWithNothingLostOrDuplicated) {
    auto path = write("t.yaml", tiny_study(40));
    const std::string tupe = TUPE_CLI;
    // The child kills itself (SIGKILL) right after step 14 of its first job, bert-a: a crash
    // at a known point, between its checkpoint at step 12 and the next one, with the curve
    // points up to step 14 in the store. Built before fork(): the child only execs.
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e)
        if (std::string(*e).rfind(std::string(kRaiseAtStepEnv) + "=", 0) != 0) vars.push_back(*e);
    vars.push_back(std::string(kRaiseAtStepEnv) + "=14:KILL");
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        int devnull = ::open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        execle(tupe.c_str(), tupe.c_str(), "run", path.c_str(), "--quiet",
               static_cast<char*>(nullptr), envp.data());
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the runner was to kill itself at step 14 (wait status " << status << ")";

    // Killed mid-job: bert-a running at its checkpoint of step 12, its curve up to step 14,
    // nothing after it started.
    auto spec = load_experiment(path.string());
    std::map<int64_t, double> killed_run;  // train/loss step -> wall time
    {
        auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
        auto exp = store.find_experiment("tiny");
        ASSERT_TRUE(exp.has_value());
        auto run = store.find_run(exp->id, "bert-a");
        ASSERT_TRUE(run.has_value());
        EXPECT_EQ(run->status, "running");
        EXPECT_EQ(run->step, 12);
        for (const auto& p : store.metrics(run->id, "train/loss")) killed_run[p.step] = p.wall_time;
        ASSERT_EQ(killed_run.size(), 7u);  // every 2 steps, 2..14
        EXPECT_EQ(killed_run.rbegin()->first, 14);
        EXPECT_EQ(store.list_runs(exp->id).size(), 1u);
    }
    ASSERT_TRUE(fs::exists(dir_ / "runs" / "bert-a" / "checkpoint.pt"));

    auto summary = run_experiment(spec, {}, {});
    EXPECT_EQ(summary.failed, 0);
    EXPECT_EQ(summary.skipped, 0);  // every job, bert-a included, was left to do
    EXPECT_EQ(summary.finished, static_cast<int64_t>(make_plan(spec).size()));
    auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
    auto exp = store.find_experiment("tiny");
    auto run = store.find_run(exp->id, "bert-a");
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->status, "finished");
    EXPECT_EQ(run->step, 40);
    auto loss = store.metrics(run->id, "train/loss");
    std::set<int64_t> steps;
    for (const auto& p : loss)
        EXPECT_TRUE(steps.insert(p.step).second) << "step " << p.step << " twice";
    EXPECT_EQ(loss.size(), 20u);  // every 2 steps, 2..40
    // Resumed from step 12, not redone from scratch: the points up to 12 are the killed
    // run's own, and the one at 14 (after its checkpoint) was dropped and logged again.
    for (const auto& p : loss) {
        if (p.step <= 12)
            EXPECT_EQ(p.wall_time, killed_run.at(p.step)) << "step " << p.step << " redone";
        else if (p.step == 14)
            EXPECT_GT(p.wall_time, killed_run.at(14)) << "step 14 not logged again";
    }
    for (const auto& r : store.list_runs(exp->id)) EXPECT_EQ(r.status, "finished") << r.name;
    // The killed runner's claim was taken over (its pid is gone), and released at the end.
    for (const auto& c : store.list_claims(exp->id)) {
        EXPECT_FALSE(c.held()) << c.job;
        EXPECT_EQ(c.attempts, c.job == "bert-a" ? 2 : 1) << c.job;
    }
}
