// index.json to and from AnalysisIndex (see analysis_index.h), with nlohmann_json.
#include "analysis/analysis_index.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>
#include <variant>

#include "engine/errors.h"

namespace analysis {

namespace k = index_keys;
using nlohmann::json;

namespace {

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json index_or_null(int64_t v) { return v >= 0 ? json(v) : json(nullptr); }

/// Reads typed values out of one JSON object; errors name the file and the key path.
class Reader {
  public:
    Reader(const json& object, std::string where, const std::string& path)
        : object_(object), where_(std::move(where)), path_(path) {
        if (!object_.is_object()) fail(where_, "expected an object, got " + type(object_));
    }

    const json* find(const char* key) const {
        const auto it = object_.find(key);
        return it == object_.end() ? nullptr : &*it;
    }
    std::string name(const char* key) const { return where_.empty() ? key : where_ + "." + key; }

    void get(const char* key, std::string& out) const {
        if (const json* v = find(key)) out = string(*v, name(key));
    }
    void get(const char* key, bool& out) const {
        if (const json* v = find(key)) {
            if (!v->is_boolean()) fail(name(key), "expected true or false, got " + type(*v));
            out = v->get<bool>();
        }
    }
    void get(const char* key, int64_t& out) const {
        if (const json* v = find(key)) out = integer(*v, name(key));
    }
    void get(const char* key, double& out) const {
        if (const json* v = find(key)) {
            if (!v->is_number()) fail(name(key), "expected a number, got " + type(*v));
            out = v->get<double>();
        }
    }
    /// An integer, or -1 for null.
    void get_index(const char* key, int64_t& out) const {
        if (const json* v = find(key)) {
            if (!v->is_null() && !v->is_number_integer())
                fail(name(key), "expected an integer or null, got " + type(*v));
            out = v->is_null() ? -1 : integer(*v, name(key));
        }
    }
    /// The array at `key` (nullptr when absent).
    const json* array(const char* key) const {
        const json* v = find(key);
        if (v && !v->is_array()) fail(name(key), "expected an array, got " + type(*v));
        return v;
    }

    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        throw engine::InputError(path_, (key.empty() ? std::string() : key + ": ") + what);
    }
    std::string string(const json& v, const std::string& key) const {
        if (!v.is_string()) fail(key, "expected a string, got " + type(v));
        return v.get<std::string>();
    }
    int64_t integer(const json& v, const std::string& key) const {
        if (!v.is_number_integer()) fail(key, "expected an integer, got " + type(v));
        if (v.is_number_unsigned() &&
            v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            fail(key, "integer out of range");
        return v.get<int64_t>();
    }
    static std::string type(const json& v) {
        return v.is_number() ? (v.is_number_integer() ? "an integer" : "a number")
                             : std::string(v.type_name());
    }

  private:
    const json& object_;
    std::string where_;
    const std::string& path_;
};

std::string element(const std::string& where, size_t i) {
    return where + "[" + std::to_string(i) + "]";
}

/// The inverse of model_config_json into `c`; absent keys keep c's value, null reads as NaN
/// for a double, and the pre-zoo "rel_pos": true as relative_position "t5".
void read_index_config(const Reader& r, engine::ModelConfig& c) {
    bool rel_pos = false;  // index.json written before the zoo
    r.get(k::kRelPos, rel_pos);
    if (rel_pos) engine::set_legacy_rel_pos(c, true);
    engine::visit_model_fields(c, [&](const char* name, engine::ModelFieldRef field) {
        std::visit(
            [&](auto* value) {
                if constexpr (std::is_same_v<std::decay_t<decltype(*value)>, double>) {
                    if (const json* v = r.find(name); v && v->is_null()) {
                        *value = std::numeric_limits<double>::quiet_NaN();
                        return;
                    }
                }
                r.get(name, *value);
            },
            field);
    });
}

}  // namespace

std::string model_config_json(const engine::ModelConfig& config) {
    engine::ModelConfig copy = config;
    json out = json::object();
    engine::visit_model_fields(copy, [&](const char* name, engine::ModelFieldRef field) {
        std::visit(
            [&](auto* value) {
                if constexpr (std::is_same_v<std::decay_t<decltype(*value)>, double>)
                    out[name] = number_or_null(*value);
                else
                    out[name] = *value;
            },
            field);
    });
    return out.dump();
}

std::string write_index_json(const AnalysisIndex& index) {
    json out;  // std::map-ordered: the keys come out sorted
    out[k::kModel] = index.model;
    out[k::kVariant] = index.variant;
    out[k::kSize] = index.size;
    out[k::kConfig] = json::parse(model_config_json(index.config));
    out[k::kSentences] = index.sentences;
    out[k::kTokens] = index.tokens;
    out[k::kForwardPasses] = index.forward_passes;
    // No wall time: an analysis's files are a function of its settings and inputs, so the
    // same analysis hashes the same (job_identity.h, output_identity); the CLI prints timings.
    out[k::kAxes] = index.axes;
    out[k::kNotes] = index.notes;
    json skipped = json::array();
    for (const AnalysisIndexSkipped& s : index.skipped)
        skipped.push_back({{k::kWhat, s.what}, {k::kReason, s.reason}});
    out[k::kSkipped] = skipped;
    json files = json::array();
    for (const AnalysisIndexFile& e : index.files) {
        json f = {{k::kFile, e.file}, {k::kWhat, e.what}, {k::kDescription, e.description}};
        f[k::kLayer] = index_or_null(e.layer);
        f[k::kHead] = index_or_null(e.head);
        if (!e.shape.empty()) f[k::kShape] = e.shape;
        if (!e.label.empty()) f[k::kLabel] = e.label;
        if (!e.statistics.empty()) {
            json stats = json::object();
            for (const auto& [name, value] : e.statistics) stats[name] = number_or_null(value);
            f[k::kStatistics] = stats;
        }
        files.push_back(f);
    }
    out[k::kFiles] = files;
    return out.dump(1) + "\n";
}

AnalysisIndex parse_index_json(const std::string& text, const std::string& path) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a huge number
        throw engine::InputError(path, std::string("not JSON: ") + e.what());
    }
    if (!doc.is_object()) throw engine::InputError(path, "not a JSON object");
    const Reader top(doc, "", path);
    AnalysisIndex index;
    top.get(k::kModel, index.model);
    top.get(k::kVariant, index.variant);
    top.get(k::kSize, index.size);
    if (const json* config = top.find(k::kConfig)) {
        read_index_config(Reader(*config, k::kConfig, path), index.config);
    }
    top.get(k::kSentences, index.sentences);
    top.get(k::kTokens, index.tokens);
    top.get(k::kForwardPasses, index.forward_passes);
    top.get(k::kSeconds, index.seconds);
    top.get(k::kAxes, index.axes);
    if (const json* notes = top.array(k::kNotes))
        for (size_t i = 0; i < notes->size(); ++i)
            index.notes.push_back(top.string((*notes)[i], element(k::kNotes, i)));
    if (const json* skipped = top.array(k::kSkipped))
        for (size_t i = 0; i < skipped->size(); ++i) {
            const Reader r((*skipped)[i], element(k::kSkipped, i), path);
            AnalysisIndexSkipped s;
            r.get(k::kWhat, s.what);
            r.get(k::kReason, s.reason);
            index.skipped.push_back(std::move(s));
        }
    if (const json* files = top.array(k::kFiles))
        for (size_t i = 0; i < files->size(); ++i) {
            const std::string where = element(k::kFiles, i);
            const Reader r((*files)[i], where, path);
            AnalysisIndexFile f;
            r.get(k::kFile, f.file);
            r.get(k::kWhat, f.what);
            r.get(k::kDescription, f.description);
            r.get_index(k::kLayer, f.layer);
            r.get_index(k::kHead, f.head);
            if (const json* shape = r.array(k::kShape))
                for (size_t d = 0; d < shape->size(); ++d)
                    f.shape.push_back(r.integer((*shape)[d], element(r.name(k::kShape), d)));
            r.get(k::kLabel, f.label);
            if (const json* stats = r.find(k::kStatistics)) {
                const Reader s(*stats, r.name(k::kStatistics), path);
                for (auto it = stats->begin(); it != stats->end(); ++it) {
                    const json& v = it.value();
                    if (!v.is_null() && !v.is_number())
                        s.fail(s.name(it.key().c_str()),
                               "expected a number or null, got " + Reader::type(v));
                    f.statistics.emplace_back(
                        it.key(),
                        v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
                }
            }
            index.files.push_back(std::move(f));
        }
    return index;
}

AnalysisIndex read_index_json(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, std::string("cannot open: ") + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad())
        throw engine::InputError(path, "read failed: " + std::string(std::strerror(errno)));
    return parse_index_json(text.str(), path);
}

}  // namespace analysis
