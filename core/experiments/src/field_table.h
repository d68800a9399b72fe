// The one way a study file's own keys are read (experiment files, experiment.cpp; length-
// generalisation studies, lengthgen_study.cpp): a YAML reader whose every error names the file,
// line, column and key, and a table of fields, one row per dotted key, each with how its value
// is read and checked and how it is written back as text. A section's allowed keys, the
// nearest-key hints and the errors come from the table, so a key cannot be read without being
// allowed or allowed without being read. Private to the store library.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "experiments/config_loader.h"

namespace experiments::detail {

inline long line_of(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().line + 1; }
inline long col_of(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().column + 1; }

/// Reads scalars and lists of one file; every failure is a ConfigError naming the file, the
/// node's line and column and the key.
class Reader {
  public:
    explicit Reader(std::string path) : path_(std::move(path)) {}

    [[noreturn]] void fail(const YAML::Node& at, const std::string& key,
                           const std::string& message) const {
        throw ConfigError(path_, line_of(at), col_of(at), key, message);
    }

    /// Every key of `map` is in `allowed`, else the nearest allowed one is suggested.
    void check_keys(const YAML::Node& map, const std::string& section,
                    const std::vector<std::string>& allowed) const {
        if (!map.IsMap()) fail(map, section, "expected a mapping");
        for (const auto& e : map) {
            const std::string k = e.first.as<std::string>();
            if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
                const std::string near = nearest_key(k, allowed);
                fail(e.first, section.empty() ? k : section + "." + k,
                     "unknown key" + (near.empty() ? "" : ", did you mean '" + near + "'?"));
            }
        }
    }

    template <typename T>
    T scalar(const YAML::Node& n, const std::string& key, const char* what) const {
        if (!n.IsScalar()) fail(n, key, std::string("expected ") + what);
        try {
            return n.as<T>();
        } catch (const YAML::Exception&) {
            fail(n, key, std::string("expected ") + what + ", got '" + n.Scalar() + "'");
        }
    }

    /// A non-empty list of T, or one scalar as a list of one.
    template <typename T>
    std::vector<T> list(const YAML::Node& n, const std::string& key, const char* what) const {
        std::vector<T> out;
        if (n.IsScalar()) {
            out.push_back(scalar<T>(n, key, what));
            return out;
        }
        if (!n.IsSequence() || n.size() == 0)
            fail(n, key, std::string("expected a non-empty list of ") + what);
        for (const auto& item : n) out.push_back(scalar<T>(item, key, what));
        return out;
    }

    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

/// How one field of `Spec` is read from YAML and written back as text.
template <class Spec>
struct FieldIO {
    /// Reads the node of `key` into the spec; empty: read elsewhere (a row that is only allowed).
    std::function<void(const YAML::Node&, const Reader&, const std::string& key, Spec&)> read;
    std::function<std::string(const Spec&)> text;  ///< empty: not written back
    /// How the value is written, for forms: "text", "bool", "integer", "number", or "list of "
    /// one of them; "" for a row read elsewhere.
    const char* kind = "";
};

/// One row of a field table.
template <class Spec>
struct Field {
    const char* key;  ///< "train.lr"; no dot: a top-level key
    FieldIO<Spec> io;
    /// What the field determines, for identities: e.g. "analysis" (experiment.cpp, study_settings).
    const char* output = "";
    const char* doc = "";  ///< One or two sentences for forms and tooltips.
    /// The values of a closed set (forms offer them as a list); empty: any the reader accepts.
    std::vector<std::string> choices = {};
};

inline std::string value_text(const std::string& v) { return v; }
inline std::string value_text(bool v) { return v ? "true" : "false"; }
inline std::string value_text(int64_t v) { return std::to_string(v); }
inline std::string value_text(uint64_t v) { return std::to_string(v); }
inline std::string value_text(double v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
}
template <typename T>
std::string value_text(const std::vector<T>& values) {
    std::string out;
    for (const T& v : values) out += (out.empty() ? "" : ",") + value_text(v);
    return out;
}

template <class Spec, typename T>
using FieldRef = std::function<T&(Spec&)>;

/// The kind of a value of type T, as FieldIO::kind names it.
template <typename T>
constexpr const char* kind_of() {
    if constexpr (std::is_same_v<T, bool>) return "bool";
    if constexpr (std::is_floating_point_v<T>) return "number";
    if constexpr (std::is_integral_v<T>) return "integer";
    return "text";
}
template <typename T>
constexpr const char* list_kind_of() {
    if constexpr (std::is_same_v<T, bool>) return "list of bool";
    if constexpr (std::is_floating_point_v<T>) return "list of number";
    if constexpr (std::is_integral_v<T>) return "list of integer";
    return "list of text";
}

/// A scalar of type T (`what` names it in errors), kept when `ok` accepts it, else `range`.
template <class Spec, typename T>
FieldIO<Spec> scalar_field(FieldRef<Spec, T> ref, const char* what, bool (*ok)(const T&) = nullptr,
                           const char* range = "") {
    return {[=](const YAML::Node& n, const Reader& r, const std::string& key, Spec& s) {
                const T value = r.scalar<T>(n, key, what);
                if (ok && !ok(value)) r.fail(n, key, range);
                ref(s) = value;
            },
            [=](const Spec& s) { return value_text(ref(const_cast<Spec&>(s))); }, kind_of<T>()};
}

/// A non-empty list of T (or one scalar), every item accepted by `ok`, else `range`.
template <class Spec, typename T>
FieldIO<Spec> list_field(FieldRef<Spec, std::vector<T>> ref, const char* what,
                         bool (*ok)(const T&) = nullptr, const char* range = "") {
    return {[=](const YAML::Node& n, const Reader& r, const std::string& key, Spec& s) {
                std::vector<T> values = r.list<T>(n, key, what);
                if (ok)
                    for (const T& v : values)
                        if (!ok(v)) r.fail(n, key, range);
                ref(s) = std::move(values);
            },
            [=](const Spec& s) { return value_text(ref(const_cast<Spec&>(s))); },
            list_kind_of<T>()};
}

/// The keys of `fields` allowed in `section` ("" = the top level, where `sections` are keys).
template <class Spec>
std::vector<std::string> section_keys(const std::vector<Field<Spec>>& fields,
                                      const std::string& section,
                                      const std::vector<std::string>& sections) {
    std::vector<std::string> keys;
    const std::string prefix = section.empty() ? "" : section + ".";
    for (const auto& f : fields) {
        const std::string key = f.key;
        if (section.empty() ? key.find('.') == std::string::npos
                            : key.compare(0, prefix.size(), prefix) == 0)
            keys.push_back(key.substr(prefix.size()));
    }
    if (section.empty()) keys.insert(keys.end(), sections.begin(), sections.end());
    return keys;
}

/// Checks the keys of each of `sections` and reads every field `root` sets, in table order.
template <class Spec>
void read_fields(const YAML::Node& root, const Reader& r, const std::vector<Field<Spec>>& fields,
                 const std::vector<std::string>& sections, Spec& spec) {
    for (const auto& section : sections)
        if (const YAML::Node node = root[section])
            r.check_keys(node, section, section_keys(fields, section, sections));
    for (const auto& f : fields) {
        if (!f.io.read) continue;
        const std::string key = f.key;
        const auto dot = key.find('.');
        // A key of an absent section is absent (indexing an absent node would throw). The node
        // is constructed, never assigned: YAML::Node's assignment writes into what it refers to.
        const auto at = [&]() -> YAML::Node {
            if (dot == std::string::npos) return root[key];
            const YAML::Node section = root[key.substr(0, dot)];
            return section ? section[key.substr(dot + 1)] : section;
        };
        if (const YAML::Node node = at()) f.io.read(node, r, key, spec);
    }
}

}  // namespace experiments::detail
