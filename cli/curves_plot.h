// `tupe curves`: the validation points of several runs, and (Qt build) the figure drawn of them.
// The figure's data is built apart from its drawing, so a test can check what is drawn.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#if TUPE_WITH_QT
#include "plotting/plotting.h"
#endif

namespace cli {

/// Validation values of `tupe curves`: step -> run index (its RUN_DIR's position) -> value.
using CurveTable = std::map<long long, std::map<std::size_t, double>>;

#if TUPE_WITH_QT
/// The curves figure: one line per variant group (run directories named VARIANT@seedN are
/// pooled: the mean over seeds with a min-max band) at every step, step 0 (the untrained model,
/// ~log V) included, on a linear step axis; for the loss, the unigram floor and the bigram
/// reference of each distinct floor.txt in `dirs`, dashed.
plotting::LinePlot curves_plot(const std::string& metric, const std::vector<std::string>& names,
                               const std::vector<std::string>& dirs, const CurveTable& table);
#endif

}  // namespace cli
