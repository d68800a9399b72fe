// Loading of experiment files (see experiment.h). The pretraining part is read by the same
// loader as `tupe pretrain` configs, so both report errors the same way.
#include "experiments/experiment.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "experiments/config_loader.h"
#include "experiments/study_design.h"
#include "field_table.h"
#include "study_table.h"

namespace experiments {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kVariantKeys = {"name", "preset", "set", "seeds", "finetune_seeds"};

using detail::col_of;
using detail::kSafeNameRule;
using detail::line_of;
using detail::Reader;
using detail::safe_name;
using detail::study_fields;

std::string value_text(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : ""; }

}  // namespace

namespace {

// Fraction 0 is step 0 (the initialised model) where `zero` allows it; any other fraction
// is at least step 1.
std::vector<int64_t> steps_of(const std::vector<double>& fractions, const Variant& v,
                              bool zero = false) {
    std::set<int64_t> steps;
    for (double f : fractions)
        steps.insert(zero && f == 0
                         ? 0
                         : std::max<int64_t>(
                               1, std::llround(f * static_cast<double>(v.config.train.steps))));
    return {steps.begin(), steps.end()};
}

}  // namespace

std::vector<int64_t> ExperimentSpec::checkpoint_steps(const Variant& v) const {
    return steps_of(checkpoints, v);
}

std::vector<int64_t> ExperimentSpec::analysis_steps(const Variant& v) const {
    return analysis.enabled ? steps_of(analysis.checkpoints, v, true) : std::vector<int64_t>{};
}

std::vector<int64_t> ExperimentSpec::kept_steps(const Variant& v) const {
    std::vector<int64_t> steps;
    if (!analysis.enabled || analysis.keep_every <= 0) return steps;
    for (int64_t step = 0; step < v.config.train.steps; step += analysis.keep_every)
        steps.push_back(step);
    steps.push_back(v.config.train.steps);
    return steps;
}

std::string variant_group(const std::string& full_name) {
    // A run beside a changed one is NAME~FINGERPRINT8 (runner.h, bind_plan): same group.
    std::string name = full_name;
    const auto tilde = name.rfind('~');
    if (tilde != std::string::npos && tilde > 0 && name.size() - tilde == 9 &&
        std::all_of(name.begin() + static_cast<long>(tilde) + 1, name.end(),
                    [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
        name.resize(tilde);
    const auto at = name.rfind("@seed");
    if (at == std::string::npos || at == 0 || at + 5 == name.size()) return name;
    for (size_t i = at + 5; i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return name;
    return name.substr(0, at);
}

namespace {

// The sections of the study file with keys of their own in study_fields().
const std::vector<std::string> kStudySections = {"glue", "analysis", "extrapolation", "finetune"};

// The keys allowed in `section` ("" = the top level, beside model/data/train).
std::vector<std::string> study_keys(const std::string& section) {
    return detail::section_keys(study_fields(), section, kStudySections);
}

// Reads every key of study_fields() the file sets, after checking each section's keys; turns
// on the analysis and the extrapolation when their sections are present.
void read_study_fields(const YAML::Node& root, const Reader& r, ExperimentSpec& spec) {
    detail::read_fields(root, r, study_fields(), kStudySections, spec);
    if (spec.name.empty()) spec.name = fs::path(r.path()).stem().string();
    if (!safe_name(spec.name)) r.fail(root, "name", "'" + spec.name + "' " + kSafeNameRule);
    if (spec.runs_dir.empty()) spec.runs_dir = (fs::path("runs") / spec.name).string();
    // A seed or task listed twice would be one job counted twice.
    if (const auto seeds = root["finetune"] ? root["finetune"]["seeds"] : YAML::Node())
        if (std::set<uint64_t>(spec.finetune.seeds.begin(), spec.finetune.seeds.end()).size() !=
            spec.finetune.seeds.size())
            r.fail(seeds, "finetune.seeds", "seeds must be distinct");
    if (const auto tasks = root["glue"] ? root["glue"]["tasks"] : YAML::Node()) {
        std::set<std::string> seen;
        for (const auto& t : spec.glue.tasks) {
            std::string key = t;
            for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (!seen.insert(key).second)
                r.fail(tasks, "glue.tasks", "task '" + t + "' is listed twice");
        }
    }
    spec.analysis.enabled = static_cast<bool>(root["analysis"]);
    spec.extrapolation.enabled = static_cast<bool>(root["extrapolation"]);
    if (root["analysis"] && root["analysis"]["corpus"] && root["analysis"]["text"])
        r.fail(root["analysis"]["text"], "analysis.text", "give corpus or text, not both");
}

// A variant before its config is loaded: its name, its overrides and where it was declared.
struct PendingVariant {
    std::string name;
    std::vector<std::string> overrides;
    YAML::Node at;
    bool own_seeds = false;       ///< the entry lists `seeds`, which replace pretrain_seeds
    std::vector<uint64_t> seeds;  ///< the entry's own pretraining seeds
    std::vector<uint64_t>
        finetune_seeds;  ///< the entry's own fine-tuning seeds (empty: the study's)
};

// Reads a list of distinct pretraining seeds at `node`.
std::vector<uint64_t> read_seed_list(const YAML::Node& node, const Reader& r,
                                     const std::string& key) {
    std::vector<uint64_t> seeds = r.list<uint64_t>(node, key, "non-negative integers");
    if (seeds.empty() && key != "pretrain_seeds") r.fail(node, key, "expected at least one seed");
    if (std::set<uint64_t>(seeds.begin(), seeds.end()).size() != seeds.size())
        r.fail(node, key, "seeds must be distinct");
    return seeds;
}

// Reads one entry of `variants`: a preset name or {name, preset, set, seeds, finetune_seeds}.
PendingVariant read_one_variant(const YAML::Node& v, const Reader& r) {
    PendingVariant p;
    p.at = v;
    if (v.IsScalar()) {
        p.name = v.Scalar();
        p.overrides.push_back("model.preset=" + v.Scalar());
        return p;
    }
    r.check_keys(v, "variants", kVariantKeys);
    if (v["preset"])
        p.overrides.push_back("model.preset=" +
                              r.scalar<std::string>(v["preset"], "variants.preset", "a preset"));
    if (const auto set = v["set"]) {
        if (!set.IsMap()) r.fail(set, "variants.set", "expected a mapping of key: value");
        for (const auto& kv : set)
            p.overrides.push_back(kv.first.as<std::string>() + "=" + value_text(kv.second));
    }
    if (v["seeds"]) {
        p.own_seeds = true;
        p.seeds = read_seed_list(v["seeds"], r, "variants.seeds");
    }
    if (v["finetune_seeds"])
        p.finetune_seeds = read_seed_list(v["finetune_seeds"], r, "variants.finetune_seeds");
    p.name = v["name"] ? r.scalar<std::string>(v["name"], "variants.name", "a name")
                       : (v["preset"] ? v["preset"].Scalar() : "");
    if (p.name.empty()) r.fail(v, "variants", "a variant needs a name or a preset");
    return p;
}

// Reads the `variants` list, in its order.
std::vector<PendingVariant> read_variant_list(const YAML::Node& vs, const Reader& r) {
    if (!vs.IsSequence())
        r.fail(vs, "variants",
               "expected a list of presets or {name, preset, set, seeds, finetune_seeds}");
    std::vector<PendingVariant> pending;
    for (const auto& v : vs) pending.push_back(read_one_variant(v, r));
    return pending;
}

// Expands `grid` (key: [values]) into its cartesian product, the first key varying slowest.
std::vector<PendingVariant> expand_variant_grid(const YAML::Node& grid, const Reader& r) {
    if (!grid.IsMap() || grid.size() == 0)
        r.fail(grid, "grid", "expected a mapping of key: [values]");
    std::vector<std::pair<std::string, std::vector<std::string>>> axes;
    for (const auto& kv : grid)
        axes.emplace_back(
            kv.first.as<std::string>(),
            r.list<std::string>(kv.second, "grid." + kv.first.as<std::string>(), "values"));
    // The product is checked before expanding: a few long axes would otherwise make
    // millions of variants (found by tests/fuzz/fuzz_experiment_yaml: a hang, then OOM).
    constexpr size_t kMaxGridVariants = 1000;
    size_t count = 1;
    for (const auto& axis : axes)
        if ((count *= axis.second.size()) > kMaxGridVariants)
            r.fail(grid, "grid",
                   "more than " + std::to_string(kMaxGridVariants) +
                       " variants (the product of the value counts)");
    std::vector<PendingVariant> combos = {PendingVariant{"", {}, grid, false, {}, {}}};
    for (const auto& [key, values] : axes) {
        std::vector<PendingVariant> next;
        for (const auto& c : combos)
            for (const auto& value : values) {
                PendingVariant p = c;
                p.overrides.push_back(key + "=" + value);
                p.name += (p.name.empty() ? "" : ",") + level_name_part(key, value);
                next.push_back(p);
            }
        combos = next;
    }
    return combos;
}

// Reads `pretrain_seeds` and applies them to `pending` (one variant per seed); an entry's own
// `seeds` replace them for that entry (more seeds where a comparison is undecided). One naming
// rule: a variant carries @seedN whenever its seeds are listed (by the study or the entry),
// however many, so a variant's seed 4 pairs with another's seed 4 and a study of seed 2 alone
// names the same job as a study of seeds 1 and 2 (plan_binding.cpp adopts runs stored under
// the older rule, which named a lone seed's variant without it). Returns each variant's group.
std::vector<std::string> apply_pretrain_seeds(YAML::Node& root, const Reader& r,
                                              ExperimentSpec& spec,
                                              std::vector<PendingVariant>& pending) {
    if (root["pretrain_seeds"])
        spec.pretrain_seeds = read_seed_list(root["pretrain_seeds"], r, "pretrain_seeds");
    std::vector<std::string> groups;
    std::vector<PendingVariant> seeded;
    for (const auto& p : pending) {
        const std::vector<uint64_t>& seeds = p.own_seeds ? p.seeds : spec.pretrain_seeds;
        if (seeds.empty()) {
            seeded.push_back(p);
            groups.push_back(p.name);
            continue;
        }
        for (uint64_t seed : seeds) {
            PendingVariant q = p;
            q.name += "@seed" + std::to_string(seed);
            q.overrides.push_back("train.seed=" + std::to_string(seed));
            seeded.push_back(q);
            groups.push_back(p.name);
        }
    }
    pending = seeded;
    return groups;
}

// Loads each pending variant's pretraining config (command-line `overrides` first) into
// spec.variants; a config error without a line of its own points at the variant.
void build_variants(const YAML::Node& root, const Reader& r,
                    const std::vector<std::string>& overrides,
                    const std::vector<PendingVariant>& pending,
                    const std::vector<std::string>& groups, ExperimentSpec& spec) {
    const std::string& path = r.path();
    std::set<std::string> names;
    for (size_t i = 0; i < pending.size(); ++i) {
        const PendingVariant& p = pending[i];
        if (!names.insert(p.name).second)
            r.fail(p.at, "variants", "duplicate variant name '" + p.name + "'");
        if (!safe_name(p.name))
            r.fail(p.at, "variants", "variant name '" + p.name + "' " + kSafeNameRule);
        Variant v;
        v.name = p.name;
        v.group = groups[i];
        v.overrides = p.overrides;
        v.finetune_seeds = p.finetune_seeds;
        std::vector<std::string> all = overrides;
        all.insert(all.end(), p.overrides.begin(), p.overrides.end());
        try {
            v.config = load_pretrain_config_from_node(root, path, all, study_keys(""));
        } catch (const ConfigError& e) {
            // A bad command-line --set is that option's fault, not the variant's line.
            const bool from_command_line =
                std::any_of(overrides.begin(), overrides.end(),
                            [&](const std::string& o) { return e.file() == "--set " + o; });
            if (!from_command_line && e.file() != path && e.line() == 0 && line_of(p.at) > 0)
                throw ConfigError(path, line_of(p.at), col_of(p.at), e.key(),
                                  "variant '" + p.name + "': " + e.message(), true);
            throw;
        }
        v.config.out_dir = (fs::path(spec.runs_dir) / v.name).string();
        spec.variants.push_back(std::move(v));
    }
}

}  // namespace

ExperimentSpec load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
    ExperimentSpec spec;
    spec.path = path;
    {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw ConfigError(path, 0, 0, "", "cannot open experiment file");
        std::ostringstream text;
        text << in.rdbuf();
        spec.yaml_text = text.str();
    }
    YAML::Node root;
    try {
        root = YAML::Load(spec.yaml_text);
    } catch (const YAML::Exception& e) {
        throw ConfigError(path, e.mark.line + 1, e.mark.column + 1, "", "malformed YAML: " + e.msg);
    }
    Reader r(path);
    if (!root.IsMap()) r.fail(root, "", "expected a mapping at the top level");
    if (root["out_dir"])
        r.fail(root["out_dir"], "out_dir",
               "not used in experiments: runs go to runs_dir/<variant>");

    read_study_fields(root, r, spec);

    // Variants: a list (preset names or {name, preset, set}) and/or a grid (cartesian product).
    std::vector<PendingVariant> pending;
    if (const auto vs = root["variants"]) pending = read_variant_list(vs, r);
    if (const auto grid = root["grid"]) {
        const auto combos = expand_variant_grid(grid, r);
        pending.insert(pending.end(), combos.begin(), combos.end());
    }
    if (pending.empty()) pending.push_back(PendingVariant{"base", {}, root, false, {}, {}});
    const std::vector<std::string> groups = apply_pretrain_seeds(root, r, spec, pending);
    build_variants(root, r, overrides, pending, groups, spec);
    return spec;
}

}  // namespace experiments
