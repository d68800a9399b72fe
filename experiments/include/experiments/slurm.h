// A study on a Slurm cluster (`tupe run FILE --executor slurm`, `tupe gather`, `tupe cancel`).
// The plan becomes Slurm jobs: each pretraining one job (its data-parallel ranks started by
// srun), the fine-tuning jobs of each pretraining snapshot one array job that waits for that
// pretraining (afterok). Nothing blocks the submitting host: sbatch --parsable, then return
// (or, with SlurmOptions::wait, stay and gather until the study is done).
//
// Results reach the study's store without many writers on a shared filesystem: every job
// runs with a store of its own in its job folder, RUNS_DIR/slurm/jobs/FINGERPRINT/job.sqlite
// (SQLite's rollback journal: WAL's shared-memory index works on one host only), and when it
// ends it writes done.json beside it (atomically: written, then renamed) with the SHA-256 of
// that store. `tupe gather` (one process, on the host that owns the study's store) copies each
// finished job's run into the study's store in one transaction that also records the job's
// attempt as gathered, so a job is ingested exactly once and a half-written job folder never
// (no done.json yet, or a store that no longer matches its hash). The app and `tupe report`
// read the study's store as it fills.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "experiments/experiment.h"
#include "experiments/runner.h"

namespace experiments {

/// How the study's jobs ask Slurm for resources (`tupe run --executor slurm` options).
struct SlurmOptions {
    std::string self_exe;                ///< The tupe the jobs run: a path every node sees.
    std::vector<std::string> overrides;  ///< --set key=value, passed on to every job.
    bool new_runs = false;               ///< --new-runs, passed on (and used to bind the plan).
    std::set<std::string> redo;          ///< --redo blocks, passed on (and used to bind).
    int64_t threads = 0;  ///< --threads of each job; 0 = --cpus-per-task (or the CPUs).
    int64_t nodes = 1;    ///< Nodes of each pretraining job.
    /// Data-parallel ranks per node of a pretraining job (srun tasks); 0 = one per GPU
    /// (--gpus-per-job / --nodes), or 1 without GPUs.
    int64_t ranks_per_node = 0;
    int64_t gpus_per_job = 0;              ///< GPUs of each job (sbatch --gpus), 0 = none asked.
    int64_t cpus_per_task = 0;             ///< sbatch --cpus-per-task; 0 = Slurm's default.
    std::string partition, account, time;  ///< sbatch --partition/--account/--time ("" = none)
    std::vector<std::string> sbatch_args;  ///< Further sbatch options, verbatim.
    /// Stay: gather as jobs end, submit again a job whose Slurm job ended without a result
    /// (killed, preempted, node failure) up to max_attempts times, return when every job is
    /// gathered, failed or blocked.
    bool wait = false;
    int64_t max_attempts = 3;
    double poll_seconds = 10;  ///< Between looks at Slurm and the job folders (wait).
    /// Seconds before its time limit that Slurm sends a job SIGUSR1 (sbatch
    /// --signal=B:USR1@N); the job then checkpoints and requeues itself. 0 = no signal.
    int64_t signal_before = 0;
    /// At most this many pretraining jobs pending or running at once, and at most this many
    /// tasks of each fine-tuning array running at once (--array=...%N). 0 = no cap.
    int64_t max_in_flight = 0;
    /// A job Slurm shows running whose result was written, or whose heartbeat stopped, this
    /// many seconds ago is lost to Slurm (TUPE_CLAIM_TIMEOUT); with wait it is cancelled.
    double stale_after_seconds = 60;
};

/// What `tupe gather` did.
struct GatherSummary {
    int64_t ingested = 0;  ///< Job attempts copied into the study's store now.
    int64_t already = 0;   ///< Finished attempts gathered before.
    int64_t pending = 0;   ///< Job folders without a done.json (running, or killed).
    /// One line per job folder that was not ingested although it has a done.json (its store
    /// does not match the hash, or cannot be read), naming the folder.
    std::vector<std::string> refused;
};

/// Copies every finished job of the study from its job folder into the study's store, once
/// (see the file comment). Pretraining runs first, so a fine-tuning run finds its parent.
GatherSummary gather_study(const ExperimentSpec& spec);

/// Submits every job of the plan that is neither finished in the study's store (after a
/// gather) nor pending or running in Slurm, with its dependencies; with options.wait, stays
/// until the study is done (see SlurmOptions::wait). Lines go to callbacks.on_message; the
/// stop flag ends the wait (the Slurm jobs go on). Throws ConfigError/InputError/StoreError
/// as bind_plan does, and std::runtime_error with sbatch's own line when it refuses a job.
RunSummary run_with_slurm(const ExperimentSpec& spec, const SlurmOptions& options,
                          const RunnerCallbacks& callbacks);

/// Slurm's view of one job's newest submission.
struct SlurmJobStatus {
    std::string job, slurm_id;  ///< slurm_id "123", or "124_3" for an array's task
    /// PENDING, RUNNING, COMPLETED, FAILED, PREEMPTED, CANCELLED, TIMEOUT, ... (squeue, else
    /// sacct); UNKNOWN when neither knows it any more.
    std::string state;
    std::string node, reason;  ///< Where it runs or ran; why it is pending.
    int exit_code = -1;        ///< The batch script's exit status (-1 unknown); with `signal`.
    int signal = 0;
    std::string result;  ///< Its job folder's done.json: "finished", "failed" or "" (none).
    /// Slurm shows it running although its result was written, or its heartbeat stopped,
    /// longer ago than the timeout: one line saying which, "" otherwise.
    std::string lost;
};
struct SlurmStudyStatus {
    bool submitted = false;  ///< The study has a ledger (was ever submitted to Slurm).
    std::string trouble;     ///< Why Slurm could not be asked ("" = it answered).
    std::vector<SlurmJobStatus> jobs;
};
/// Every submitted job of the study with Slurm's view of its newest submission; a job is
/// called lost after `stale_after_seconds` (SlurmJobStatus::lost).
SlurmStudyStatus slurm_job_statuses(const ExperimentSpec& spec, double stale_after_seconds = 60);
/// The same as `tupe status` prints it below the store's table: counts per state, then each
/// job not completed with a result. "" when the study was never submitted to Slurm.
std::string slurm_status(const ExperimentSpec& spec, double stale_after_seconds = 60);

/// Cancels (scancel) every pending or running Slurm job of the study; returns how many.
int64_t cancel_study(const ExperimentSpec& spec);

/// The job side of a warning signal (SlurmOptions::signal_before): requeues the Slurm job
/// this process runs in (`scontrol requeue`, the array task's id for an array), after it has
/// written its checkpoint. Returns the line to print; throws std::runtime_error when scontrol
/// refuses or this process is not in a Slurm job.
std::string requeue_this_slurm_job();

/// The job side: `tupe run FILE --job NAME --job-store DIR` runs with DIR/job.sqlite as its
/// store; this prepares DIR for a new attempt (its old done.json removed, the rollback journal
/// chosen) and returns the store's path.
std::string begin_job_store(const std::string& dir);
/// A cluster job's run set up on its own store: begin_job_store(dir) becomes spec.database
/// (the study's store stays spec.study_store, which its run folders belong to), and a claim an
/// earlier attempt of the job left in that store (killed, preempted, on another node) is taken
/// over now (options.claim_from), as a job store has one writer at a time.
void use_job_store(ExperimentSpec& spec, RunnerOptions& options, const std::string& dir);
/// Writes DIR/done.json for the attempt that just ended: the job, its fingerprint, "finished"
/// or "failed", the SHA-256 of DIR/job.sqlite (closed by now), the Slurm job and host.
void finish_job_store(const std::string& dir, const std::string& job,
                      const std::string& fingerprint, bool failed);

}  // namespace experiments
