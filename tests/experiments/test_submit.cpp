// GLUE submission files written from stored predictions (analysis/submission.h, `tupe
// submit`): the server's file names, label strings, the stored zip (read back here through
// its central directory, CRC-32 recomputed bit by bit), a round trip through the submission
// reader and `tupe score` that gives back the stored GLUE scores of the run the report shows,
// and a tiny `tupe run` on fixture GLUE folders with test splits whose test predictions
// (and saved best-epoch weights) become the server's files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "analysis/metrics.h"
#include "analysis/submission.h"
#include "analysis/tasks.h"
#include "engine/config.h"
#include "engine/finetune.h"
#include "engine/sha256.h"
#include "engine/tokenizer.h"
#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "experiments/glue_data.h"
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

/// CRC-32 computed bit by bit (no table): an independent check of analysis::crc32.
uint32_t slow_crc32(const std::string& bytes) {
    uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char c : bytes) {
        crc ^= c;
        for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t le(const std::string& b, size_t at, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b.at(at + i));
    return v;
}

/// Reads a zip through its end record and central directory (APPNOTE.TXT 4.3.16, 4.3.12),
/// each entry's local header and bytes (4.3.7): name -> bytes, in directory order. Fails the
/// test on a stored CRC-32 or size that does not match the bytes, or a compressed entry.
std::vector<std::pair<std::string, std::string>> read_zip(const fs::path& path) {
    const std::string b = test_support::read_file(path);
    std::vector<std::pair<std::string, std::string>> out;
    EXPECT_GE(b.size(), 22u);
    if (b.size() < 22) return out;
    const size_t end = b.size() - 22;  // no archive comment
    EXPECT_EQ(le(b, end, 4), 0x06054b50u);
    const uint32_t count = le(b, end + 10, 2), cd_size = le(b, end + 12, 4),
                   cd_offset = le(b, end + 16, 4);
    EXPECT_EQ(cd_offset + cd_size, end);
    size_t at = cd_offset;
    for (uint32_t i = 0; i < count; ++i) {
        EXPECT_EQ(le(b, at, 4), 0x02014b50u);
        const uint32_t method = le(b, at + 10, 2), crc = le(b, at + 16, 4),
                       comp = le(b, at + 20, 4), size = le(b, at + 24, 4),
                       name_len = le(b, at + 28, 2), extra = le(b, at + 30, 2),
                       comment = le(b, at + 32, 2), local = le(b, at + 42, 4);
        const std::string name = b.substr(at + 46, name_len);
        EXPECT_EQ(method, 0u) << name;
        EXPECT_EQ(comp, size) << name;
        EXPECT_EQ(le(b, local, 4), 0x04034b50u) << name;
        EXPECT_EQ(b.substr(local + 30, le(b, local + 26, 2)), name);
        const size_t data = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
        const std::string bytes = b.substr(data, size);
        EXPECT_EQ(bytes.size(), size) << name;
        EXPECT_EQ(slow_crc32(bytes), crc) << name;
        EXPECT_EQ(le(b, local + 14, 4), crc) << name;
        out.emplace_back(name, bytes);
        at += 46 + name_len + extra + comment;
    }
    EXPECT_EQ(at, end);
    return out;
}

}  // namespace

TEST(SubmissionZip, Crc32MatchesTheStandardCheckValue) {
    EXPECT_EQ(analysis::crc32("123456789", 9), 0xCBF43926u);
    EXPECT_EQ(analysis::crc32("", 0), 0u);
    const std::string text = "index\tprediction\n0\tentailment\n";
    EXPECT_EQ(analysis::crc32(text.data(), text.size()), slow_crc32(text));
    // Streaming in two pieces gives the same value.
    const uint32_t first = analysis::crc32(text.data(), 10);
    EXPECT_EQ(analysis::crc32(text.data() + 10, text.size() - 10, first), slow_crc32(text));
}

TEST(SubmissionZip, StoredEntriesReadBackWithNamesSizesAndCrcs) {
    test_support::TempDir dir(test_support::per_test_name("tupe_zip"), true);
    const std::vector<analysis::ZipEntry> entries = {
        {"CoLA.tsv", "index\tprediction\n0\t1\n1\t0\n"},
        {"AX.tsv", "index\tprediction\n0\tneutral\n"},
        {"empty.tsv", ""},
        {"bytes.bin", std::string("\0\xff\x80 binary", 10)}};
    const fs::path zip = dir.path() / "a.zip";
    analysis::write_stored_zip(zip.string(), entries);
    const auto back = read_zip(zip);
    ASSERT_EQ(back.size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
        EXPECT_EQ(back[i].first, entries[i].name);
        EXPECT_EQ(back[i].second, entries[i].data) << entries[i].name;
    }
    EXPECT_FALSE(fs::exists(zip.string() + ".tmp"));
    // Equal entries, equal bytes (the time stamp is fixed).
    analysis::write_stored_zip((dir.path() / "b.zip").string(), entries);
    EXPECT_EQ(test_support::read_file(zip), test_support::read_file(dir.path() / "b.zip"));
    EXPECT_THROW(
        analysis::write_stored_zip((dir.path() / "c.zip").string(), {entries[0], entries[0]}),
        std::invalid_argument);
    EXPECT_THROW(analysis::write_stored_zip((dir.path() / "c.zip").string(), {{"/abs", "x"}}),
                 std::invalid_argument);
    EXPECT_THROW(analysis::write_stored_zip((dir.path() / "c.zip").string(), {{"", "x"}}),
                 std::invalid_argument);
}

// Test files carry the test file's own indices; AX is written with MNLI's labels.
TEST(SubmissionFiles, TestIndicesAndAxFile) {
    test_support::TempDir dir(test_support::per_test_name("tupe_submit_ids"), false);
    const auto written = analysis::write_submission(
        dir.path().string(), {{"rte", {1, 0}, {"100", "103"}}, {"ax", {2, 0, 1}, {"0", "1", "2"}}});
    ASSERT_EQ(written.files.size(), 2u);
    EXPECT_EQ(test_support::read_file(dir.path() / "RTE.tsv"),
              "index\tprediction\n100\tnot_entailment\n103\tentailment\n");
    EXPECT_EQ(test_support::read_file(dir.path() / "AX.tsv"),
              "index\tprediction\n0\tcontradiction\n1\tentailment\n2\tneutral\n");
    EXPECT_EQ(analysis::submission_file_name("ax"), "AX.tsv");
    EXPECT_EQ(analysis::submission_task("ax").name, "MNLI");
    EXPECT_THROW(analysis::write_submission(dir.path().string(), {{"rte", {1, 0}, {"100"}}}),
                 std::invalid_argument);
    EXPECT_THROW(analysis::write_submission(dir.path().string(), {{"rte", {1}, {"1\t2"}}}),
                 std::invalid_argument);
    const std::string zip = analysis::write_submission_zip(dir.path().string(), written.files);
    const auto back = read_zip(zip);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].first, "RTE.tsv");
    EXPECT_EQ(back[0].second, test_support::read_file(dir.path() / "RTE.tsv"));
    EXPECT_EQ(back[1].first, "AX.tsv");
}

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
    // The zip: the GLUE files at its top level, the synthetic one left out.
    std::vector<std::string> names;
    for (const auto& [name, bytes] : read_zip(out / "submission.zip")) {
        names.push_back(name);
        EXPECT_EQ(bytes, test_support::read_file(out / name)) << name;
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"MNLI-m.tsv", "RTE.tsv", "STS-B.tsv"}));

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
                          "has no stored test predictions");
    EXPECT_FALSE(fs::exists(file("out")));
}

namespace {

// A tiny study on fixture GLUE folders written here in GLUE_FORMAT.md's layouts: CoLA (no
// header), SST-2 (no test split), STS-B, MNLI (two dev and two test splits, and the AX
// diagnostic set) and RTE, each with train, dev and (but SST-2) test files whose index column
// is not the row number. One pretraining of 8 steps, one fine-tuning job per task.
class SubmitTestSplitTest : public test_support::TempDirTest {
  protected:
    SubmitTestSplitTest() : TempDirTest(test_support::per_test_name("tupe_submit_test")) {}

    // A sentence of 3..6 words of the toy corpus, from a counter (the same on every platform).
    std::string sentence() {
        static const std::vector<std::string> words = {
            "the", "a",     "old",   "red",  "cat",   "dog",  "man",   "house",
            "saw", "liked", "found", "near", "river", "with", "small", "bird"};
        auto next = [&]() { return state_ = state_ * 1103515245u + 12345u, (state_ >> 16) % 16; };
        const unsigned n = 3 + next() % 4;
        std::string out;
        for (unsigned w = 0; w < n; ++w) out += (w ? " " : "") + words[next()];
        return out;
    }

    // Writes the fixture folders; test indices are 1000 + 3 i (AX: 0, 1, ...).
    void write_glue() {
        const fs::path g = dir_ / "glue";
        const std::vector<std::string> nli = {"entailment", "neutral", "contradiction"};
        const std::vector<std::string> rte = {"entailment", "not_entailment"};
        auto test_index = [](int i) { return std::to_string(1000 + 3 * i); };
        std::ostringstream cola_train, cola_dev, cola_test, sst_train, sst_dev, sts_train, sts_dev,
            sts_test, rte_train, rte_dev, rte_test, mnli_train, mnli_dev_m, mnli_dev_mm,
            mnli_test_m, mnli_test_mm, ax;
        const std::string sts_header =
            "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2";
        const std::string mnli_header =
            "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
            "sentence1_parse\tsentence2_parse\tsentence1\tsentence2";
        sst_train << "sentence\tlabel\n";
        sst_dev << "sentence\tlabel\n";
        cola_test << "index\tsentence\n";
        sts_train << sts_header << "\tscore\n";
        sts_dev << sts_header << "\tscore\n";
        sts_test << sts_header << "\n";
        rte_train << "index\tsentence1\tsentence2\tlabel\n";
        rte_dev << "index\tsentence1\tsentence2\tlabel\n";
        rte_test << "index\tsentence1\tsentence2\n";
        mnli_train << mnli_header << "\tlabel1\tgold_label\n";
        mnli_dev_m << mnli_header << "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n";
        mnli_dev_mm << mnli_header << "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n";
        mnli_test_m << mnli_header << "\n";
        mnli_test_mm << mnli_header << "\n";
        ax << "index\tsentence1\tsentence2\n";
        for (int i = 0; i < 24; ++i) {
            const bool dev = i >= 16;
            const int k = i % 3;
            (dev ? cola_dev : cola_train) << "gj04\t" << i % 2 << "\t\t" << sentence() << "\n";
            (dev ? sst_dev : sst_train) << sentence() << " \t" << i % 2 << "\n";
            (dev ? sts_dev : sts_train)
                << i << "\tmain\tMSRvid\t2012\t" << i << "\tnone\tnone\t" << sentence() << "\t"
                << sentence() << "\t" << 0.25 * (i % 21) << "\n";
            (dev ? rte_dev : rte_train)
                << i << "\t" << sentence() << "\t" << sentence() << "\t" << rte[i % 2] << "\n";
            const std::string parses = "\tb1\tb2\tp1\tp2\t";
            if (!dev) {
                mnli_train << i << "\t1\t1n\tfiction" << parses << sentence() << "\t" << sentence()
                           << "\t" << nli[k] << "\t" << nli[k] << "\n";
            } else {
                for (auto* f : {&mnli_dev_m, &mnli_dev_mm}) {
                    *f << i << "\t1\t1n\tslate" << parses << sentence() << "\t" << sentence();
                    for (int l = 0; l < 6; ++l) *f << "\t" << nli[k];
                    *f << "\n";
                }
            }
        }
        for (int i = 0; i < 6; ++i) {
            cola_test << test_index(i) << "\t" << sentence() << "\n";
            sts_test << test_index(i) << "\tmain\tMSRvid\t2012\t" << i << "\tnone\tnone\t"
                     << sentence() << "\t" << sentence() << "\n";
            rte_test << test_index(i) << "\t" << sentence() << "\t" << sentence() << "\n";
            mnli_test_m << test_index(i) << "\t1\t1\tfiction\tb1\tb2\tp1\tp2\t" << sentence()
                        << "\t" << sentence() << "\n";
            mnli_test_mm << test_index(i) << "\t1\t1\tletters\tb1\tb2\tp1\tp2\t" << sentence()
                         << "\t" << sentence() << "\n";
            ax << i << "\t" << sentence() << "\t" << sentence() << "\n";
        }
        test_support::write_file(g / "CoLA/train.tsv", cola_train.str());
        test_support::write_file(g / "CoLA/dev.tsv", cola_dev.str());
        test_support::write_file(g / "CoLA/test.tsv", cola_test.str());
        test_support::write_file(g / "SST-2/train.tsv", sst_train.str());
        test_support::write_file(g / "SST-2/dev.tsv", sst_dev.str());
        test_support::write_file(g / "STS-B/train.tsv", sts_train.str());
        test_support::write_file(g / "STS-B/dev.tsv", sts_dev.str());
        test_support::write_file(g / "STS-B/test.tsv", sts_test.str());
        test_support::write_file(g / "RTE/train.tsv", rte_train.str());
        test_support::write_file(g / "RTE/dev.tsv", rte_dev.str());
        test_support::write_file(g / "RTE/test.tsv", rte_test.str());
        test_support::write_file(g / "MNLI/train.tsv", mnli_train.str());
        test_support::write_file(g / "MNLI/dev_matched.tsv", mnli_dev_m.str());
        test_support::write_file(g / "MNLI/dev_mismatched.tsv", mnli_dev_mm.str());
        test_support::write_file(g / "MNLI/test_matched.tsv", mnli_test_m.str());
        test_support::write_file(g / "MNLI/test_mismatched.tsv", mnli_test_mm.str());
        test_support::write_file(g / "diagnostic/diagnostic.tsv", ax.str());
    }

    void SetUp() override {
        test_support::write_toy_corpus(dir_, 16, 30, 7, 11);
        write_glue();
        std::ofstream(dir_ / "study.yaml")
            << "name: subtest\nvariants: [tupe-a]\n"
               "model: {size: tiny, max_position_embeddings: 32}\n"
               "data: {corpus: "
            << (dir_ / "corpus.txt").string() << ", vocab: " << (dir_ / "vocab.txt").string()
            << ", cache_dir: " << (dir_ / "cache").string()
            << ", max_seq_len: 32, validation_fraction: 0.25}\n"
               "train: {steps: 8, batch_size: 8, eval_interval: 4, checkpoint_interval: 4, "
               "log_interval: 2, threads: 1}\n"
               "checkpoints: [1.0]\n"
               "glue: {data: "
            << (dir_ / "glue").string()
            << ", tasks: [cola, sst2, stsb, mnli, rte]}\n"
               "finetune: {lrs: [1.0e-3], seeds: [1], batch_size: 8, epochs: 2, max_seq_len: 32, "
               "save: best}\n"
               "database: "
            << db() << "\nruns_dir: " << (dir_ / "runs").string() << "\n";
    }

    std::string db() const { return file("results.sqlite"); }
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
    static std::vector<std::string> ax_indices() { return {"0", "1", "2", "3", "4", "5"}; }
    std::vector<std::string> test_indices() const {
        std::vector<std::string> out;
        for (int i = 0; i < 6; ++i) out.push_back(std::to_string(1000 + 3 * i));
        return out;
    }

    using RunsByTask = std::map<std::string, experiments::RunRecord>;  // task key -> its run
    using StoredPredictions = std::map<std::pair<int64_t, std::string>, experiments::PredictionSet>;

    // The experiment's fine-tuning run of each of the five tasks.
    static void find_finetune_runs(experiments::ResultStore& store, int64_t experiment_id,
                                   RunsByTask& run_of_task) {
        for (const auto& r : store.list_runs(experiment_id))
            if (r.kind == "finetune")
                for (const std::string key : {"cola", "sst2", "stsb", "mnli", "rte"})
                    if (r.name.find("/" + key + "/") != std::string::npos) run_of_task[key] = r;
        ASSERT_EQ(run_of_task.size(), 5u);
    }

    // Test splits: the file's indices, NaN gold, labels in range; SST-2 has none.
    void expect_test_predictions(RunsByTask& run_of_task, const StoredPredictions& stored) const {
        const std::vector<std::pair<std::string, std::string>> test_sets = {
            {"cola", "test"},
            {"stsb", "test"},
            {"rte", "test"},
            {"mnli", "test_matched"},
            {"mnli", "test_mismatched"},
            {"mnli", "ax"}};
        for (const auto& [key, split] : test_sets) {
            const auto it = stored.find({run_of_task[key].id, split});
            ASSERT_NE(it, stored.end()) << key << " " << split;
            const auto& p = it->second;
            ASSERT_EQ(p.predicted.size(), 6u) << key << " " << split;
            EXPECT_EQ(p.ids, (split == "ax" ? ax_indices() : test_indices()))
                << key << " " << split;
            for (size_t i = 0; i < p.gold.size(); ++i) {
                EXPECT_TRUE(std::isnan(p.gold[i])) << key << " " << split;
                if (key != "stsb") {
                    const double labels = key == "mnli" ? 3 : 2;
                    EXPECT_TRUE(p.predicted[i] >= 0 && p.predicted[i] < labels &&
                                p.predicted[i] == std::round(p.predicted[i]));
                }
            }
        }
        EXPECT_EQ(stored.count({run_of_task["sst2"].id, "test"}), 0u);
        EXPECT_TRUE(stored.at({run_of_task["rte"].id, "dev"}).ids.empty());  // dev: row numbers
    }

    // finetune.save: best: one model.pt artifact per job, its SHA-256 as stored.
    static void expect_model_artifacts(experiments::ResultStore& store,
                                       const RunsByTask& run_of_task) {
        for (const auto& [key, r] : run_of_task) {
            const auto artifacts = store.artifacts(r.id);
            ASSERT_EQ(artifacts.size(), 1u) << key;
            EXPECT_EQ(artifacts[0].kind, "finetuned-model");
            EXPECT_EQ(fs::path(artifacts[0].path).filename(), "model.pt");
            EXPECT_NE(artifacts[0].path.find("finetune"), std::string::npos);
            ASSERT_TRUE(fs::exists(artifacts[0].path)) << artifacts[0].path;
            EXPECT_EQ(artifacts[0].hash, "sha256:" + engine::sha256_file_hex(artifacts[0].path));
            EXPECT_EQ(artifacts[0].size, static_cast<int64_t>(fs::file_size(artifacts[0].path)));
        }
    }

    // The RTE test labels predicted by the fine-tuned model saved at `model_path`.
    std::vector<double> predict_rte_test(const std::string& model_path) const {
        torch::serialize::InputArchive archive;
        archive.load_from(model_path);
        c10::IValue format, config_text, num_labels;
        archive.read("format", format);
        archive.read("config", config_text);
        archive.read("num_labels", num_labels);
        EXPECT_EQ(format.toStringRef(), "tupe-finetuned-v1");
        const auto config = engine::parse_config_text(config_text.toStringRef());
        engine::BertForSequenceClassification model(config.model, num_labels.toInt(), 0.1);
        torch::serialize::InputArchive weights;
        archive.read("model", weights);
        model->load(weights);
        engine::WordPieceTokenizer tokenizer(
            engine::Vocab::load((dir_ / "runs" / "tupe-a" / "vocab.txt").string()),
            config.data.lower_case);
        const auto layout = experiments::test_splits(analysis::find_task("RTE")).at(0);
        const auto split =
            experiments::read_glue_test_tsv(layout, (dir_ / "glue/RTE/test.tsv").string());
        std::vector<engine::LabeledText> xs;
        for (const auto& e : split.examples) xs.push_back({e.text_a, e.text_b});
        engine::FinetuneConfig fc;
        fc.num_labels = num_labels.toInt();
        fc.max_seq_len = 32;
        fc.batch_size = 8;
        return engine::predict_sets(model, tokenizer, {xs}, fc).at(0);
    }

    // The server's files in `out` with the test indices and label strings (`err`: submit's).
    void expect_server_files(const fs::path& out, const std::string& err) const {
        const std::map<std::string, std::pair<std::string, std::vector<std::string>>> files = {
            {"CoLA.tsv", {"stsb-no", {"0", "1"}}},
            {"STS-B.tsv", {"float", {}}},
            {"RTE.tsv", {"", {"entailment", "not_entailment"}}},
            {"MNLI-m.tsv", {"", {"entailment", "neutral", "contradiction"}}},
            {"MNLI-mm.tsv", {"", {"entailment", "neutral", "contradiction"}}},
            {"AX.tsv", {"ax", {"entailment", "neutral", "contradiction"}}}};
        for (const auto& [name, expect] : files) {
            ASSERT_TRUE(fs::exists(out / name)) << name << "\n" << err;
            const auto rows = analysis::read_submission((out / name).string());
            std::vector<std::string> indices;
            for (const auto& [index, label] : rows) {
                indices.push_back(index);
                if (expect.first == "float") {
                    EXPECT_TRUE(std::isfinite(std::stod(label))) << name << " " << label;
                } else {
                    EXPECT_NE(std::find(expect.second.begin(), expect.second.end(), label),
                              expect.second.end())
                        << name << " " << label;
                }
            }
            EXPECT_EQ(indices, (expect.first == "ax" ? ax_indices() : test_indices())) << name;
        }
    }

    // The RTE file `path` holds the stored test predictions `p`, row by row.
    static void expect_rte_rows(const fs::path& path, const experiments::PredictionSet& p) {
        const auto rows = analysis::read_submission(path.string());
        ASSERT_EQ(rows.size(), p.predicted.size());
        for (size_t i = 0; i < rows.size(); ++i)
            EXPECT_EQ(rows[i].second,
                      analysis::find_task("RTE").labels[static_cast<size_t>(p.predicted[i])]);
    }

    // The zip: exactly the written files at its top level, byte for byte.
    static void expect_zip_of_files(const fs::path& out) {
        std::vector<std::string> names;
        for (const auto& [name, bytes] : read_zip(out / "submission.zip")) {
            names.push_back(name);
            EXPECT_EQ(bytes, test_support::read_file(out / name)) << name;
        }
        std::sort(names.begin(), names.end());
        EXPECT_EQ(names, (std::vector<std::string>{"AX.tsv", "CoLA.tsv", "MNLI-m.tsv",
                                                   "MNLI-mm.tsv", "RTE.tsv", "STS-B.tsv"}));
    }

    // The stored RTE accuracy of `rte_run_id` (NaN when there is none).
    static double stored_rte_accuracy(experiments::ResultStore& store, int64_t experiment_id,
                                      int64_t rte_run_id) {
        double want = NAN;
        for (const auto& g : store.glue_results(experiment_id))
            if (g.run_id == rte_run_id && g.metric == "accuracy") want = g.value;
        return want;
    }

    unsigned state_ = 5;
};

}  // namespace

// `tupe run` stores test predictions under the test files' indices (gold NaN) and, with
// finetune.save: best, the best epoch's weights, which predict the stored test labels again;
// `tupe submit --split test` writes the server's files and zip from them, names the task with
// no test split, and the dev round trip through `tupe score` still gives the stored score.
TEST_F(SubmitTestSplitTest, FineTunedTestPredictionsBecomeServerFiles) {
    const auto run = tupe("run " + quote((dir_ / "study.yaml").string()) + " --threads 1");
    ASSERT_EQ(run.status, 0) << run.out << run.err;

    auto store = experiments::ResultStore::open_for_reading(db());
    const auto exp = store.find_experiment("subtest");
    ASSERT_TRUE(exp);
    RunsByTask run_of_task;
    ASSERT_NO_FATAL_FAILURE(find_finetune_runs(store, exp->id, run_of_task));
    StoredPredictions stored;
    for (const auto& p : store.predictions(exp->id)) stored[{p.run_id, p.split}] = p;
    ASSERT_NO_FATAL_FAILURE(expect_test_predictions(run_of_task, stored));
    ASSERT_NO_FATAL_FAILURE(expect_model_artifacts(store, run_of_task));
    // The saved RTE weights predict the stored RTE test labels again.
    EXPECT_EQ(predict_rte_test(store.artifacts(run_of_task["rte"].id)[0].path),
              stored.at({run_of_task["rte"].id, "test"}).predicted);

    // tupe submit --split test: the server's files with the test indices and label strings.
    const fs::path out = dir_ / "out";
    const auto r =
        tupe("submit --db " + quote(db()) +
             " --experiment subtest --variant tupe-a --split test --out " + quote(out.string()));
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_NO_FATAL_FAILURE(expect_server_files(out, r.err));
    ASSERT_NO_FATAL_FAILURE(
        expect_rte_rows(out / "RTE.tsv", stored.at({run_of_task["rte"].id, "test"})));
    EXPECT_FALSE(fs::exists(out / "SST-2.tsv"));
    EXPECT_NE(r.err.find("submit: SST-2.tsv not written: its median-seed run " +
                         run_of_task["sst2"].name +
                         " has no stored test predictions (no "
                         "SST-2/test.tsv in the GLUE folder"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("submit: QNLI.tsv not written"), std::string::npos) << r.err;
    expect_zip_of_files(out);

    // --no-zip: the files only.
    const auto plain = tupe("submit --db " + quote(db()) +
                            " --experiment subtest --variant tupe-a --split test --no-zip --out " +
                            quote((dir_ / "plain").string()));
    ASSERT_EQ(plain.status, 0) << plain.err;
    EXPECT_TRUE(fs::exists(dir_ / "plain" / "RTE.tsv"));
    EXPECT_FALSE(fs::exists(dir_ / "plain" / "submission.zip"));

    // Dev: `tupe score` reads the dev file back to the stored score.
    const auto dev =
        tupe("submit --db " + quote(db()) + " --experiment subtest --variant tupe-a --out " +
             quote((dir_ / "dev").string()));
    ASSERT_EQ(dev.status, 0) << dev.err;
    const auto scored =
        tupe("score --task RTE --dev " + quote((dir_ / "glue/RTE/dev.tsv").string()) +
             " --predictions " + quote((dir_ / "dev" / "RTE.tsv").string()) + " --format json");
    ASSERT_EQ(scored.status, 0) << scored.err;
    const double want = stored_rte_accuracy(store, exp->id, run_of_task["rte"].id);
    EXPECT_NEAR(nlohmann::json::parse(scored.out)["metrics"]["accuracy"].get<double>(), want, 1e-9);
}

// finetune.save: none by default, best or none, anything else a one-line error with the line.
TEST(SubmitFinetuneSave, KeyTakesBestOrNone) {
    test_support::TempDir dir(test_support::per_test_name("tupe_submit_save"), true);
    EXPECT_EQ(experiments::load_experiment(dir.write("a.yaml", "name: a\n").string()).finetune.save,
              "none");
    EXPECT_EQ(experiments::load_experiment(
                  dir.write("b.yaml", "name: b\nfinetune: {save: best}\n").string())
                  .finetune.save,
              "best");
    try {
        experiments::load_experiment(dir.write("bad.yaml", "finetune:\n  save: all\n").string());
        FAIL() << "no error for finetune.save: all";
    } catch (const experiments::ConfigError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("bad.yaml:2"), std::string::npos) << what;
        EXPECT_NE(what.find("finetune.save"), std::string::npos) << what;
        EXPECT_NE(what.find("expected best or none, got 'all'"), std::string::npos) << what;
    }
}
