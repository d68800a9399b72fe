// The study builder's design, written as an experiment file and read back (see study_design.h).
#include "experiments/study_design.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "engine/config_fields.h"
#include "experiments/config_loader.h"
#include "experiments/study_fields.h"

namespace experiments {

namespace design_text {

const char* const kSections[] = {"glue", "finetune", "analysis", "extrapolation"};

bool is_section(const std::string& key) {
    return std::find(std::begin(kSections), std::end(kSections), key) != std::end(kSections);
}

// The rows of the study-field table the design keeps as settings: every row read by the
// loader except the name (a field of the design).
bool is_setting(const std::string& key) {
    if (key == "name") return false;
    for (const auto& f : study_field_infos())
        if (f.key == key) return !f.kind.empty();
    return false;
}

size_t setting_order(const std::string& key) {
    const auto& infos = study_field_infos();
    for (size_t i = 0; i < infos.size(); ++i)
        if (infos[i].key == key) return i;
    return infos.size();
}

std::string flow_text(const YAML::Node& node) {
    YAML::Emitter out;
    out << YAML::Flow << node;
    return out.c_str();
}

std::string block_text(const std::string& key, const YAML::Node& node) {
    YAML::Emitter out;
    out << YAML::BeginMap << YAML::Key << key << YAML::Value << node << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

std::string list_text(const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + yaml_scalar_text(items[i]);
    return out + "]";
}

std::string last_part(const std::string& key) {
    const auto dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

// The opening comment block: the lines before the first content line that start with '#'.
std::string opening_comment(const std::string& text, size_t* lines_used) {
    std::string out;
    size_t pos = 0, used = 0;
    while (pos < text.size()) {
        const size_t end = std::min(text.find('\n', pos), text.size());
        const std::string line = text.substr(pos, end - pos);
        if (line.empty() || line[0] != '#') break;
        out += line.substr(line.size() > 1 && line[1] == ' ' ? 2 : 1) + "\n";
        ++used;
        pos = end + 1;
    }
    *lines_used = used;
    return out;
}

// Comment lines, or lines with a trailing comment, after the opening block.
int later_comments(const std::string& text, size_t skip) {
    int count = 0;
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        const size_t end = std::min(text.find('\n', pos), text.size());
        const std::string line = text.substr(pos, end - pos);
        const size_t first = line.find_first_not_of(' ');
        if (line_no++ >= skip && first != std::string::npos &&
            (line[first] == '#' || line.find(" #") != std::string::npos))
            ++count;
        pos = end + 1;
    }
    return count;
}

// The pretraining sections: preset and size to the design, every other scalar to `base`.
void read_base_section(const std::string& section, const YAML::Node& node, StudyDesign& d) {
    if (!node.IsMap()) {
        d.kept += block_text(section, node);
        d.notes.push_back(section + ": not a mapping; kept as written");
        return;
    }
    for (const auto& kv : node) {
        const std::string key = section + "." + kv.first.as<std::string>();
        if (!kv.second.IsScalar()) {
            d.notes.push_back(key + ": not a single value; dropped");
            continue;
        }
        if (key == "model.preset")
            d.preset = kv.second.Scalar();
        else if (key == "model.size")
            d.size = kv.second.Scalar();
        else
            d.base.emplace_back(key, kv.second.Scalar());
    }
}

// glue:, finetune:, analysis:, extrapolation: into settings.
void read_study_section(const std::string& section, const YAML::Node& node, StudyDesign& d) {
    if (section == "analysis") d.analysis = true;
    if (section == "extrapolation") d.extrapolation = true;
    if (node.IsNull()) return;
    if (!node.IsMap()) {
        d.notes.push_back(section + ": not a mapping; dropped");
        return;
    }
    for (const auto& kv : node) {
        const std::string key = section + "." + kv.first.as<std::string>();
        if (is_setting(key))
            d.settings.emplace_back(key, flow_text(kv.second));
        else
            d.notes.push_back(key + ": not a key of the study file; dropped");
    }
}

void read_grid(const YAML::Node& node, StudyDesign& d) {
    if (!node.IsMap()) {
        d.kept += block_text("grid", node);
        d.notes.push_back("grid: not a mapping of key: [values]; kept as written");
        return;
    }
    for (const auto& kv : node) {
        StudyFactor f{kv.first.as<std::string>(), {}};
        if (kv.second.IsScalar()) f.levels.push_back(kv.second.Scalar());
        for (const auto& v : kv.second)
            if (v.IsScalar()) f.levels.push_back(v.Scalar());
        d.factors.push_back(f);
    }
}

// One entry of variants: as factor (key, level) parts and its name; false when the form
// cannot express it (own seeds, finetune_seeds, a value that is not a scalar).
bool variant_parts(const YAML::Node& v, std::vector<std::pair<std::string, std::string>>* parts,
                   std::string* name) {
    if (v.IsScalar()) {
        parts->emplace_back("model.preset", v.Scalar());
        *name = v.Scalar();
        return true;
    }
    if (!v.IsMap()) return false;
    for (const auto& kv : v) {
        const std::string k = kv.first.as<std::string>();
        if (k != "name" && k != "preset" && k != "set") return false;
    }
    if (v["preset"]) {
        if (!v["preset"].IsScalar()) return false;
        parts->emplace_back("model.preset", v["preset"].Scalar());
    }
    if (const auto set = v["set"]) {
        if (!set.IsMap()) return false;
        for (const auto& kv : set) {
            if (!kv.second.IsScalar()) return false;
            parts->emplace_back(kv.first.as<std::string>(), kv.second.Scalar());
        }
    }
    if (v["name"] && !v["name"].IsScalar()) return false;
    *name = v["name"] ? v["name"].Scalar() : (v["preset"] ? v["preset"].Scalar() : "");
    return !parts->empty();
}

// variants: as chosen cells when every entry sets the same keys and is named by its levels.
bool read_cells(const YAML::Node& node, StudyDesign& d) {
    if (!node.IsSequence() || node.size() == 0) return false;
    std::vector<StudyFactor> factors;
    std::vector<std::vector<std::string>> cells;
    for (const auto& v : node) {
        std::vector<std::pair<std::string, std::string>> parts;
        std::string name;
        if (!variant_parts(v, &parts, &name)) return false;
        if (factors.empty())
            for (const auto& p : parts) factors.push_back({p.first, {}});
        if (parts.size() != factors.size()) return false;
        std::vector<std::string> cell;
        for (size_t i = 0; i < parts.size(); ++i) {
            if (parts[i].first != factors[i].key) return false;
            auto& levels = factors[i].levels;
            if (std::find(levels.begin(), levels.end(), parts[i].second) == levels.end())
                levels.push_back(parts[i].second);
            cell.push_back(parts[i].second);
        }
        if (cell_variant_name(factors, cell) != name) return false;
        cells.push_back(cell);
    }
    d.factors = factors;
    d.cells = cells;
    d.full_factorial = false;
    return true;
}

void read_seeds(const YAML::Node& node, StudyDesign& d) {
    try {
        if (node.IsScalar()) {
            d.seeds.push_back(node.as<uint64_t>());
        } else {
            for (const auto& s : node) d.seeds.push_back(s.as<uint64_t>());
        }
    } catch (const YAML::Exception&) {
        d.seeds.clear();
        d.kept += block_text("pretrain_seeds", node);
        d.notes.push_back("pretrain_seeds: not a list of seeds; kept as written");
    }
}

void write_settings(const StudyDesign& d, const std::string& section, std::string& out) {
    const std::string prefix = section + ".";
    std::string body;
    for (const auto& [key, value] : d.settings)
        if (key.compare(0, prefix.size(), prefix) == 0)
            body += "  " + key.substr(prefix.size()) + ": " + value + "\n";
    const bool block =
        (section == "analysis" && d.analysis) || (section == "extrapolation" && d.extrapolation);
    if (!body.empty())
        out += section + ":\n" + body;
    else if (block)
        out += section + ": {}\n";
}

void write_variants(const StudyDesign& d, std::string& out) {
    if (d.factors.empty()) return;
    if (d.full_factorial) {
        out += "grid:\n";
        for (const auto& f : d.factors) out += "  " + f.key + ": " + list_text(f.levels) + "\n";
        return;
    }
    out += "variants:\n";
    for (const auto& cell : d.cells) {
        out += "  - name: \"" + cell_variant_name(d.factors, cell) + "\"\n";
        std::string set;
        for (size_t i = 0; i < d.factors.size() && i < cell.size(); ++i) {
            if (d.factors[i].key == "model.preset")
                out += "    preset: " + yaml_scalar_text(cell[i]) + "\n";
            else
                set +=
                    (set.empty() ? "" : ", ") + d.factors[i].key + ": " + yaml_scalar_text(cell[i]);
        }
        if (!set.empty()) out += "    set: {" + set + "}\n";
    }
}

}  // namespace design_text

std::string StudyDesign::setting(const std::string& key) const {
    for (const auto& [k, v] : settings)
        if (k == key) return v;
    return "";
}

void StudyDesign::set_setting(const std::string& key, const std::string& value) {
    settings.erase(std::remove_if(settings.begin(), settings.end(),
                                  [&](const auto& kv) { return kv.first == key; }),
                   settings.end());
    if (value.empty()) return;
    settings.emplace_back(key, value);
    std::stable_sort(settings.begin(), settings.end(), [](const auto& a, const auto& b) {
        return design_text::setting_order(a.first) < design_text::setting_order(b.first);
    });
}

std::string yaml_scalar_text(const std::string& text) {
    const bool plain = !text.empty() && text.front() != '-' && text.front() != '@' &&
                       std::all_of(text.begin(), text.end(), [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                  c == '.' || c == '+' || c == '-' || c == '/' || c == '@' ||
                                  c == '=';
                       });
    if (plain || (text.size() > 1 && text.front() == '-' &&
                  std::isdigit(static_cast<unsigned char>(text[1]))))
        return text;
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string level_name_part(const std::string& key, const std::string& value) {
    return key == "model.preset" ? value : design_text::last_part(key) + "=" + value;
}

std::string cell_variant_name(const std::vector<StudyFactor>& factors,
                              const std::vector<std::string>& cell) {
    std::string name;
    for (size_t i = 0; i < factors.size() && i < cell.size(); ++i)
        name += (name.empty() ? "" : ",") + level_name_part(factors[i].key, cell[i]);
    return name;
}

std::vector<std::vector<std::string>> design_cells(const StudyDesign& d) {
    if (!d.full_factorial) return d.cells;
    std::vector<std::vector<std::string>> cells = {{}};
    for (const auto& f : d.factors) {
        std::vector<std::vector<std::string>> next;
        for (const auto& c : cells)
            for (const auto& level : f.levels) {
                auto longer = c;
                longer.push_back(level);
                next.push_back(longer);
            }
        cells = next;
    }
    return cells;
}

std::string write_study_design(const StudyDesign& d) {
    std::string out;
    size_t pos = 0;
    while (pos < d.comment.size()) {
        const size_t end = std::min(d.comment.find('\n', pos), d.comment.size());
        const std::string line = d.comment.substr(pos, end - pos);
        out += line.empty() ? "#\n" : "# " + line + "\n";
        pos = end + 1;
    }
    if (!d.name.empty()) out += "name: " + yaml_scalar_text(d.name) + "\n";
    design_text::write_variants(d, out);
    if (!d.seeds.empty()) {
        std::vector<std::string> seeds;
        for (uint64_t s : d.seeds) seeds.push_back(std::to_string(s));
        out += "pretrain_seeds: " + design_text::list_text(seeds) + "\n";
    }
    for (const char* section : {"model", "data", "train"}) {
        const std::string prefix = std::string(section) + ".";
        std::string body;
        if (prefix == "model.")
            body += "  preset: " + yaml_scalar_text(d.preset) +
                    "\n  size: " + yaml_scalar_text(d.size) + "\n";
        for (const auto& [key, value] : d.base)
            if (key.compare(0, prefix.size(), prefix) == 0)
                body += "  " + key.substr(prefix.size()) + ": " + yaml_scalar_text(value) + "\n";
        if (!body.empty()) out += std::string(section) + ":\n" + body;
    }
    for (const auto& [key, value] : d.settings)
        if (key.find('.') == std::string::npos && key != "database" && key != "runs_dir")
            out += key + ": " + value + "\n";
    for (const char* section : design_text::kSections) design_text::write_settings(d, section, out);
    for (const char* key : {"database", "runs_dir"})
        if (const std::string v = d.setting(key); !v.empty())
            out += std::string(key) + ": " + v + "\n";
    return out + d.kept;
}

StudyDesign read_study_design(const std::string& text, const std::string& name_for_messages) {
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
        throw ConfigError(name_for_messages, e.mark.line + 1, e.mark.column + 1, "",
                          "malformed YAML: " + e.msg);
    }
    StudyDesign d;
    d.preset = "bert-a";  // the loader's default when the file names none
    if (!root || root.IsNull()) return d;
    if (!root.IsMap())
        throw ConfigError(name_for_messages, 1, 1, "", "expected a mapping at the top level");
    size_t header_lines = 0;
    d.comment = design_text::opening_comment(text, &header_lines);
    if (const int n = design_text::later_comments(text, header_lines); n > 0)
        d.notes.push_back(std::to_string(n) +
                          " comment line(s) after the opening comment: not kept (the form "
                          "writes its own layout)");
    YAML::Node variants;
    bool grid = false, has_variants = false;
    for (const auto& kv : root) {
        const std::string key = kv.first.as<std::string>();
        if (key == "name" && kv.second.IsScalar())
            d.name = kv.second.Scalar();
        else if (key == "model" || key == "data" || key == "train")
            design_text::read_base_section(key, kv.second, d);
        else if (key == "grid")
            design_text::read_grid(kv.second, d), grid = true;
        else if (key == "variants")
            variants = kv.second, has_variants = true;
        else if (key == "pretrain_seeds")
            design_text::read_seeds(kv.second, d);
        else if (design_text::is_section(key))
            design_text::read_study_section(key, kv.second, d);
        else if (design_text::is_setting(key))
            d.settings.emplace_back(key, design_text::flow_text(kv.second));
        else {
            d.kept += design_text::block_text(key, kv.second);
            d.notes.push_back(key + ": not a key the form edits; kept as written");
        }
    }
    if (has_variants && (grid || !design_text::read_cells(variants, d))) {
        d.kept = design_text::block_text("variants", variants) + d.kept;
        d.notes.push_back(
            "variants: " +
            std::string(grid ? "beside a grid" : "entries the factors cannot express") +
            " (names of their own, their own seeds or finetune_seeds); kept as written, not "
            "shown as factors");
    }
    std::stable_sort(d.settings.begin(), d.settings.end(), [](const auto& a, const auto& b) {
        return design_text::setting_order(a.first) < design_text::setting_order(b.first);
    });
    return d;
}

std::string documented_defaults_yaml(const std::string& name) {
    std::string out =
        "# A new study: every key of the field tables at its documented default, commented out\n"
        "# with what it does (a study file holds only overrides: uncomment what you change).\n"
        "# docs/experiments.md, \"The study file\"; the study builder writes these files too.\n";
    out += "name: " + yaml_scalar_text(name) + "\n";
    out += "variants: [bert-a, tupe-a]   # presets, or {name, preset, set: {key: value}}\n";
    out += "# pretrain_seeds: [1, 2]      # every variant as V@seed1, V@seed2\n";
    std::string section;
    for (const auto& f : engine::config_field_infos()) {
        const auto dot = f.key.find('.');
        if (dot == std::string::npos) continue;  // out_dir: the runner's (runs_dir/<variant>)
        const std::string s = f.key.substr(0, dot);
        if (s != section) out += s + ":\n", section = s;
        const std::string key = f.key.substr(dot + 1);
        if (f.key == "data.corpus")
            out += "  corpus: data/brown/brown.txt   # " + f.doc + "\n";
        else if (f.key == "data.vocab")
            out += "  vocab: data/brown/vocab-8k.txt   # " + f.doc + "\n";
        else
            out += "  # " + key + ": " + yaml_scalar_text(f.default_text) + "   # " + f.doc + "\n";
    }
    section.clear();
    for (const auto& f : study_field_infos()) {
        if (f.kind.empty() || f.key == "name") continue;
        const auto dot = f.key.find('.');
        const std::string s = dot == std::string::npos ? "" : f.key.substr(0, dot);
        if (s != section && !s.empty()) out += "# " + s + ":\n";
        section = s;
        const std::string key = s.empty() ? f.key : "  " + f.key.substr(dot + 1);
        out += "# " + key + ": " + (f.default_text.empty() ? "" : f.default_text) + "   # " +
               f.doc + "\n";
    }
    return out;
}

}  // namespace experiments
