// The study file's own keys as one table (study_fields.cpp): every key outside model/data/train,
// how it is read and checked, what it determines and its documentation. experiment.cpp reads
// study files through it; study_fields.h shows it to forms. Private to the store library.
#pragma once

#include <string>
#include <vector>

#include "experiments/experiment.h"
#include "field_table.h"

namespace experiments::detail {

/// A study's or a variant's name becomes a folder (runs_dir/<name>, runs_dir/<variant>) and
/// part of every job's name: one path component, printable.
constexpr const char* kSafeNameRule =
    "must be one folder name: no '/' or '\\', not '.' or '..', no control characters";
/// Whether `name` obeys kSafeNameRule.
bool safe_name(const std::string& name);

/// Every row, section by section: the top level, glue:, analysis:, extrapolation:, finetune:.
const std::vector<Field<ExperimentSpec>>& study_fields();

}  // namespace experiments::detail
