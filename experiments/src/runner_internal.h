// What the runner (runner.cpp) and a data-parallel job's other ranks (runner_jobs.cpp) must
// agree on exactly: where a variant's snapshots live, how a task's examples are read, and the
// fine-tuning and pretraining settings of a job. Not a public header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "engine/finetune.h"
#include "engine/trainer.h"
#include "experiments/experiment.h"
#include "experiments/glue_data.h"
#include "experiments/runner.h"

namespace experiments::detail {

/// The folder of the fine-tuning tasks: spec.glue.data, or the built-in tasks (prepared once).
std::string glue_dir(const ExperimentSpec& spec);
std::string snapshot_path(const Variant& v, int64_t step);
/// Throws std::invalid_argument when the spec has no such variant.
const Variant& variant_named(const ExperimentSpec& spec, const std::string& name);
/// The plan's job called `name`; throws std::invalid_argument (naming the spec) when none is.
const Job& job_named(const std::vector<Job>& plan, const ExperimentSpec& spec,
                     const std::string& name);

/// Examples in the engine's plain form, labels as indices into the task's fixed label order.
std::vector<engine::LabeledText> labeled(const TaskInfo& task, const Split& split);
std::vector<double> gold_values(const TaskInfo& task, const std::vector<engine::LabeledText>& xs);
analysis::MetricKind kind_of(const TaskInfo& task);
/// The name a dev split is reported under: "mnli_m"/"mnli_mm" for MNLI, else the task key.
std::string reported_task(const TaskInfo& task, const std::string& split);

/// A task's train split and dev splits, read from `dir`.
struct TaskData {
    TaskInfo info;
    std::vector<engine::LabeledText> train;
    std::vector<std::string> dev_names;
    std::vector<std::vector<engine::LabeledText>> dev;
};
/// The task's train and dev splits; with shuffle_words, every sentence's words shuffled
/// (the bag-of-words control, FinetuneProtocol::shuffle_words).
TaskData load_task_data(const std::string& task_key, const std::string& dir,
                        bool shuffle_words = false);

/// The snapshot steps a variant's pretraining writes: fine-tuning and analysis checkpoints.
std::vector<int64_t> snapshot_steps(const ExperimentSpec& spec, const Variant& v);
/// The engine settings of a fine-tuning job.
engine::FinetuneConfig finetune_config(const ExperimentSpec& spec, const Variant& v, const Job& job,
                                       const TaskInfo& task, int64_t threads);

/// A data-parallel job on a rank other than 0 (options.dist, options.only_job): the same
/// pretraining or fine-tuning as rank 0, without the results store (rank 0 records).
RunSummary run_worker_job(const ExperimentSpec& spec, const RunnerOptions& options,
                          const RunnerCallbacks& callbacks);

}  // namespace experiments::detail
