// A job's identity: everything that determines its result, as sorted "key=value" lines, and
// the fingerprints the results store keeps with each run (schema 5). A rerun whose identity
// differs from the stored run's is another job, never "already done"; a report pools only runs
// whose identities agree on everything but the keys it averages over (seeds, the fine-tuning
// lr). Paths never enter an identity: the files' SHA-256 do, so moving data changes nothing
// and editing it changes everything.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "experiments/experiment.h"

namespace experiments {

/// Sorted key -> value; text() is what the store keeps.
class JobIdentity {
  public:
    void set(const std::string& key, const std::string& value) { fields_[key] = value; }
    const std::map<std::string, std::string>& fields() const { return fields_; }
    /// "key=value\n" per field, sorted by key.
    std::string text() const;
    /// 16 hex digits of the SHA-256 of text().
    std::string fingerprint() const;
    /// 16 hex digits of the SHA-256 of the fields other than `pooled` ("" when pooled holds
    /// every field).
    std::string cell(const std::vector<std::string>& pooled) const;
    /// The identity that text() wrote; lines without '=' are ignored.
    static JobIdentity parse(const std::string& text);

  private:
    std::map<std::string, std::string> fields_;
};

/// The keys left out of a run's cell: those a report pools over (a pretraining's seed; a
/// fine-tuning's lr, seed and its pretraining's seed) and those that tell its columns apart
/// (the task, and the epochs its default resolves to), so one row holds one config.
const std::vector<std::string>& pooled_keys(bool finetune);

/// SHA-256 of files, each read once per process (cached by path, size and modification time).
class FileHashes {
  public:
    /// 64 hex digits; throws engine::InputError naming the file when it cannot be read.
    std::string sha256(const std::string& path);
    /// One hash over every regular file under `dir` (relative paths and contents, sorted);
    /// throws engine::InputError when `dir` is not a folder.
    std::string sha256_tree(const std::string& dir);

  private:
    struct Entry {
        std::uintmax_t size = 0;
        std::int64_t mtime = 0;
        std::string hash;
    };
    std::map<std::string, Entry> cache_;
};

/// The pretraining of `v`: every config field that shapes the model or its training (not the
/// output folder, caches, threads, device or logging cadence), the corpus's and vocabulary's
/// SHA-256 instead of their paths, and the snapshot steps fine-tuning starts from.
JobIdentity pretrain_identity(const ExperimentSpec& spec, const Variant& v, FileHashes& hashes);

/// Where the study's task examples come from: the built-in generator's version and options with
/// the corpus's SHA-256, or one hash over the folders of `task_keys` under glue.data (so a
/// report row holds one version of every task's data).
std::string task_data_identity(const ExperimentSpec& spec,
                               const std::vector<std::string>& task_keys, FileHashes& hashes);

/// The data identity of the zero-shot tasks (analysis::TaskInfo::zero_shot), which read only
/// dev.tsv: for the built-in tasks, that of the smallest train size giving the same dev.tsv
/// (min(synthetic_train, synthetic_dev), synthetic_tasks.h), so a study that only adds
/// training examples for its fine-tuned tasks reuses the stored pair-task scores.
std::string zero_shot_task_data_identity(const ExperimentSpec& spec,
                                         const std::vector<std::string>& task_keys,
                                         FileHashes& hashes);

/// A task-data identity (task_data_identity) as the zero-shot tasks have it: a built-in one
/// with train > dev becomes the one with train = dev (same dev.tsv); anything else as given.
/// The report puts a zero-shot task's scores in every row whose fine-tuned tasks' data maps
/// to its data this way.
std::string zero_shot_task_data(const std::string& task_data);

/// A fine-tuning job: its pretraining's identity (keys prefixed "pretrain."), the snapshot
/// step, task, lr, seed, the resolved protocol and `task_data` (task_data_identity).
JobIdentity finetune_identity(const ExperimentSpec& spec, const Variant& v,
                              const JobIdentity& pretrain, int64_t checkpoint_step,
                              const std::string& task_key, double lr, uint64_t seed,
                              const std::string& task_data);

/// The files a pretraining run's study writes beside its checkpoints, each recorded as
/// artifacts of the run (ArtifactRecord::identity on every row): one per analysis snapshot,
/// the extrapolation table, the ablation and the head-type scan.
enum class RunOutput { kAnalysis, kExtrapolation, kAblation, kHeads };

/// "analysis", "extrapolation", "ablation", "heads": the block `tupe run --redo` names.
const char* run_output_name(RunOutput output);

/// What one output is a function of: the study's settings for it (study_settings; a corpus
/// path replaced by its file's SHA-256, the variant's data.corpus when the setting is empty),
/// the SHA-256 of each input file (`inputs`: name -> path, e.g. the checkpoint it reads and
/// the vocabulary) and the version of the code that writes it. Recorded with the output; a
/// rerun whose identity differs is a changed setting, never "already done".
JobIdentity output_identity(const ExperimentSpec& spec, const Variant& v, RunOutput output,
                            const std::vector<std::pair<std::string, std::string>>& inputs,
                            FileHashes& hashes);

/// How `now` differs from `stored` (both identity texts), one "key: old -> new" per key, in
/// key order ("(none)" for a key only one side has).
std::vector<std::string> identity_changes(const std::string& stored, const std::string& now);

/// For runs whose identities differ on more than the pooled keys: a short label per identity
/// naming the values that tell them apart ("train.lr=0.0005, finetune.epochs=5"; at most
/// `max_keys` keys, pooled keys and finetune.checkpoint_step ignored: a report row shows its
/// step). Labels are in the order of `identities`.
std::vector<std::string> distinguishing_labels(const std::vector<std::string>& identities,
                                               bool finetune, size_t max_keys = 3);

}  // namespace experiments
