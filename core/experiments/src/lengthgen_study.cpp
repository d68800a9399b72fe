// The length-generalisation study file, its result lines and its summary
// (experiments/lengthgen_study.h).
#include "experiments/lengthgen_study.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "analysis/chomsky_tasks.h"
#include "analysis/evidence.h"
#include "engine/errors.h"
#include "engine/position_scheme.h"
#include "experiments/config_loader.h"
#include "field_table.h"

namespace experiments {

namespace {

using detail::Reader;
using LengthgenField = detail::Field<LengthgenStudy>;
template <typename T>
using Ref = detail::FieldRef<LengthgenStudy, T>;

bool positive(const int64_t& v) { return v >= 1; }
bool positive_seed(const uint64_t& v) { return v >= 1; }
bool in_0_1(const double& v) { return v >= 0 && v <= 1; }
bool positive_number(const double& v) { return v > 0 && std::isfinite(v); }
constexpr const char* kPositive = "must be >= 1";

template <typename T>
detail::FieldIO<LengthgenStudy> scalar(Ref<T> ref, const char* what, bool (*ok)(const T&) = nullptr,
                                       const char* range = "") {
    return detail::scalar_field<LengthgenStudy, T>(ref, what, ok, range);
}
template <typename T>
detail::FieldIO<LengthgenStudy> list(Ref<std::vector<T>> ref, const char* what,
                                     bool (*ok)(const T&) = nullptr, const char* range = "") {
    return detail::list_field<LengthgenStudy, T>(ref, what, ok, range);
}

// Each item of a list of names accepted by `check` (which throws std::invalid_argument).
detail::FieldIO<LengthgenStudy> names(Ref<std::vector<std::string>> ref, const char* what,
                                      void (*check)(const std::string&)) {
    auto io = list<std::string>(ref, what);
    const auto read = io.read;
    io.read = [=](const YAML::Node& n, const Reader& r, const std::string& key, LengthgenStudy& s) {
        read(n, r, key, s);
        for (size_t i = 0; i < ref(s).size(); ++i) try {
                check(ref(s)[i]);
            } catch (const std::invalid_argument& e) {
                r.fail(n.IsSequence() ? n[i] : n, key, e.what());
            }
    };
    return io;
}

// The study file, one row per key (field_table.h): what each reads and accepts.
const std::vector<LengthgenField>& lengthgen_fields() {
    static const std::vector<LengthgenField> fields = {
        {"name", scalar<std::string>(
                     [](LengthgenStudy & s) -> auto& { return s.name; }, "a string")},
        {"tasks", names(
                      [](LengthgenStudy & s) -> auto& { return s.tasks; }, "task names",
                      [](const std::string& t) { analysis::chomsky_task(t); })},
        {"presets", names(
                        [](LengthgenStudy & s) -> auto& { return s.presets; }, "preset names",
                        [](const std::string& p) { engine::make_model_config(p, "tiny"); })},
        {"randomized", list<bool>(
                           [](LengthgenStudy & s) -> auto& { return s.randomized; }, "booleans")},
        {"randomized_positions_max",
         scalar<int64_t>(
             [](LengthgenStudy & s) -> auto& { return s.randomized_positions_max; }, "an integer",
             positive, kPositive)},
        {"seeds", list<uint64_t>(
                      [](LengthgenStudy & s) -> auto& { return s.seeds; }, "seeds (integers >= 1)",
                      positive_seed, kPositive)},
        {"train_lengths",
         {[](const YAML::Node& n, const Reader& r, const std::string& key, LengthgenStudy& s) {
              const auto v = r.list<int64_t>(n, key, "[min, max], e.g. [1, 40]");
              if (v.size() != 2) r.fail(n, key, "expected [min, max], e.g. [1, 40]");
              if (v[0] < 1 || v[1] < v[0]) r.fail(n, key, "expected 1 <= min <= max");
              s.train_min_length = v[0], s.train_max_length = v[1];
          },
          [](const LengthgenStudy& s) {
              return std::to_string(s.train_min_length) + "," + std::to_string(s.train_max_length);
          }}},
        {"test_lengths", list<int64_t>(
                             [](LengthgenStudy & s) -> auto& { return s.test_lengths; }, "lengths",
                             positive, kPositive)},
        {"test_examples", scalar<int64_t>(
                              [](LengthgenStudy & s) -> auto& { return s.test_examples; },
                              "an integer", positive, kPositive)},
        {"model", {}},  // model.* keys, read by read_model_keys
        {"train.examples", scalar<int64_t>(
                               [](LengthgenStudy & s) -> auto& { return s.train_examples; },
                               "an integer", positive, kPositive)},
        {"train.batch_size", scalar<int64_t>(
                                 [](LengthgenStudy & s) -> auto& { return s.batch_size; },
                                 "an integer", positive, kPositive)},
        {"train.lr", scalar<double>(
                         [](LengthgenStudy & s) -> auto& { return s.lr; }, "a number",
                         positive_number, "must be > 0")},
        {"train.warmup_ratio", scalar<double>(
                                   [](LengthgenStudy & s) -> auto& { return s.warmup_ratio; },
                                   "a number", in_0_1, "must be in [0, 1]")},
        {"train.weight_decay", scalar<double>(
                                   [](LengthgenStudy & s) -> auto& { return s.weight_decay; },
                                   "a number", in_0_1, "must be in [0, 1]")},
        {"train.dropout", scalar<double>(
                              [](LengthgenStudy & s) -> auto& { return s.dropout; }, "a number",
                              in_0_1, "must be in [0, 1]")},
        {"train.threads", scalar<int64_t>(
                              [](LengthgenStudy & s) -> auto& { return s.threads; }, "an integer",
                              positive, kPositive)},
    };
    return fields;
}

// model.* keys applied to every preset, each checked on its own line by the engine's own
// field table (engine::set_config_value).
void read_model_keys(const YAML::Node& m, const Reader& r, LengthgenStudy& s) {
    if (!m.IsMap()) r.fail(m, "model", "expected a mapping of model.* keys");
    for (const auto& kv : m) {
        const std::string k = kv.first.as<std::string>();
        if (k == "preset" || k == "randomized_positions_max" || k == "vocab_size")
            r.fail(kv.first, "model." + k,
                   "set by the study (presets, randomized, the task vocabulary), not here");
        s.model.emplace_back(k, r.scalar<std::string>(kv.second, "model." + k, "a scalar"));
        try {
            engine::PretrainConfig probe;
            engine::set_config_value(probe, "model." + k, s.model.back().second);
        } catch (const std::exception& e) {
            r.fail(kv.first, "model." + k, e.what());
        }
    }
}

// The lengths against the model: every test input ([CLS] + symbols + [SEP]) fits the position
// table, and randomized positions cover every test position.
void check_lengths(const YAML::Node& root, const Reader& r, const LengthgenStudy& s) {
    const int64_t longest =
        std::max(*std::max_element(s.test_lengths.begin(), s.test_lengths.end()),
                 s.train_max_length) +
        2;
    if (std::find(s.randomized.begin(), s.randomized.end(), true) != s.randomized.end() &&
        s.randomized_positions_max < longest)
        r.fail(root["randomized_positions_max"] ? root["randomized_positions_max"] : root,
               "randomized_positions_max",
               "must cover the longest input (" + std::to_string(longest) +
                   " tokens with [CLS] and [SEP]), got " +
                   std::to_string(s.randomized_positions_max));
    for (const auto& preset : s.presets)
        for (bool rand : s.randomized) {
            try {
                const auto config = lengthgen_model_config(s, preset, rand);
                if (config.max_position_embeddings < longest)
                    throw std::invalid_argument("max_position_embeddings = " +
                                                std::to_string(config.max_position_embeddings) +
                                                " is shorter than the longest input (" +
                                                std::to_string(longest) +
                                                " tokens with [CLS] and [SEP])");
            } catch (const std::exception& e) {
                r.fail(root["model"] ? root["model"] : root, "model",
                       preset + (rand ? " randomized" : "") + ": " + e.what());
            }
        }
}

LengthgenStudy parse_lengthgen_study(const YAML::Node& root, const std::string& file) {
    const Reader r(file);
    LengthgenStudy s;
    if (!root.IsMap()) r.fail(root, "", "expected a mapping of study keys");
    const std::vector<std::string> sections = {"train"};
    r.check_keys(root, "", detail::section_keys(lengthgen_fields(), "", sections));
    detail::read_fields(root, r, lengthgen_fields(), sections, s);
    if (root["model"]) read_model_keys(root["model"], r, s);
    check_lengths(root, r, s);
    return s;
}

double lengthgen_mean(const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

}  // namespace

const std::vector<std::string>& lengthgen_vocab() {
    static const std::vector<std::string> vocab = [] {
        std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
        for (const auto& task : analysis::chomsky_tasks())
            for (const auto& sym : task.symbols)
                if (std::find(v.begin(), v.end(), sym) == v.end()) v.push_back(sym);
        return v;
    }();
    return vocab;
}

bool lengthgen_takes_positions(const std::string& preset) {
    return !engine::describe_position(engine::make_model_config(preset, "tiny")).order_blind;
}

engine::ModelConfig lengthgen_model_config(const LengthgenStudy& study, const std::string& preset,
                                           bool randomized) {
    engine::PretrainConfig c;
    c.model = engine::make_model_config(preset, "tiny");
    for (const auto& [k, v] : study.model) engine::set_config_value(c, "model." + k, v);
    c.model.vocab_size = static_cast<int64_t>(lengthgen_vocab().size());
    c.model.hidden_dropout_prob = c.model.attention_probs_dropout_prob = study.dropout;
    c.model.randomized_positions_max = randomized ? study.randomized_positions_max : 0;
    c.model.validate();
    return c.model;
}

LengthgenStudy load_lengthgen_study_from_string(const std::string& yaml_text,
                                                const std::string& name_for_messages) {
    YAML::Node root;
    try {
        root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        throw ConfigError(name_for_messages, e.mark.line >= 0 ? e.mark.line + 1 : 0,
                          e.mark.column >= 0 ? e.mark.column + 1 : 0, "", e.msg);
    }
    return parse_lengthgen_study(root, name_for_messages);
}

LengthgenStudy load_lengthgen_study(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError(path, 0, 0, "", "cannot read the study file");
    std::stringstream text;
    text << in.rdbuf();
    return load_lengthgen_study_from_string(text.str(), path);
}

std::string LengthgenJob::key() const {
    return task + "/" + preset + (randomized ? "+rand" : "") + "@seed" + std::to_string(seed);
}

std::vector<LengthgenJob> lengthgen_jobs(const LengthgenStudy& study) {
    std::vector<LengthgenJob> jobs;
    for (const auto& task : study.tasks)
        for (const auto& preset : study.presets)
            for (bool rand : study.randomized) {
                if (rand && !lengthgen_takes_positions(preset)) continue;
                for (uint64_t seed : study.seeds) jobs.push_back({task, preset, rand, seed});
            }
    return jobs;
}

std::string result_to_json_line(const LengthgenResult& r) {
    nlohmann::json j = {{"key", r.job.key()},         {"task", r.job.task},
                        {"preset", r.job.preset},     {"randomized", r.job.randomized},
                        {"seed", r.job.seed},         {"lengths", r.lengths},
                        {"accuracy", r.accuracy},     {"majority", r.majority},
                        {"train_loss", r.train_loss}, {"seconds", r.seconds}};
    if (!r.accuracy_random_positions.empty())
        j["accuracy_random_positions"] = r.accuracy_random_positions;
    if (!r.identity.empty()) j["identity"] = r.identity;
    return j.dump();
}

JobIdentity lengthgen_identity(const LengthgenStudy& study, const LengthgenJob& job) {
    const auto joined = [](const auto& values) {
        std::string out;
        for (const auto& v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
        return out;
    };
    const auto number = [](double v) {
        std::ostringstream os;
        os.precision(17);
        os << v;
        return os.str();
    };
    JobIdentity id;
    id.set("task", job.task);
    id.set("preset", job.preset);
    id.set("randomized", job.randomized ? "true" : "false");
    id.set("seed", std::to_string(job.seed));
    if (job.randomized)
        id.set("randomized_positions_max", std::to_string(study.randomized_positions_max));
    id.set("train_lengths",
           std::to_string(study.train_min_length) + "," + std::to_string(study.train_max_length));
    id.set("test_lengths", joined(study.test_lengths));
    id.set("test_examples", std::to_string(study.test_examples));
    for (const auto& [key, value] : study.model) id.set("model." + key, value);
    id.set("train.examples", std::to_string(study.train_examples));
    id.set("train.batch_size", std::to_string(study.batch_size));
    id.set("train.lr", number(study.lr));
    id.set("train.warmup_ratio", number(study.warmup_ratio));
    id.set("train.weight_decay", number(study.weight_decay));
    id.set("train.dropout", number(study.dropout));
    // Raise when what a job computes for the same settings changes.
    id.set("code", "tupe lengthgen 1");
    return id;
}

void append_lengthgen_result(const std::string& path, const LengthgenResult& result) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) throw engine::InputError(path, "cannot open to append a result line");
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }  // also drops the lock
    } closer{fd};
    if (::flock(fd, LOCK_EX) != 0) throw engine::InputError(path, "cannot lock the file");
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw engine::InputError(path, "cannot read the file's size");
    if (st.st_size > 0) {
        // A torn tail: everything after the last newline goes.
        off_t end = st.st_size;
        char c = 0;
        while (end > 0 && ::pread(fd, &c, 1, end - 1) == 1 && c != '\n') --end;
        if (end != st.st_size && ::ftruncate(fd, end) != 0)
            throw engine::InputError(path, "cannot cut away a torn last line");
    }
    const std::string line = result_to_json_line(result) + "\n";
    size_t written = 0;
    while (written < line.size()) {
        const ssize_t n = ::write(fd, line.data() + written, line.size() - written);
        if (n <= 0) throw engine::InputError(path, "cannot append a result line");
        written += static_cast<size_t>(n);
    }
}

LengthgenResult result_from_json_line(const std::string& line) {
    try {
        const auto j = nlohmann::json::parse(line);
        LengthgenResult r;
        r.job.task = j.at("task").get<std::string>();
        r.job.preset = j.at("preset").get<std::string>();
        r.job.randomized = j.at("randomized").get<bool>();
        r.job.seed = j.at("seed").get<uint64_t>();
        r.lengths = j.at("lengths").get<std::vector<int64_t>>();
        r.accuracy = j.at("accuracy").get<std::vector<double>>();
        r.majority = j.at("majority").get<std::vector<double>>();
        r.train_loss = j.at("train_loss").get<double>();
        r.seconds = j.at("seconds").get<double>();
        if (j.contains("accuracy_random_positions"))
            r.accuracy_random_positions =
                j.at("accuracy_random_positions").get<std::vector<double>>();
        if (j.contains("identity")) r.identity = j.at("identity").get<std::string>();
        if (r.lengths.size() != r.accuracy.size())
            throw std::invalid_argument("lengths and accuracy differ in size");
        return r;
    } catch (const nlohmann::json::exception& e) {
        throw std::invalid_argument(std::string("not a result line: ") + e.what());
    }
}

std::vector<LengthgenResult> read_lengthgen_results(const std::string& path) {
    std::vector<LengthgenResult> out;
    std::ifstream in(path);
    if (!in) return out;
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(line);
    for (size_t i = 0; i < lines.size(); ++i) {
        try {
            out.push_back(result_from_json_line(lines[i]));
        } catch (const std::invalid_argument& e) {
            if (i + 1 == lines.size()) break;  // A torn last line: that run is redone.
            throw engine::InputError(path, e.what(), static_cast<long>(i + 1));
        }
    }
    return out;
}

std::vector<LengthgenCell> summarize_lengthgen(const LengthgenStudy& study,
                                               const std::vector<LengthgenResult>& results) {
    std::vector<LengthgenCell> cells;
    const size_t n_len = study.test_lengths.size();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto interval = [](const std::vector<double>& v, double& m, double& lo, double& hi) {
        const auto t = analysis::paired_t_test(v);
        m = lengthgen_mean(v);
        lo = t.valid ? t.ci_lo : m;
        hi = t.valid ? t.ci_hi : m;
    };
    for (const auto& task : study.tasks)
        for (const auto& preset : study.presets)
            for (bool rand : study.randomized)
                for (bool random_test : {false, true}) {
                    if (random_test && !rand) continue;
                    auto accuracy = [&](const LengthgenResult& r) -> const std::vector<double>& {
                        return random_test ? r.accuracy_random_positions : r.accuracy;
                    };
                    // The latest line of each seed, at the study's test lengths.
                    std::map<uint64_t, const LengthgenResult*> by_seed;
                    for (const auto& r : results)
                        if (r.job.task == task && r.job.preset == preset &&
                            r.job.randomized == rand && r.lengths == study.test_lengths &&
                            accuracy(r).size() == n_len &&
                            std::find(study.seeds.begin(), study.seeds.end(), r.job.seed) !=
                                study.seeds.end())
                            by_seed[r.job.seed] = &r;
                    if (by_seed.empty()) continue;
                    LengthgenCell c;
                    c.task = task, c.preset = preset, c.randomized = rand;
                    c.random_test_positions = random_test;
                    c.seeds = static_cast<int64_t>(by_seed.size());
                    c.chance = 100.0 * analysis::task_chance(analysis::chomsky_task(task));
                    c.mean.resize(n_len), c.lo.resize(n_len), c.hi.resize(n_len);
                    for (size_t k = 0; k < n_len; ++k) {
                        std::vector<double> v;
                        for (const auto& [seed, r] : by_seed) v.push_back(accuracy(*r)[k]);
                        interval(v, c.mean[k], c.lo[k], c.hi[k]);
                    }
                    std::vector<double> in_seeds, out_seeds;
                    for (const auto& [seed, r] : by_seed) {
                        std::vector<double> in, out;
                        for (size_t k = 0; k < n_len; ++k)
                            (study.test_lengths[k] <= study.train_max_length ? in : out)
                                .push_back(accuracy(*r)[k]);
                        if (!in.empty()) in_seeds.push_back(lengthgen_mean(in));
                        if (!out.empty()) out_seeds.push_back(lengthgen_mean(out));
                    }
                    c.in_mean = c.in_lo = c.in_hi = c.out_mean = c.out_lo = c.out_hi = nan;
                    if (!in_seeds.empty()) interval(in_seeds, c.in_mean, c.in_lo, c.in_hi);
                    if (!out_seeds.empty()) interval(out_seeds, c.out_mean, c.out_lo, c.out_hi);
                    cells.push_back(std::move(c));
                }
    return cells;
}

}  // namespace experiments
