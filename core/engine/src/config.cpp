// Presets of the model family (TUPE_NOTES.md, "The variants") and sizes, config validation,
// and the flat text form of a config stored in checkpoints.
#include "engine/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "config_table.h"
#include "engine/position_scheme.h"
#include "engine/text_util.h"

namespace engine {

// The shortest decimal form that parses back to the same double ("0.1", not
// "0.10000000000000001"; "10000", not "1e+04"; "1e-6", not "1e-06"), so config.txt, the store
// and config.yaml read as the user would write them.
std::string format_double(double d) {
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.0f", d);
        return buf;
    }
    for (int precision = 1; precision <= 17; ++precision) {
        std::ostringstream os;
        os.precision(precision);
        os << d;
        std::string text = os.str();
        double back = 0;
        std::istringstream is(text);
        is >> back;
        if (is.fail() || back != d) continue;
        // "1e-06" -> "1e-6", "1e+20" -> "1e20" (the same number to the engine's parser).
        const auto e = text.find('e');
        if (e != std::string::npos) {
            std::string mantissa = text.substr(0, e), exponent = text.substr(e + 1);
            const bool negative = !exponent.empty() && exponent[0] == '-';
            if (!exponent.empty() && (exponent[0] == '-' || exponent[0] == '+'))
                exponent.erase(0, 1);
            exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
            text = mantissa + "e" + (negative ? "-" : "") + exponent;
        }
        return text;
    }
    std::ostringstream os;  // not reached: 17 significant digits always read back
    os.precision(17);
    os << d;
    return os.str();
}

void ModelConfig::validate() const {
    // Each message names the key, the rule and the value that broke it.
    auto fail = [](const std::string& msg) { throw std::invalid_argument("model." + msg); };
    auto got = [](auto v) {
        if constexpr (std::is_floating_point_v<decltype(v)>)
            return ", got " + format_double(v);
        else
            return ", got " + std::to_string(v);
    };
    if (vocab_size < 6) fail("vocab_size must be >= 6" + got(vocab_size));
    if (hidden_size <= 0) fail("hidden_size must be > 0" + got(hidden_size));
    if (num_hidden_layers <= 0) fail("num_hidden_layers must be > 0" + got(num_hidden_layers));
    if (num_attention_heads <= 0 || hidden_size % num_attention_heads != 0)
        fail("num_attention_heads (" + std::to_string(num_attention_heads) +
             ") must divide hidden_size (" + std::to_string(hidden_size) + ")");
    if (intermediate_size <= 0) fail("intermediate_size must be > 0" + got(intermediate_size));
    if (max_position_embeddings < 3)
        fail("max_position_embeddings must be >= 3" + got(max_position_embeddings));
    if (type_vocab_size < 0) fail("type_vocab_size must be >= 0" + got(type_vocab_size));
    if (hidden_dropout_prob < 0 || hidden_dropout_prob >= 1)
        fail("hidden_dropout_prob must be in [0, 1)" + got(hidden_dropout_prob));
    if (attention_probs_dropout_prob < 0 || attention_probs_dropout_prob >= 1)
        fail("attention_probs_dropout_prob must be in [0, 1)" + got(attention_probs_dropout_prob));
    if (!(attention_scale_factor > 0))
        fail("attention_scale_factor must be > 0" + got(attention_scale_factor));
    if (pad_token_id < 0 || pad_token_id >= vocab_size)
        fail("pad_token_id must be in [0, vocab_size " + std::to_string(vocab_size) + ")" +
             got(pad_token_id));
    if (norm != "layernorm" && norm != "rmsnorm")
        fail("norm: unknown value '" + norm + "' (expected layernorm, rmsnorm)");
    if (ffn != "gelu" && ffn != "geglu" && ffn != "swiglu")
        fail("ffn: unknown value '" + ffn + "' (expected gelu, geglu, swiglu)");
    if (skip_first_attention_norm && !pre_layernorm)
        fail(
            "skip_first_attention_norm needs pre_layernorm: true (post-LN has no attention "
            "input norm to skip)");
    if (local_window < 0)
        fail("local_window must be >= 0 (0 = no local layers)" + got(local_window));
    if (global_every < 1) fail("global_every must be >= 1" + got(global_every));
    // Like rope_base, read only by RoPE (and only in local layers): ignored elsewhere.
    if (rope_base_local != 0 && !(rope_base_local > 1))
        fail("rope_base_local must be > 1 (or 0 = rope_base)" + got(rope_base_local));
    describe_position(*this);  // the positional scheme, its fields and its modifiers
}

void TrainConfig::validate() const {
    auto at_least = [](const char* key, int64_t value, int64_t min, const char* meaning) {
        if (value < min)
            throw std::invalid_argument(std::string("train.") + key +
                                        " must be >= " + std::to_string(min) + meaning + ", got " +
                                        std::to_string(value));
    };
    at_least("steps", steps, 1, "");
    at_least("warmup_steps", warmup_steps, 0, " (0 = no warm-up)");
    at_least("eval_batches", eval_batches, 0, " (0 = the whole validation split)");
    at_least("threads", threads, 0, " (0 = the CPUs available)");
    if (!(lr >= 0)) throw std::invalid_argument("train.lr must be >= 0, got " + format_double(lr));
    if (schedule != "linear" && schedule != "wsd" && schedule != "wsd-sqrt")
        throw std::invalid_argument("train.schedule must be linear, wsd or wsd-sqrt, got '" +
                                    schedule + "'");
    if (!(decay_fraction > 0 && decay_fraction <= 1))
        throw std::invalid_argument("train.decay_fraction must be in (0, 1], got " +
                                    format_double(decay_fraction));
    if (!(clip_norm >= 0))
        throw std::invalid_argument("train.clip_norm must be >= 0 (0 = no clipping), got " +
                                    format_double(clip_norm));
}

namespace {

// One line per preset (TUPE_NOTES.md, "The variants"; docs/zoo.md, "Presets and what they
// cost"): its schemes, by their rows (engine/position_scheme.h), and the fields it sets. Scale
// factors as in the reference: TUPE scales both terms by 1/sqrt(2d) and BERT-Ad's four terms by
// 1/sqrt(4d) (TUPE_NOTES.md).
struct Preset {
    const char* name;
    Scheme absolute, relative;
    void (*fields)(ModelConfig& c);  // besides the two scheme fields; null: none
    bool modern = false;             // on ModernBERT's backbone
};

void tupe_scale(ModelConfig& c) { c.attention_scale_factor = 2.0; }
void tupe_reset(ModelConfig& c) { c.untie_cls = true, c.attention_scale_factor = 2.0; }
void per_layer(ModelConfig& c) { c.shared_pos_term = false; }
void cls_reset(ModelConfig& c) { c.untie_cls = true; }

const std::vector<Preset>& preset_table() {
    using S = Scheme;
    static const std::vector<Preset> table = {
        {"bert-a", S::kInput, S::kNone, nullptr},
        {"bert-r", S::kInput, S::kT5, nullptr},
        {"tupe-a", S::kUntied, S::kNone, tupe_reset},
        {"tupe-r", S::kUntied, S::kT5, tupe_reset},
        {"tupe-a-tie-cls", S::kUntied, S::kNone, tupe_scale},
        {"bert-ad", S::kDecoupled, S::kNone,
         [](ModelConfig& c) { c.shared_pos_term = false, c.attention_scale_factor = 4.0; }},
        // The table scaled as fairseq and Cramming do (scale_input_positions).
        {"sinusoidal", S::kSinusoidal, S::kNone,
         [](ModelConfig& c) { c.scale_input_positions = true; }},
        {"nope", S::kNone, S::kNone, nullptr},  // Kazemnejad et al. 2023: the order-blind control
        {"t5", S::kNone, S::kT5, nullptr},      // TUPE Eq. 5 without the input table
        {"shaw", S::kNone, S::kShaw, per_layer},
        {"shaw-kq", S::kNone, S::kShawKeyQuery, per_layer},
        {"rope", S::kNone, S::kRope, nullptr},
        {"rope-cls", S::kNone, S::kRope, cls_reset},  // RoPE + TUPE's [CLS] reset (new)
        {"alibi", S::kNone, S::kAlibi, nullptr},
        {"alibi-cls", S::kNone, S::kAlibi, cls_reset},  // ALiBi + TUPE's [CLS] reset (new)
        {"deberta", S::kNone, S::kDeberta,
         [](ModelConfig& c) { c.shared_pos_term = false, c.attention_scale_factor = 3.0; }},
        {"fire", S::kNone, S::kFire, per_layer},
        {"kerple-log", S::kNone, S::kKerpleLog, per_layer},
        {"kerple-power", S::kNone, S::kKerplePower, per_layer},
        {"cope", S::kNone, S::kCope, per_layer},
        // ModernBERT's positions: RoPE, 160k global, 10k local.
        {"modern-rope", S::kNone, S::kRope,
         [](ModelConfig& c) { c.rope_base = 160000, c.rope_base_local = 10000; }, true},
        // The paper's comparison on the modern backbone.
        {"modern-tupe-a", S::kUntied, S::kNone, tupe_reset, true},
        {"modern-tupe-r", S::kUntied, S::kT5, tupe_reset, true},
        {"modern-alibi", S::kNone, S::kAlibi, nullptr, true},
        {"modern-bert-a", S::kInput, S::kNone, nullptr, true},
    };
    return table;
}

}  // namespace

const std::vector<std::string>& model_presets() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& p : preset_table()) out.emplace_back(p.name);
        return out;
    }();
    return names;
}

const std::vector<std::string>& model_sizes() {
    static const std::vector<std::string> names = {"tiny", "small", "base"};
    return names;
}

ModelConfig make_model_config(const std::string& preset, const std::string& size) {
    ModelConfig c;
    c.preset = preset;
    c.size = size;
    if (size == "tiny") {
        c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 2;
        c.intermediate_size = 64, c.max_position_embeddings = 128;
    } else if (size == "small") {
        c.hidden_size = 256, c.num_hidden_layers = 4, c.num_attention_heads = 4;
        c.intermediate_size = 1024, c.max_position_embeddings = 128;
    } else if (size == "base") {
        c.hidden_size = 768, c.num_hidden_layers = 12, c.num_attention_heads = 12;
        c.intermediate_size = 3072, c.max_position_embeddings = 512;
    } else {
        throw std::invalid_argument("unknown model size '" + size + "' (expected " +
                                    join(model_sizes()) + ")");
    }
    const auto& table = preset_table();
    const auto it =
        std::find_if(table.begin(), table.end(), [&](const Preset& p) { return preset == p.name; });
    if (it == table.end())
        throw std::invalid_argument("unknown model preset '" + preset + "' (expected " +
                                    join(model_presets()) + ")");
    c.absolute_position = scheme_row(it->absolute).name;
    c.relative_position = scheme_row(it->relative).name;
    if (it->fields) it->fields(c);
    if (it->modern) {
        // ModernBERT's backbone (Warner et al. 2024, sec. 2.1.1-2.1.2): pre-LN, a final norm,
        // no attention norm in layer 0, LayerNorm and Linear layers without biases, GeGLU, and
        // every third layer global (layer 0 among them), the others local. ModernBERT's window
        // is 128 tokens (64 each side) on 1024 to 8192 tokens; here max_position_embeddings / 8
        // each side: 64 at base (512), 16 at tiny and small (128), a window of about T/4.
        c.pre_layernorm = true, c.skip_first_attention_norm = true;
        c.bias = false, c.ffn = "geglu";
        c.local_window = c.max_position_embeddings / 8, c.global_every = 3;
    }
    return c;
}

std::string describe_backbone(const ModelConfig& c) {
    std::string s = c.pre_layernorm ? "pre-LN" : "post-LN";
    if (c.attention_input_norm(0) != c.pre_layernorm) s += " (no attention norm in layer 0)";
    s += c.norm == "rmsnorm" ? ", RMSNorm" : ", LayerNorm";
    s += c.bias ? ", biases" : ", no biases";
    s += c.ffn == "geglu" ? ", GeGLU FFN" : c.ffn == "swiglu" ? ", SwiGLU FFN" : ", GELU FFN";
    if (c.local_window > 0 && c.global_every > 1) {
        s += ", local attention (+-" + std::to_string(c.local_window) + " tokens) but every " +
             std::to_string(c.global_every) +
             (c.global_every == 2   ? "nd"
              : c.global_every == 3 ? "rd"
                                    : "th") +
             " layer global";
        if (c.rope_base_local > 0)
            s += ", RoPE base " + format_double(c.rope_base_local) + " local / " +
                 format_double(c.rope_base) + " global";
    } else {
        s += ", global attention";
    }
    return s;
}

namespace {

using detail::visit_fields;
using detail::visit_model;

std::string format_value(const std::string& s) { return s; }
std::string format_value(bool b) { return b ? "true" : "false"; }
std::string format_value(int64_t i) { return std::to_string(i); }
std::string format_value(uint64_t i) { return std::to_string(i); }
std::string format_value(double d) { return format_double(d); }

void parse_value(const std::string& s, std::string& out) { out = s; }
void parse_value(const std::string& s, bool& out) {
    if (s == "true")
        out = true;
    else if (s == "false")
        out = false;
    else
        throw std::invalid_argument("expected true or false, got '" + s + "'");
}
template <typename T>
void parse_number(const std::string& s, T& out) {
    std::istringstream is(s);
    is >> out;
    if (is.fail() || !is.eof()) throw std::invalid_argument("not a number: '" + s + "'");
}
// An integer field takes digits only. A number in another form ("1e12", "2.5") or past the
// type's range is named for what it is, with the range, rather than "not a number".
template <typename T>
void parse_integer(const std::string& s, T& out) {
    std::istringstream is(s);
    is >> out;
    if (!is.fail() && is.eof()) return;
    double d = 0;
    std::istringstream as_double(s);
    as_double >> d;
    if (as_double.fail() || !as_double.eof())
        throw std::invalid_argument("not a number: '" + s + "'");
    const std::string range = "an integer from " + std::to_string(std::numeric_limits<T>::min()) +
                              " to " + std::to_string(std::numeric_limits<T>::max());
    if (!std::isfinite(d) || d < static_cast<double>(std::numeric_limits<T>::min()) ||
        d >= static_cast<double>(std::numeric_limits<T>::max()))
        throw std::invalid_argument("out of range: '" + s + "' (" + range + ")");
    if (d != std::floor(d))
        throw std::invalid_argument("not an integer: '" + s + "' (" + range + ")");
    char digits[32];
    std::snprintf(digits, sizeof digits, "%.0f", d);
    throw std::invalid_argument("not an integer: '" + s + "' (write it in digits, " + digits +
                                "; " + range + ")");
}
void parse_value(const std::string& s, int64_t& out) { parse_integer(s, out); }
void parse_value(const std::string& s, uint64_t& out) {
    // istream happily wraps "-1" to 2^64 - 1; a seed must be written as a non-negative number.
    if (s.find('-') != std::string::npos)
        throw std::invalid_argument("expected a non-negative integer, got '" + s + "'");
    parse_integer(s, out);
}
void parse_value(const std::string& s, double& out) { parse_number(s, out); }

}  // namespace

std::vector<std::string> config_keys() {
    std::vector<std::string> keys;
    PretrainConfig c;
    visit_fields(c,
                 [&](const char* key, auto&, const detail::FieldDoc&) { keys.emplace_back(key); });
    return keys;
}

void visit_model_fields(ModelConfig& config,
                        const std::function<void(const char* name, ModelFieldRef field)>& visit) {
    constexpr size_t kPrefix = sizeof("model.") - 1;
    visit_model(config, [&](const char* key, auto& field, const detail::FieldDoc&) {
        visit(key + kPrefix, ModelFieldRef(&field));
    });
}

const std::vector<std::string>& legacy_config_keys() {
    static const std::vector<std::string> keys = {"model.rel_pos"};
    return keys;
}

void set_legacy_rel_pos(ModelConfig& config, bool on) {
    const char* t5 = scheme_row(Scheme::kT5).name;
    if (on)
        config.relative_position = t5;
    else if (legacy_rel_pos(config))
        config.relative_position = scheme_row(Scheme::kNone).name;
}

bool legacy_rel_pos(const ModelConfig& config) {
    return find_scheme(SchemeAxis::kRelative, config.relative_position) == Scheme::kT5;
}

const std::map<std::string, std::string>& config_keys_omitted_at_default() {
    // The modern backbone's fields, at BERT's values (ModelConfig's defaults), randomized
    // positions, off, BERT's linear schedule, and validation masked as training is.
    static const std::map<std::string, std::string> keys = {
        {"model.norm", "layernorm"},    {"model.bias", "true"},
        {"model.ffn", "gelu"},          {"model.skip_first_attention_norm", "false"},
        {"model.local_window", "0"},    {"model.global_every", "3"},
        {"model.rope_base_local", "0"}, {"model.randomized_positions_max", "0"},
        {"train.schedule", "linear"},   {"train.decay_fraction", "0.2"},
        {"data.eval_mask_prob", "0"}};
    return keys;
}

std::string config_to_text(const PretrainConfig& config) {
    std::string out;
    PretrainConfig copy = config;
    const auto& omitted = config_keys_omitted_at_default();
    visit_fields(copy, [&](const char* key, auto& value, const detail::FieldDoc&) {
        const std::string text = format_value(value);
        if (const auto it = omitted.find(key); it != omitted.end() && it->second == text) return;
        out += key;
        out += " = " + text + "\n";
    });
    return out;
}

namespace {

// YAML double-quoted scalar (YAML 1.2, sec. 7.3.1): every string is quoted, so "none", "~",
// "" or a path with ": " or " #" reads back as the same string.
std::string yaml_value(const std::string& s) {
    std::string out = "\"";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out + "\"";
}
std::string yaml_value(bool b) { return format_value(b); }
std::string yaml_value(int64_t i) { return format_value(i); }
std::string yaml_value(uint64_t i) { return format_value(i); }
std::string yaml_value(double d) { return format_double(d); }

}  // namespace

std::string config_to_yaml(const PretrainConfig& config) {
    std::string out =
        "# The resolved config of this run, every key at its value: `tupe pretrain --config\n"
        "# config.yaml --out DIR` trains the same run again into DIR.\n";
    std::string section;
    PretrainConfig copy = config;
    visit_fields(copy, [&](const char* key, auto& value, const detail::FieldDoc&) {
        const std::string k = key;
        const auto dot = k.find('.');
        const std::string s = dot == std::string::npos ? "" : k.substr(0, dot);
        if (s != section) {
            if (!s.empty()) out += s + ":\n";
            section = s;
        }
        out += (s.empty() ? k : "  " + k.substr(dot + 1)) + ": " + yaml_value(value) + "\n";
    });
    return out;
}

void set_config_value(PretrainConfig& config, const std::string& key, const std::string& value) {
    if (key == "model.rel_pos") {
        // Before the positional zoo the T5 bias was a flag; checkpoints and YAML files from
        // then still say so.
        bool on = false;
        parse_value(value, on);
        set_legacy_rel_pos(config.model, on);
        return;
    }
    bool found = false;
    visit_fields(config, [&](const char* k, auto& field, const detail::FieldDoc&) {
        if (key != k) return;
        found = true;
        parse_value(value, field);
    });
    if (!found) throw std::out_of_range("unknown config key '" + key + "'");
}

std::string get_config_value(const PretrainConfig& config, const std::string& key) {
    if (key == "model.rel_pos") return format_value(legacy_rel_pos(config.model));
    std::string out;
    bool found = false;
    PretrainConfig copy = config;
    visit_fields(copy, [&](const char* k, auto& field, const detail::FieldDoc&) {
        if (key != k) return;
        found = true;
        out = format_value(field);
    });
    if (!found) throw std::out_of_range("unknown config key '" + key + "'");
    return out;
}

PretrainConfig parse_config_text(const std::string& text) {
    PretrainConfig c;
    std::istringstream is(text);
    std::string line;
    long line_no = 0;
    while (std::getline(is, line)) {
        ++line_no;
        if (line.empty() || line[0] == '#') continue;
        auto eq = line.find(" = ");
        if (eq == std::string::npos)
            throw std::invalid_argument("config line " + std::to_string(line_no) +
                                        ": expected 'key = value'");
        std::string key = line.substr(0, eq), value = line.substr(eq + 3);
        try {
            set_config_value(c, key, value);
        } catch (const std::out_of_range&) {
            // Tolerated: checkpoints written by newer versions stay readable.
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("config line " + std::to_string(line_no) + " (" + key +
                                        "): " + e.what());
        }
    }
    return c;
}

}  // namespace engine
