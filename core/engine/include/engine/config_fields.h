// The pretraining config's fields as data, for forms and documentation: every key of
// config_keys() with its kind, its default, its documentation and, for a closed set of text
// values, the values (the presets, the sizes, the positional schemes...). Read from the one
// field table (core/engine/src/config_table.h), so a form built from it cannot miss a field.
#pragma once

#include <string>
#include <vector>

#include "engine/config.h"

namespace engine {

/// One settable field.
struct ConfigFieldInfo {
    enum class Kind { kText, kBool, kInteger, kNumber };
    std::string key;           ///< "model.hidden_size"
    Kind kind = Kind::kText;   ///< how the value is written: text, true/false, digits, a number
    std::string default_text;  ///< its value in a default PretrainConfig (bert-a at tiny)
    std::string doc;           ///< one or two sentences: what it does, its range
    std::vector<std::string> choices;  ///< the values of a closed set; empty: any valid value
};

/// Every field, in config_keys() order.
const std::vector<ConfigFieldInfo>& config_field_infos();

/// The field `key`, or nullptr for an unknown key.
const ConfigFieldInfo* find_config_field(const std::string& key);

/// Whether `value` may be given to `key` on top of `base`, checked as the YAML loader checks a
/// file (engine::set_config_value, then ModelConfig::validate and TrainConfig::validate):
/// "" when it may, else the loader's message ("model.num_attention_heads (3) must divide
/// hidden_size (32)"; "model.hidden_size: not a number: 'x'"). A model.preset or model.size
/// value rebuilds the base model first, as the loader does.
std::string check_config_value(const PretrainConfig& base, const std::string& key,
                               const std::string& value);

}  // namespace engine
