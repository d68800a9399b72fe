// Job identities and their fingerprints (see job_identity.h).
#include "experiments/job_identity.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "analysis/tasks.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "engine/sha256.h"
#include "experiments/synthetic_tasks.h"

namespace experiments {

namespace fs = std::filesystem;

namespace {

// Config keys that do not change what a pretraining computes: where it writes, caches, how
// many threads or which device runs it, and how often it logs or saves for resuming. The data
// paths are replaced by the files' hashes; the preset and size names are informative (every
// field they set is in the identity).
const std::set<std::string> kNotIdentity = {"model.preset",
                                            "model.size",
                                            "data.corpus",
                                            "data.vocab",
                                            "data.cache_dir",
                                            "train.device",
                                            "train.threads",
                                            "train.tensorboard",
                                            "train.log_interval",
                                            "train.checkpoint_interval",
                                            "out_dir"};

// Fields added after results were stored, each with the value that reproduces what came
// before it: at that value a field stays out of the identity, so adding it leaves every stored
// run's identity (and "already done") as it was; at any other value it enters.
const std::map<std::string, std::string> kOmittedAtDefault = {
    {"model.scale_input_positions", "false"},
};

// kOmittedAtDefault and the engine's own such fields (the modern backbone's), which its config
// text leaves out at their defaults too.
const std::map<std::string, std::string>& omitted_at_default() {
    static const std::map<std::string, std::string> all = [] {
        auto m = kOmittedAtDefault;
        for (const auto& entry : engine::config_keys_omitted_at_default()) m.insert(entry);
        return m;
    }();
    return all;
}

std::string short_hash(const std::string& text) { return engine::sha256_hex(text).substr(0, 16); }

// The shortest decimal text that reads back as the same double ("0.0005", not
// "0.00050000000000000001"): identities must not change when a config writer's number style
// does.
std::string number(double v) {
    for (int precision = 1; precision <= 17; ++precision) {
        std::ostringstream os;
        os.precision(precision);
        os << v;
        if (std::strtod(os.str().c_str(), nullptr) == v) return os.str();
    }
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
}

// A config value in canonical form: a number (the whole text parses as one) in number()'s
// form, anything else as it is.
std::string canonical(const std::string& text) {
    if (text.empty()) return text;
    const bool integer = std::all_of(text.begin() + (text[0] == '-' ? 1 : 0), text.end(),
                                     [](char c) { return c >= '0' && c <= '9'; });
    if (integer) return text;  // seeds and sizes exactly, however large
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() + text.size() && std::isfinite(v)) return number(v);
    return text;
}

std::string joined_steps(const std::vector<int64_t>& steps) {
    std::string out;
    for (int64_t s : steps) out += (out.empty() ? "" : ",") + std::to_string(s);
    return out;
}

}  // namespace

std::string JobIdentity::text() const {
    std::string out;
    for (const auto& [key, value] : fields_) out += key + "=" + value + "\n";
    return out;
}

std::string JobIdentity::fingerprint() const { return short_hash(text()); }

std::string JobIdentity::cell(const std::vector<std::string>& pooled) const {
    std::string out;
    for (const auto& [key, value] : fields_)
        if (std::find(pooled.begin(), pooled.end(), key) == pooled.end())
            out += key + "=" + value + "\n";
    return out.empty() ? "" : short_hash(out);
}

JobIdentity JobIdentity::parse(const std::string& text) {
    JobIdentity id;
    std::istringstream is(text);
    std::string line;
    while (std::getline(is, line)) {
        const auto eq = line.find('=');
        if (eq != std::string::npos) id.set(line.substr(0, eq), line.substr(eq + 1));
    }
    return id;
}

const std::vector<std::string>& pooled_keys(bool finetune) {
    static const std::vector<std::string> pretrain = {"train.seed"};
    static const std::vector<std::string> fine = {
        "pretrain.train.seed", "finetune.lr",      "finetune.seed", "finetune.task",
        "finetune.epochs",     "finetune.protocol"};  // the protocol follows from the task
                                                      // (zero-shot or fine-tuned)
    return finetune ? fine : pretrain;
}

std::string FileHashes::sha256(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw engine::InputError(path, "cannot read the file (no such file or no permission)");
    auto& entry = cache_[path];
    const auto size = static_cast<std::uintmax_t>(st.st_size);
    const auto mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL +
                       static_cast<std::int64_t>(st.st_mtim.tv_nsec);
    if (entry.hash.empty() || entry.size != size || entry.mtime != mtime)
        entry = {size, mtime, engine::sha256_file_hex(path)};
    return entry.hash;
}

std::string FileHashes::sha256_tree(const std::string& dir) {
    std::error_code error;
    if (!fs::is_directory(dir, error)) throw engine::InputError(dir, "not a folder");
    std::vector<fs::path> files;
    for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end;
         it.increment(error))
        if (it->is_regular_file(error)) files.push_back(it->path());
    if (error) throw engine::InputError(dir, "cannot list the folder: " + error.message());
    std::sort(files.begin(), files.end());
    std::string listing;
    for (const auto& f : files)
        listing += f.lexically_relative(dir).generic_string() + " " + sha256(f.string()) + "\n";
    return engine::sha256_hex(listing);
}

JobIdentity pretrain_identity(const ExperimentSpec& spec, const Variant& v, FileHashes& hashes) {
    JobIdentity id;
    for (const auto& key : engine::config_keys()) {
        if (kNotIdentity.count(key)) continue;
        const std::string value = canonical(engine::get_config_value(v.config, key));
        const auto omitted = omitted_at_default().find(key);
        if (omitted == omitted_at_default().end() || omitted->second != value) id.set(key, value);
    }
    id.set("data.corpus.sha256", hashes.sha256(v.config.data.corpus));
    id.set("data.vocab.sha256", hashes.sha256(v.config.data.vocab));
    id.set("snapshots", joined_steps(spec.checkpoint_steps(v)));
    return id;
}

namespace {

std::string builtin_task_data_identity(const ExperimentSpec& spec, int64_t train,
                                       FileHashes& hashes) {
    const auto& data = spec.variants.front().config.data;
    const int64_t dev = spec.glue.synthetic_dev;
    return "builtin v" + std::to_string(synthetic_tasks_version(train, dev)) +
           " corpus=" + hashes.sha256(data.corpus) +
           " fraction=" + number(data.validation_fraction) + " train=" + std::to_string(train) +
           " dev=" + std::to_string(dev);
}

}  // namespace

std::string task_data_identity(const ExperimentSpec& spec,
                               const std::vector<std::string>& task_keys, FileHashes& hashes) {
    if (spec.glue.data == "builtin")
        return builtin_task_data_identity(spec, spec.glue.synthetic_train, hashes);
    std::set<std::string> folders;
    for (const auto& key : task_keys) folders.insert(analysis::find_task(key).name);
    std::string listing;
    for (const auto& name : folders)
        listing +=
            name + " " + hashes.sha256_tree((fs::path(spec.glue.data) / name).string()) + "\n";
    return "folder " + engine::sha256_hex(listing);
}

std::string zero_shot_task_data(const std::string& task_data) {
    // "builtin vK corpus=H fraction=F train=N dev=M": dev.tsv is the same for every train size
    // >= dev (synthetic_tasks.h), so name the smallest, with the version it then has.
    if (task_data.rfind("builtin v", 0) != 0) return task_data;
    std::istringstream in(task_data);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    int64_t train = -1, dev = -1;
    try {
        for (const auto& w : words) {
            if (w.rfind("train=", 0) == 0) train = std::stoll(w.substr(6));
            if (w.rfind("dev=", 0) == 0) dev = std::stoll(w.substr(4));
        }
    } catch (const std::exception&) {
        return task_data;  // not a string task_data_identity wrote
    }
    if (train < 0 || dev < 0 || train <= dev) return task_data;
    words[1] = "v" + std::to_string(synthetic_tasks_version(dev, dev));  // words[0]: builtin
    std::string out;
    for (const auto& w : words)
        out += (out.empty() ? "" : " ") +
               (w.rfind("train=", 0) == 0 ? "train=" + std::to_string(dev) : w);
    return out;
}

std::string zero_shot_task_data_identity(const ExperimentSpec& spec,
                                         const std::vector<std::string>& task_keys,
                                         FileHashes& hashes) {
    return zero_shot_task_data(task_data_identity(spec, task_keys, hashes));
}

JobIdentity finetune_identity(const ExperimentSpec& spec, const Variant& v,
                              const JobIdentity& pretrain, int64_t checkpoint_step,
                              const std::string& task_key, double lr, uint64_t seed,
                              const std::string& task_data) {
    JobIdentity id;
    for (const auto& [key, value] : pretrain.fields()) id.set("pretrain." + key, value);
    const auto& task = analysis::find_task(task_key);
    const auto& p = spec.finetune;
    id.set("finetune.checkpoint_step", std::to_string(checkpoint_step));
    id.set("finetune.task", task.key);
    id.set("finetune.task_data", task_data);
    id.set("finetune.lr", number(lr));
    id.set("finetune.seed", std::to_string(seed));
    id.set("finetune.batch_size", std::to_string(p.batch_size));
    id.set("finetune.epochs", std::to_string(p.epochs > 0 ? p.epochs : task.default_epochs));
    id.set("finetune.epochs_setting", std::to_string(p.epochs));  // 0: each task's default
    id.set("finetune.warmup_ratio", number(p.warmup_ratio));
    id.set("finetune.weight_decay", number(p.weight_decay));
    id.set("finetune.max_seq_len",
           std::to_string(std::min(p.max_seq_len, v.config.model.max_position_embeddings)));
    id.set("finetune.classifier_dropout", number(p.classifier_dropout));
    id.set("finetune.shuffle_words", p.shuffle_words ? "true" : "false");
    // Set only for the zero-shot pair tasks, so the identities of the others stay as stored.
    if (task.zero_shot) id.set("finetune.protocol", "zero-shot pseudo-log-likelihood v1");
    return id;
}

const char* run_output_name(RunOutput output) {
    switch (output) {
        case RunOutput::kAnalysis: return "analysis";
        case RunOutput::kExtrapolation: return "extrapolation";
        case RunOutput::kAblation: return "ablation";
        case RunOutput::kHeads: return "heads";
    }
    return "";
}

JobIdentity output_identity(const ExperimentSpec& spec, const Variant& v, RunOutput output,
                            const std::vector<std::pair<std::string, std::string>>& inputs,
                            FileHashes& hashes) {
    // The version of the command that writes each output: raise it when what the command
    // computes for the same settings and inputs changes, so stored outputs read as changed.
    static const std::map<RunOutput, const char*> kCode = {
        {RunOutput::kAnalysis, "tupe analyze 1"},
        {RunOutput::kExtrapolation, "tupe extrapolate 1"},
        {RunOutput::kAblation, "tupe ablate 1"},
        {RunOutput::kHeads, "tupe heads 1"}};
    JobIdentity id;
    const std::string name = run_output_name(output);
    for (const auto& [key, value] : study_settings(spec, name)) {
        const bool is_corpus = key.size() > 7 && key.compare(key.size() - 7, 7, ".corpus") == 0;
        if (!is_corpus) {
            id.set(key, canonical(value));
        } else if (!(output == RunOutput::kAnalysis && !spec.analysis.text.empty())) {
            // The text read, not where it lies (the analysis of analysis.text reads no corpus).
            id.set(key + ".sha256", hashes.sha256(value.empty() ? v.config.data.corpus : value));
        }
    }
    // The ablation and the head scan read the run's held-out documents of its own corpus.
    if (output == RunOutput::kAblation || output == RunOutput::kHeads)
        id.set("data.corpus.sha256", hashes.sha256(v.config.data.corpus));
    for (const auto& [input, path] : inputs)
        id.set("input." + input + ".sha256", hashes.sha256(path));
    id.set("code", kCode.at(output));
    return id;
}

std::vector<std::string> identity_changes(const std::string& stored, const std::string& now) {
    const auto a = JobIdentity::parse(stored).fields();
    const auto b = JobIdentity::parse(now).fields();
    std::set<std::string> keys;
    for (const auto& [k, v] : a) keys.insert(k);
    for (const auto& [k, v] : b) keys.insert(k);
    std::vector<std::string> out;
    for (const auto& k : keys) {
        const auto ia = a.find(k), ib = b.find(k);
        const std::string va = ia == a.end() ? "(none)" : ia->second;
        const std::string vb = ib == b.end() ? "(none)" : ib->second;
        if (va != vb) out.push_back(k + ": " + va + " -> " + vb);
    }
    return out;
}

std::vector<std::string> distinguishing_labels(const std::vector<std::string>& identities,
                                               bool finetune, size_t max_keys) {
    std::vector<std::map<std::string, std::string>> parsed;
    std::set<std::string> keys;
    for (const auto& text : identities) {
        parsed.push_back(JobIdentity::parse(text).fields());
        for (const auto& [k, v] : parsed.back()) keys.insert(k);
    }
    const auto& pooled = pooled_keys(finetune);
    std::vector<std::string> differing;
    for (const auto& k : keys) {
        if (std::find(pooled.begin(), pooled.end(), k) != pooled.end()) continue;
        if (k == "finetune.checkpoint_step") continue;  // a report row's "@ step" says it
        std::set<std::string> values;
        for (const auto& fields : parsed) {
            const auto it = fields.find(k);
            values.insert(it == fields.end() ? "(none)" : it->second);
        }
        if (values.size() > 1) differing.push_back(k);
    }
    // A value of several words (a task-data identity with its corpus hash) shows only the
    // words where the values differ, when every value has the same number of words:
    // "finetune.task_data=v2 train=10000", not the 64-digit hash they share.
    const auto words_of = [](const std::string& v) {
        std::vector<std::string> w;
        std::istringstream in(v);
        for (std::string x; in >> x;) w.push_back(x);
        return w;
    };
    std::map<std::string, std::vector<bool>> shown_words;  // key -> which words differ
    for (const auto& k : differing) {
        std::vector<std::vector<std::string>> split;
        for (const auto& fields : parsed) {
            const auto it = fields.find(k);
            if (it == fields.end()) break;
            split.push_back(words_of(it->second));
        }
        if (split.size() != parsed.size() || split[0].size() < 2) continue;
        std::vector<bool> differs(split[0].size(), false);
        bool aligned = true;
        for (const auto& w : split) {
            aligned = aligned && w.size() == split[0].size();
            for (size_t i = 0; aligned && i < w.size(); ++i)
                differs[i] = differs[i] || w[i] != split[0][i];
        }
        if (aligned) shown_words[k] = differs;
    }
    std::vector<std::string> labels;
    for (const auto& fields : parsed) {
        std::string label;
        for (size_t i = 0; i < differing.size() && i < max_keys; ++i) {
            const auto it = fields.find(differing[i]);
            std::string key = differing[i];
            if (key.rfind("pretrain.", 0) == 0) key = key.substr(9);
            std::string value = it == fields.end() ? "(none)" : it->second;
            if (const auto shown = shown_words.find(differing[i]); shown != shown_words.end()) {
                const auto words = words_of(value);
                value.clear();
                for (size_t w = 0; w < words.size(); ++w)
                    if (shown->second[w]) value += (value.empty() ? "" : " ") + words[w];
            }
            label += (label.empty() ? "" : ", ") + key + "=" + value;
        }
        if (differing.size() > max_keys)
            label += ", +" + std::to_string(differing.size() - max_keys) + " more";
        labels.push_back(label);
    }
    return labels;
}

}  // namespace experiments
