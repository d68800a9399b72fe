// An ablation study declared in one YAML file: the base pretraining setup (the same model:,
// data:, train: sections as a pretraining config), the variants (a list or a grid), the
// pretraining fractions at which to fine-tune, the GLUE tasks, seeds, the fine-tuning protocol
// (the TUPE paper's by default) and the results database. Defaults live in C++.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/config.h"

namespace experiments {

/// The paper's fine-tuning protocol (TUPE_NOTES.md): batch 32, lr in {2,3,4,5}e-5, 5 epochs
/// for MNLI/QNLI/QQP and 10 for the rest, warm-up ratio 0.06, 5 seeds; the median over seeds
/// per lr, then the best lr.
struct FinetuneProtocol {
    std::vector<double> lrs = {2e-5, 3e-5, 4e-5, 5e-5};
    std::vector<uint64_t> seeds = {1, 2, 3, 4, 5};
    int64_t batch_size = 32;
    int64_t epochs = 0;  ///< 0 = the task's default (5 or 10)
    double warmup_ratio = 0.06;
    double weight_decay = 0.01;
    int64_t max_seq_len = 128;
    double classifier_dropout = 0.1;  ///< Dropout before the classifier (HF's default).
    /// The bag-of-words control: shuffle the words inside each sentence of every train and
    /// dev example (deterministically per example). A task that needs word order must then
    /// be at chance whatever the model.
    bool shuffle_words = false;
    /// `finetune.save`: "best" writes the best epoch's fine-tuned weights of every job to
    /// out_dir/finetune/<job>/model.pt (an artifact of its run); "none" (default) keeps none.
    std::string save = "none";
};

/// One pretrained variant of the study.
struct Variant {
    std::string name;  ///< Unique in the study, e.g. "tupe-a" or "tupe-a@seed2".
    /// The variant without its pretraining seed: equal to name, or "tupe-a" for
    /// "tupe-a@seed2" when the study lists several pretrain_seeds. Reports group by it.
    std::string group;
    std::vector<std::string>
        overrides;                  ///< "key=value" applied on the base, e.g. model.preset=tupe-a
    engine::PretrainConfig config;  ///< The resolved config (out_dir = runs_dir/name).
    /// The entry's own `finetune_seeds`, which replace finetune.seeds for this variant's
    /// fine-tuned tasks (more fine-tuning seeds where its cells are bimodal); empty: the study's.
    std::vector<uint64_t> finetune_seeds;
    /// The fine-tuning seeds of this variant under `study_seeds` (finetune.seeds).
    const std::vector<uint64_t>& finetune_seeds_or(const std::vector<uint64_t>& study_seeds) const {
        return finetune_seeds.empty() ? study_seeds : finetune_seeds;
    }
};

/// Where the GLUE tasks come from.
struct GlueSource {
    std::string data = "builtin";    ///< "builtin" (synthetic tasks from held-out corpus text) or a
                                     ///< glue_data/ folder
    std::vector<std::string> tasks;  ///< Task names or keys; empty = all available
    int64_t synthetic_train = 2000;  ///< Examples per built-in task (train split)
    int64_t synthetic_dev = 400;
};

/// The optional `analysis:` block: `tupe analyze` on pretraining snapshots of every variant,
/// its files recorded as artifacts of the variant's pretrain run. Absent: no analysis.
struct AnalysisSpec {
    bool enabled = false;                     ///< true when the block is present
    std::vector<double> checkpoints = {1.0};  ///< Fractions of train.steps (snapshots).
    std::string corpus;      ///< Sentences file; empty = the variant's data.corpus.
    int64_t sentences = 32;  ///< The first N non-empty lines of corpus.
    std::string text;        ///< One sentence instead of corpus lines (when set).
    int64_t max_tokens = 0;  ///< 0 = the model's position table.
    int64_t batch_size = 32;
    bool figures = true;  ///< PNGs too (needs the `tupe` executable; else data only).
    /// The properties probe (analysis/properties.h) runs on every snapshot; its per-layer head
    /// means become metrics of the pretrain run ("property/<name>", "property/<name>/L<l>"),
    /// so properties are curves over training.
    int64_t probe_windows = 16;  ///< windows of the training length (from the sentences)
    bool order_probe = false;    ///< also `tupe analyze --order-probe`
    /// "zero", "mean" or "shuffle": also `tupe ablate --mode M` on each final checkpoint (the
    /// run's held-out documents), its ablation.csv/.json recorded as artifacts of the pretrain
    /// run; "" (the default): not run. Needs the tupe executable, as the extrapolation.
    std::string ablation;
    /// Also keep a snapshot of every pretraining run at step 0, every N steps and the last
    /// (`tupe pretrain --keep-every N`), for analysis.heads; 0 (the default): only the
    /// snapshots of checkpoints and analysis.checkpoints. Not part of a run's identity.
    int64_t keep_every = 0;
    /// Also `tupe heads` over every snapshot of each pretraining run (its held-out
    /// documents), its heads.json/.csv (and figures) recorded as artifacts of the pretrain
    /// run. Needs the tupe executable, as the ablation.
    bool heads = false;
};

/// The optional `extrapolation:` block: `tupe extrapolate` on each variant's final
/// checkpoint, its json/csv/png recorded as artifacts of the pretrain run. Absent: not run.
struct ExtrapolationSpec {
    bool enabled = false;
    std::string corpus;                 ///< held-out text; empty = the variant's data.corpus
    std::string lengths = "1,1.5,2,4";  ///< factors of the training length
    int64_t max_tokens = 60000;         ///< stream tokens scored at every length
};

struct ExperimentSpec {
    std::string name;
    std::string path;       ///< The YAML file.
    std::string yaml_text;  ///< Its text, stored with every run.
    std::vector<Variant> variants;
    std::vector<double> checkpoints = {1.0};  ///< Fractions of train.steps to fine-tune from.
    /// Pretraining seeds (train.seed) of every variant; with more than one, each variant V
    /// becomes V@seedS per seed. Empty: train.seed as configured.
    std::vector<uint64_t> pretrain_seeds;
    GlueSource glue;
    FinetuneProtocol finetune;
    std::string database = "results/tupe.sqlite";
    /// The store the study file names when `database` is another one: a cluster job records
    /// into a store of its own (`tupe run --job-store`), but its run folders belong to the
    /// study's store (their owner records name it). Empty otherwise.
    std::string study_store;
    /// The store the study's run folders belong to: study_store, or database.
    const std::string& owning_store() const { return study_store.empty() ? database : study_store; }
    std::string runs_dir;  ///< Default "runs/<name>".
    int64_t jobs = 1;      ///< Fine-tuning jobs run in parallel (child processes).
    AnalysisSpec analysis;
    ExtrapolationSpec extrapolation;

    /// Pretraining steps of the analysis snapshots: as checkpoint_steps, for analysis.checkpoints
    /// (empty when analysis is off).
    std::vector<int64_t> analysis_steps(const Variant& v) const;

    /// The steps of analysis.keep_every: 0, N, 2N, ... and train.steps (empty when it is 0 or
    /// analysis is off).
    std::vector<int64_t> kept_steps(const Variant& v) const;

    /// Pretraining steps at which fine-tuning starts: round(fraction * steps), at least 1.
    std::vector<int64_t> checkpoint_steps(const Variant& v) const;
};

/// "tupe-a@seed2" -> "tupe-a"; "tupe-a@seed2~3a4b5c6d" (a run beside a changed one) ->
/// "tupe-a"; a name without these suffixes is its own group.
std::string variant_group(const std::string& variant_name);

/// The study file's settings that determine one output of a pretraining run, as (key, text)
/// in the study-field table's order: `output` is "analysis" (each analysis snapshot),
/// "ablation", "heads" or "extrapolation". Paths come as written (output_identity replaces
/// them by the files' hashes); numbers in full precision.
std::vector<std::pair<std::string, std::string>> study_settings(const ExperimentSpec& spec,
                                                                const std::string& output);

/// Reads an experiment file. Unknown keys and wrong types raise ConfigError with the key path
/// and line:column (and the nearest valid key); `overrides` ("key=value") apply to the base
/// pretraining config of every variant, as `tupe pretrain --set` does.
ExperimentSpec load_experiment(const std::string& path,
                               const std::vector<std::string>& overrides = {});

}  // namespace experiments
