// What the runner's scheduler (runner.cpp), its executors (pretrain_executor.cpp,
// finetune_executor.cpp, analysis_executor.cpp) and a data-parallel job's other ranks
// (runner_jobs.cpp) must agree on exactly: where a variant's snapshots live, how a task's
// examples are read, the fine-tuning and pretraining settings of a job, the executors'
// interface (a JobContext lent by the scheduler) and the thread that keeps the runner's job
// claims alive (ClaimKeeper). Not a public header.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/tasks.h"
#include "engine/finetune.h"
#include "engine/trainer.h"
#include "experiments/experiment.h"
#include "experiments/glue_data.h"
#include "experiments/job_identity.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"
#include "study_layout.h"

namespace experiments::detail {

/// The folder of the fine-tuning tasks: spec.glue.data, or the built-in tasks (prepared once).
std::string glue_dir(const ExperimentSpec& spec);
/// Examples in the engine's plain form, labels as indices into the task's fixed label order.
std::vector<engine::LabeledText> labeled(const TaskInfo& task, const Split& split);
/// The gold labels (class index, or the STS-B score) of `xs`, as scoring takes them.
std::vector<double> gold_values(const TaskInfo& task, const std::vector<engine::LabeledText>& xs);

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

/// The engine settings of a fine-tuning job.
engine::FinetuneConfig finetune_config(const ExperimentSpec& spec, const Variant& v, const Job& job,
                                       const TaskInfo& task, int64_t threads);

/// A data-parallel job on a rank other than 0 (options.dist, options.only_job): the same
/// pretraining or fine-tuning as rank 0, without the results store (rank 0 records).
RunSummary run_worker_job(const BoundPlan& bound, const RunnerOptions& options,
                          const RunnerCallbacks& callbacks);

/// Runs argv as a child process (stdout to /dev/null, stderr kept: a failing child says why
/// in one line), with `env` set on top of this process's environment, and throws
/// std::runtime_error naming `what` when it does not exit with 0.
void run_child(std::vector<std::string> args, const std::string& what,
               const std::vector<std::pair<std::string, std::string>>& env = {});

/// Whole seconds from `then` to `now` (seconds since the epoch), never negative: the clocks
/// of two hosts may differ a little.
inline long long seconds_between(double then, double now) {
    return static_cast<long long>(now > then ? now - then + 0.5 : 0.0);
}

/// Keeps this process's job claims alive while a runner works: a thread that, through its own
/// store connection, sets the heartbeat of every claim the owner holds every `interval`, and
/// copies the caller's stop flag into `job_stop` every 50 ms (the flag the executors watch).
/// When the claim of the watched job disappears (another runner took it over after the
/// heartbeats stalled, e.g. while this process was suspended) it sets lost() and job_stop, so
/// the job stops and is left to the new owner.
class ClaimKeeper {
  public:
    ClaimKeeper(ResultStore store, ClaimOwner owner, std::chrono::milliseconds interval,
                const std::atomic<bool>* user_stop, std::atomic<bool>& job_stop);
    ~ClaimKeeper();  ///< Stops and joins the thread.
    ClaimKeeper(const ClaimKeeper&) = delete;
    ClaimKeeper& operator=(const ClaimKeeper&) = delete;

    /// Watches the claim of `job` (run in this process from now on); clears lost() and sets
    /// job_stop to the caller's stop flag. Call after claiming.
    void watch(std::int64_t experiment_id, const std::string& job);
    /// Stops watching. Call before releasing the claim.
    void unwatch();
    /// The watched job's claim was taken over by another runner.
    bool lost() const { return lost_.load(); }
    /// Runs `action` while no heartbeat is being written (the test hook raises a signal in
    /// it, which must not leave the store locked by a half-done write).
    void quietly(const std::function<void()>& action);

  private:
    void loop();

    ResultStore store_;
    ClaimOwner owner_;
    std::chrono::milliseconds interval_;
    const std::atomic<bool>* user_stop_;
    std::atomic<bool>& job_stop_;
    std::atomic<bool> lost_{false};
    std::mutex mutex_;  // guards watched_*, quit_
    std::condition_variable wake_;
    bool quit_ = false;
    std::int64_t watched_experiment_ = 0;
    std::string watched_job_;  // "" = none
    std::uint64_t watch_generation_ = 0;
    std::mutex write_mutex_;  // held while a heartbeat is written
    std::thread thread_;
};

/// What the scheduler lends an executor: the experiment, the store and its reporting.
struct JobContext {
    const ExperimentSpec& spec;
    const RunnerOptions& options;
    const RunnerCallbacks& callbacks;
    ResultStore& store;
    int64_t experiment_id;
    /// Progress inside the current job (fraction 0..1, a short status); the scheduler adds
    /// the plan's counts and ETA.
    std::function<void(double fraction, const std::string& status)> report;
    /// The test hook of RunnerOptions::raise_at_step: raises options.raise_signal on this
    /// process, with no heartbeat half-written (the pretraining calls it after that step).
    std::function<void()> simulate_crash;

    /// The stop flag is set (checked between steps and jobs).
    bool stopped() const { return callbacks.stop && callbacks.stop->load(); }
    /// One informational line.
    void say(const std::string& message) const {
        if (callbacks.on_message) callbacks.on_message(message);
    }
};

/// Pretraining of a variant with its snapshots (pretrain_executor.cpp).
class PretrainExecutor {
  public:
    explicit PretrainExecutor(const JobContext& ctx) : ctx_(ctx) {}
    /// The run row's pretraining columns: the resolved config (vocabulary size from the
    /// vocabulary file, when it exists yet) and the seed.
    void describe(const Job& job, RunRecord& record) const;
    /// Pretrains (resuming from the checkpoint), recording params, curves, the loss floor and
    /// the snapshots. False when stopped.
    bool run(const Job& job, int64_t run_id) const;

  private:
    bool record_shared_run(int64_t run_id, const Variant& v) const;
    /// A checkpoints row for every snapshot file of `v` the store lacks.
    void record_missing_snapshots(int64_t run_id, const Variant& v) const;
    const JobContext& ctx_;
};

/// One fine-tuning job: task x snapshot x lr x seed, scored GLUE-exactly
/// (finetune_executor.cpp). Keeps the tasks it has read for the jobs after.
class FinetuneExecutor {
  public:
    explicit FinetuneExecutor(const JobContext& ctx) : ctx_(ctx) {}
    /// The run row's fine-tuning columns: the seed, the pretraining run as parent, the config.
    void describe(const Job& job, RunRecord& record) const;
    /// Fine-tunes, recording per-epoch curves and the best epoch's GLUE rows and
    /// predictions. A zero-shot task (TaskInfo::zero_shot) is scored by the pretrained MLM
    /// instead, without training. False when stopped.
    bool run(const Job& job, int64_t run_id);

  private:
    bool run_zero_shot(const Job& job, int64_t run_id, const TaskData& data,
                       engine::BertForMaskedLM& model, const engine::WordPieceTokenizer& tokenizer,
                       const engine::FinetuneConfig& fc);
    const TaskData& task_data(const std::string& key);
    const std::string& glue_dir_cached();

    const JobContext& ctx_;
    std::string glue_dir_;
    std::map<std::string, TaskData> tasks_;
};

/// The outputs of a pretraining run (analysis_executor.cpp): each one not done with today's
/// identity is computed (a `tupe` child process, or this process for the analysis without
/// the executable) into its own folder, cleared first, and recorded whole by this process in
/// one transaction (ResultStore::record_output): its files with the identity, and for an
/// analysis its property metrics. A shared run folder's outputs are the owner's, copied.
class AnalysisExecutor {
  public:
    explicit AnalysisExecutor(const JobContext& ctx) : ctx_(ctx) {}
    /// Whether any output of the job's run is not done (pending, or changed under --redo).
    bool pending(const Job& job, int64_t run_id);
    /// Computes and records every output of the job's run that is not done.
    void run(const Job& job, int64_t run_id);

  private:
    /// `tupe analyze` on the plan's snapshot into plan.dir (or analyze_model in-process).
    void analyze(const Variant& v, const RunOutputPlan& plan, int64_t run_id) const;
    std::vector<ArtifactRecord> ablate(const Variant& v, const RunOutputPlan& plan,
                                       int64_t run_id) const;
    std::vector<ArtifactRecord> scan_heads(const Variant& v, const RunOutputPlan& plan,
                                           int64_t run_id) const;
    std::vector<ArtifactRecord> extrapolate(const Variant& v, const RunOutputPlan& plan,
                                            int64_t run_id) const;
    /// The owner's recorded files (and property metrics) of a shared folder's output.
    void copy_owner_output(const Variant& v, const RunOutputPlan& plan, const std::string& identity,
                           int64_t run_id);

    const JobContext& ctx_;
    FileHashes hashes_;
};

}  // namespace experiments::detail
