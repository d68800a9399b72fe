// The study file's own keys: one table (study_table.h, study_fields.h). Every key of an
// experiment file outside model/data/train (those are the pretraining config's, read by its own
// field table, config_loader.h) is one row here: the dotted key, how its value is read and
// checked, what it determines and its documentation. A section's allowed keys, the nearest-key
// hints and the line:column errors all come from this table, so a key cannot be read without
// being allowed or allowed without being read.
#include "experiments/study_fields.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/config.h"
#include "experiments/config_loader.h"
#include "study_table.h"

namespace experiments {

namespace detail {

namespace {

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

using StudyField = detail::Field<ExperimentSpec>;
using FieldIO = detail::FieldIO<ExperimentSpec>;
template <typename T>
using FieldRef = detail::FieldRef<ExperimentSpec, T>;

template <typename T>
FieldIO scalar_field(FieldRef<T> ref, const char* what, bool (*ok)(const T&) = nullptr,
                     const char* range = "") {
    return detail::scalar_field<ExperimentSpec, T>(ref, what, ok, range);
}
template <typename T>
FieldIO list_field(FieldRef<std::vector<T>> ref, const char* what, bool (*ok)(const T&) = nullptr,
                   const char* range = "") {
    return detail::list_field<ExperimentSpec, T>(ref, what, ok, range);
}

}  // namespace

bool safe_name(const std::string& name) {
    if (name.empty() || name == "." || name == "..") return false;
    return std::none_of(name.begin(), name.end(), [](char c) {
        return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
}

namespace {

// SQLite would open ":memory:" and "file:...?mode=memory" as stores that vanish on close.
bool store_file_path(const std::string& path) {
    return !path.empty() && path != ":memory:" && path.rfind("file:", 0) != 0;
}

bool at_least_1(const int64_t& v) { return v >= 1; }
bool in_0_1_open_left(const double& f) { return f > 0 && f <= 1; }  // (0, 1]
bool in_0_1_closed(const double& f) { return f >= 0 && f <= 1; }    // [0, 1]
bool positive_finite(const double& v) { return std::isfinite(v) && v > 0; }

// The table, section by section: the top-level keys and glue:, analysis:, extrapolation: and
// finetune:.
std::vector<StudyField> top_and_glue_fields() {
    return {
        {"name",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.name; }, "a name", safe_name,
             kSafeNameRule),
         "",
         "The study's name: its folder under runs/ and its rows in the store (default: the file's "
         "stem)."},
        {"database",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.database; }, "a path", store_file_path,
             "must name a file: an in-memory store (':memory:', a 'file:' URI) "
             "would keep no result"),
         "", "The SQLite results store every run is recorded in."},
        {"runs_dir",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.runs_dir; }, "a path"),
         "", "Where each variant's run folder goes (default runs/NAME)."},
        {"jobs",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.jobs; }, "an integer", at_least_1,
             "must be >= 1"),
         "", "Fine-tuning jobs run side by side in child processes (tupe run --jobs)."},
        {"checkpoints",
         list_field<double>(
             [](ExperimentSpec & s) -> auto& { return s.checkpoints; }, "fractions in (0, 1]",
             in_0_1_open_left, "fractions must be in (0, 1]"),
         "",
         "Fractions of train.steps whose snapshots are fine-tuned and scored, e.g. [0.3, 1.0]."},
        {"variants",
         {},
         "",
         "The variants: preset names, or {name, preset, set, seeds, finetune_seeds}."},
        {"grid",
         {},
         "",
         "key: [values]; the cartesian product of the values becomes more variants, named by their "
         "levels."},
        {"pretrain_seeds",
         {},
         "",
         "Pretraining seeds: every variant V runs once per seed as V@seedN."},

        {"glue.data",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.glue.data; }, "builtin or a folder"),
         "", "builtin (the SYN-* tasks from held-out corpus text) or a glue_data/ folder."},
        {"glue.tasks",
         list_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.glue.tasks; }, "task names"),
         "", "The tasks fine-tuned or scored; default every task the data has."},
        {"glue.synthetic_train",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.glue.synthetic_train; }, "an integer",
             at_least_1, "must be >= 1"),
         "", "Training examples per built-in task."},
        {"glue.synthetic_dev",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.glue.synthetic_dev; }, "an integer",
             at_least_1, "must be >= 1"),
         "", "Dev examples (or pairs) per built-in task."},

    };
}

std::vector<StudyField> analysis_fields() {
    return {
        {"analysis.checkpoints",  // 0: the initialised model (claim 5's control)
         list_field<double>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.checkpoints; },
             "fractions in [0, 1]", in_0_1_closed, "fractions must be in [0, 1]"),
         "", "Fractions of train.steps analysed by tupe analyze; 0 = the initialised model."},
        {"analysis.corpus",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.corpus; }, "a path"),
         "analysis", "Sentences analysed; default the variant's data.corpus."},
        {"analysis.text",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.text; }, "a sentence"),
         "analysis", "One sentence analysed instead of corpus lines."},
        {"analysis.sentences",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.sentences; }, "an integer",
             at_least_1, "must be >= 1"),
         "analysis", "The first N non-empty lines of the corpus."},
        {"analysis.max_tokens",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.max_tokens; }, "an integer",
             [](const int64_t& v) { return v == 0 || v >= 2; },
             "must be 0 (the position table) or >= 2"),
         "analysis", "Longest analysed sequence; 0 = the position table."},
        {"analysis.batch_size",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.batch_size; }, "an integer",
             at_least_1, "must be >= 1"),
         "analysis", "Sentences per forward pass of the analysis."},
        {"analysis.figures",
         scalar_field<bool>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.figures; }, "true or false"),
         "analysis", "Also draw the analysis's PNGs."},
        {"analysis.probe_windows",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.probe_windows; }, "an integer",
             at_least_1, "must be >= 1"),
         "analysis", "Windows of the training length for the positional-properties probe."},
        {"analysis.order_probe",
         scalar_field<bool>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.order_probe; }, "true or false"),
         "analysis", "Also run the order probe (tupe analyze --order-probe)."},
        {"analysis.ablation",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.ablation; },
             "zero, mean or shuffle",
             [](const std::string& m) { return m == "zero" || m == "mean" || m == "shuffle"; },
             "expected zero, mean or shuffle (tupe ablate --mode)"),
         "ablation",
         "Also tupe ablate --mode zero|mean|shuffle on the final checkpoint: the change in loss "
         "without each positional term.",
         {"zero", "mean", "shuffle"}},
        {"analysis.keep_every",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.keep_every; }, "an integer",
             [](const int64_t& v) { return v >= 0; },
             "must be >= 0 (0 = only the snapshots of checkpoints and analysis.checkpoints)"),
         "heads", "Also keep a snapshot every N steps (and at 0 and the end), for analysis.heads."},
        {"analysis.heads",
         scalar_field<bool>(
             [](ExperimentSpec & s) -> auto& { return s.analysis.heads; }, "true or false"),
         "heads", "Also tupe heads over every snapshot: each head's type over training."},

    };
}

std::vector<StudyField> extrapolation_and_finetune_fields() {
    return {
        {"extrapolation.corpus",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.extrapolation.corpus; }, "a path"),
         "extrapolation", "Held-out text for tupe extrapolate; default the variant's data.corpus."},
        {"extrapolation.lengths",
         scalar_field<std::string>(
             [](ExperimentSpec & s) -> auto& { return s.extrapolation.lengths; },
             "factors such as 1,1.5,2,4", extrapolation_lengths_valid,
             "expected factors > 0 of the training length, e.g. 1,1.5,2,4"),
         "extrapolation", "Factors of the training length to score at, e.g. 1,1.5,2,4."},
        {"extrapolation.max_tokens",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.extrapolation.max_tokens; }, "an integer",
             at_least_1, "must be >= 1"),
         "extrapolation", "Stream tokens scored at every length."},

        {"finetune.lrs",
         list_field<double>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.lrs; }, "learning rates",
             positive_finite, "learning rates must be > 0"),
         "", "Fine-tuning learning rates; the report takes the best (median over seeds)."},
        {"finetune.seeds",
         list_field<uint64_t>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.seeds; }, "non-negative integers"),
         "", "Fine-tuning seeds per task and lr."},
        {"finetune.batch_size",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.batch_size; }, "an integer",
             at_least_1, "must be >= 1"),
         "", "Fine-tuning batch size."},
        {"finetune.epochs",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.epochs; }, "an integer",
             [](const int64_t& v) { return v >= 0; }, "must be >= 0 (0 = the task's default)"),
         "", "Epochs per task; 0 = the task's default (5 or 10)."},
        {"finetune.warmup_ratio",
         scalar_field<double>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.warmup_ratio; }, "a number",
             in_0_1_closed, "must be in [0, 1]"),
         "", "Share of fine-tuning steps spent warming up, in [0, 1]."},
        {"finetune.weight_decay",
         scalar_field<double>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.weight_decay; }, "a number",
             [](const double& v) { return v >= 0; }, "must be >= 0"),
         "", "Fine-tuning weight decay."},
        {"finetune.max_seq_len",
         scalar_field<int64_t>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.max_seq_len; }, "an integer",
             [](const int64_t& v) { return v >= 3; }, "must be >= 3 ([CLS], a token, [SEP])"),
         "", "Fine-tuning examples are cut to this many tokens."},
        {"finetune.classifier_dropout",
         scalar_field<double>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.classifier_dropout; }, "a number",
             [](const double& v) { return v >= 0 && v < 1; }, "must be in [0, 1)"),
         "", "Dropout before the classifier, in [0, 1)."},
        {"finetune.shuffle_words",
         scalar_field<bool>(
             [](ExperimentSpec & s) -> auto& { return s.finetune.shuffle_words; }, "true or false"),
         "",
         "The bag-of-words control: every sentence's words shuffled (tasks that need order go to "
         "chance)."},
        {"finetune.save",
         {[](const YAML::Node& n, const Reader& r, const std::string& key, ExperimentSpec& s) {
              const auto save = r.scalar<std::string>(n, key, "best or none");
              if (save != "best" && save != "none")
                  r.fail(n, key, "expected best or none, got '" + save + "'");
              s.finetune.save = save;
          },
          [](const ExperimentSpec& s) { return s.finetune.save; }, "text"},
         "",
         "best: keep each job's best fine-tuned weights; none: keep none.",
         {"none", "best"}},
    };
}

}  // namespace

const std::vector<StudyField>& study_fields() {
    static const std::vector<StudyField> fields = [] {
        std::vector<StudyField> all = top_and_glue_fields();
        for (auto part : {analysis_fields(), extrapolation_and_finetune_fields()})
            all.insert(all.end(), part.begin(), part.end());
        return all;
    }();
    return fields;
}

}  // namespace detail

std::vector<std::pair<std::string, std::string>> study_settings(const ExperimentSpec& spec,
                                                                const std::string& output) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& f : detail::study_fields())
        if (f.io.text && output == f.output) out.emplace_back(f.key, f.io.text(spec));
    return out;
}

namespace {

// A default as a person writes it: numbers in their shortest form ("2e-05", not the 17 digits
// an identity keeps), a list in YAML's brackets.
std::string readable_default(const std::string& kind, const std::string& text) {
    const bool list = kind.rfind("list of", 0) == 0;
    if (!list && kind != "number") return text;
    std::string out;
    std::istringstream items(text);
    for (std::string item; std::getline(items, item, ',');) {
        if (kind.find("number") != std::string::npos) {
            try {
                item = engine::format_double(std::stod(item));
            } catch (const std::exception&) {
                // Not a number after all: as it was.
            }
        }
        out += (out.empty() ? "" : ", ") + item;
    }
    return list ? "[" + out + "]" : out;
}

}  // namespace

const std::vector<StudyFieldInfo>& study_field_infos() {
    static const std::vector<StudyFieldInfo> infos = [] {
        std::vector<StudyFieldInfo> out;
        const ExperimentSpec defaults;
        for (const auto& f : detail::study_fields())
            out.push_back({f.key, f.io.kind,
                           f.io.text ? readable_default(f.io.kind, f.io.text(defaults)) : "", f.doc,
                           f.output, f.choices});
        return out;
    }();
    return infos;
}

std::string check_study_value(const std::string& key, const std::string& yaml_value) {
    for (const auto& f : detail::study_fields()) {
        if (key != f.key) continue;
        if (!f.io.read) return "";  // written by the study builder itself
        try {
            const YAML::Node node = YAML::Load(yaml_value);
            if (!node || node.IsNull()) return "expected a value";
            ExperimentSpec scratch;
            f.io.read(node, detail::Reader("form"), key, scratch);
            return "";
        } catch (const ConfigError& e) {
            return e.message();
        } catch (const YAML::Exception& e) {
            return "malformed YAML: " + e.msg;
        }
    }
    return "unknown key";
}

}  // namespace experiments
