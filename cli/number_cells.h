// Numbers where NaN means "not measured": "-" in a text table, null in JSON (which has no NaN).
// Shared by the commands that print both (`tupe extrapolate`, `tupe ablate`).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/text_format.h"

namespace cli {

/// x with `digits` decimals, or "-" when it is not finite.
inline std::string fixed_or_dash(double x, int digits = 4) {
    return std::isfinite(x) ? analysis::fixed_number(x, digits) : "-";
}

/// x, or null when it is not finite.
inline nlohmann::json number_or_null(double x) {
    return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json();
}

}  // namespace cli
