// The config's fields as data (see config_fields.h), from the one field table.
#include "engine/config_fields.h"

#include <stdexcept>
#include <type_traits>

#include "config_table.h"

namespace engine {

const std::vector<ConfigFieldInfo>& config_field_infos() {
    static const std::vector<ConfigFieldInfo> infos = [] {
        std::vector<ConfigFieldInfo> out;
        PretrainConfig defaults;
        detail::visit_fields(
            defaults, [&](const char* key, auto& field, const detail::FieldDoc& doc) {
                using T = std::decay_t<decltype(field)>;
                ConfigFieldInfo info;
                info.key = key;
                info.kind = std::is_same_v<T, bool>          ? ConfigFieldInfo::Kind::kBool
                            : std::is_floating_point_v<T>    ? ConfigFieldInfo::Kind::kNumber
                            : std::is_same_v<T, std::string> ? ConfigFieldInfo::Kind::kText
                                                             : ConfigFieldInfo::Kind::kInteger;
                info.default_text = get_config_value(defaults, key);
                info.doc = doc.text;
                if (doc.choices) info.choices = doc.choices();
                out.push_back(std::move(info));
            });
        return out;
    }();
    return infos;
}

const ConfigFieldInfo* find_config_field(const std::string& key) {
    for (const auto& f : config_field_infos())
        if (f.key == key) return &f;
    return nullptr;
}

std::string check_config_value(const PretrainConfig& base, const std::string& key,
                               const std::string& value) {
    PretrainConfig c = base;
    try {
        if (key == "model.preset" || key == "model.size") {
            // As the loader: the preset and size build the base model, the rest goes on top.
            const bool preset = key == "model.preset";
            ModelConfig rebuilt =
                make_model_config(preset ? value : c.model.preset, preset ? c.model.size : value);
            rebuilt.vocab_size = c.model.vocab_size;
            c.model = rebuilt;
        } else {
            set_config_value(c, key, value);
        }
    } catch (const std::out_of_range&) {
        return key + ": unknown key";
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        return what.rfind(key, 0) == 0 ? what : key + ": " + what;
    }
    try {
        c.model.validate();
        c.train.validate();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

}  // namespace engine
