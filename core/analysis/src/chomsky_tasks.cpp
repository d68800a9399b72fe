// The Chomsky-hierarchy classification tasks (analysis/chomsky_tasks.h): the table, the
// generator and the rules. Symbols are indices into a task's alphabet; the text is their tokens
// joined by spaces, so the WordPiece tokenizer maps each to one id of the task vocabulary.
#include "analysis/chomsky_tasks.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace analysis {

namespace {

// Modular arithmetic as the reference (modulus 5, operators + - *, standard precedence).
constexpr int kModulus = 5;
constexpr int kPlus = kModulus, kMinus = kModulus + 1, kTimes = kModulus + 2;

// Evaluates digit (op digit)* mod 5 left to right: products first, then the signed sum; a '-'
// negates the product that follows it, as the reference replaces a - b by a + (-b).
int64_t modular_value(const std::vector<int>& s) {
    int64_t sum = 0, product = s.empty() ? 0 : s[0], sign = 1;
    for (size_t i = 1; i + 1 < s.size(); i += 2) {
        const int op = s[i], digit = s[i + 1];
        if (op == kTimes) {
            product = product * digit % kModulus;
        } else {
            sum = (sum + sign * product) % kModulus;
            product = digit;
            sign = op == kMinus ? -1 : 1;
        }
    }
    sum = (sum + sign * product) % kModulus;
    return (sum + kModulus) % kModulus;
}

}  // namespace

const std::vector<ChomskyTask>& chomsky_tasks() {
    static const std::vector<ChomskyTask> table = {
        {"even_pairs",
         "regular",
         2,
         {"0", "1"},
         "1 when the number of 01 and 10 pairs is odd (the first symbol differs from the last)"},
        {"parity_check", "regular", 2, {"0", "1"}, "the number of 1s mod 2"},
        {"cycle_navigation",
         "regular",
         5,
         {"0", "1", "2"},
         "final position on a 5-cycle from 0, symbol s moving by s - 1 (left, stay, right)"},
        {"modular_arithmetic",
         "regular",
         5,
         {"0", "1", "2", "3", "4", "+", "-", "*"},
         "the value mod 5 of digit (op digit)* with + - * at the usual precedence"},
        {"missing_duplicate",
         "cs",
         2,
         {"0", "1", "2", "3"},
         "the symbol replaced by 2 in a binary string written twice (odd lengths end in 3)"},
    };
    return table;
}

const ChomskyTask& chomsky_task(const std::string& name) {
    std::string names;
    for (const auto& t : chomsky_tasks()) {
        if (t.name == name) return t;
        names += (names.empty() ? "" : ", ") + t.name;
    }
    throw std::invalid_argument("unknown task '" + name + "' (tasks: " + names + ")");
}

uint64_t TaskRng::next() {
    // SplitMix64 (Steele, Lea, Flood 2014).
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t TaskRng::below(uint64_t n) {
    // Rejection of the top partial block: every residue equally likely.
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
}

int64_t task_label(const ChomskyTask& task, const std::vector<int>& s) {
    const std::string& n = task.name;
    if (n == "even_pairs") {
        int64_t changes = 0;
        for (size_t i = 1; i < s.size(); ++i) changes += s[i] != s[i - 1];
        return changes % 2;
    }
    if (n == "parity_check") {
        int64_t ones = 0;
        for (int v : s) ones += v;
        return ones % 2;
    }
    if (n == "cycle_navigation") {
        int64_t pos = 0;
        for (int v : s) pos += v - 1;
        return ((pos % 5) + 5) % 5;
    }
    if (n == "modular_arithmetic") return modular_value(s);
    if (n == "missing_duplicate") {
        // The half that holds the 2 is read from the other half at the same offset.
        const size_t half = s.size() / 2;
        if (half == 0) return 1;
        for (size_t i = 0; i < 2 * half; ++i)
            if (s[i] == 2) return s[i < half ? i + half : i - half];
        throw std::invalid_argument("missing_duplicate: no symbol 2 in the input");
    }
    throw std::invalid_argument("task_label: unknown task '" + n + "'");
}

std::vector<TaskExample> generate_task_examples(const ChomskyTask& task, int64_t min_length,
                                                int64_t max_length, int64_t count, uint64_t seed) {
    if (min_length < 1 || max_length < min_length)
        throw std::invalid_argument("task lengths must satisfy 1 <= min <= max, got [" +
                                    std::to_string(min_length) + ", " + std::to_string(max_length) +
                                    "]");
    TaskRng rng(seed);
    std::vector<TaskExample> out;
    out.reserve(static_cast<size_t>(std::max<int64_t>(count, 0)));
    for (int64_t k = 0; k < count; ++k) {
        int64_t length =
            min_length + static_cast<int64_t>(rng.below(uint64_t(max_length - min_length + 1)));
        std::vector<int> s;
        if (task.name == "modular_arithmetic") {
            if (length % 2 == 0) --length;
            for (int64_t i = 0; i < length; ++i)
                s.push_back(i % 2 == 0 ? int(rng.below(kModulus)) : kPlus + int(rng.below(3)));
        } else if (task.name == "missing_duplicate") {
            if (length == 1) {
                s = {1};
            } else {
                const int64_t half = length / 2;
                for (int64_t i = 0; i < half; ++i) s.push_back(int(rng.below(2)));
                for (int64_t i = 0; i < half; ++i) s.push_back(s[size_t(i)]);
                s[size_t(rng.below(uint64_t(2 * half)))] = 2;
                if (length % 2) s.push_back(3);
            }
        } else {
            const uint64_t n = task.symbols.size();
            for (int64_t i = 0; i < length; ++i) s.push_back(int(rng.below(n)));
        }
        TaskExample e;
        e.length = static_cast<int64_t>(s.size());
        e.label = task_label(task, s);
        for (size_t i = 0; i < s.size(); ++i) e.text += (i ? " " : "") + task.symbols[size_t(s[i])];
        out.push_back(std::move(e));
    }
    return out;
}

double task_chance(const ChomskyTask& task) { return 1.0 / task.num_classes; }

uint64_t task_stream_seed(uint64_t seed, uint64_t purpose, int64_t length) {
    TaskRng mix(seed * 0x100000001b3ULL ^ (purpose << 32) ^ static_cast<uint64_t>(length));
    mix.next();
    return mix.next();
}

}  // namespace analysis
