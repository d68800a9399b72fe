// Executes an experiment: pretrain every variant (with snapshots at the fine-tuning
// fractions), then fine-tune every task x lr x seed from every snapshot, recording curves,
// GLUE scores and checkpoints in the results store. Idempotent and resumable: a finished job
// is skipped, an interrupted pretraining resumes from its last checkpoint, an interrupted
// fine-tuning job (minutes) is redone; the store is only changed in transactions. Several
// runners share a plan through job claims in the store (ResultStore::claim_job): each job is
// run by the one runner that claimed it, and a claim whose runner died or hung is taken over.
#pragma once

#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/trainer.h"
#include "experiments/experiment.h"

namespace experiments {

/// One unit of work of the plan.
struct Job {
    enum class Kind { kPretrain, kFinetune };
    Kind kind = Kind::kPretrain;
    std::string
        name;  ///< Unique in the experiment: "tupe-a" or "tupe-a/step300/syn-cola/lr2e-05/seed1"
    std::string variant;
    int64_t checkpoint_step = 0;  ///< finetune: the pretraining snapshot it starts from
    std::string task;             ///< finetune: task key
    double lr = 0;
    uint64_t seed = 0;
    // Filled by bind_plan (job_identity.h):
    std::string identity;     ///< What determines the job's result, "key=value" lines.
    std::string fingerprint;  ///< Hash of identity.
    std::string cell;         ///< Hash of identity without the keys a report pools over.
    std::string base_name;    ///< The plan's name; name is base_name~FINGERPRINT8 for a job
                              ///< whose config changed, run beside its stored run.
    /// A run stored before run identities (schema 5) that this job's config matches: its
    /// identity is written when the plan runs.
    bool adopt = false;
    /// How the job differs from its stored run ("key: old -> new; ..."); empty when it does
    /// not (or has no stored run).
    std::string change;
    /// A pretraining job whose recorded outputs (analysis, extrapolation, ...) were made with
    /// other settings or inputs: "analysis of step 40: key: old -> new; ..." (bind_plan);
    /// empty when none differs.
    std::string output_change;
};

/// Every job of the experiment, pretraining first, in a stable order (names as the study
/// file gives them; bind_plan matches them to the store).
std::vector<Job> make_plan(const ExperimentSpec& spec);

/// What to do with a job whose stored run has another identity (its config, data or protocol
/// changed since it ran).
enum class ChangedJobs {
    kRefuse,     ///< bind_plan throws one line naming the changed keys (the default of `tupe run`)
    kRunBeside,  ///< run it as a new run, name~FINGERPRINT8, beside the stored one (--new-runs)
    kDescribe,   ///< keep the stored name and list it in BoundPlan::changed (`tupe status`)
};

/// The plan matched to the results store and the run folders.
struct BoundPlan {
    /// The study, with each variant whose pretraining runs beside a changed stored run renamed
    /// (NAME~FINGERPRINT8, its group unchanged) and its out_dir moved with it.
    ExperimentSpec spec;
    std::vector<Job> jobs;
    /// Per changed job: "NAME: key: old -> new; ..." (kDescribe; kRunBeside: those run beside).
    std::vector<std::string> changed;
};

/// Also matches each output of the study's pretraining runs (analysis snapshots,
/// extrapolation, ablation, head scan: job_identity.h, RunOutput) to what the store recorded:
/// one recorded with another identity (a changed setting or input) is refused in one line
/// naming the changes, unless `redo` names its block ("analysis", "extrapolation": `tupe run
/// --redo`), which makes it pending again; kDescribe lists it in BoundPlan::changed.
/// Checks the study before anything is written (every variant's config ranges, that the
/// corpus and vocabulary exist, the GLUE folder's task files, the run folders' owners; not in
/// kDescribe, which only reads), makes
/// the plan, computes every job's identity, and matches it to the runs already stored:
/// a stored run with the same fingerprint is the job's run (finished: done; else resumed), a
/// run stored before identities is adopted when its stored config equals the job's, and a
/// run with another identity is a changed job, handled as `changed` says. Throws ConfigError,
/// engine::InputError (a run folder another study owns, files of unknown origin, a folder
/// locked by `tupe pretrain`) or StoreError; reads the store without writing a row.
BoundPlan bind_plan(const ExperimentSpec& spec, ChangedJobs changed = ChangedJobs::kRefuse,
                    const std::set<std::string>& redo = {});

/// Where the plan stands, reported before every job and while one runs.
struct PlanProgress {
    int64_t done = 0;  ///< Jobs finished (including those skipped as already done).
    int64_t total = 0;
    std::string current;      ///< The job running now.
    double job_fraction = 0;  ///< Progress inside the current job, 0..1.
    std::string job_status;   ///< e.g. "loss 6.21  1,500 tok/s".
    double eta_seconds = -1;  ///< For the whole plan; -1 while unknown.
};

struct RunnerCallbacks {
    std::function<void(const PlanProgress&)> on_progress;
    std::function<void(const std::string&)> on_message;  ///< One line, informational.
    const std::atomic<bool>* stop = nullptr;             ///< Checked between steps and jobs.
};

struct RunnerOptions {
    std::string only_job;  ///< Run just this job (child processes of a parallel run).
    /// Jobs whose config changed since their run was stored run as new runs beside it
    /// (`tupe run --new-runs`); without it the runner refuses (bind_plan).
    bool new_runs = false;
    /// The blocks ("analysis", "extrapolation") whose recorded outputs are computed again
    /// where their settings or inputs changed (`tupe run --redo`); bind_plan refuses others.
    std::set<std::string> redo;
    int64_t jobs = 0;                    ///< Parallel fine-tuning processes; 0 = the spec's `jobs`.
    std::string self_exe;                ///< Path of `tupe` for child processes (parallel runs).
    int64_t threads = 0;                 ///< Intra-op threads per process, 0 = the CPUs available.
    std::vector<std::string> overrides;  ///< The --set key=value list, passed on to children.
    /// Every job as this many local data-parallel workers (children `tupe run FILE --job NAME
    /// --nproc-per-node N`); 1 = in this process.
    int64_t nproc_per_node = 1;
    /// This process is one rank of a data-parallel group running only_job: rank 0 runs and
    /// records it as usual, the other ranks compute in step without touching the store.
    engine::DistributedContext* dist = nullptr;
    /// A job claim whose heartbeat is older than this is stale and taken over by another
    /// runner (TUPE_CLAIM_TIMEOUT). The runner refreshes its claims every timeout/12 seconds
    /// (at most 5 s) and polls every timeout/12 (at most 2 s) while it waits for other runners.
    double claim_timeout_seconds = 60;
    /// "HOST:PID" of the runner that claimed only_job and started this process for it
    /// (TUPE_CLAIM_FROM, set by the runner for its children): its claim is taken over at once.
    std::string claim_from;
    /// Test hook (TUPE_TEST_RAISE_AT_STEP=STEP:KILL|STOP): right after pretraining step
    /// `raise_at_step` (its curve points stored) this process raises `raise_signal` on
    /// itself, a crash (SIGKILL) or a hang (SIGSTOP) at a known point. 0 = off.
    int64_t raise_at_step = 0;
    int raise_signal = 0;
    /// Test hook (TUPE_TEST_STEP_DELAY=SECONDS): each pretraining step is followed by this
    /// much sleep, so a tiny job outlasts a cluster's time limit or a node's loss without
    /// using the CPU. The results are those of an undelayed run. 0 = off.
    double step_delay_seconds = 0;
};

/// The environment variables of the options above, read by `tupe run` and `tupe status`.
inline constexpr const char* kClaimTimeoutEnv = "TUPE_CLAIM_TIMEOUT";
inline constexpr const char* kClaimFromEnv = "TUPE_CLAIM_FROM";
inline constexpr const char* kRaiseAtStepEnv = "TUPE_TEST_RAISE_AT_STEP";
inline constexpr const char* kStepDelayEnv = "TUPE_TEST_STEP_DELAY";

struct RunSummary {
    int64_t finished = 0, skipped = 0, failed = 0;
    int64_t blocked = 0;  ///< Fine-tuning jobs not run: their pretraining failed.
    bool stopped = false;
};

/// Runs the plan. Throws StoreError / ConfigError / InputError for problems that stop the
/// whole plan (database, configuration, data); a job that fails (e.g. diverges) is marked
/// failed in the store with its message and the plan goes on. Every job is claimed first
/// (see RunnerOptions::claim_timeout_seconds): a job held by another live runner is left to
/// it, a fine-tuning job waits for its pretraining, and when every job left is held or waits,
/// the runner polls until they finish (counted as skipped) or their claims go stale. A job
/// another runner failed after this one started is not retried. One runner per process.
RunSummary run_experiment(const ExperimentSpec& spec, const RunnerOptions& options,
                          const RunnerCallbacks& callbacks);

/// One job of the plan as `tupe status` shows it.
struct JobStatus {
    std::string job;
    std::string kind;  ///< "pretrain" or "finetune"
    /// pending, running, finished, failed, stale, blocked (its pretraining failed) or changed
    /// (the stored run has another identity: `tupe run` refuses, --new-runs runs it beside)
    std::string status;
    std::int64_t step = -1;       ///< The run's last recorded step (-1 = no run row).
    std::string owner;            ///< host:pid of the claim's holder ("" = unclaimed).
    double heartbeat_age_s = -1;  ///< Seconds since the holder's heartbeat (-1 = unclaimed).
    bool owner_gone = false;      ///< The holder is on this host and its pid no longer exists.
    std::string error;            ///< The run's error message, when it failed.
};

/// The plan's jobs with their status in the store (pending when absent). A claimed job shows
/// as running with its owner and heartbeat age, or, when the owner is gone or its heartbeat is
/// older than `claim_timeout_seconds`, as stale.
std::vector<JobStatus> job_statuses(const ExperimentSpec& spec, double claim_timeout_seconds = 60);

/// job_statuses as a text table: counts per status, then the pretraining jobs and every job
/// that failed, runs or is stale.
std::string experiment_status(const ExperimentSpec& spec, double claim_timeout_seconds = 60);
/// The same as one JSON document: {"experiment", "database", "counts", "jobs": [...]}.
std::string experiment_status_json(const ExperimentSpec& spec, double claim_timeout_seconds = 60);

/// Prepares (once) the built-in synthetic tasks for the spec from held-out corpus documents
/// (the pretraining validation documents) and returns the folder that holds them.
std::string prepare_builtin_tasks(const ExperimentSpec& spec);

}  // namespace experiments
