// Small text helpers every layer shares (engine_core, so the torch-free core, the engine, the
// analysis, the store, the CLI and the app can all include it).
#pragma once

#include <string>
#include <vector>

namespace engine {

/// "a, b, c": lists of names in messages; `sep` between the items.
inline std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : std::string()) + items[i];
    return out;
}

}  // namespace engine
