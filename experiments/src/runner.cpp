// The experiment runner (see runner.h): the scheduler. It makes the plan, skips finished jobs
// and resumes the rest, keeps the run rows common to every job (record, status, failure), reports
// progress with the plan ETA (plan_eta.h), and hands each job to the executor of its kind
// (pretrain_executor.cpp, finetune_executor.cpp, analysis_executor.cpp) or to child processes
// (parallel fine-tuning, data-parallel workers) through the process pool.
#include "experiments/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "analysis/tasks.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "experiments/build_info.h"
#include "experiments/glue_data.h"
#include "experiments/process_pool.h"
#include "experiments/result_store.h"
#include "experiments/synthetic_tasks.h"
#include "plan_eta.h"
#include "runner_internal.h"

namespace experiments {

namespace fs = std::filesystem;
using namespace detail;  // variant_named, run_child, JobContext and the executors

namespace {

using Clock = std::chrono::steady_clock;

std::string lr_text(double lr) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", lr);
    return buf;
}

std::string hostname() {
    char buf[256] = {0};
    gethostname(buf, sizeof buf - 1);
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
    r.host = hostname();
    r.torch_version = torch_version();
    r.git_commit = git_commit();
    return r;
}

class Runner {
  public:
    Runner(const ExperimentSpec& spec, const RunnerOptions& options, const RunnerCallbacks& cb)
        : spec_(spec),
          options_(options),
          cb_(cb),
          store_(ResultStore::open(spec.database, OpenMode::kReadWrite)),
          experiment_id_(store_.get_or_create_experiment(spec.name, spec.path, spec.yaml_text)),
          ctx_{spec_,
               options_,
               cb_,
               store_,
               experiment_id_,
               [this](double fraction, const std::string& status) { report(fraction, status); }},
          pretrain_(ctx_),
          finetune_(ctx_),
          analysis_(ctx_) {}

    RunSummary run() {
        const auto plan = make_plan(spec_);
        RunSummary summary;
        progress_.total = static_cast<int64_t>(plan.size());
        // Parallel fine-tuning: children run one job each (`tupe run FILE --job NAME`).
        const int64_t parallel = options_.jobs > 0 ? options_.jobs : spec_.jobs;
        std::vector<const Job*> finetunes;
        std::set<std::string> finished;  // one query for the ETA's "what is left"
        for (const auto& r : store_.list_runs(experiment_id_))
            if (r.status == "finished") finished.insert(r.name);
        for (const auto& job : plan)
            if ((options_.only_job.empty() || job.name == options_.only_job) &&
                !finished.count(job.name))
                eta_.add_pending(job.kind, job_tokens(spec_, job));
        for (const auto& job : plan) {
            if (!options_.only_job.empty() && job.name != options_.only_job) continue;
            if (stopped()) {
                summary.stopped = true;
                break;
            }
            auto existing = store_.find_run(experiment_id_, job.name);
            if (existing && existing->status == "finished" && job.kind == Job::Kind::kPretrain &&
                !analysis_.pending_steps(job, existing->id).empty()) {
                // Pretrained before the analysis block was added (or its analysis failed):
                // analyse the snapshots now; the run stays finished.
                progress_.current = job.name + " (analysis)";
                report(0, "analysing");
                analysis_.run(job, existing->id);
                ++summary.finished;
                ++progress_.done;
                continue;
            }
            if (existing && existing->status == "finished") {
                ++summary.skipped;
                ++progress_.done;
                continue;
            }
            if (job.kind == Job::Kind::kFinetune && parallel > 1 && options_.only_job.empty() &&
                options_.nproc_per_node <= 1) {
                finetunes.push_back(&job);
                continue;
            }
            if (options_.nproc_per_node > 1 && options_.only_job.empty()) {
                run_on_workers(job, summary);
                continue;
            }
            run_one(job, summary);
        }
        if (!finetunes.empty() && !summary.stopped) run_parallel(finetunes, parallel, summary);
        return summary;
    }

  private:
    bool stopped() const { return ctx_.stopped(); }
    void say(const std::string& m) const { ctx_.say(m); }

    void report(double fraction, const std::string& status) {
        progress_.job_fraction = fraction;
        progress_.job_status = status;
        const double elapsed = std::chrono::duration<double>(Clock::now() - job_start_).count();
        progress_.eta_seconds =
            eta_.seconds_left(current_ != nullptr, current_ ? current_->kind : Job::Kind::kPretrain,
                              current_tokens_, fraction, elapsed);
        if (cb_.on_progress) cb_.on_progress(progress_);
    }

    /// A job runs in this process (or on workers this process waits for): the ETA times it.
    void begin_timing(const Job& job) {
        current_ = &job;
        current_tokens_ = job_tokens(spec_, job);
        job_start_ = Clock::now();
        eta_.start(job.kind, current_tokens_);
    }
    void end_timing() {
        if (!current_) return;
        eta_.finish(current_->kind, current_tokens_,
                    std::chrono::duration<double>(Clock::now() - job_start_).count());
        current_ = nullptr;
    }

    /// The run's row: what it is, where it writes, and its kind's columns (resolved config).
    RunRecord record_for(const Job& job) {
        const Variant& v = variant_named(spec_, job.variant);
        RunRecord r = base_record(experiment_id_, job);
        r.out_dir = v.config.out_dir;
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
        return !stopped();
    }

    void run_one(const Job& job, RunSummary& summary) {
        progress_.current = job.name;
        begin_timing(job);
        report(0, "starting");
        // One upsert with every column, then the status (which stamps the start time).
        const int64_t run_id = store_.upsert_run(record_for(job));
        store_.set_run_status(run_id, "running");
        try {
            if (!execute(job, run_id)) {
                store_.set_run_status(run_id, "stopped");
                summary.stopped = true;
                current_ = nullptr;
                return;
            }
            store_.set_run_status(run_id, "finished");
            ++summary.finished;
            end_timing();
        } catch (const engine::TrainingDiverged& e) {
            store_.set_run_status(run_id, "failed", e.what());
            say("job " + job.name + " failed: " + e.what());
            ++summary.failed;
            end_timing();
        } catch (const std::exception& e) {
            // Anything else (bad data, bad config, store) stops the plan; the run says why.
            store_.set_run_status(run_id, "failed", e.what());
            throw;
        }
        ++progress_.done;
        report(0, "done");
    }

    /// `tupe run FILE --job NAME` with this run's --set overrides, plus `extra`.
    std::vector<std::string> job_command(const Job& job, std::vector<std::string> extra) const {
        std::vector<std::string> args = {options_.self_exe, "run", spec_.path, "--job", job.name};
        for (const auto& o : options_.overrides) args.insert(args.end(), {"--set", o});
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    }

    /// One job as nproc_per_node local data-parallel workers (`tupe run FILE --job NAME
    /// --nproc-per-node N`); their rank 0 records it in the store.
    void run_on_workers(const Job& job, RunSummary& summary) {
        TORCH_CHECK(!options_.self_exe.empty(), "data-parallel jobs need the path of tupe");
        progress_.current = job.name;
        const int64_t n = options_.nproc_per_node;
        begin_timing(job);
        report(0, "on " + std::to_string(n) + " workers");
        std::vector<std::string> extra = {"--nproc-per-node", std::to_string(n), "--quiet"};
        if (options_.threads > 0)
            extra.insert(extra.end(), {"--threads", std::to_string(options_.threads)});
        try {
            run_child(job_command(job, extra), "job " + job.name);
            ++summary.finished;
        } catch (const std::exception& e) {
            if (stopped()) {
                summary.stopped = true;
                current_ = nullptr;
                return;
            }
            ++summary.failed;
            say(std::string(e.what()) + " (see `tupe status`)");
        }
        end_timing();
        ++progress_.done;
        report(0, "done");
    }

    /// The fine-tuning jobs as `parallel` child processes at a time, each `tupe run FILE --job
    /// NAME`, which records its own run; a failed child is counted and the others go on.
    void run_parallel(const std::vector<const Job*>& jobs, int64_t parallel, RunSummary& summary) {
        TORCH_CHECK(!options_.self_exe.empty(), "parallel jobs need the path of tupe");
        say("running " + std::to_string(jobs.size()) + " fine-tuning jobs, " +
            std::to_string(parallel) + " at a time");
        ProcessPool pool;
        std::map<pid_t, const Job*> running;
        std::map<pid_t, Clock::time_point> launched;
        size_t next = 0;
        const int64_t threads =
            std::max<int64_t>(1, (options_.threads > 0 ? options_.threads : 2) / parallel);
        while (next < jobs.size() || !running.empty()) {
            while (next < jobs.size() && static_cast<int64_t>(running.size()) < parallel &&
                   !stopped()) {
                const Job* job = jobs[next++];
                ChildSpec child;
                child.path = options_.self_exe;
                child.argv = job_command(*job, {"--threads", std::to_string(threads), "--quiet"});
                const pid_t pid = pool.spawn(child);
                if (pid < 0) throw std::runtime_error("cannot start " + options_.self_exe);
                running[pid] = job;
                launched[pid] = Clock::now();
                eta_.start(job->kind, job_tokens(spec_, *job));
                progress_.current = job->name;
                report(0, std::to_string(running.size()) + " running");
            }
            if (running.empty()) break;
            const auto ended = pool.wait_any();
            if (!ended) continue;
            const pid_t pid = ended->pid;
            auto it = running.find(pid);
            if (it == running.end()) continue;
            const bool ok = exited_ok(ended->status);
            // Wall time shared by the children running side by side.
            eta_.finish(it->second->kind, job_tokens(spec_, *it->second),
                        std::chrono::duration<double>(Clock::now() - launched[pid]).count() /
                            static_cast<double>(parallel));
            if (ok)
                ++summary.finished;
            else {
                ++summary.failed;
                say("job " + it->second->name + " failed (see `tupe status`)");
            }
            running.erase(it);
            ++progress_.done;
            report(0, std::to_string(running.size()) + " running");
        }
        if (stopped()) summary.stopped = true;
    }

    const ExperimentSpec& spec_;
    RunnerOptions options_;
    RunnerCallbacks cb_;
    ResultStore store_;
    int64_t experiment_id_ = 0;
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
            for (const auto& task : tasks)
                for (double lr : spec.finetune.lrs)
                    for (uint64_t seed : spec.finetune.seeds) {
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
    return plan;
}

RunSummary run_experiment(const ExperimentSpec& spec, const RunnerOptions& options,
                          const RunnerCallbacks& callbacks) {
    if (options.dist && options.only_job.empty())
        throw std::invalid_argument("a data-parallel worker runs one job: pass --job NAME");
    if (options.dist && !options.dist->is_main()) return run_worker_job(spec, options, callbacks);
    Runner runner(spec, options, callbacks);
    return runner.run();
}

std::string experiment_status(const ExperimentSpec& spec) {
    const auto plan = make_plan(spec);
    std::map<std::string, RunRecord> runs;
    if (fs::exists(spec.database)) {
        auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
        if (auto e = store.find_experiment(spec.name))
            for (auto& r : store.list_runs(e->id)) runs[r.name] = r;
    }
    std::map<std::string, int> counts;
    std::ostringstream os;
    for (const auto& job : plan) {
        auto it = runs.find(job.name);
        const std::string status = it == runs.end() ? "pending" : it->second.status;
        ++counts[status];
        if (job.kind == Job::Kind::kPretrain || status == "failed" || status == "running") {
            os << "  " << status << std::string(10 - std::min<size_t>(9, status.size()), ' ')
               << job.name;
            if (it != runs.end() && job.kind == Job::Kind::kPretrain)
                os << "  (step " << it->second.step << ")";
            if (it != runs.end() && !it->second.error_message.empty())
                os << "  " << it->second.error_message;
            os << "\n";
        }
    }
    std::ostringstream head;
    head << spec.name << ": " << plan.size() << " jobs (" << spec.variants.size()
         << " pretraining, " << plan.size() - spec.variants.size() << " fine-tuning) in "
         << spec.database << "\n ";
    for (const auto& [status, n] : counts) head << " " << status << " " << n;
    head << "\n";
    return head.str() + os.str();
}

std::string prepare_builtin_tasks(const ExperimentSpec& spec) {
    const auto& data = spec.variants.front().config.data;
    const fs::path dir = fs::path(spec.runs_dir) / "builtin_tasks";
    std::ostringstream stamp;
    stamp << "corpus=" << data.corpus << " fraction=" << data.validation_fraction
          << " train=" << spec.glue.synthetic_train << " dev=" << spec.glue.synthetic_dev << "\n";
    const fs::path stamp_path = dir / "SOURCE.txt";
    {
        std::ifstream in(stamp_path);
        std::stringstream have;
        have << in.rdbuf();
        if (in && have.str() == stamp.str()) return dir.string();
    }
    // Sentences of the pretraining validation documents only: fine-tuning text the model
    // never saw during pretraining.
    SyntheticOptions options;
    options.train_size = spec.glue.synthetic_train;
    options.dev_size = spec.glue.synthetic_dev;
    options.validation_fraction = data.validation_fraction;
    write_synthetic_tasks(data.corpus, dir.string(), options);
    std::ofstream(stamp_path) << stamp.str();
    return dir.string();
}

}  // namespace experiments
