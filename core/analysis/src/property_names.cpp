// The one list of positional property names (analysis/property_names.h).
#include "analysis/property_names.h"

namespace analysis {

const std::vector<std::string>& property_names() {
    static const std::vector<std::string> names = {"positional_share",
                                                   "static_share",
                                                   "monotonicity_left",
                                                   "monotonicity_right",
                                                   "translation_invariance",
                                                   "symmetry",
                                                   "rank90",
                                                   "toeplitz_residual",
                                                   "locality",
                                                   "attention_symmetry",
                                                   "mean_distance",
                                                   "entropy"};
    return names;
}

}  // namespace analysis
