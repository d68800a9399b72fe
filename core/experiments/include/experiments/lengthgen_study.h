// A length-generalisation study (`tupe lengthgen`, docs/zoo.md "Length generalisation in an
// encoder"): encoders trained from scratch on short inputs of the Chomsky-hierarchy tasks
// (analysis/chomsky_tasks.h) and tested on longer ones, with and without randomized positions
// (Ruoss et al., ACL 2023). This is the torch-free half: the study file, one result line per
// finished run (so a killed study resumes), and the summary over seeds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/config.h"
#include "experiments/job_identity.h"

namespace experiments {

/// The task vocabulary: BERT's five special tokens and every task symbol, one id each; with
/// it a tiny model spends no parameters on 30k unused word rows.
const std::vector<std::string>& lengthgen_vocab();

/// The study file. Defaults here; the YAML holds overrides (experiments/length_generalisation_
/// cpu.yaml shows every key).
struct LengthgenStudy {
    std::string name = "lengthgen";
    std::vector<std::string> tasks = {"even_pairs"};
    std::vector<std::string> presets = {"rope"};
    /// Randomized positions off (false) and/or on (true); a scheme without positions (NoPE)
    /// runs only off.
    std::vector<bool> randomized = {false, true};
    int64_t randomized_positions_max = 512;  ///< Ruoss et al.'s L (theirs: 2048).
    std::vector<uint64_t> seeds = {1, 2, 3};
    int64_t train_min_length = 1, train_max_length = 40;  ///< Uniform, as Ruoss et al.
    std::vector<int64_t> test_lengths = {20, 40, 60, 100};
    int64_t test_examples = 128;  ///< Per test length.
    /// model.* keys applied to every preset (hidden_size, num_hidden_layers, ...), in order.
    std::vector<std::pair<std::string, std::string>> model;
    int64_t train_examples = 16000;  ///< One epoch over them.
    int64_t batch_size = 64;
    double lr = 1e-3;
    double warmup_ratio = 0.06;
    double weight_decay = 0.0;
    double dropout = 0.1;  ///< Hidden, attention and classifier dropout.
    int64_t threads = 1;
};

/// Reads a study file. Throws ConfigError (config_loader.h) naming the file, line and key for
/// malformed YAML, an unknown key (with the nearest one), a wrong type, an unknown task or
/// preset, a model key the engine refuses, or lengths that do not fit (a test length beyond
/// randomized_positions_max or max_position_embeddings).
LengthgenStudy load_lengthgen_study(const std::string& path);
/// As load_lengthgen_study, from text; `name_for_messages` stands in for the file.
LengthgenStudy load_lengthgen_study_from_string(const std::string& yaml_text,
                                                const std::string& name_for_messages);

/// The model of one (preset, randomized) cell: make_model_config(preset, "tiny"), the study's
/// model keys, the task vocabulary's size and, when randomized, randomized_positions_max.
/// Throws what engine::set_config_value and ModelConfig::validate throw for a bad key or value.
engine::ModelConfig lengthgen_model_config(const LengthgenStudy& study, const std::string& preset,
                                           bool randomized);

/// Whether the preset has positions to randomize (NoPE has none).
bool lengthgen_takes_positions(const std::string& preset);

/// One (task, preset, randomized, seed) of a study.
struct LengthgenJob {
    std::string task, preset;
    bool randomized = false;
    uint64_t seed = 1;
    /// "even_pairs/rope+rand@seed1": the key of its result line.
    std::string key() const;
};

/// Every job of the study, tasks outermost, seeds innermost; NoPE only without randomization.
std::vector<LengthgenJob> lengthgen_jobs(const LengthgenStudy& study);

/// A finished job: accuracy (percent) at each test length of the study, in its order.
struct LengthgenResult {
    LengthgenJob job;
    std::vector<int64_t> lengths;
    std::vector<double> accuracy;
    std::vector<double> majority;  ///< Majority-class share of each test set (percent).
    /// Randomized jobs: accuracy with randomized positions at test time as well (Ruoss et al.'s
    /// evaluation); empty otherwise. `accuracy` is at the plain positions 0..T-1.
    std::vector<double> accuracy_random_positions;
    double train_loss = 0;  ///< Mean training loss of the epoch.
    double seconds = 0;
    /// What determined it (lengthgen_identity(...).text()); a line whose identity is not the
    /// study's job's is another result, never "already done". Empty in lines written before.
    std::string identity = {};
};

/// Everything one job's result is a function of: its task, preset, randomization and seed,
/// and every study setting that shapes the data, the model or the training (not the study's
/// name, its other jobs or threads), with the version of the code that trains and tests it.
JobIdentity lengthgen_identity(const LengthgenStudy& study, const LengthgenJob& job);

/// One JSON line (no newline) and back; parse throws std::invalid_argument for a line that is
/// not a result.
std::string result_to_json_line(const LengthgenResult& result);
LengthgenResult result_from_json_line(const std::string& line);
/// Every result line of `path` (none when it does not exist); a torn last line (a killed run)
/// is skipped. Throws engine::InputError naming the file and line for a bad line elsewhere.
std::vector<LengthgenResult> read_lengthgen_results(const std::string& path);
/// Appends one result line to `path` under an exclusive lock (shards share the file); a torn
/// last line left by a killed process is cut away first, so it never fuses with the new one.
/// Throws engine::InputError naming the file when it cannot be written.
void append_lengthgen_result(const std::string& path, const LengthgenResult& result);

/// One row of the summary: a (task, preset, randomized) cell over its seeds.
struct LengthgenCell {
    std::string task, preset;
    bool randomized = false;
    /// Tested with randomized positions (Ruoss et al.'s evaluation) instead of 0..T-1.
    bool random_test_positions = false;
    int64_t seeds = 0;
    std::vector<double> mean, lo, hi;  ///< Per test length: mean and 95% t-interval over seeds.
    double in_mean = 0, in_lo = 0, in_hi = 0;     ///< Lengths <= train_max_length, averaged.
    double out_mean = 0, out_lo = 0, out_hi = 0;  ///< Lengths beyond, averaged.
    double chance = 0;                            ///< 100 / num_classes.
};

/// Cells in study order (tasks, presets, off before on; a randomized cell tested at plain
/// positions, then at random ones), only those with results.
std::vector<LengthgenCell> summarize_lengthgen(const LengthgenStudy& study,
                                               const std::vector<LengthgenResult>& results);

}  // namespace experiments
