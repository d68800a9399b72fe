// libFuzzer target for the GLUE readers (experiments/glue_data.h). The first byte picks the
// task (the nine GLUE tasks and the synthetic ones) and the format (TSV or HF JSON-lines); the
// rest is the file. A bad file must end in engine::InputError (or another std::exception with
// a message); crashes, sanitizer reports, hangs and std::terminate are bugs.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "engine/errors.h"
#include "experiments/glue_data.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const auto& tasks = experiments::glue_tasks();
    const uint8_t selector = data[0];
    const auto& task = tasks[(selector >> 1) % tasks.size()];
    const bool jsonl = selector & 1;
    const std::string& path = fuzz::scratch_path(jsonl ? ".jsonl" : ".tsv");
    fuzz::write_file(path, data + 1, size - 1);
    try {
        const experiments::Split split = experiments::read_glue_file(task, path);
        // Every example the reader accepts must carry a label of the task's label set (or a
        // score for regression): the readers promise it, so check it here.
        for (const auto& ex : split.examples) {
            if (task.regression) continue;
            bool known = false;
            for (const auto& l : task.labels) known = known || l == ex.label;
            if (!known) __builtin_trap();
        }
    } catch (const engine::InputError&) {
    } catch (const std::exception&) {
    }
    return 0;
}
