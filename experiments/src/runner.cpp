// The experiment runner (see runner.h): the scheduler. It makes the plan, claims each job in
// the results store before it runs it (so several runners share one plan: a job held by a live
// runner is left to it, a fine-tuning job waits for its pretraining, a stale claim is taken
// over), skips finished jobs and resumes the rest, keeps the run rows common to every job
// (record, status, failure), reports progress with the plan ETA (plan_eta.h), and hands each
// job to the executor of its kind (pretrain_executor.cpp, finetune_executor.cpp,
// analysis_executor.cpp) or to child processes (parallel fine-tuning, data-parallel workers)
// through the process pool, handing them its claim.
#include "experiments/runner.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "analysis/tasks.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/threads.h"
#include "experiments/build_info.h"
#include "experiments/glue_data.h"
#include "experiments/process_pool.h"
#include "experiments/result_store.h"
#include "plan_eta.h"
#include "runner_internal.h"

namespace experiments {

namespace fs = std::filesystem;
using namespace detail;  // variant_named, run_child, JobContext, ClaimKeeper and the executors

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string lr_text(double lr) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", lr);
    return buf;
}

std::vector<std::string> task_keys(const ExperimentSpec& spec) {
    std::vector<std::string> names = spec.glue.tasks;
    if (names.empty()) {
        if (spec.glue.data == "builtin") return analysis::synthetic_task_keys();
        // The paper's Table 1 tasks (WNLI left out), in its column order.
        for (const auto& key : analysis::paper_task_keys())
            if (fs::exists(fs::path(spec.glue.data) / find_task(key).name)) names.push_back(key);
        if (names.empty())
            throw engine::InputError(spec.glue.data,
                                     "no GLUE task folders found (expected e.g. CoLA/, MNLI/)");
    }
    std::vector<std::string> keys;
    for (const auto& n : names) keys.push_back(find_task(n).key);
    return keys;
}

RunRecord base_record(int64_t experiment_id, const Job& job) {
    RunRecord r;
    r.experiment_id = experiment_id;
    r.kind = job.kind == Job::Kind::kPretrain ? "pretrain" : "finetune";
    r.name = job.name;
    r.variant = job.variant;
    r.host = ClaimOwner::self().host;
    r.torch_version = torch_version();
    r.blas = engine::blas_description();
    r.git_commit = git_commit();
    return r;
}

/// timeout/12 within [lo, hi] seconds: how often claims are refreshed (hi 5 s) and how often
/// a waiting runner looks again (hi 2 s); a claim goes stale after 12 missed refreshes.
milliseconds fraction_of_timeout(double timeout_seconds, double lo, double hi) {
    return milliseconds(static_cast<int64_t>(1000 * std::clamp(timeout_seconds / 12, lo, hi)));
}

RunnerCallbacks with_stop(RunnerCallbacks callbacks, const std::atomic<bool>* stop) {
    callbacks.stop = stop;
    return callbacks;
}

class Runner {
  public:
    Runner(BoundPlan bound, const RunnerOptions& options, const RunnerCallbacks& cb)
        : bound_(std::move(bound)),
          spec_(bound_.spec),
          options_(options),
          user_stop_(cb.stop),
          cb_(with_stop(cb, &job_stop_)),
          store_(ResultStore::open(spec_.database, OpenMode::kReadWrite)),
          experiment_id_(store_.get_or_create_experiment(spec_.name, spec_.path, spec_.yaml_text)),
          owner_(ClaimOwner::self()),
          handoff_(ClaimOwner::parse(options.claim_from)),
          session_start_(utc_now_iso8601()),
          ctx_{spec_,
               options_,
               cb_,
               store_,
               experiment_id_,
               [this](double fraction, const std::string& status) { report(fraction, status); },
               [this] { simulate_crash(); }},
          pretrain_(ctx_),
          finetune_(ctx_),
          analysis_(ctx_) {
        if (!(options_.claim_timeout_seconds > 0))
            throw std::invalid_argument("the claim timeout must be a positive number of seconds");
    }

    RunSummary run() {
        plan_ = bound_.jobs;
        // Runs stored before run identities that their jobs' configs match: recorded now.
        for (const Job& job : plan_)
            if (job.adopt && in_scope(job))
                if (const auto run = store_.find_run(experiment_id_, job.name))
                    store_.set_run_identity(run->id, job.identity, job.fingerprint, job.cell);
        RunSummary summary;
        progress_.total = static_cast<int64_t>(plan_.size());
        // Parallel fine-tuning: children run one job each (`tupe run FILE --job NAME`).
        parallel_ = options_.jobs > 0 ? options_.jobs : spec_.jobs;
        pooled_ = parallel_ > 1 && options_.only_job.empty() && options_.nproc_per_node <= 1;
        std::set<std::string> finished;  // one query for the ETA's "what is left"
        for (const auto& r : store_.list_runs(experiment_id_))
            if (r.status == "finished") finished.insert(r.name);
        for (const auto& job : plan_)
            if (in_scope(job) && !finished.count(job.name)) {
                eta_.add_pending(job.kind, job_work(spec_, job));
                eta_pending_.insert(job.name);
            }
        ClaimKeeper keeper(ResultStore::open(spec_.database, OpenMode::kReadWrite), owner_,
                           fraction_of_timeout(options_.claim_timeout_seconds, 0.1, 5.0),
                           user_stop_, job_stop_);
        keeper_ = &keeper;
        try {
            schedule(summary);
        } catch (...) {
            keeper_ = nullptr;
            throw;
        }
        keeper_ = nullptr;
        return summary;
    }

  private:
    struct Child {
        const Job* job;
        Clock::time_point launched;
    };

    /// Releases a claim of this runner when it goes out of scope, the job unwatched first.
    class ClaimRelease {
      public:
        ClaimRelease(Runner& runner, const Job& job) : runner_(runner), job_(job) {}
        ~ClaimRelease() { runner_.release(job_); }
        ClaimRelease(const ClaimRelease&) = delete;
        ClaimRelease& operator=(const ClaimRelease&) = delete;

      private:
        Runner& runner_;
        const Job& job_;
    };

    /// The user's stop flag (Ctrl-C); the executors watch job_stop_, which the claim keeper
    /// sets from it (and when the claim of their job is lost).
    bool stopped() const { return user_stop_ && user_stop_->load(); }
    void say(const std::string& m) const { ctx_.say(m); }
    bool in_scope(const Job& job) const {
        return options_.only_job.empty() || job.name == options_.only_job;
    }

    void report(double fraction, const std::string& status) {
        progress_.job_fraction = fraction;
        progress_.job_status = status;
        const double elapsed = std::chrono::duration<double>(Clock::now() - job_start_).count();
        progress_.eta_seconds =
            eta_.seconds_left(current_ != nullptr, current_ ? current_->kind : Job::Kind::kPretrain,
                              current_tokens_, fraction, elapsed);
        if (cb_.on_progress) cb_.on_progress(progress_);
    }

    /// The scheduling passes: each reads the runs once, then claims and runs (or hands to a
    /// child) every job it can, in plan order; then it reaps a child, or, when every job left
    /// is held by another runner or waits for a pretraining held by one, it polls.
    void schedule(RunSummary& summary) {
        bool said_waiting = false;
        while (!summary.stopped) {
            if (stopped()) {
                summary.stopped = true;
                break;
            }
            std::map<std::string, RunRecord> runs;
            for (auto& r : store_.list_runs(experiment_id_)) {
                std::string name = r.name;
                runs.emplace(std::move(name), std::move(r));
            }
            // Jobs other runners hold live, read once: they are passed over without a write
            // transaction (claim_job decides for every other job).
            std::map<std::string, JobClaim> live_elsewhere;
            const double now = unix_time_now();
            for (auto& c : store_.list_claims(experiment_id_))
                if (c.held() && c.owner != owner_ && !(handoff_ && c.owner == *handoff_) &&
                    claim_health(c, options_.claim_timeout_seconds, now) == ClaimHealth::kLive)
                    live_elsewhere.emplace(c.job, c);
            bool acted = false;
            std::vector<std::string> held;  // "job on HOST:PID"
            for (const Job& job : plan_) {
                if (!in_scope(job) || done_.count(job.name) || running_child(job)) continue;
                if (stopped()) {
                    summary.stopped = true;
                    break;
                }
                const auto found = runs.find(job.name);
                const RunRecord* run = found == runs.end() ? nullptr : &found->second;
                bool analysis_only = false;
                if (run && run->status == "finished") {
                    // Pretrained before the analysis block was added (or its analysis failed):
                    // analyse the snapshots now; the run stays finished.
                    analysis_only =
                        job.kind == Job::Kind::kPretrain && analysis_.pending(job, run->id);
                    if (!analysis_only) {
                        settle(job);
                        ++summary.skipped;
                        continue;
                    }
                } else if (run && run->status == "failed" && run->end_time >= session_start_) {
                    // Failed in another runner since this one started: not retried now.
                    settle(job);
                    ++summary.skipped;
                    continue;
                }
                if (const std::string failed = failed_pretraining(job, runs); !failed.empty()) {
                    block(job, failed);
                    ++summary.blocked;
                    continue;
                }
                if (waits_for_pretraining(job, runs, live_elsewhere)) continue;
                if (const auto other = live_elsewhere.find(job.name);
                    other != live_elsewhere.end() && !options_.dist) {
                    held.push_back(job.name + " on " + other->second.owner.text());
                    continue;
                }
                if (pooled_ && job.kind == Job::Kind::kFinetune &&
                    static_cast<int64_t>(children_.size()) >= parallel_)
                    continue;  // the pool is full: a later pass
                ClaimOptions claim_options;
                claim_options.stale_after_seconds = options_.claim_timeout_seconds;
                claim_options.handoff_from = handoff_;
                claim_options.allow_finished = analysis_only;
                const ClaimResult claim =
                    store_.claim_job(experiment_id_, job.name, owner_, claim_options);
                if (claim.outcome == ClaimResult::Outcome::kFinished) {
                    settle(job);
                    ++summary.skipped;
                    continue;
                }
                if (claim.outcome == ClaimResult::Outcome::kHeld) {
                    const std::string holder = claim.previous->owner.text();
                    // A data-parallel rank 0 cannot wait: its peers are already computing.
                    if (options_.dist)
                        throw std::runtime_error("job " + job.name + " is being run by " + holder +
                                                 " (`tupe status` shows it)");
                    held.push_back(job.name + " on " + holder);
                    continue;
                }
                if (claim.previous && !(handoff_ && claim.previous->owner == *handoff_))
                    say(takeover_message(job, *claim.previous));
                acted = true;
                said_waiting = false;
                dispatch(job, analysis_only, run ? run->id : 0, summary);
                if (summary.stopped) break;
            }
            if (summary.stopped) break;
            if (children_.empty() && all_done()) break;
            if (!children_.empty()) {
                reap_child(summary);
                continue;
            }
            if (acted) continue;
            // Nothing to do here now: wait for the other runners.
            if (!said_waiting) {
                said_waiting = true;
                say(waiting_message(held));
            }
            progress_.current = "waiting for other runners";
            report(0, std::to_string(held.size()) + " jobs held elsewhere");
            const auto until =
                Clock::now() + fraction_of_timeout(options_.claim_timeout_seconds, 0.1, 2.0);
            while (Clock::now() < until && !stopped())
                std::this_thread::sleep_for(milliseconds(50));
        }
        // Children still running after a stop had the Ctrl-C too (same process group).
        while (!children_.empty()) reap_child(summary);
        if (stopped()) summary.stopped = true;
    }

    /// The claimed job, by how it runs: a child of the pool (which takes the claim over), on
    /// data-parallel workers, or here; the claim is released when it is done here.
    void dispatch(const Job& job, bool analysis_only, int64_t run_id, RunSummary& summary) {
        if (pooled_ && job.kind == Job::Kind::kFinetune) {
            spawn_child(job);
            return;
        }
        ClaimRelease release(*this, job);
        if (analysis_only) {
            keeper_->watch(experiment_id_, job.name);
            progress_.current = job.name + " (analysis)";
            report(0, "analysing");
            analysis_.run(job, run_id);
            ++summary.finished;
            settle(job);
            return;
        }
        if (options_.nproc_per_node > 1 && options_.only_job.empty()) {
            if (!run_on_workers(job, summary)) return;
        } else {
            keeper_->watch(experiment_id_, job.name);
            if (!run_one(job, summary)) return;
        }
        settle(job);
        report(0, "done");
    }

    /// A fine-tuning job waits while its variant's pretraining is neither finished nor done
    /// by this runner. For the whole plan that means another runner holds it (this one claimed
    /// every pretraining it could earlier in the pass); for one job (--job), only while
    /// another runner holds it live; a data-parallel rank 0 never waits.
    bool waits_for_pretraining(const Job& job, const std::map<std::string, RunRecord>& runs,
                               const std::map<std::string, JobClaim>& live_elsewhere) const {
        if (job.kind != Job::Kind::kFinetune || done_.count(job.variant) || options_.dist)
            return false;
        const auto it = runs.find(job.variant);
        if (it != runs.end() && it->second.status == "finished") return false;
        return options_.only_job.empty() || live_elsewhere.count(job.variant) > 0;
    }

    /// The error of the job's pretraining when it failed in this session (here or in another
    /// runner): the fine-tuning cannot run; "" otherwise.
    std::string failed_pretraining(const Job& job,
                                   const std::map<std::string, RunRecord>& runs) const {
        if (job.kind != Job::Kind::kFinetune) return "";
        if (const auto it = failed_here_.find(job.variant); it != failed_here_.end())
            return it->second;
        const auto it = runs.find(job.variant);
        if (it != runs.end() && it->second.status == "failed" &&
            it->second.end_time >= session_start_)
            return it->second.error_message;
        return "";
    }

    /// A fine-tuning whose pretraining failed: its run row says so (status blocked), and the
    /// plan goes on with the other variants.
    void block(const Job& job, const std::string& pretraining_error) {
        RunRecord r = record_for(job);
        r.status = "blocked";
        r.error_message = "its pretraining " + job.variant + " failed: " + pretraining_error;
        store_.upsert_run(r);
        settle(job);
    }

    bool all_done() const {
        for (const auto& job : plan_)
            if (in_scope(job) && !done_.count(job.name)) return false;
        return true;
    }

    bool running_child(const Job& job) const {
        for (const auto& [pid, child] : children_)
            if (child.job == &job) return true;
        return false;
    }

    /// The job needs nothing more from this runner.
    void settle(const Job& job) {
        done_.insert(job.name);
        progress_.done = static_cast<int64_t>(done_.size());
        // Done by another runner: no longer part of what this one has left.
        if (eta_pending_.erase(job.name)) eta_.add_pending(job.kind, -job_work(spec_, job));
    }

    /// Releases this runner's claim on the job (no-op when a child took it over); a release
    /// that fails leaves a claim that goes stale once this process is gone.
    void release(const Job& job) noexcept {
        try {
            if (keeper_) keeper_->unwatch();
            store_.release_claim(experiment_id_, job.name, owner_);
        } catch (const std::exception&) {
        }
    }

    std::string takeover_message(const Job& job, const JobClaim& previous) const {
        const double now = unix_time_now();
        const bool gone =
            claim_health(previous, options_.claim_timeout_seconds, now) == ClaimHealth::kOwnerGone;
        return "taking over job " + job.name + " from " + previous.owner.text() + " (" +
               (gone ? "no such process, " : "") + "last heartbeat " +
               std::to_string(seconds_between(previous.heartbeat_time, now)) + " s ago)";
    }

    std::string waiting_message(const std::vector<std::string>& held) const {
        size_t left = 0;
        for (const auto& job : plan_)
            if (in_scope(job) && !done_.count(job.name)) ++left;
        std::string text = "waiting for other runners: " + std::to_string(left) +
                           (left == 1 ? " job left" : " jobs left");
        for (size_t i = 0; i < held.size() && i < 3; ++i) text += (i == 0 ? ", " : "; ") + held[i];
        if (held.size() > 3) text += "; ...";
        return text;
    }

    /// A job runs in this process (or on workers this process waits for): the ETA times it.
    void begin_timing(const Job& job) {
        current_ = &job;
        current_tokens_ = job_work(spec_, job);
        job_start_ = Clock::now();
        eta_.start(job.kind, current_tokens_);
        eta_pending_.erase(job.name);
    }
    void end_timing() {
        if (!current_) return;
        eta_.finish(current_->kind, current_tokens_,
                    std::chrono::duration<double>(Clock::now() - job_start_).count());
        current_ = nullptr;
    }
    /// A job started here and left unfinished to another runner: out of the ETA, unmeasured.
    void drop_timing() {
        if (!current_) return;
        // start() with negative tokens moves them from running back to pending...
        eta_.start(current_->kind, -current_tokens_);
        // ... and a negative add_pending removes them from pending.
        eta_.add_pending(current_->kind, -current_tokens_);
        current_ = nullptr;
    }

    /// The run's row: what it is, where it writes, and its kind's columns (resolved config).
    RunRecord record_for(const Job& job) {
        const Variant& v = variant_named(spec_, job.variant);
        RunRecord r = base_record(experiment_id_, job);
        r.out_dir = v.config.out_dir;
        r.identity = job.identity;
        r.fingerprint = job.fingerprint;
        r.cell = job.cell;
        if (job.kind == Job::Kind::kPretrain)
            pretrain_.describe(job, r);
        else
            finetune_.describe(job, r);
        return r;
    }

    /// The job's work by kind. A pretraining job includes the analysis of its snapshots,
    /// recorded against its run. False when stopped.
    bool execute(const Job& job, int64_t run_id) {
        if (job.kind == Job::Kind::kFinetune) return finetune_.run(job, run_id);
        if (!pretrain_.run(job, run_id)) return false;
        analysis_.run(job, run_id);
        return !ctx_.stopped();
    }

    /// Runs the claimed job in this process. True when it ended (finished or failed); false
    /// when it was stopped, or its claim was taken over by another runner meanwhile.
    bool run_one(const Job& job, RunSummary& summary) {
        progress_.current = job.name;
        begin_timing(job);
        report(0, "starting");
        // One upsert with every column, then the status (which stamps the start time).
        const int64_t run_id = store_.upsert_run(record_for(job));
        store_.set_run_status(run_id, "running");
        try {
            if (!execute(job, run_id)) {
                if (keeper_->lost() && !stopped()) {
                    // The other runner owns the run row now: its status is left to it.
                    say("job " + job.name +
                        ": another runner took over its claim while this one was not "
                        "heard from; leaving the job to it");
                    drop_timing();
                    return false;
                }
                store_.set_run_status(run_id, "stopped");
                summary.stopped = true;
                current_ = nullptr;
                return false;
            }
            store_.set_run_status(run_id, "finished");
            ++summary.finished;
            end_timing();
        } catch (const engine::TrainingDiverged& e) {
            store_.set_run_status(run_id, "failed", e.what());
            say("job " + job.name + " failed: " + e.what());
            if (job.kind == Job::Kind::kPretrain) failed_here_[job.name] = e.what();
            ++summary.failed;
            end_timing();
        } catch (const std::exception& e) {
            // Anything else (bad data, bad config, store) stops the plan; the run says why.
            store_.set_run_status(run_id, "failed", e.what());
            throw;
        }
        return true;
    }

    /// The test hook (RunnerOptions::raise_at_step): a crash or a hang at a known step.
    void simulate_crash() {
        const int sig = options_.raise_signal;
        if (keeper_)
            keeper_->quietly([sig] { ::raise(sig); });
        else
            ::raise(sig);
    }

    /// `tupe run FILE --job NAME` with this run's --set overrides, plus `extra`.
    std::vector<std::string> job_command(const Job& job, std::vector<std::string> extra) const {
        std::vector<std::string> args = {options_.self_exe, "run", spec_.path, "--job", job.name};
        for (const auto& o : options_.overrides) args.insert(args.end(), {"--set", o});
        if (options_.new_runs) args.push_back("--new-runs");
        for (const auto& block : options_.redo) args.insert(args.end(), {"--redo", block});
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    }

    /// What a child started for a claimed job needs to take the claim over.
    std::vector<std::pair<std::string, std::string>> child_env() const {
        char timeout[32];
        std::snprintf(timeout, sizeof timeout, "%g", options_.claim_timeout_seconds);
        return {{kClaimFromEnv, owner_.text()}, {kClaimTimeoutEnv, timeout}};
    }

    /// One job as nproc_per_node local data-parallel workers (`tupe run FILE --job NAME
    /// --nproc-per-node N`); their rank 0 takes the claim over and records the job. False
    /// when stopped.
    bool run_on_workers(const Job& job, RunSummary& summary) {
        TORCH_CHECK(!options_.self_exe.empty(), "data-parallel jobs need the path of tupe");
        progress_.current = job.name;
        const int64_t n = options_.nproc_per_node;
        begin_timing(job);
        report(0, "on " + std::to_string(n) + " workers");
        std::vector<std::string> extra = {"--nproc-per-node", std::to_string(n), "--quiet"};
        if (options_.threads > 0)
            extra.insert(extra.end(), {"--threads", std::to_string(options_.threads)});
        try {
            run_child(job_command(job, extra), "job " + job.name, child_env());
            ++summary.finished;
        } catch (const std::exception& e) {
            if (stopped()) {
                summary.stopped = true;
                current_ = nullptr;
                return false;
            }
            ++summary.failed;
            say(std::string(e.what()) + " (see `tupe status`)");
        }
        end_timing();
        return true;
    }

    /// A claimed fine-tuning job as a child process `tupe run FILE --job NAME`, which takes
    /// the claim over and records its own run; at most parallel_ at a time.
    void spawn_child(const Job& job) {
        TORCH_CHECK(!options_.self_exe.empty(), "parallel jobs need the path of tupe");
        if (!said_parallel_) {
            said_parallel_ = true;
            size_t left = 0;
            for (const auto& j : plan_)
                if (j.kind == Job::Kind::kFinetune && !done_.count(j.name)) ++left;
            say("running " + std::to_string(left) + " fine-tuning jobs, " +
                std::to_string(parallel_) + " at a time");
        }
        const int64_t threads =
            std::max<int64_t>(1, (options_.threads > 0 ? options_.threads : 2) / parallel_);
        ChildSpec child;
        child.path = options_.self_exe;
        child.argv = job_command(job, {"--threads", std::to_string(threads), "--quiet"});
        child.env = child_env();
        const pid_t pid = pool_.spawn(child);
        if (pid < 0) {
            release(job);
            throw std::runtime_error("cannot start " + options_.self_exe);
        }
        children_[pid] = {&job, Clock::now()};
        eta_.start(job.kind, job_work(spec_, job));
        eta_pending_.erase(job.name);
        progress_.current = job.name;
        report(0, std::to_string(children_.size()) + " running");
    }

    /// Waits for one child of the pool and counts it; a failed child is counted and the
    /// others go on.
    void reap_child(RunSummary& summary) {
        const auto ended = pool_.wait_any();
        if (!ended) {
            // No child left to wait for (reaped elsewhere): count them as failed.
            for (const auto& [pid, child] : children_) {
                ++summary.failed;
                release(*child.job);
                settle(*child.job);
            }
            children_.clear();
            return;
        }
        const auto it = children_.find(ended->pid);
        if (it == children_.end()) return;
        const Job& job = *it->second.job;
        // Wall time shared by the children running side by side.
        eta_.finish(job.kind, job_work(spec_, job),
                    std::chrono::duration<double>(Clock::now() - it->second.launched).count() /
                        static_cast<double>(parallel_));
        if (exited_ok(ended->status)) {
            ++summary.finished;
        } else {
            ++summary.failed;
            say("job " + job.name + " failed (see `tupe status`)");
        }
        children_.erase(it);
        release(job);  // a child that never took its claim over
        settle(job);
        report(0, std::to_string(children_.size()) + " running");
    }

    const BoundPlan bound_;
    const ExperimentSpec& spec_;  // bound_.spec: the study with its variants' run names
    RunnerOptions options_;
    const std::atomic<bool>* user_stop_;  // the caller's stop flag (Ctrl-C)
    std::atomic<bool> job_stop_{false};   // the executors' stop flag, set by the claim keeper
    RunnerCallbacks cb_;                  // the caller's, with stop = &job_stop_
    ResultStore store_;
    int64_t experiment_id_ = 0;
    ClaimOwner owner_;                   // this process
    std::optional<ClaimOwner> handoff_;  // the runner that started this one for its job
    std::string session_start_;          // ISO-8601: a failure after it is not retried
    std::vector<Job> plan_;
    std::set<std::string> done_;  // jobs that need nothing more from this runner
    std::map<std::string, std::string> failed_here_;  // pretrainings that failed here: error
    std::set<std::string> eta_pending_;               // jobs counted as pending in the ETA
    ClaimKeeper* keeper_ = nullptr;                   // while run() runs
    int64_t parallel_ = 1;
    bool pooled_ = false;  // fine-tuning jobs go to child processes
    bool said_parallel_ = false;
    ProcessPool pool_;
    std::map<pid_t, Child> children_;
    PlanProgress progress_;
    PlanEta eta_;
    const Job* current_ = nullptr;  // the job timed in this process, if any
    double current_tokens_ = 0;
    Clock::time_point job_start_ = Clock::now();
    JobContext ctx_;  // lent to the executors below: spec, options, callbacks, store, report
    PretrainExecutor pretrain_;
    FinetuneExecutor finetune_;
    AnalysisExecutor analysis_;
};

}  // namespace

std::vector<Job> make_plan(const ExperimentSpec& spec) {
    std::vector<Job> plan;
    for (const auto& v : spec.variants) {
        Job j;
        j.kind = Job::Kind::kPretrain;
        j.name = v.name;
        j.variant = v.name;
        plan.push_back(j);
    }
    const auto tasks = task_keys(spec);
    for (const auto& v : spec.variants)
        for (int64_t step : spec.checkpoint_steps(v))
            for (const auto& task : tasks) {
                // A zero-shot task trains nothing: one job, at the first lr and seed.
                const bool zero_shot = find_task(task).zero_shot;
                const std::vector<double> lrs =
                    zero_shot ? std::vector<double>{spec.finetune.lrs.front()} : spec.finetune.lrs;
                const std::vector<uint64_t> seeds =
                    zero_shot ? std::vector<uint64_t>{spec.finetune.seeds.front()}
                              : v.finetune_seeds_or(spec.finetune.seeds);
                for (double lr : lrs)
                    for (uint64_t seed : seeds) {
                        Job j;
                        j.kind = Job::Kind::kFinetune;
                        j.variant = v.name;
                        j.checkpoint_step = step;
                        j.task = task;
                        j.lr = lr;
                        j.seed = seed;
                        j.name = v.name + "/step" + std::to_string(step) + "/" + task + "/lr" +
                                 lr_text(lr) + "/seed" + std::to_string(seed);
                        plan.push_back(j);
                    }
            }
    return plan;
}

RunSummary run_experiment(const ExperimentSpec& spec, const RunnerOptions& options,
                          const RunnerCallbacks& callbacks) {
    if (options.dist && options.only_job.empty())
        throw std::invalid_argument("a data-parallel worker runs one job: pass --job NAME");
    BoundPlan bound = bind_plan(
        spec, options.new_runs ? ChangedJobs::kRunBeside : ChangedJobs::kRefuse, options.redo);
    if (!options.only_job.empty()) job_named(bound.jobs, spec, options.only_job);  // exists?
    if (options.dist && !options.dist->is_main()) return run_worker_job(bound, options, callbacks);
    Runner runner(std::move(bound), options, callbacks);
    return runner.run();
}

}  // namespace experiments
