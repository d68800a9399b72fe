// Small text helpers shared by the engine's sources (private to engine/src).
#pragma once

#include <string>
#include <vector>

namespace engine::detail {

/// "a, b, c": lists of names in messages.
inline std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : std::string()) + v[i];
    return out;
}

}  // namespace engine::detail
