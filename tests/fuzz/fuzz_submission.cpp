// libFuzzer target for GLUE submission files (`tupe score`'s reader, analysis/submission.h). The
// first byte picks a task; the rest is the file. read_submission must either return rows or
// throw engine::InputError; rows it returns are then scored against a gold set made of their
// own indices, which must either give scores or throw InputError / std::invalid_argument.
// Crashes, sanitizer reports, hangs and std::terminate are bugs.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>

#include "analysis/submission.h"
#include "analysis/tasks.h"
#include "engine/errors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const auto& tasks = analysis::glue_tasks();
    const auto& task = tasks[data[0] % tasks.size()];
    const std::string& path = fuzz::scratch_path(".tsv");
    fuzz::write_file(path, data + 1, size - 1);
    std::vector<std::pair<std::string, std::string>> rows;
    try {
        rows = analysis::read_submission(path);
    } catch (const engine::InputError&) {
        return 0;
    }
    // The reader promises two non-empty fields per row.
    for (const auto& [index, prediction] : rows)
        if (index.empty() || prediction.empty()) __builtin_trap();
    if (rows.empty() || task.dev.empty()) return 0;
    // Gold labels for the indices the file names (the first 64), cycling through the labels.
    std::map<std::string, std::string> gold;
    for (const auto& row : rows) {
        if (gold.size() >= 64) break;
        const size_t i = gold.size();
        gold.emplace(row.first,
                     task.regression ? std::to_string(i % 6) : task.labels[i % task.labels.size()]);
    }
    try {
        analysis::score_submission(task.dev[0].column, rows, gold, task.labels, path);
    } catch (const engine::InputError&) {
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
