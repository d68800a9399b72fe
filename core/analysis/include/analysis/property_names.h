// The names of the positional properties (analysis/properties.h defines each), in the order of
// every table and file: torch-free, so the desktop app (app/workbench/core/properties_data)
// and the analysis layer share one list.
#pragma once

#include <string>
#include <vector>

namespace analysis {

/// "positional_share", "static_share", ..., "entropy": the order of every table and file.
const std::vector<std::string>& property_names();

}  // namespace analysis
