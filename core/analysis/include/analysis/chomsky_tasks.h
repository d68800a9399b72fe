// The classification tasks of the Chomsky-hierarchy benchmark (Deletang et al., ICLR 2023) that
// Ruoss et al. (ACL 2023) use to test length generalisation, generated here without torch: a
// string of task symbols and one class. One table (chomsky_tasks()) names every task, its level,
// classes, symbols and rule; generation is deterministic under a seed with its own RNG, so every
// standard library draws the same examples. Rules and encodings as in google-deepmind/
// randomized_positional_encodings (tasks/regular, tasks/cs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace analysis {

/// One task of the table.
struct ChomskyTask {
    std::string name;   ///< even_pairs, parity_check, cycle_navigation, modular_arithmetic, ...
    std::string level;  ///< regular, dcf (deterministic context-free), cs (context-sensitive)
    int num_classes = 2;
    std::vector<std::string> symbols;  ///< The input alphabet, as tokens.
    std::string rule;                  ///< One line: what the label is.
};

/// Every task this workbench generates, in table order. All have a one-token output; the
/// sequence-output tasks (Reverse String, Duplicate String, Binary Addition, ...) need a
/// per-token output head and are not here (docs/zoo.md).
const std::vector<ChomskyTask>& chomsky_tasks();

/// The task named `name`; throws std::invalid_argument listing the names otherwise.
const ChomskyTask& chomsky_task(const std::string& name);

/// One example: `length` symbols of the task, space-separated in `text`, and its class.
struct TaskExample {
    std::string text;
    int64_t label = 0;
    int64_t length = 0;  ///< Symbols in text (modular_arithmetic: odd, see generate).
};

/// A small deterministic generator (SplitMix64): the same numbers with every compiler.
class TaskRng {
  public:
    explicit TaskRng(uint64_t seed) : state_(seed) {}
    uint64_t next();
    /// Uniform in [0, n), n >= 1, without modulo bias.
    uint64_t below(uint64_t n);

  private:
    uint64_t state_;
};

/// `count` examples of `task` with lengths uniform in [min_length, max_length], drawn from
/// TaskRng(seed). As the reference: modular_arithmetic makes an even length odd by dropping
/// one symbol; missing_duplicate pads an odd length with the symbol 3 and maps length 1 to the
/// input "1" with class 1. Throws std::invalid_argument for min_length < 1 or min > max.
std::vector<TaskExample> generate_task_examples(const ChomskyTask& task, int64_t min_length,
                                                int64_t max_length, int64_t count, uint64_t seed);

/// The label of one input, from its symbols (the rule of the table, computed directly).
int64_t task_label(const ChomskyTask& task, const std::vector<int>& symbols);

/// Chance accuracy of a classifier that always answers the majority class of the task's label
/// distribution under uniform inputs; 1 / num_classes for every task here.
double task_chance(const ChomskyTask& task);

/// A seed for one (study seed, purpose, length) stream, so the train set and every test set
/// of a seed are independent draws and every scheme sees the same ones.
uint64_t task_stream_seed(uint64_t seed, uint64_t purpose, int64_t length);

}  // namespace analysis
