// `tupe lengthgen` end to end on a study of two tiny runs: one result line per finished run, a
// second invocation trains nothing (resume), the summary holds every cell (the randomized run
// tested both ways), and a bad study file ends in one line naming the file and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.h"

namespace {

using test_support::quote;

class LengthgenCliTest : public test_support::TempDirTest {
  protected:
    LengthgenCliTest() : TempDirTest(test_support::per_test_name("tupe_lengthgen")) {}
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
};

size_t count_lines(const std::string& text) {
    std::istringstream in(text);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += !line.empty();
    return n;
}

TEST_F(LengthgenCliTest, TrainsEachRunOnceAndSummarisesBySeedAndLength) {
    const auto study = write("study.yaml",
                             "name: tiny\ntasks: [even_pairs]\npresets: [rope]\n"
                             "randomized: [false, true]\nrandomized_positions_max: 32\n"
                             "seeds: [1]\ntrain_lengths: [1, 8]\ntest_lengths: [4, 8, 16]\n"
                             "test_examples: 16\n"
                             "model: {hidden_size: 16, num_attention_heads: 2, "
                             "num_hidden_layers: 1, intermediate_size: 32, "
                             "max_position_embeddings: 32}\n"
                             "train: {examples: 48, batch_size: 16}\n");
    const std::string out = (dir_ / "out").string();
    const std::string args = "lengthgen " + quote(study.string()) + " --out " + quote(out);
    auto r = tupe(args + " --format json");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(count_lines(test_support::read_file(dir_ / "out" / "results.jsonl")), 2u);
    const auto summary = nlohmann::json::parse(r.out);
    // Plain, randomized tested at 0..T-1, randomized tested at random positions.
    ASSERT_EQ(summary["cells"].size(), 3u);
    EXPECT_EQ(summary["cells"][1]["randomized"], true);
    EXPECT_EQ(summary["cells"][1]["random_test_positions"], false);
    EXPECT_EQ(summary["cells"][2]["random_test_positions"], true);
    EXPECT_EQ(summary["cells"][0]["accuracy_mean_lo_hi"].size(), 3u);
    EXPECT_DOUBLE_EQ(summary["cells"][0]["chance"].get<double>(), 50.0);
    EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "lengthgen.csv"));

    // Resumed: both runs are found, none is trained again.
    r = tupe(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("2 already in"), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(test_support::read_file(dir_ / "out" / "results.jsonl")), 2u);
    EXPECT_NE(r.out.find("rope +rand"), std::string::npos) << r.out;
}

// A result line is a job's only under the settings it was trained with: the same --out with
// another lr is refused in one line naming the change, never counted as done; a torn last line
// (a process killed while writing it) is cut away on the next append, never fused with it.
TEST_F(LengthgenCliTest, ResultLinesCarryTheirSettingsAndATornLineIsCutAway) {
    const std::string body =
        "name: tiny\ntasks: [even_pairs]\npresets: [rope]\nrandomized: [false]\n"
        "seeds: [1, 2]\ntrain_lengths: [1, 8]\ntest_lengths: [4, 8]\ntest_examples: 8\n"
        "model: {hidden_size: 16, num_attention_heads: 2, num_hidden_layers: 1, "
        "intermediate_size: 32, max_position_embeddings: 32}\n";
    const auto study = write("study.yaml", body + "train: {examples: 32, batch_size: 16}\n");
    const auto other =
        write("other.yaml", body + "train: {examples: 32, batch_size: 16, lr: 0.002}\n");
    const std::string out = (dir_ / "out").string();
    const auto results = dir_ / "out" / "results.jsonl";
    auto r = tupe("lengthgen " + quote(study.string()) + " --out " + quote(out));
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string lines = test_support::read_file(results);
    EXPECT_EQ(count_lines(lines), 2u);
    EXPECT_NE(lines.find("train.lr=0.001"), std::string::npos) << lines;

    r = tupe("lengthgen " + quote(other.string()) + " --out " + quote(out));
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("2 of the study's runs were trained with other settings"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("train.lr: 0.001 -> 0.002"), std::string::npos) << r.err;
    EXPECT_EQ(test_support::read_file(results), lines);  // nothing written

    // Seed 2's line torn halfway, as by a kill: seed 2 is trained again, and the file holds
    // two whole lines after it.
    const std::string first = lines.substr(0, lines.find('\n') + 1);
    const std::string second = lines.substr(first.size());
    test_support::write_file(results, first + second.substr(0, second.size() / 2));
    r = tupe("lengthgen " + quote(study.string()) + " --out " + quote(out) + " --format json");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("1 already in"), std::string::npos) << r.err;
    const std::string repaired = test_support::read_file(results);
    EXPECT_EQ(count_lines(repaired), 2u) << repaired;
    std::istringstream in(repaired);
    for (std::string line; std::getline(in, line);)
        EXPECT_NO_THROW(nlohmann::json::parse(line)) << line;
    EXPECT_EQ(nlohmann::json::parse(r.out)["cells"][0]["seeds"], 2) << r.out;
}

TEST_F(LengthgenCliTest, BadStudyIsOneLineNamingFileAndKey) {
    const auto study = write("bad.yaml", "tasks: [even_pairs]\nseeds: [1]\ntest_lenghts: [10]\n");
    const auto r =
        tupe("lengthgen " + quote(study.string()) + " --out " + quote((dir_ / "out").string()));
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("bad.yaml:3"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("test_lenghts"), std::string::npos) << r.err;
}

}  // namespace
