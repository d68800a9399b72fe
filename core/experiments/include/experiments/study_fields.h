// The study file's own keys as data, for forms: every key outside model/data/train (the top
// level, glue:, analysis:, extrapolation:, finetune:) with its kind, default and documentation,
// and a check of one value exactly as the loader reads it. The same table load_experiment reads
// study files through (core/experiments/src/study_fields.cpp).
#pragma once

#include <string>
#include <vector>

namespace experiments {

/// One key of the study file.
struct StudyFieldInfo {
    std::string key;  ///< "finetune.lrs"; no dot: a top-level key
    /// "text", "bool", "integer", "number", "list of ..." one of them; "" for the keys the
    /// study builder writes itself (variants, grid, pretrain_seeds)
    std::string kind;
    std::string default_text;  ///< its value in a default study ("" when not written back)
    std::string doc;           ///< one or two sentences
    std::string output;        ///< what it determines beside results: "analysis", "ablation", ...
    std::vector<std::string> choices;  ///< the values of a closed set; empty: any valid value
};

/// Every key, in the table's order.
const std::vector<StudyFieldInfo>& study_field_infos();

/// Whether the YAML value `yaml_value` ("[1e-3, 2e-3]", "true", "zero") is read for `key` as
/// the loader reads it: "" when it is, else the loader's message without a location
/// ("must be >= 1", "expected zero, mean or shuffle ..."), or "unknown key".
std::string check_study_value(const std::string& key, const std::string& yaml_value);

}  // namespace experiments
