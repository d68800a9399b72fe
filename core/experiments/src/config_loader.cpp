// YAML -> engine::PretrainConfig: walks the yaml-cpp node tree, checks every key against
// engine::config_keys() (suggesting the nearest one), builds the base model from its preset
// and size, applies the scalars with engine::set_config_value, then the --set overrides.
#include "experiments/config_loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

namespace experiments {

namespace {

std::string format_what(const std::string& file, long line, long column, const std::string& key,
                        const std::string& message, bool key_in_message) {
    std::string out = file;
    if (line > 0) {
        out += ":" + std::to_string(line);
        if (column > 0) out += ":" + std::to_string(column);
    }
    if (!key.empty() && !key_in_message) out += ": " + key;
    return out + ": " + message;
}

}  // namespace

ConfigError::ConfigError(const std::string& file, long line, long column, const std::string& key,
                         const std::string& message, bool key_in_message)
    : std::runtime_error(format_what(file, line, column, key, message, key_in_message)),
      file_(file),
      line_(line),
      column_(column),
      key_(key),
      message_(message) {}

namespace {

std::string to_lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Optimal string alignment distance: Levenshtein plus adjacent transpositions, so the
// commonest typo ("trian") costs one edit.
size_t edit_distance(const std::string& a, const std::string& b) {
    const size_t n = a.size(), m = b.size();
    std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
    for (size_t i = 0; i <= n; ++i) d[i][0] = i;
    for (size_t j = 0; j <= m; ++j) d[0][j] = j;
    for (size_t i = 1; i <= n; ++i) {
        for (size_t j = 1; j <= m; ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[n][m];
}

std::string join(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& s : names) out += (out.empty() ? "" : ", ") + s;
    return out;
}

bool contains_name(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

std::string did_you_mean(const std::string& suggestion) {
    return suggestion.empty() ? "" : ", did you mean '" + suggestion + "'?";
}

// The field name of a key: "train.lr" -> "lr", "out_dir" -> "out_dir".
std::string field_of(const std::string& key) {
    const auto dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

const KeyAlias* find_alias(const std::string& name) {
    const std::string lowered = to_lower(name);
    for (const auto& a : key_aliases())
        if (a.name == lowered) return &a;
    return nullptr;
}

std::string alias_hint(const KeyAlias& a, const std::string& name) {
    const std::string said = "; the " + a.origin + " name " + name;
    if (a.key.empty()) return said + " has no key here: " + a.note;
    return said + " is " + a.key + a.note + " here";
}

const char* kind_name(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Map: return "a mapping";
        case YAML::NodeType::Sequence: return "a sequence";
        case YAML::NodeType::Scalar: return "a scalar";
        case YAML::NodeType::Null: return "nothing";
        case YAML::NodeType::Undefined: break;
    }
    return "an undefined node";
}

long line_of(const YAML::Mark& mark) { return mark.is_null() ? 0 : mark.line + 1; }
long column_of(const YAML::Mark& mark) { return mark.is_null() ? 0 : mark.column + 1; }

/// One "section.key = value" to apply, from the file or from a --set override.
struct Setting {
    std::string key;
    std::string value;
    long line = 0;  // 1-based position of the key in the file (0 for overrides)
    long column = 0;
    std::string override_text;  // "key=value" when it came from --set
};

class Loader {
  public:
    explicit Loader(std::string name, std::vector<std::string> foreign_keys = {})
        : name_(std::move(name)), keys_(engine::config_keys()), foreign_(std::move(foreign_keys)) {
        // Old files' keys are read (set_config_value maps them) but never suggested.
        for (const auto& k : engine::legacy_config_keys()) legacy_.push_back(k);
    }

    engine::PretrainConfig load(const std::string& yaml_text,
                                const std::vector<std::string>& overrides) {
        YAML::Node root;
        try {
            root = YAML::Load(yaml_text);
        } catch (const YAML::Exception& e) {
            fail_at(e.mark, "", "malformed YAML: " + e.msg);
        }
        return load(root, overrides);
    }

    engine::PretrainConfig load(const YAML::Node& root, const std::vector<std::string>& overrides) {
        read_yaml(root);
        for (const auto& text : overrides) read_override(text);
        return build();
    }

  private:
    static const std::vector<std::string>& top_level_names() {
        static const std::vector<std::string> names = {"model", "data", "train", "out_dir"};
        return names;
    }

    [[noreturn]] void fail_at(const YAML::Mark& mark, const std::string& key,
                              const std::string& message) const {
        throw ConfigError(name_, line_of(mark), column_of(mark), key, message);
    }

    [[noreturn]] void fail_at(const Setting& s, const std::string& message) const {
        if (!s.override_text.empty())
            throw ConfigError("--set " + s.override_text, 0, 0, s.key, message, true);
        throw ConfigError(name_, s.line, s.column, s.key, message);
    }

    // True when the field is a bool (its default text form is true/false).
    bool is_bool_key(const std::string& key) const {
        const std::string v = engine::get_config_value(engine::PretrainConfig{}, key);
        return v == "true" || v == "false";
    }

    void read_yaml(const YAML::Node& root) {
        if (!root.IsDefined() || root.IsNull()) return;  // an empty file: all defaults
        if (!root.IsMap())
            fail_at(root.Mark(), "",
                    std::string("expected a mapping (model:, data:, train:, out_dir:) at the "
                                "top level, got ") +
                        kind_name(root));
        std::map<std::string, YAML::Mark> seen;
        for (const auto& entry : root) {
            const std::string name = key_text(entry.first, "");
            check_duplicate(seen, name, entry.first.Mark());
            if (contains_name(foreign_, name)) continue;  // the caller's own keys (experiments)
            if (name == "out_dir") {
                add_scalar(name, entry.first, entry.second);
            } else if (name == "model" || name == "data" || name == "train") {
                read_section(name, entry.second);
            } else {
                fail_at(entry.first.Mark(), name, unknown_top_level_message(name));
            }
        }
    }

    void read_section(const std::string& section, const YAML::Node& node) {
        if (node.IsNull()) return;  // "train:" with nothing under it
        if (!node.IsMap())
            fail_at(node.Mark(), section,
                    std::string("expected a mapping of keys, got ") + kind_name(node));
        std::map<std::string, YAML::Mark> seen;
        for (const auto& entry : node) {
            const std::string path = section + "." + key_text(entry.first, section);
            check_duplicate(seen, path, entry.first.Mark());
            if (!contains_name(keys_, path) && !contains_name(legacy_, path))
                fail_at(entry.first.Mark(), path, "unknown key" + unknown_key_hint(path));
            add_scalar(path, entry.first, entry.second);
        }
    }

    std::string key_text(const YAML::Node& key, const std::string& section) const {
        if (!key.IsScalar())
            fail_at(key.Mark(), section,
                    std::string("expected a plain key, got ") + kind_name(key));
        return key.Scalar();
    }

    void check_duplicate(std::map<std::string, YAML::Mark>& seen, const std::string& key,
                         const YAML::Mark& mark) const {
        auto [it, inserted] = seen.emplace(key, mark);
        if (!inserted)
            fail_at(
                mark, key,
                "duplicate key (first given at line " + std::to_string(line_of(it->second)) + ")");
    }

    void add_scalar(const std::string& key, const YAML::Node& key_node, const YAML::Node& value) {
        if (value.IsNull()) fail_at(key_node.Mark(), key, "missing value");
        if (!value.IsScalar())
            fail_at(value.Mark(), key, std::string("expected a value, got ") + kind_name(value));
        Setting s;
        s.key = key;
        s.value = value.Scalar();
        // YAML 1.2 core booleans; the engine itself reads only true/false.
        if (is_bool_key(key)) {
            if (s.value == "True" || s.value == "TRUE") s.value = "true";
            if (s.value == "False" || s.value == "FALSE") s.value = "false";
        }
        // Point value errors at the value ("abc" for a number), not at the key.
        s.line = line_of(value.Mark());
        s.column = column_of(value.Mark());
        settings_.push_back(std::move(s));
    }

    std::string unknown_top_level_message(const std::string& name) const {
        if (contains_name(keys_, name) && name.find('.') != std::string::npos) {
            const auto dot = name.find('.');
            return "unknown top-level key; write it nested, '" + name.substr(dot + 1) +
                   ":' under '" + name.substr(0, dot) + ":'";
        }
        std::vector<std::string> names = top_level_names();
        names.insert(names.end(), foreign_.begin(), foreign_.end());
        const std::string expected = "unknown top-level key (expected " + join(names) + ")";
        // Another toolkit's name ("max_steps:") before any edit-distance guess.
        if (const KeyAlias* alias = find_alias(name)) return expected + alias_hint(*alias, name);
        std::string suggestion = nearest_key(name, names);
        if (suggestion.empty()) {
            // A bare field at the top level ("lr:") belongs under its section.
            for (const auto& key : keys_)
                if (key.size() > name.size() + 1 &&
                    key.compare(key.size() - name.size() - 1, std::string::npos, "." + name) == 0) {
                    suggestion = key;
                    break;
                }
        }
        return expected + did_you_mean(suggestion);
    }

    void read_override(const std::string& text) {
        const auto eq = text.find('=');
        std::string key = eq == std::string::npos ? text : text.substr(0, eq);
        key.erase(0, key.find_first_not_of(" \t"));
        key.erase(key.find_last_not_of(" \t") + 1);
        if (eq == std::string::npos || key.empty())
            throw ConfigError("--set " + text, 0, 0, "", "expected key=value, e.g. train.lr=1e-4");
        Setting s;
        s.key = key;
        s.value = text.substr(eq + 1);
        s.override_text = text;
        if (!contains_name(keys_, key) && !contains_name(legacy_, key))
            fail_at(s, "unknown key '" + key + "'" + unknown_key_hint(key));
        settings_.push_back(std::move(s));
    }

    // The last setting of `key` (the one that wins), or nullptr.
    const Setting* last_setting(const std::string& key) const {
        for (auto it = settings_.rbegin(); it != settings_.rend(); ++it)
            if (it->key == key) return &*it;
        return nullptr;
    }

    std::string checked_name(const std::string& key, const std::string& what,
                             const std::string& fallback,
                             const std::vector<std::string>& valid) const {
        const Setting* s = last_setting(key);
        if (!s) return fallback;
        if (!contains_name(valid, s->value))
            fail_at(*s, "unknown model " + what + " '" + s->value + "' (expected " + join(valid) +
                            ")" + did_you_mean(nearest_key(s->value, valid)));
        return s->value;
    }

    engine::PretrainConfig build() const {
        engine::PretrainConfig config;
        const std::string preset =
            checked_name("model.preset", "preset", "bert-a", engine::model_presets());
        const std::string size = checked_name("model.size", "size", "tiny", engine::model_sizes());
        try {
            config.model = engine::make_model_config(preset, size);
        } catch (const std::invalid_argument& e) {
            throw ConfigError(name_, 0, 0, "model.preset", e.what(), true);
        }
        // Everything else on top of the preset: the file's keys, then the overrides, so a
        // preset switch from --set keeps the file's other model keys.
        for (const auto& s : settings_) {
            if (s.key == "model.preset" || s.key == "model.size") continue;
            try {
                engine::set_config_value(config, s.key, s.value);
            } catch (const std::invalid_argument& e) {
                fail_at(s, e.what());
            } catch (const std::out_of_range&) {
                fail_at(s, "unknown key" + unknown_key_hint(s.key));
            }
        }
        try {
            config.model.validate();
        } catch (const std::invalid_argument& e) {
            fail_validation(e.what(), "invalid model config: ", false);
        }
        try {
            config.train.validate();
        } catch (const std::invalid_argument& e) {
            fail_validation(e.what(), "", true);
        }
        return config;
    }

    // validate() messages start with the offending key ("model.num_attention_heads (3) must
    // divide ..."): point at the line that set it when the file did. `one_key`: the check reads
    // that key alone, so a --set that gave it is named as the culprit.
    [[noreturn]] void fail_validation(const std::string& message, const std::string& prefix,
                                      bool one_key) const {
        size_t end = 0;
        while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) ||
                                        message[end] == '_' || message[end] == '.'))
            ++end;
        const std::string key =
            contains_name(keys_, message.substr(0, end)) ? message.substr(0, end) : "";
        const Setting* s = key.empty() ? nullptr : last_setting(key);
        const std::string text = prefix + message;
        if (s && s->override_text.empty())
            throw ConfigError(name_, s->line, s->column, key, text, true);
        if (s && one_key) throw ConfigError("--set " + s->override_text, 0, 0, key, text, true);
        if (s)
            throw ConfigError(name_, 0, 0, key, text + " (after --set " + s->override_text + ")",
                              true);
        throw ConfigError(name_, 0, 0, key, text, true);
    }

    std::string name_;
    std::vector<std::string> keys_;
    std::vector<std::string> legacy_;  // engine::legacy_config_keys()
    std::vector<std::string> foreign_;
    std::vector<Setting> settings_;
};

}  // namespace

engine::PretrainConfig load_pretrain_config_from_string(const std::string& yaml_text,
                                                        const std::string& name_for_messages,
                                                        const std::vector<std::string>& overrides) {
    return Loader(name_for_messages).load(yaml_text, overrides);
}

engine::PretrainConfig load_pretrain_config_from_node(
    const YAML::Node& root, const std::string& name_for_messages,
    const std::vector<std::string>& overrides, const std::vector<std::string>& foreign_keys) {
    return Loader(name_for_messages, foreign_keys).load(root, overrides);
}

engine::PretrainConfig load_pretrain_config(const std::string& path,
                                            const std::vector<std::string>& overrides) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError(path, 0, 0, "", "cannot open config file");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw ConfigError(path, 0, 0, "", "cannot read config file");
    return load_pretrain_config_from_string(text.str(), path, overrides);
}

const std::vector<KeyAlias>& key_aliases() {
    // HF: transformers' TrainingArguments, BertConfig and run_mlm.py's data arguments; fairseq:
    // its command-line options with '_' for '-' (fairseq/dataclass/configs.py, the Adam and
    // polynomial_decay options). Names that are our own field names (lr, seed, batch_size,
    // weight_decay, adam_beta1 ...) need no alias: a misplaced field is found by its name.
    static const std::vector<KeyAlias> aliases = {
        {"max_steps", "HF", "train.steps", ""},
        {"max_update", "fairseq", "train.steps", ""},
        {"total_num_update", "fairseq", "train.steps", ""},
        {"learning_rate", "HF", "train.lr", ""},
        {"per_device_train_batch_size", "HF", "train.batch_size", ""},
        {"max_sentences", "fairseq", "train.batch_size", ""},
        {"warmup_updates", "fairseq", "train.warmup_steps", ""},
        {"gradient_accumulation_steps", "HF", "train.grad_accum", ""},
        {"update_freq", "fairseq", "train.grad_accum", ""},
        {"adam_betas", "fairseq", "train.adam_beta1", " and train.adam_beta2"},
        {"adam_epsilon", "HF", "train.adam_eps", ""},
        {"max_grad_norm", "HF", "train.clip_norm", ""},
        {"eval_steps", "HF", "train.eval_interval", ""},
        {"validate_interval_updates", "fairseq", "train.eval_interval", ""},
        {"save_steps", "HF", "train.checkpoint_interval", ""},
        {"save_interval_updates", "fairseq", "train.checkpoint_interval", ""},
        {"logging_steps", "HF", "train.log_interval", ""},
        {"fp16", "HF and fairseq", "train.dtype", ": fp16"},
        {"bf16", "HF and fairseq", "train.dtype", ": bf16"},
        {"no_cuda", "HF", "train.device", ": cpu"},
        {"use_cpu", "HF", "train.device", ": cpu"},
        {"cpu", "fairseq", "train.device", ": cpu"},
        {"lr_scheduler_type", "HF", "",
         "the schedule is a linear warm-up over train.warmup_steps, then a linear decay to 0 at "
         "train.steps"},
        {"lr_scheduler", "fairseq", "",
         "the schedule is a linear warm-up over train.warmup_steps, then a linear decay to 0 at "
         "train.steps"},
        {"encoder_layers", "fairseq", "model.num_hidden_layers", ""},
        {"encoder_embed_dim", "fairseq", "model.hidden_size", ""},
        {"encoder_attention_heads", "fairseq", "model.num_attention_heads", ""},
        {"encoder_ffn_embed_dim", "fairseq", "model.intermediate_size", ""},
        {"dropout", "fairseq", "model.hidden_dropout_prob", ""},
        {"attention_dropout", "fairseq", "model.attention_probs_dropout_prob", ""},
        {"encoder_normalize_before", "fairseq", "model.pre_layernorm", ""},
        {"max_seq_length", "HF", "data.max_seq_len", ""},
        {"tokens_per_sample", "fairseq", "data.max_seq_len", ""},
        {"mlm_probability", "HF", "data.mask_prob", ""},
        {"train_file", "HF", "data.corpus", ""},
        {"output_dir", "HF", "out_dir", ""},
        {"save_dir", "fairseq", "out_dir", ""},
    };
    return aliases;
}

std::string unknown_key_hint(const std::string& key) {
    const std::string name = field_of(key);
    if (const KeyAlias* alias = find_alias(name)) return alias_hint(*alias, name);
    const std::vector<std::string> keys = engine::config_keys();
    // A field of another section ("model.lr"): the key that has that field.
    for (const auto& k : keys)
        if (k != key && field_of(k) == name) return did_you_mean(k);
    return did_you_mean(nearest_key(key, keys));
}

std::string nearest_key(const std::string& key, const std::vector<std::string>& candidates) {
    const std::string lowered = to_lower(key);
    const size_t limit = std::max<size_t>(1, key.size() / 3);
    std::string best;
    size_t best_distance = limit + 1;
    for (const auto& candidate : candidates) {
        const size_t d = edit_distance(lowered, to_lower(candidate));
        if (d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    return best;
}

}  // namespace experiments
