// What the Slurm executor's two sources share (slurm_folders.cpp: the files under
// RUNS_DIR/slurm/, Slurm's view and gather; slurm_executor.cpp: submission, status, cancel).
// Not a public header.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "experiments/experiment.h"
#include "experiments/runner.h"

namespace experiments::slurm_detail {

/// RUNS_DIR/slurm, absolute.
std::filesystem::path slurm_dir(const ExperimentSpec& spec);
/// A job's folder: RUNS_DIR/slurm/jobs/FINGERPRINT (its own store, its done.json).
std::filesystem::path job_folder(const ExperimentSpec& spec, const Job& job);

/// `text` in single quotes for bash.
std::string shell_quote(const std::string& text);
/// The first line of `text`, trailing blanks removed.
std::string first_line(const std::string& text);
std::vector<std::string> split(const std::string& text, char separator);

/// A command's exit status (128 + signal when killed) with its stdout and stderr.
struct CommandResult {
    int status = -1;
    std::string out, err;
};
/// Runs argv (words quoted; no shell expansion of them) and waits for it.
CommandResult run_command(const std::vector<std::string>& argv);

/// One line of RUNS_DIR/slurm/ledger.tsv: a job submitted to Slurm. A Slurm id alone names
/// a job only within one cluster and one life of its controller (a reinstalled controller
/// counts from 1 again), so a record Slurm gives for the id is this job's only when its
/// cluster, job name and submit time agree (record_matches).
struct LedgerEntry {
    std::string slurm_id;  ///< "123", or "124_3" for task 3 of array job 124
    std::string job;
    std::string fingerprint;
    double time = 0;         ///< When sbatch took it, seconds since the epoch
    std::string cluster;     ///< Slurm's ClusterName ("" in ledgers written before it)
    std::string slurm_name;  ///< The Slurm job name, tupe:STUDY:JOB ("" likewise)
};
std::vector<LedgerEntry> read_ledger(const ExperimentSpec& spec);
/// Appends (the submitting process is the ledger's only writer).
void append_ledger(const ExperimentSpec& spec, const std::vector<LedgerEntry>& entries);
/// The newest entry of each job.
std::map<std::string, LedgerEntry> latest_entries(const std::vector<LedgerEntry>& ledger);

/// What Slurm says of one job.
struct SlurmView {
    std::string state;  ///< PENDING, RUNNING, COMPLETED, FAILED, PREEMPTED, ... ("" = unknown)
    std::string node;
    std::string reason;
    int exit_code = -1;  ///< The batch script's exit status, -1 when unknown
    int signal = 0;
    double submit_time = 0;  ///< Seconds since the epoch; 0 unknown (a requeue moves it on)
    double start_time = 0;   ///< Of the current (or last) attempt; 0 not started
    std::string cluster, name;
    bool from_accounting = false;  ///< Read from sacct: squeue no longer knew the job
};
/// Pending, running or about to run again (requeued, suspended, ...).
bool live_state(const std::string& state);
/// Whether Slurm's record `view` is the job the ledger entry submitted: the same cluster and
/// job name (where the entry has them), submitted no earlier than the entry (a requeue gives
/// a later submit time; an id reused by a restarted controller names another job).
bool record_matches(const LedgerEntry& entry, const SlurmView& view);
/// Slurm's view of each entry's job, by job name (squeue for jobs it still knows, then sacct
/// with every record of a reused id, where the cluster keeps accounting); a job whose record
/// neither knows is absent. Throws when squeue fails.
std::map<std::string, SlurmView> query_slurm(const std::map<std::string, LedgerEntry>& latest);
/// The cluster's name (ClusterName, `scontrol show config`); "" when it cannot be asked.
std::string slurm_cluster_name();
/// "2026-12-07T14:09:38" (Slurm's local time) as seconds since the epoch; 0 for N/A, Unknown.
double parse_slurm_time(const std::string& text);

/// A job folder's done.json (finish_job_store).
struct DoneMarker {
    std::string job, fingerprint, status, sha256, slurm_job, host;
    double ended = 0;  ///< seconds since the epoch
};
/// nullopt when the folder has none (or one being replaced).
std::optional<DoneMarker> read_done(const std::filesystem::path& folder);

/// This host's name (gethostname).
std::string host_name();

/// The newest heartbeat of the held claim on `job` in the job folder's own store
/// (job.sqlite), seconds since the epoch; 0 when it holds none or cannot be read.
double job_heartbeat(const std::filesystem::path& folder, const std::string& experiment,
                     const std::string& job);

/// One submitter per study at a time: an exclusive lock on RUNS_DIR/slurm/submit.lock
/// (flock), naming its holder HOST:PID inside. A second `tupe run --executor slurm` of the
/// study waits for it, saying once whom it waits for, then submits only what is left.
class SubmitLock {
  public:
    /// Blocks until the lock is this process's; `say` gets the one line when it must wait.
    SubmitLock(const std::filesystem::path& slurm_dir,
               const std::function<void(const std::string&)>& say);
    ~SubmitLock();
    SubmitLock(const SubmitLock&) = delete;
    SubmitLock& operator=(const SubmitLock&) = delete;

  private:
    int fd_ = -1;
};

}  // namespace experiments::slurm_detail
