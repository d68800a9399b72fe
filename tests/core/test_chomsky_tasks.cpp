// The Chomsky-hierarchy task generators (analysis/chomsky_tasks.h) and the length-generalisation
// study file (experiments/lengthgen_study.h): labels checked by computations of their own,
// determinism, the lengths asked for, and the study's errors naming file and key.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <stack>

#include "analysis/chomsky_tasks.h"
#include "experiments/config_loader.h"
#include "experiments/lengthgen_study.h"

namespace {

std::vector<std::string> split_words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// Modular arithmetic by a two-stack (shunting-yard) evaluation of the text itself.
int64_t shunting_yard_mod5(const std::vector<std::string>& w) {
    std::stack<int64_t> values;
    std::stack<char> ops;
    auto prec = [](char op) { return op == '*' ? 2 : 1; };
    auto apply = [&] {
        const char op = ops.top();
        ops.pop();
        const int64_t b = values.top();
        values.pop();
        const int64_t a = values.top();
        values.pop();
        values.push(op == '+' ? (a + b) % 5 : op == '-' ? ((a - b) % 5 + 5) % 5 : a * b % 5);
    };
    for (const auto& t : w) {
        if (std::isdigit(static_cast<unsigned char>(t[0]))) {
            values.push(std::stoi(t));
            continue;
        }
        while (!ops.empty() && prec(ops.top()) >= prec(t[0])) apply();
        ops.push(t[0]);
    }
    while (!ops.empty()) apply();
    return values.top();
}

TEST(ChomskyTasks, LabelsMatchAnIndependentComputation) {
    using analysis::chomsky_task;
    using analysis::generate_task_examples;
    for (const auto& e : generate_task_examples(chomsky_task("even_pairs"), 1, 30, 300, 7)) {
        const auto w = split_words(e.text);
        EXPECT_EQ(e.label, w.front() != w.back() ? 1 : 0) << e.text;
    }
    for (const auto& e : generate_task_examples(chomsky_task("parity_check"), 1, 30, 300, 7)) {
        int64_t ones = 0;
        for (const auto& t : split_words(e.text)) ones += t == "1";
        EXPECT_EQ(e.label, ones % 2) << e.text;
    }
    for (const auto& e : generate_task_examples(chomsky_task("cycle_navigation"), 1, 30, 300, 7)) {
        int64_t right = 0, left = 0;
        for (const auto& t : split_words(e.text)) right += t == "2", left += t == "0";
        EXPECT_EQ(e.label, (((right - left) % 5) + 5) % 5) << e.text;
    }
    for (const auto& e :
         generate_task_examples(chomsky_task("modular_arithmetic"), 1, 31, 300, 7)) {
        EXPECT_EQ(e.label, shunting_yard_mod5(split_words(e.text))) << e.text;
    }
    for (const auto& e : generate_task_examples(chomsky_task("missing_duplicate"), 2, 30, 300, 7)) {
        auto w = split_words(e.text);
        if (w.size() % 2) {
            EXPECT_EQ(w.back(), "3");
            w.pop_back();
        }
        const size_t half = w.size() / 2;
        size_t holes = 0;
        for (size_t i = 0; i < half; ++i) {
            if (w[i] == "2" || w[i + half] == "2") {
                ++holes;
                EXPECT_EQ(std::to_string(e.label), w[i] == "2" ? w[i + half] : w[i]) << e.text;
            } else {
                EXPECT_EQ(w[i], w[i + half]) << e.text;
            }
        }
        EXPECT_EQ(holes, 1u) << e.text;
    }
}

TEST(ChomskyTasks, DeterministicUnderASeedAndLengthsAsAsked) {
    for (const auto& task : analysis::chomsky_tasks()) {
        const auto a = analysis::generate_task_examples(task, 1, 40, 200, 3);
        const auto b = analysis::generate_task_examples(task, 1, 40, 200, 3);
        const auto c = analysis::generate_task_examples(task, 1, 40, 200, 4);
        ASSERT_EQ(a.size(), 200u);
        bool differs = false;
        int64_t shortest = 1000, longest = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].text, b[i].text);
            EXPECT_EQ(a[i].label, b[i].label);
            differs |= a[i].text != c[i].text;
            EXPECT_EQ(static_cast<int64_t>(split_words(a[i].text).size()), a[i].length);
            EXPECT_GE(a[i].label, 0);
            EXPECT_LT(a[i].label, task.num_classes);
            shortest = std::min(shortest, a[i].length), longest = std::max(longest, a[i].length);
        }
        EXPECT_TRUE(differs) << task.name;
        EXPECT_LE(shortest, 2) << task.name;
        EXPECT_GE(longest, 39) << task.name;
        // A fixed length gives that length (modular arithmetic: the odd length below).
        for (const auto& e : analysis::generate_task_examples(task, 100, 100, 20, 5))
            EXPECT_EQ(e.length, task.name == "modular_arithmetic" ? 99 : 100) << task.name;
    }
    EXPECT_THROW(
        analysis::generate_task_examples(analysis::chomsky_task("parity_check"), 0, 4, 1, 1),
        std::invalid_argument);
    EXPECT_THROW(analysis::chomsky_task("reverse_string"), std::invalid_argument);
}

TEST(ChomskyTasks, LabelsAreBalancedOnLongInputs) {
    // Far from the short lengths, every class is about equally frequent: chance is 1/classes.
    for (const auto& task : analysis::chomsky_tasks()) {
        std::vector<int> counts(size_t(task.num_classes), 0);
        for (const auto& e : analysis::generate_task_examples(task, 200, 200, 2000, 11))
            ++counts[size_t(e.label)];
        for (int n : counts)
            EXPECT_NEAR(n / 2000.0, analysis::task_chance(task), 0.06) << task.name;
    }
}

TEST(LengthgenStudy, ReadsOverridesAndListsJobs) {
    const auto s = experiments::load_lengthgen_study_from_string(
        "name: t\ntasks: [even_pairs, cycle_navigation]\npresets: [rope, nope]\n"
        "randomized: [false, true]\nrandomized_positions_max: 128\nseeds: [1, 2]\n"
        "train_lengths: [1, 20]\ntest_lengths: [10, 20, 50]\n"
        "model: {hidden_size: 16, num_attention_heads: 2, max_position_embeddings: 128}\n"
        "train: {examples: 64, lr: 0.002}\n",
        "t.yaml");
    EXPECT_EQ(s.train_max_length, 20);
    EXPECT_DOUBLE_EQ(s.lr, 0.002);
    // rope off/on and nope off, 2 seeds each, per task.
    const auto jobs = experiments::lengthgen_jobs(s);
    ASSERT_EQ(jobs.size(), 12u);
    EXPECT_EQ(jobs[0].key(), "even_pairs/rope@seed1");
    EXPECT_EQ(jobs[2].key(), "even_pairs/rope+rand@seed1");
    EXPECT_EQ(jobs[4].key(), "even_pairs/nope@seed1");
    const auto m = experiments::lengthgen_model_config(s, "rope", true);
    EXPECT_EQ(m.hidden_size, 16);
    EXPECT_EQ(m.randomized_positions_max, 128);
    EXPECT_EQ(m.vocab_size, static_cast<int64_t>(experiments::lengthgen_vocab().size()));
}

TEST(LengthgenStudy, BadInputNamesFileLineAndKey) {
    auto error = [](const std::string& yaml) {
        try {
            experiments::load_lengthgen_study_from_string(yaml, "s.yaml");
        } catch (const experiments::ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error("tasks: [even_pairs]\npresetz: [rope]\n").find("s.yaml:2"), std::string::npos);
    EXPECT_NE(error("presetz: [rope]\n").find("did you mean 'presets'"), std::string::npos);
    EXPECT_NE(error("tasks: [even_pairs, reverse_string]\n").find("tasks"), std::string::npos);
    EXPECT_NE(error("train: {lr: fast}\n").find("train.lr"), std::string::npos);
    EXPECT_NE(error("model: {hidden_sise: 8}\n").find("model.hidden_sise"), std::string::npos);
    // A test length the learned table cannot hold, and randomized positions that do not cover it.
    EXPECT_NE(error("presets: [bert-a]\nrandomized: [false]\ntest_lengths: [600]\n")
                  .find("max_position_embeddings"),
              std::string::npos);
    EXPECT_NE(error("randomized_positions_max: 50\ntest_lengths: [100]\n"
                    "model: {max_position_embeddings: 512}\n")
                  .find("randomized_positions_max"),
              std::string::npos);
}

TEST(LengthgenStudy, SummaryAveragesSeedsAtAndBeyondTheTrainingLength) {
    experiments::LengthgenStudy s;
    s.tasks = {"parity_check"};
    s.presets = {"rope"};
    s.randomized = {false};
    s.seeds = {1, 2};
    s.train_max_length = 40;
    s.test_lengths = {20, 40, 100};
    std::vector<experiments::LengthgenResult> results;
    for (uint64_t seed : {1, 2}) {
        experiments::LengthgenResult r;
        r.job = {"parity_check", "rope", false, seed};
        r.lengths = s.test_lengths;
        r.accuracy = seed == 1 ? std::vector<double>{100, 90, 50} : std::vector<double>{80, 70, 60};
        r.majority = {50, 50, 50};
        // Through the result line and back.
        results.push_back(experiments::result_from_json_line(experiments::result_to_json_line(r)));
    }
    const auto cells = experiments::summarize_lengthgen(s, results);
    ASSERT_EQ(cells.size(), 1u);
    EXPECT_EQ(cells[0].seeds, 2);
    EXPECT_DOUBLE_EQ(cells[0].mean[0], 90);
    EXPECT_DOUBLE_EQ(cells[0].in_mean, 85);   // seeds: 95 and 75
    EXPECT_DOUBLE_EQ(cells[0].out_mean, 55);  // seeds: 50 and 60
    EXPECT_LT(cells[0].in_lo, 85);
    EXPECT_GT(cells[0].in_hi, 85);
    EXPECT_DOUBLE_EQ(cells[0].chance, 50);
}

}  // namespace
