// What the Slurm executor's two sources share (slurm_folders.cpp: the files under
// RUNS_DIR/slurm/, Slurm's view and gather; slurm_executor.cpp: submission, status, cancel).
// Not a public header.
#pragma once

#include <filesystem>
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

/// One line of RUNS_DIR/slurm/ledger.tsv: a job submitted to Slurm.
struct LedgerEntry {
    std::string slurm_id;  ///< "123", or "124_3" for task 3 of array job 124
    std::string job;
    std::string fingerprint;
    double time = 0;  ///< seconds since the epoch
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
};
/// Pending, running or about to run again (requeued, suspended, ...).
bool live_state(const std::string& state);
/// Slurm's state of each id (squeue for jobs it still knows, then sacct where the cluster
/// keeps accounting); an id neither knows is absent. Throws when squeue fails.
std::map<std::string, SlurmView> query_slurm(const std::set<std::string>& ids);

/// A job folder's done.json (finish_job_store).
struct DoneMarker {
    std::string job, fingerprint, status, sha256, slurm_job, host;
    double ended = 0;  ///< seconds since the epoch
};
/// nullopt when the folder has none (or one being replaced).
std::optional<DoneMarker> read_done(const std::filesystem::path& folder);

}  // namespace experiments::slurm_detail
