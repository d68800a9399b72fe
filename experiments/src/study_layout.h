// Where a study's results live and what they are, below the runner: a variant's run folder
// and snapshots, the config texts stored with its runs, and the outputs (analysis snapshots,
// extrapolation, ablation, head scan) each pretraining run owes the study, with where each one
// stands against the store. The plan's binding to the store (plan_binding.cpp) and the
// runner's executors (runner_internal.h) both stand on it; it knows neither. Not a public
// header.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "experiments/experiment.h"
#include "experiments/job_identity.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"

namespace experiments::detail {

/// Where a variant's pretraining writes its snapshot of `step`.
std::string snapshot_path(const Variant& v, int64_t step);
/// True when v's run folder holds another study's run (its owner record names another
/// experiment): plan_binding.cpp admits that only for a finished run of the same job, which
/// this study then reads and never writes.
bool shared_run_folder(const ExperimentSpec& spec, const Variant& v);
/// Throws std::invalid_argument when the spec has no such variant.
const Variant& variant_named(const ExperimentSpec& spec, const std::string& name);
/// The plan's job called `name`; throws std::invalid_argument (naming the spec) when none is.
const Job& job_named(const std::vector<Job>& plan, const ExperimentSpec& spec,
                     const std::string& name);

/// The config text stored with a variant's pretraining run: its resolved config (the
/// vocabulary's size once the file exists), as engine::config_to_text writes it.
std::string pretrain_config_text(const Variant& v);
/// The protocol text stored with a fine-tuning run (config_text of its run row).
std::string finetune_config_text(const ExperimentSpec& spec, const Variant& v, const Job& job);

/// The snapshot steps a variant's pretraining writes: fine-tuning and analysis checkpoints.
std::vector<int64_t> snapshot_steps(const ExperimentSpec& spec, const Variant& v);
/// The run's vocabulary, written into its folder by the pretraining.
std::string vocab_of(const Variant& v);

/// One output a study writes beside a pretraining run (job_identity.h, RunOutput).
struct RunOutputPlan {
    RunOutput kind = RunOutput::kAnalysis;
    int64_t step = 0;    ///< the snapshot it reads; the final step but for an analysis
    std::string dir;     ///< its folder, inside the run folder
    std::string marker;  ///< the file whose recorded row says it is stored
    /// name -> the file it reads (the checkpoint or snapshots, the vocabulary): hashed into
    /// its identity.
    std::vector<std::pair<std::string, std::string>> inputs;
    /// "analysis of step 40", "extrapolation", "ablation", "heads".
    std::string label() const;
};

/// The outputs the study asks of variant v, analysis snapshots first; the extrapolation, the
/// ablation and the head scan only `with_executable` (they run as `tupe` child processes).
std::vector<RunOutputPlan> run_output_plans(const ExperimentSpec& spec, const Variant& v,
                                            bool with_executable);

/// Where one output stands against what the store recorded for its run.
struct RunOutputState {
    enum class State {
        kPending,  ///< not recorded (or its inputs are not there yet)
        kDone,     ///< its marker is recorded with today's identity
        kChanged,  ///< recorded with another identity (a setting or an input changed)
    };
    State state = State::kPending;
    std::string identity;              ///< today's; empty while an input is missing
    std::vector<std::string> changes;  ///< kChanged: "key: old -> new", one per key
};

/// The state of `plan` given the run's recorded artifacts (identities computed with `hashes`,
/// which hashes each input file once per process).
RunOutputState run_output_state(const ExperimentSpec& spec, const Variant& v,
                                const RunOutputPlan& plan,
                                const std::vector<ArtifactRecord>& recorded, FileHashes& hashes);

}  // namespace experiments::detail
