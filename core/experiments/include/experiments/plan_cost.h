// What a study's plan costs before it runs: its jobs counted as the runner plans them, each
// job's work in FLOPs (the tokens it pushes through its model times the model's FLOPs per token,
// engine/cost_model.h), and the wall time that work takes at the FLOP/s `tupe bench` measured
// on this machine. The runner's ETA (experiments/src/plan_eta.h) weighs jobs by the same work.
#pragma once

#include <map>
#include <string>

#include "experiments/experiment.h"

namespace experiments {

/// Tokens one job trains on (forward + backward), plus a third for forward-only evaluation:
/// pretraining steps x batch x seq; fine-tuning epochs x train examples x half max_seq_len
/// (synthetic sizes from the spec, GLUE's from GLUE_FORMAT.md, 10,000 when unknown); a
/// zero-shot task two sentences of ~24 tokens per dev pair, forward only. `task` is ignored
/// for pretraining.
double job_tokens(const ExperimentSpec& spec, const Variant& variant, bool pretrain,
                  const std::string& task);

/// The work of one job in FLOPs: job_tokens times the FLOPs per token of the variant's model at
/// the job's sequence length (the encoder, the positional term and, for pretraining, the MLM
/// head; forward and backward).
double job_work(const ExperimentSpec& spec, const Variant& variant, bool pretrain,
                const std::string& task);

/// The plan's jobs, counted as `tupe run` plans them, and their work.
struct PlanCounts {
    int pretrain = 0;         ///< one per variant (and pretraining seed)
    int finetune = 0;         ///< per variant, snapshot, fine-tuned task, lr and fine-tuning seed
    int zero_shot = 0;        ///< per variant, snapshot and zero-shot task
    int analyses = 0;         ///< tupe analyze snapshots, ablations, head scans, extrapolations
    bool every_task = false;  ///< glue.tasks is empty: the tasks are known only at run time
    double pretrain_work = 0, finetune_work = 0;  ///< FLOPs (zero-shot jobs with fine-tuning)
};
PlanCounts count_plan(const ExperimentSpec& spec);

/// Training FLOP/s measured by `tupe bench --format json`, by preset.
struct MachineRate {
    std::string description;  ///< "tupe bench --size quickstart --seq 64 --batch 32, 2 threads"
    std::map<std::string, double> flops_per_second;
    /// The preset's rate, else the median over the measured presets; 0 when none.
    double rate_for(const std::string& preset) const;
};

/// Reads `tupe bench --format json`'s output. Throws std::invalid_argument naming what is
/// missing or malformed.
MachineRate parse_bench_json(const std::string& json_text);

/// Seconds of wall time the plan's pretraining and fine-tuning take at `rate` (each job's work
/// over its variant's preset's FLOP/s), one job after another; analyses are not counted.
struct PlanEstimate {
    double pretrain_seconds = 0, finetune_seconds = 0;
    double seconds() const { return pretrain_seconds + finetune_seconds; }
};
PlanEstimate estimate_plan(const ExperimentSpec& spec, const MachineRate& rate);

}  // namespace experiments
