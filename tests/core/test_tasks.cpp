// The task registry (analysis/tasks.h) against the GLUE format document: the table of
// layouts, labels and metrics and the split sizes are read from resources/GLUE_FORMAT.md (a
// copy of shared/GLUE_FORMAT.md, compared with it when that is present), not restated here.
// Also the lists derived from the registry (Table 1 columns, report order, lookups).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/tasks.h"
#include "support/test_support.h"

using test_support::has;

namespace {

namespace fs = std::filesystem;
using analysis::MetricKind;

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string trim(const std::string& s) {
    const auto a = s.find_first_not_of(" \t");
    if (a == std::string::npos) return "";
    const auto b = s.find_last_not_of(" \t");
    return s.substr(a, b - a + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, sep)) out.push_back(trim(item));
    return out;
}

/// One row of the document's table: task | files | header | columns | labels | metric(s).
struct DocRow {
    std::string task, files, header, columns, labels, metrics;
};

fs::path format_doc() { return fs::path(TUPE_SOURCE_DIR) / "resources" / "GLUE_FORMAT.md"; }

std::vector<DocRow> doc_rows() {
    std::vector<DocRow> rows;
    std::stringstream in(slurp(format_doc()));
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("| ", 0) != 0) continue;
        auto cells = split(line.substr(1, line.size() - 2), '|');
        if (cells.size() != 6 || cells[0] == "task" || cells[0].rfind("---", 0) == 0) continue;
        rows.push_back({cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]});
    }
    return rows;
}

/// "8,551" -> 8551.
long number(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return std::stol(s);
}

/// The "Split sizes" paragraph: task -> {train, dev...} ("MNLI 392,702 / 9,815 m + 9,832 mm").
std::map<std::string, std::vector<long>> doc_sizes() {
    const std::string doc = slurp(format_doc());
    const auto a = doc.find("Split sizes");
    const auto colon = doc.find(':', a);
    const auto end = doc.find("\n\n", colon);
    std::string text = doc.substr(colon + 1, end - colon - 1);
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::map<std::string, std::vector<long>> sizes;
    for (std::string item : split(text, ';')) {
        if (!item.empty() && item.back() == '.') item.pop_back();
        const auto space = item.find(' ');
        const std::string task = item.substr(0, space);
        const auto parts = split(item.substr(space + 1), '/');
        std::vector<long> v = {number(parts[0])};
        if (has(parts[1], "+")) {  // MNLI: "9,815 m + 9,832 mm"
            for (const auto& dev : split(parts[1], '+')) v.push_back(number(split(dev, ' ')[0]));
        } else {
            v.push_back(number(parts[1]));
        }
        sizes[task] = v;
    }
    return sizes;
}

TEST(TaskRegistry, DocumentIsTheSharedOne) {
    ASSERT_TRUE(fs::exists(format_doc())) << format_doc();
    const fs::path shared = fs::path(TUPE_SOURCE_DIR) / ".." / "shared" / "GLUE_FORMAT.md";
    if (fs::exists(shared)) {
        EXPECT_EQ(slurp(format_doc()), slurp(shared)) << "update the copy";
    }
}

TEST(TaskRegistry, MatchesTheFormatDocumentTable) {
    const auto rows = doc_rows();
    int checked = 0;
    for (const auto& row : rows) {
        if (row.task == "AX") continue;  // diagnostic only, not a task we train on
        SCOPED_TRACE(row.task);
        const analysis::TaskInfo& t = analysis::find_task(row.task);
        EXPECT_EQ(t.name, row.task);
        EXPECT_FALSE(t.synthetic);
        EXPECT_EQ(t.header, !has(row.header, "none"));

        // "3 / - / 1", "7 / 8 / 9 (last)", "8 / 9 / last (11 in train, 15 in dev)".
        const auto cols = split(row.columns, '/');
        ASSERT_EQ(cols.size(), 3u);
        EXPECT_EQ(t.text_a, std::stoi(cols[0]));
        EXPECT_EQ(t.text_b, cols[1] == "-" ? -1 : std::stoi(cols[1]));
        EXPECT_EQ(t.label, has(cols[2], "last") ? -1 : std::stoi(cols[2]));  // -1: the last

        if (has(row.labels, "regression")) {
            EXPECT_TRUE(t.regression);
            EXPECT_TRUE(t.labels.empty());
        } else {
            EXPECT_FALSE(t.regression);
            EXPECT_EQ(t.labels, split(row.labels, ','));
        }

        const std::string& m = row.metrics;
        const MetricKind want = has(m, "Matthews")  ? MetricKind::kMcc
                                : has(m, "Pearson") ? MetricKind::kPearsonSpearman
                                : has(m, "F1")      ? MetricKind::kF1Accuracy
                                                    : MetricKind::kAccuracy;
        EXPECT_EQ(t.metric, want) << m;
        EXPECT_EQ(t.skip_short_rows, has(m, "dropped"));

        // Dev files: the dev*.tsv named (MNLI's dev_matched and dev_mismatched), or "dev"
        // where the cell says "same" or "train/dev/test".
        std::vector<std::string> dev_files;
        for (const auto& f : split(row.files, ' '))
            if (f.rfind("dev", 0) == 0 && has(f, ".tsv") && f.rfind("dev_ids", 0) != 0)
                dev_files.push_back(f.substr(0, f.find('.')));
        if (dev_files.empty()) dev_files = {"dev"};
        EXPECT_EQ(t.dev_splits, dev_files);
        ++checked;
    }
    EXPECT_EQ(checked, 9);
    EXPECT_EQ(std::count_if(analysis::glue_tasks().begin(), analysis::glue_tasks().end(),
                            [](const analysis::TaskInfo& t) { return !t.synthetic; }),
              checked);
}

TEST(TaskRegistry, SplitSizesMatchTheFormatDocument) {
    const auto sizes = doc_sizes();
    ASSERT_EQ(sizes.size(), 9u);
    for (const auto& [name, expected] : sizes) {
        SCOPED_TRACE(name);
        const analysis::TaskInfo& t = analysis::find_task(name);
        EXPECT_EQ(analysis::expected_split_size(t, "train"), expected[0]);
        ASSERT_EQ(expected.size(), t.dev.size() + 1);
        for (size_t i = 0; i < t.dev.size(); ++i)
            EXPECT_EQ(analysis::expected_split_size(t, t.dev[i].file), expected[i + 1]);
    }
}

TEST(TaskRegistry, DerivedListsFollowThePaper) {
    EXPECT_EQ(analysis::paper_columns(),
              (std::vector<std::string>{"mnli_m", "mnli_mm", "qnli", "qqp", "sst2", "cola", "mrpc",
                                        "rte", "stsb"}));
    EXPECT_EQ(
        analysis::paper_task_keys(),
        (std::vector<std::string>{"mnli", "qnli", "qqp", "sst2", "cola", "mrpc", "rte", "stsb"}));
    EXPECT_EQ(analysis::synthetic_task_keys(),
              (std::vector<std::string>{"syn-cola", "syn-mrpc", "syn-stsb", "syn-rte", "syn-bshift",
                                        "syn-move", "syn-span", "syn-rev"}));
    for (const auto& key : analysis::synthetic_task_keys())
        EXPECT_EQ(analysis::find_task(key).zero_shot,
                  key == "syn-bshift" || key == "syn-move" || key == "syn-span" || key == "syn-rev")
            << key;
    const auto& order = analysis::report_columns();
    EXPECT_EQ(order.size(), 18u);
    EXPECT_EQ(order.back(), "wnli");
    EXPECT_EQ(order[9], "syn-cola");
}

TEST(TaskRegistry, ResolvesTasksAndColumns) {
    const auto mm = analysis::resolve_task_column("MNLI-mm");
    ASSERT_NE(mm.task, nullptr);
    ASSERT_NE(mm.split, nullptr);
    EXPECT_EQ(mm.task->key, "mnli");
    EXPECT_EQ(mm.split->file, "dev_mismatched");
    EXPECT_EQ(analysis::resolve_task_column("mnli_matched").split->column, "mnli_m");
    const auto mnli = analysis::resolve_task_column("mnli");
    ASSERT_NE(mnli.task, nullptr);
    EXPECT_EQ(mnli.split, nullptr);
    EXPECT_EQ(analysis::resolve_task_column("SST-2").split->column, "sst2");
    EXPECT_EQ(analysis::resolve_task_column("SYN-STS-B").task->key, "syn-stsb");
    EXPECT_EQ(analysis::resolve_task_column("squad").task, nullptr);
    EXPECT_EQ(analysis::reported_column(analysis::find_task("mnli"), "dev_mismatched"), "mnli_mm");
    EXPECT_EQ(analysis::reported_column(analysis::find_task("rte"), "dev"), "rte");
    EXPECT_THROW(analysis::reported_column(analysis::find_task("rte"), "dev_matched"),
                 std::invalid_argument);
    // The selection metric follows the metric kind (GLUE_FORMAT.md, "Model selection metric").
    EXPECT_STREQ(analysis::selection_metric_key(analysis::find_task("cola").metric), "mcc");
    EXPECT_STREQ(analysis::selection_metric_key(analysis::find_task("stsb").metric), "pearson");
    EXPECT_STREQ(analysis::selection_metric_key(analysis::find_task("mrpc").metric), "accuracy");
}

}  // namespace
