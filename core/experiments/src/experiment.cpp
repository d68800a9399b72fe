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

namespace experiments {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kExperimentKeys = {
    "name",     "variants", "grid", "checkpoints", "glue",           "finetune",
    "database", "runs_dir", "jobs", "analysis",    "pretrain_seeds", "extrapolation"};
const std::vector<std::string> kAnalysisKeys = {"checkpoints", "corpus",        "sentences",
                                                "text",        "max_tokens",    "batch_size",
                                                "figures",     "probe_windows", "order_probe"};
const std::vector<std::string> kExtrapolationKeys = {"corpus", "lengths", "max_tokens"};
const std::vector<std::string> kGlueKeys = {"data", "tasks", "synthetic_train", "synthetic_dev"};
const std::vector<std::string> kFinetuneKeys = {
    "lrs",          "seeds",       "batch_size",         "epochs",        "warmup_ratio",
    "weight_decay", "max_seq_len", "classifier_dropout", "shuffle_words", "save"};
const std::vector<std::string> kVariantKeys = {"name", "preset", "set"};

long line_of(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().line + 1; }
long col_of(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().column + 1; }

class Reader {
  public:
    explicit Reader(std::string path) : path_(std::move(path)) {}

    [[noreturn]] void fail(const YAML::Node& at, const std::string& key,
                           const std::string& message) const {
        throw ConfigError(path_, line_of(at), col_of(at), key, message);
    }

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

std::string value_text(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : ""; }

// "model.shared_pos_term" -> "shared_pos_term", for variant names.
std::string short_key(const std::string& key) {
    const auto dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

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

// Reads the top-level scalars: name, database, runs_dir, jobs and checkpoints.
void read_experiment_scalars(YAML::Node& root, const Reader& r, ExperimentSpec& spec) {
    spec.name = root["name"] ? r.scalar<std::string>(root["name"], "name", "a name")
                             : fs::path(r.path()).stem().string();
    if (root["database"])
        spec.database = r.scalar<std::string>(root["database"], "database", "a path");
    spec.runs_dir = root["runs_dir"] ? r.scalar<std::string>(root["runs_dir"], "runs_dir", "a path")
                                     : (fs::path("runs") / spec.name).string();
    if (root["jobs"]) {
        spec.jobs = r.scalar<int64_t>(root["jobs"], "jobs", "an integer");
        if (spec.jobs < 1) r.fail(root["jobs"], "jobs", "must be >= 1");
    }
    if (root["checkpoints"]) {
        spec.checkpoints =
            r.list<double>(root["checkpoints"], "checkpoints", "fractions in (0, 1]");
        for (double f : spec.checkpoints)
            if (!(f > 0 && f <= 1))
                r.fail(root["checkpoints"], "checkpoints", "fractions must be in (0, 1]");
    }
}

// Reads the glue section: the data source, the tasks and the synthetic set sizes.
void read_glue_section(const YAML::Node& g, const Reader& r, GlueSource& glue) {
    r.check_keys(g, "glue", kGlueKeys);
    if (g["data"]) glue.data = r.scalar<std::string>(g["data"], "glue.data", "builtin or a folder");
    if (g["tasks"]) glue.tasks = r.list<std::string>(g["tasks"], "glue.tasks", "task names");
    if (g["synthetic_train"])
        glue.synthetic_train =
            r.scalar<int64_t>(g["synthetic_train"], "glue.synthetic_train", "an integer");
    if (g["synthetic_dev"])
        glue.synthetic_dev =
            r.scalar<int64_t>(g["synthetic_dev"], "glue.synthetic_dev", "an integer");
}

// Reads the analysis section into `an` and enables the analysis.
void read_analysis_section(const YAML::Node& a, const Reader& r, AnalysisSpec& an) {
    r.check_keys(a, "analysis", kAnalysisKeys);
    an.enabled = true;
    if (a["checkpoints"]) {
        an.checkpoints =
            r.list<double>(a["checkpoints"], "analysis.checkpoints", "fractions in [0, 1]");
        for (double f : an.checkpoints)  // 0: the initialised model (claim 5's control)
            if (!(f >= 0 && f <= 1))
                r.fail(a["checkpoints"], "analysis.checkpoints", "fractions must be in [0, 1]");
    }
    if (a["corpus"]) an.corpus = r.scalar<std::string>(a["corpus"], "analysis.corpus", "a path");
    if (a["text"]) an.text = r.scalar<std::string>(a["text"], "analysis.text", "a sentence");
    if (a["corpus"] && a["text"])
        r.fail(a["text"], "analysis.text", "give corpus or text, not both");
    if (a["sentences"]) {
        an.sentences = r.scalar<int64_t>(a["sentences"], "analysis.sentences", "an integer");
        if (an.sentences < 1) r.fail(a["sentences"], "analysis.sentences", "must be >= 1");
    }
    if (a["max_tokens"]) {
        an.max_tokens = r.scalar<int64_t>(a["max_tokens"], "analysis.max_tokens", "an integer");
        if (an.max_tokens != 0 && an.max_tokens < 2)
            r.fail(a["max_tokens"], "analysis.max_tokens",
                   "must be 0 (the position table) or >= 2");
    }
    if (a["batch_size"]) {
        an.batch_size = r.scalar<int64_t>(a["batch_size"], "analysis.batch_size", "an integer");
        if (an.batch_size < 1) r.fail(a["batch_size"], "analysis.batch_size", "must be >= 1");
    }
    if (a["figures"])
        an.figures = r.scalar<bool>(a["figures"], "analysis.figures", "true or false");
    if (a["probe_windows"]) {
        an.probe_windows =
            r.scalar<int64_t>(a["probe_windows"], "analysis.probe_windows", "an integer");
        if (an.probe_windows < 1)
            r.fail(a["probe_windows"], "analysis.probe_windows", "must be >= 1");
    }
    if (a["order_probe"])
        an.order_probe = r.scalar<bool>(a["order_probe"], "analysis.order_probe", "true or false");
}

// True when `lengths` is comma-separated numbers > 0, the rule of `tupe extrapolate --lengths`.
bool extrapolation_lengths_valid(const std::string& lengths) {
    std::istringstream in(lengths);
    std::string item;
    bool ok = !lengths.empty() && lengths.back() != ',';
    while (ok && std::getline(in, item, ',')) {
        size_t used = 0;
        double f = 0;
        try {
            f = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        while (used < item.size() && item[used] == ' ') ++used;
        ok = used > 0 && used == item.size() && std::isfinite(f) && f > 0;
    }
    return ok;
}

// Reads the extrapolation section into `ex` and enables the extrapolation.
void read_extrapolation_section(const YAML::Node& x, const Reader& r, ExtrapolationSpec& ex) {
    r.check_keys(x, "extrapolation", kExtrapolationKeys);
    ex.enabled = true;
    if (x["corpus"])
        ex.corpus = r.scalar<std::string>(x["corpus"], "extrapolation.corpus", "a path");
    if (x["lengths"]) {
        ex.lengths = r.scalar<std::string>(x["lengths"], "extrapolation.lengths",
                                           "factors such as 1,1.5,2,4");
        if (!extrapolation_lengths_valid(ex.lengths))
            r.fail(x["lengths"], "extrapolation.lengths",
                   "expected factors > 0 of the training length, e.g. 1,1.5,2,4");
    }
    if (x["max_tokens"]) {
        ex.max_tokens =
            r.scalar<int64_t>(x["max_tokens"], "extrapolation.max_tokens", "an integer");
        if (ex.max_tokens < 1) r.fail(x["max_tokens"], "extrapolation.max_tokens", "must be >= 1");
    }
}

// Reads the finetune section (the fine-tuning protocol) into `p`.
void read_finetune_section(const YAML::Node& f, const Reader& r, FinetuneProtocol& p) {
    r.check_keys(f, "finetune", kFinetuneKeys);
    if (f["lrs"]) p.lrs = r.list<double>(f["lrs"], "finetune.lrs", "learning rates");
    if (f["seeds"])
        p.seeds = r.list<uint64_t>(f["seeds"], "finetune.seeds", "non-negative integers");
    if (f["batch_size"])
        p.batch_size = r.scalar<int64_t>(f["batch_size"], "finetune.batch_size", "an integer");
    if (f["epochs"]) p.epochs = r.scalar<int64_t>(f["epochs"], "finetune.epochs", "an integer");
    if (f["warmup_ratio"])
        p.warmup_ratio = r.scalar<double>(f["warmup_ratio"], "finetune.warmup_ratio", "a number");
    if (f["weight_decay"])
        p.weight_decay = r.scalar<double>(f["weight_decay"], "finetune.weight_decay", "a number");
    if (f["max_seq_len"])
        p.max_seq_len = r.scalar<int64_t>(f["max_seq_len"], "finetune.max_seq_len", "an integer");
    if (f["classifier_dropout"]) {
        p.classifier_dropout =
            r.scalar<double>(f["classifier_dropout"], "finetune.classifier_dropout", "a number");
        if (!(p.classifier_dropout >= 0 && p.classifier_dropout < 1))
            r.fail(f["classifier_dropout"], "finetune.classifier_dropout", "must be in [0, 1)");
    }
    if (f["shuffle_words"])
        p.shuffle_words =
            r.scalar<bool>(f["shuffle_words"], "finetune.shuffle_words", "true or false");
    if (f["save"]) {
        p.save = r.scalar<std::string>(f["save"], "finetune.save", "best or none");
        if (p.save != "best" && p.save != "none")
            r.fail(f["save"], "finetune.save", "expected best or none, got '" + p.save + "'");
    }
    if (p.batch_size < 1) r.fail(f["batch_size"], "finetune.batch_size", "must be >= 1");
    if (p.epochs < 0)
        r.fail(f["epochs"], "finetune.epochs", "must be >= 0 (0 = the task's default)");
}

// A variant before its config is loaded: its name, its overrides and where it was declared.
struct PendingVariant {
    std::string name;
    std::vector<std::string> overrides;
    YAML::Node at;
};

// Reads one entry of `variants`: a preset name or {name, preset, set}.
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
    p.name = v["name"] ? r.scalar<std::string>(v["name"], "variants.name", "a name")
                       : (v["preset"] ? v["preset"].Scalar() : "");
    if (p.name.empty()) r.fail(v, "variants", "a variant needs a name or a preset");
    return p;
}

// Reads the `variants` list, in its order.
std::vector<PendingVariant> read_variant_list(const YAML::Node& vs, const Reader& r) {
    if (!vs.IsSequence())
        r.fail(vs, "variants", "expected a list of presets or {name, preset, set}");
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
    std::vector<PendingVariant> combos = {PendingVariant{"", {}, grid}};
    for (const auto& [key, values] : axes) {
        std::vector<PendingVariant> next;
        for (const auto& c : combos)
            for (const auto& value : values) {
                PendingVariant p = c;
                p.overrides.push_back(key + "=" + value);
                const std::string part =
                    key == "model.preset" ? value : short_key(key) + "=" + value;
                p.name += (p.name.empty() ? "" : ",") + part;
                next.push_back(p);
            }
        combos = next;
    }
    return combos;
}

// Reads `pretrain_seeds` and applies them to `pending` (one variant per seed when several);
// returns each resulting variant's group.
std::vector<std::string> apply_pretrain_seeds(YAML::Node& root, const Reader& r,
                                              ExperimentSpec& spec,
                                              std::vector<PendingVariant>& pending) {
    std::vector<std::string> groups;
    if (root["pretrain_seeds"]) {
        spec.pretrain_seeds =
            r.list<uint64_t>(root["pretrain_seeds"], "pretrain_seeds", "non-negative integers");
        if (std::set<uint64_t>(spec.pretrain_seeds.begin(), spec.pretrain_seeds.end()).size() !=
            spec.pretrain_seeds.size())
            r.fail(root["pretrain_seeds"], "pretrain_seeds", "seeds must be distinct");
    }
    if (spec.pretrain_seeds.size() > 1) {
        std::vector<PendingVariant> seeded;
        for (const auto& p : pending)
            for (uint64_t seed : spec.pretrain_seeds) {
                PendingVariant q = p;
                q.name += "@seed" + std::to_string(seed);
                q.overrides.push_back("train.seed=" + std::to_string(seed));
                seeded.push_back(q);
                groups.push_back(p.name);
            }
        pending = seeded;
    } else {
        for (auto& p : pending) {
            if (spec.pretrain_seeds.size() == 1)
                p.overrides.push_back("train.seed=" + std::to_string(spec.pretrain_seeds[0]));
            groups.push_back(p.name);
        }
    }
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
        Variant v;
        v.name = p.name;
        v.group = groups[i];
        v.overrides = p.overrides;
        std::vector<std::string> all = overrides;
        all.insert(all.end(), p.overrides.begin(), p.overrides.end());
        try {
            v.config = load_pretrain_config_from_node(root, path, all, kExperimentKeys);
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

    read_experiment_scalars(root, r, spec);
    if (const auto g = root["glue"]) read_glue_section(g, r, spec.glue);
    if (const auto a = root["analysis"]) read_analysis_section(a, r, spec.analysis);
    if (const auto x = root["extrapolation"]) read_extrapolation_section(x, r, spec.extrapolation);
    if (const auto f = root["finetune"]) read_finetune_section(f, r, spec.finetune);

    // Variants: a list (preset names or {name, preset, set}) and/or a grid (cartesian product).
    std::vector<PendingVariant> pending;
    if (const auto vs = root["variants"]) pending = read_variant_list(vs, r);
    if (const auto grid = root["grid"]) {
        const auto combos = expand_variant_grid(grid, r);
        pending.insert(pending.end(), combos.begin(), combos.end());
    }
    if (pending.empty()) pending.push_back(PendingVariant{"base", {}, root});
    const std::vector<std::string> groups = apply_pretrain_seeds(root, r, spec, pending);
    build_variants(root, r, overrides, pending, groups, spec);
    return spec;
}

}  // namespace experiments
