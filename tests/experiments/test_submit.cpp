// GLUE submission files written from stored predictions (analysis/submission.h, `tupe
// submit`): the server's file names, label strings, and a round trip through the submission
// reader and `tupe score` that gives back the stored GLUE scores of the run the report shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "analysis/metrics.h"
#include "analysis/submission.h"
#include "analysis/tasks.h"
#include "experiments/result_store.h"
#include "support/test_support.h"

namespace fs = std::filesystem;

namespace {

using test_support::quote;

/// Gold by index ("0", "1", ...) as the strings the submission carries.
std::map<std::string, std::string> gold_strings(const analysis::TaskInfo& task,
                                                const std::vector<double>& gold) {
    const auto strings = analysis::prediction_strings(task, gold);
    std::map<std::string, std::string> out;
    for (size_t i = 0; i < strings.size(); ++i) out[std::to_string(i)] = strings[i];
    return out;
}

/// `n` predictions of a task from `rng`: label ids, or scores in [0, 5] for regression.
std::vector<double> random_values(const analysis::TaskInfo& task, size_t n, std::mt19937& rng) {
    std::vector<double> v;
    for (size_t i = 0; i < n; ++i)
        v.push_back(task.regression ? std::uniform_real_distribution<double>(0.0, 5.0)(rng)
                                    : static_cast<double>(rng() % task.labels.size()));
    return v;
}

}  // namespace

TEST(SubmissionFiles, NamesFollowTheGlueServer) {
    EXPECT_EQ(analysis::submission_file_name("cola"), "CoLA.tsv");
    EXPECT_EQ(analysis::submission_file_name("sst2"), "SST-2.tsv");
    EXPECT_EQ(analysis::submission_file_name("stsb"), "STS-B.tsv");
    EXPECT_EQ(analysis::submission_file_name("mnli_m"), "MNLI-m.tsv");
    EXPECT_EQ(analysis::submission_file_name("mnli_mm"), "MNLI-mm.tsv");
    EXPECT_EQ(analysis::submission_file_name("wnli"), "WNLI.tsv");
    EXPECT_EQ(analysis::submission_file_name("syn-cola"), "SYN-CoLA.tsv");
    EXPECT_EQ(analysis::submission_file_name("syn-stsb"), "SYN-STS-B.tsv");
    EXPECT_THROW(analysis::submission_file_name("mnli"), std::invalid_argument);
    EXPECT_THROW(analysis::submission_file_name("nope"), std::invalid_argument);
    // Every GLUE dev column has a server file; the server's files are those plus AX.
    std::vector<std::string> files;
    for (const auto& task : analysis::glue_tasks())
        if (!task.synthetic)
            for (const auto& d : task.dev)
                files.push_back(analysis::submission_file_name(d.column));
    files.push_back("AX.tsv");
    std::sort(files.begin(), files.end());
    auto expected = analysis::glue_submission_files();
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(files, expected);
}

TEST(SubmissionFiles, LabelStringsAreTheServers) {
    const auto& rte = analysis::find_task("RTE");
    EXPECT_EQ(analysis::prediction_strings(rte, {0, 1}),
              (std::vector<std::string>{"entailment", "not_entailment"}));
    const auto& mnli = analysis::find_task("MNLI");
    EXPECT_EQ(analysis::prediction_strings(mnli, {2, 1, 0}),
              (std::vector<std::string>{"contradiction", "neutral", "entailment"}));
    EXPECT_EQ(analysis::prediction_strings(analysis::find_task("CoLA"), {1, 0}),
              (std::vector<std::string>{"1", "0"}));
    EXPECT_EQ(analysis::prediction_strings(analysis::find_task("STS-B"), {3.25, 0.1}),
              (std::vector<std::string>{"3.25", "0.1"}));
    EXPECT_THROW(analysis::prediction_strings(rte, {0.5}), std::invalid_argument);
    EXPECT_THROW(analysis::prediction_strings(rte, {2}), std::invalid_argument);
    EXPECT_THROW(analysis::prediction_strings(analysis::find_task("STS-B"), {NAN}),
                 std::invalid_argument);
}

// write_submission, then read_submission and score_submission: the scores of the predictions.
TEST(SubmissionFiles, WriteReadScoreRoundTrip) {
    test_support::TempDir dir(test_support::per_test_name("tupe_submit_unit"), false);
    std::mt19937 rng(7);
    const std::vector<std::string> columns = {"cola", "mrpc", "stsb", "mnli_mm", "rte"};
    std::vector<analysis::SubmissionColumn> given;
    std::vector<std::vector<double>> golds;
    for (const auto& c : columns) {
        const auto& task = *analysis::resolve_task_column(c).task;
        given.push_back({c, random_values(task, 40, rng)});
        golds.push_back(random_values(task, 40, rng));
    }
    const auto written = analysis::write_submission(dir.path().string(), given);
    ASSERT_EQ(written.files.size(), columns.size());
    EXPECT_EQ(test_support::read_file(written.files[4]).substr(0, 17), "index\tprediction\n");
    for (size_t i = 0; i < columns.size(); ++i) {
        const auto& task = *analysis::resolve_task_column(columns[i]).task;
        EXPECT_EQ(fs::path(written.files[i]).filename(),
                  analysis::submission_file_name(columns[i]));
        const auto rows = analysis::read_submission(written.files[i]);
        ASSERT_EQ(rows.size(), 40u);
        const auto scores =
            analysis::score_submission(columns[i], rows, gold_strings(task, golds[i]), task.labels);
        const auto direct = analysis::score_task(columns[i], given[i].predicted, golds[i]);
        ASSERT_EQ(scores.metrics.size(), direct.metrics.size()) << columns[i];
        for (const auto& [k, v] : direct.metrics)
            EXPECT_NEAR(scores.metrics.at(k), v, 1e-9) << columns[i] << " " << k;
    }
    EXPECT_THROW(analysis::write_submission(dir.path().string(), {given[0], given[0]}),
                 std::invalid_argument);
}

namespace {

class SubmitCliTest : public test_support::TempDirTest {
  protected:
    SubmitCliTest() : TempDirTest(test_support::per_test_name("tupe_submit")) {}

    struct Stored {
        int64_t run_id;
        std::vector<double> gold, predicted;
    };

    // One fine-tuning run of tupe-a @ 100 on `task` (a result column) with its scores.
    Stored add_run(experiments::ResultStore& store, const std::string& column, double lr,
                   int64_t seed, double accuracy_target, bool with_predictions = true) {
        const auto& task = *analysis::resolve_task_column(column).task;
        const auto& split = *analysis::resolve_task_column(column).split;
        experiments::RunRecord run;
        run.experiment_id = experiment_;
        run.kind = "finetune";
        run.name = "tupe-a/ckpt100/" + column + "/lr" + std::to_string(lr) + "/seed" +
                   std::to_string(seed);
        run.parent_run_id = pretrain_;
        run.seed = seed;
        run.status = "finished";
        Stored s;
        s.run_id = store.upsert_run(run);
        // 20 examples; the first round(accuracy_target * 20) predicted right.
        const size_t n = 20, right = static_cast<size_t>(accuracy_target * n + 0.5);
        for (size_t i = 0; i < n; ++i) {
            const double g = task.regression ? 0.25 * static_cast<double>(i % 17)
                                             : static_cast<double>(i % task.labels.size());
            s.gold.push_back(g);
            s.predicted.push_back(task.regression
                                      ? (i < right ? g : 5.0 - g)
                                      : (i < right ? g : std::fmod(g + 1, task.labels.size())));
        }
        for (const auto& [metric, value] :
             analysis::score_task(column, task.metric, s.predicted, s.gold).metrics) {
            experiments::GlueResultRecord g;
            g.run_id = s.run_id;
            g.task = column;
            g.split = split.file;
            g.metric = metric;
            g.value = value;
            g.checkpoint_step = 100;
            g.lr = lr;
            g.seed = seed;
            store.add_glue_result(g);
        }
        if (with_predictions) store.set_predictions({s.run_id, split.file, s.gold, s.predicted});
        return s;
    }

    void SetUp() override {
        auto store = experiments::ResultStore::open(db());
        experiment_ = store.get_or_create_experiment("exp", "exp.yaml", "name: exp\n");
        experiments::RunRecord pre;
        pre.experiment_id = experiment_;
        pre.name = "tupe-a";
        pre.variant = "tupe-a";
        pre.status = "finished";
        pretrain_ = store.upsert_run(pre);
        // RTE: lr 1e-5 medians 60, lr 2e-5 medians 75 (seeds 50, 75, 90): the seed-2 run.
        add_run(store, "rte", 1e-5, 1, 0.55);
        add_run(store, "rte", 1e-5, 2, 0.6);
        add_run(store, "rte", 1e-5, 3, 0.65);
        add_run(store, "rte", 2e-5, 1, 0.5);
        rte_median_ = add_run(store, "rte", 2e-5, 2, 0.75);
        add_run(store, "rte", 2e-5, 3, 0.9);
        stsb_ = add_run(store, "stsb", 1e-5, 1, 0.8);
        mnli_m_ = add_run(store, "mnli_m", 1e-5, 1, 0.7);
        syn_cola_ = add_run(store, "syn-cola", 1e-5, 1, 0.9);
        // MNLI-mm's scores without predictions: named as missing.
        add_run(store, "mnli_mm", 1e-5, 1, 0.7, false);
    }

    std::string db() const { return file("results.db"); }
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
    // Non-zero status and one `tupe submit:` line naming `needle`.
    void expect_one_line_error(const test_support::CliResult& r, const std::string& needle) const {
        EXPECT_NE(r.status, 0);
        std::istringstream lines(r.err);
        std::string line;
        int errors = 0;
        while (std::getline(lines, line))
            if (line.rfind("tupe submit: ", 0) == 0) {
                ++errors;
                EXPECT_NE(line.find(needle), std::string::npos) << r.err;
            }
        EXPECT_EQ(errors, 1) << r.err;
    }

    /// The scores of a written file against the stored gold of `s`.
    std::map<std::string, double> rescore(const std::string& column, const Stored& s) const {
        const auto& task = *analysis::resolve_task_column(column).task;
        const auto rows = analysis::read_submission(
            (dir_ / "out" / analysis::submission_file_name(column)).string());
        if (!task.synthetic)
            return analysis::score_submission(column, rows, gold_strings(task, s.gold), task.labels)
                .metrics;
        // score_submission scores GLUE tasks only: map the labels back by hand.
        std::vector<double> ids;
        for (const auto& [index, label] : rows)
            ids.push_back(static_cast<double>(
                std::find(task.labels.begin(), task.labels.end(), label) - task.labels.begin()));
        return analysis::score_task(column, task.metric, ids, s.gold).metrics;
    }

    /// The stored scores of run `s` on `column`.
    std::map<std::string, double> stored(const std::string& column, const Stored& s) const {
        auto store = experiments::ResultStore::open_for_reading(db());
        std::map<std::string, double> out;
        for (const auto& g : store.glue_results(experiment_))
            if (g.run_id == s.run_id && g.task == column) out[g.metric] = g.value;
        return out;
    }

    /// rescore == stored, to rounding (the reader scores in index-text order: sums reorder).
    void expect_round_trip(const std::string& column, const Stored& s) const {
        const auto got = rescore(column, s), want = stored(column, s);
        ASSERT_EQ(got.size(), want.size()) << column;
        ASSERT_FALSE(want.empty()) << column;
        for (const auto& [k, v] : want) EXPECT_NEAR(got.at(k), v, 1e-9) << column << " " << k;
    }

    int64_t experiment_ = 0, pretrain_ = 0;
    Stored rte_median_, stsb_, mnli_m_, syn_cola_;
};

}  // namespace

// `tupe submit` writes the report's run per task; the submission reader and `tupe score` give
// back the stored scores; the files it cannot write are named, one line each.
TEST_F(SubmitCliTest, WritesTheReportedRunAndScoresRoundTrip) {
    const auto out = dir_ / "out";
    const auto r = tupe("submit --db " + quote(db()) + " --experiment exp --variant tupe-a --out " +
                        quote(out.string()));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::exists(out / "RTE.tsv"));
    EXPECT_TRUE(fs::exists(out / "STS-B.tsv"));
    EXPECT_TRUE(fs::exists(out / "MNLI-m.tsv"));
    EXPECT_FALSE(fs::exists(out / "MNLI-mm.tsv"));
    EXPECT_FALSE(fs::exists(out / "CoLA.tsv"));
    expect_round_trip("rte", rte_median_);
    EXPECT_DOUBLE_EQ(rescore("rte", rte_median_).at("accuracy"), 75.0);
    expect_round_trip("stsb", stsb_);
    expect_round_trip("mnli_m", mnli_m_);
    // A built-in synthetic task under its own name, said not to be GLUE.
    expect_round_trip("syn-cola", syn_cola_);
    EXPECT_NE(r.out.find("SYN-CoLA.tsv: built-in synthetic tasks, not GLUE"), std::string::npos)
        << r.out;
    EXPECT_NE(r.err.find("MNLI-mm.tsv not written"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("submit: CoLA.tsv not written: tupe-a @ 100 has no stored fine-tuning "
                         "results on CoLA"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("AX.tsv not written"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("zip ../submission.zip *.tsv"), std::string::npos) << r.out;

    // `tupe score` reads the file against a dev.tsv holding the stored gold labels.
    const auto& rte = analysis::find_task("RTE");
    std::ofstream dev(dir_ / "dev.tsv");
    dev << "index\tsentence1\tsentence2\tlabel\n";
    for (size_t i = 0; i < rte_median_.gold.size(); ++i)
        dev << i << "\ta b\tc d\t" << rte.labels[static_cast<size_t>(rte_median_.gold[i])] << "\n";
    dev.close();
    const auto scored =
        tupe("score --task RTE --dev " + quote((dir_ / "dev.tsv").string()) + " --predictions " +
             quote((out / "RTE.tsv").string()) + " --format json");
    ASSERT_EQ(scored.status, 0) << scored.err;
    EXPECT_NE(scored.out.find("\"accuracy\": 75.0"), std::string::npos) << scored.out;
}

TEST_F(SubmitCliTest, UnknownNamesAndTestSplitAreOneLine) {
    const std::string base = "submit --db " + quote(db()) + " --out " + quote(file("out"));
    expect_one_line_error(tupe(base + " --experiment nope --variant tupe-a"),
                          "no experiment named 'nope' (has: exp)");
    expect_one_line_error(tupe(base + " --experiment exp --variant tupe-x"),
                          "no GLUE results of variant 'tupe-x' (has: tupe-a)");
    expect_one_line_error(tupe(base + " --experiment exp --variant tupe-a --step 7"),
                          "no GLUE results at step 7 (has: 100)");
    expect_one_line_error(tupe(base + " --experiment exp --variant tupe-a --split test"),
                          "no test predictions stored");
    EXPECT_FALSE(fs::exists(file("out")));
}
