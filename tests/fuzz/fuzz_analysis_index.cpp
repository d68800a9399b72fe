// libFuzzer target for index.json, the table of contents of `tupe analyze`
// (analysis/analysis_index.h). The input is the file's text: parse_index_json must return an
// index or throw engine::InputError; an index it returns must survive a round trip, i.e.
// writing it and parsing that text gives the same text again. Crashes, sanitizer reports,
// hangs and a text that changes on the second trip are bugs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "analysis/analysis_index.h"
#include "engine/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    analysis::AnalysisIndex index;
    try {
        index = analysis::parse_index_json(text, "index.json");
    } catch (const engine::InputError&) {
        return 0;
    }
    const std::string once = analysis::write_index_json(index);
    const std::string twice =
        analysis::write_index_json(analysis::parse_index_json(once, "index.json"));
    if (once != twice) __builtin_trap();
    return 0;
}
