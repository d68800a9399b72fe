// The Slurm executor (experiments/slurm.h): the plan as sbatch jobs with dependencies, the
// ledger of what was submitted, Slurm's view of it (squeue, else sacct), `tupe gather` and
// `tupe cancel`, and the job side's store folder.
//
// RUNS_DIR/slurm/ holds everything: ledger.tsv (one line per submitted job: Slurm id, job,
// fingerprint, time, cluster, Slurm job name; written under submit.lock, one submitter of the
// study at a time), scripts/ (each batch script, and an array job's list of jobs), logs/
// (Slurm's output files, appended to by each attempt) and jobs/FINGERPRINT/ (a job's own
// store and done.json). Every path in it must be on a filesystem all nodes see.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "engine/errors.h"
#include "experiments/result_store.h"
#include "experiments/slurm.h"
#include "slurm_internal.h"

namespace experiments {

namespace fs = std::filesystem;

using namespace slurm_detail;

// ---------------------------------------------------------------------------------------
// Submission.

namespace slurm_detail {

struct Submitter {
    const ExperimentSpec& spec;  // bound.spec
    const SlurmOptions& options;
    const RunnerCallbacks& callbacks;
    const std::string file;     // the study file, absolute
    const std::string cluster;  // Slurm's ClusterName, kept in the ledger
    int counter = 0;

    void say(const std::string& line) const {
        if (callbacks.on_message) callbacks.on_message(line);
    }

    int64_t threads() const {
        return options.threads > 0 ? options.threads : options.cpus_per_task;
    }

    /// `tupe run FILE --job "$JOB" --job-store "$DIR" ...` as shell words.
    std::string tupe_line(const std::string& job_word, const std::string& dir_word) const {
        std::string line = shell_quote(options.self_exe) + " run " + shell_quote(file) + " --job " +
                           job_word + " --job-store " + dir_word;
        if (threads() > 0) line += " --threads " + std::to_string(threads());
        for (const auto& o : options.overrides) line += " --set " + shell_quote(o);
        if (options.new_runs) line += " --new-runs";
        for (const auto& block : options.redo) line += " --redo " + block;
        return line;
    }

    fs::path write_script(const std::string& label, const std::string& body) {
        const fs::path dir = slurm_dir(spec) / "scripts";
        fs::create_directories(dir);
        fs::create_directories(slurm_dir(spec) / "logs");
        const fs::path path = dir / (std::to_string(std::time(nullptr)) + "-" +
                                     std::to_string(++counter) + "-" + label + ".sh");
        std::ofstream out(path);
        out << "#!/bin/bash\n"
            << "# Written by `tupe run " << spec.path << " --executor slurm`.\n"
            << "set -euo pipefail\n"
            << "cd " << shell_quote(fs::current_path().string()) << "\n"
            << "export TUPE_STORE_JOURNAL=delete\n"
            // Each attempt appends to the job's log (--open-mode=append) under a header.
            << "id=${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}\n"
            << "echo \"== tupe: attempt $((${SLURM_RESTART_COUNT:-0} + 1)) of Slurm job "
               "${id:-$SLURM_JOB_ID} on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ) ==\"\n"
            << body;
        out.flush();
        if (!out) throw engine::InputError(path.string(), "cannot write the batch script");
        fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
        return path;
    }

    /// sbatch --parsable with the study's options; returns the job id.
    std::string sbatch(const fs::path& script, const std::string& name, bool pretraining,
                       const std::vector<std::string>& extra) {
        std::vector<std::string> argv = {
            "sbatch",    "--parsable",        "--job-name=" + name, "--kill-on-invalid-dep=yes",
            "--requeue", "--open-mode=append"};
        if (options.signal_before > 0)
            argv.push_back("--signal=B:USR1@" + std::to_string(options.signal_before));
        if (!options.partition.empty()) argv.push_back("--partition=" + options.partition);
        if (!options.account.empty()) argv.push_back("--account=" + options.account);
        if (!options.time.empty()) argv.push_back("--time=" + options.time);
        if (options.cpus_per_task > 0)
            argv.push_back("--cpus-per-task=" + std::to_string(options.cpus_per_task));
        if (pretraining) {
            argv.push_back("--nodes=" + std::to_string(options.nodes));
            argv.push_back("--ntasks-per-node=" + std::to_string(ranks_per_node()));
            if (options.gpus_per_job > 0)
                argv.push_back("--gpus=" + std::to_string(options.gpus_per_job));
        } else if (options.gpus_per_job > 0) {
            argv.push_back("--gpus=1");  // a fine-tuning job is one process
        }
        for (const auto& a : options.sbatch_args) argv.push_back(a);
        for (const auto& a : extra) argv.push_back(a);
        argv.push_back(script.string());
        const auto r = run_command(argv);
        const std::string id = first_line(r.out).substr(0, first_line(r.out).find(';'));
        if (r.status != 0 || id.empty() ||
            !std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(c); }))
            throw std::runtime_error("sbatch refused " + script.string() + ": " +
                                     first_line(r.err.empty() ? r.out : r.err));
        return id;
    }

    int64_t ranks_per_node() const {
        if (options.ranks_per_node > 0) return options.ranks_per_node;
        if (options.gpus_per_job > 0)
            return std::max<int64_t>(1, options.gpus_per_job / options.nodes);
        return 1;
    }

    std::string submit_pretraining(const Job& job) {
        const std::string dir = shell_quote(job_folder(spec, job).string());
        const std::string line = tupe_line(shell_quote(job.name), dir);
        std::string body;
        if (options.nodes * ranks_per_node() > 1) {
            // Each srun task is one rank; Slurm's variables mapped onto torchrun's.
            // The batch script runs on the allocation's first node: rank 0's host.
            // The warning signal (B:USR1) reaches this shell alone: it hands it to srun,
            // which passes it on to every rank.
            body =
                "export MASTER_ADDR=$(hostname)\n"
                "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))\n"
                "srun bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS "
                "LOCAL_RANK=$SLURM_LOCALID LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE exec \"$@\"' "
                "tupe-rank " +
                line +
                " &\npid=$!\ntrap 'kill -USR1 $pid 2>/dev/null || true' USR1\nstatus=0\n"
                "while kill -0 $pid 2>/dev/null; do wait $pid && status=0 || status=$?; done\n"
                "exit $status\n";
        } else {
            body = "exec " + line + "\n";
        }
        const fs::path script = write_script("pretrain", body);
        const std::string name = "tupe:" + spec.name + ":" + job.name;
        const std::string id = sbatch(
            script, name, true, {"--output=" + (slurm_dir(spec) / "logs" / "%j.out").string()});
        append_ledger(spec, {{id, job.name, job.fingerprint, now(), cluster, name}});
        return id;
    }

    /// One array job for `jobs` (fine-tuning of one snapshot), after `after` when not empty.
    void submit_array(const std::vector<const Job*>& jobs, const std::string& label,
                      const std::string& after) {
        const fs::path list = slurm_dir(spec) / "scripts" /
                              (std::to_string(std::time(nullptr)) + "-" +
                               std::to_string(++counter) + "-" + label + ".list");
        fs::create_directories(list.parent_path());
        {
            std::ofstream out(list);
            for (const Job* j : jobs)
                out << job_folder(spec, *j).string() << '\t' << j->name << '\n';
            if (!out) throw engine::InputError(list.string(), "cannot write the array's job list");
        }
        const std::string body = "entry=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" " +
                                 shell_quote(list.string()) +
                                 ")\ndir=${entry%%$'\\t'*}\njob=${entry#*$'\\t'}\nexec " +
                                 tupe_line("\"$job\"", "\"$dir\"") + "\n";
        const fs::path script = write_script(label, body);
        std::string tasks = "--array=0-" + std::to_string(jobs.size() - 1);
        if (options.max_in_flight > 0) tasks += "%" + std::to_string(options.max_in_flight);
        std::vector<std::string> extra = {
            tasks, "--output=" + (slurm_dir(spec) / "logs" / "%A_%a.out").string()};
        if (!after.empty()) extra.push_back("--dependency=afterok:" + after);
        const std::string name = "tupe:" + spec.name + ":" + label;
        const std::string id = sbatch(script, name, false, extra);
        std::vector<LedgerEntry> entries;
        for (size_t i = 0; i < jobs.size(); ++i)
            entries.push_back({id + "_" + std::to_string(i), jobs[i]->name, jobs[i]->fingerprint,
                               now(), cluster, name});
        append_ledger(spec, entries);
    }

    static double now() {
        return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    }
};

/// Where one job stands for the executor.
enum class Standing { kFinished, kFailed, kLive, kBlocked, kToSubmit, kGaveUp };

std::string seconds_text(double seconds) {
    return std::to_string(static_cast<long long>(seconds)) + " s";
}

/// Why Slurm's "running" is not to be believed, "" when it is: the job's result was
/// written, or its heartbeat (the job claim in its own store) stopped, longer than `timeout`
/// seconds ago (a killed slurmstepd, a node that stopped answering).
std::string lost_reason(const ExperimentSpec& spec, const LedgerEntry& entry, const SlurmView& v,
                        double timeout, double now) {
    if (v.state != "RUNNING" || v.start_time <= 0) return "";
    const fs::path folder = slurm_dir(spec) / "jobs" / entry.fingerprint;
    const auto done = read_done(folder);
    if (done && done->ended >= v.start_time - 1 && now - done->ended > timeout)
        return "its result was written " + seconds_text(now - done->ended) +
               " ago, yet Slurm shows it running";
    if (now - v.start_time <= timeout) return "";
    const double beat = job_heartbeat(folder, spec.name, entry.job);
    if (beat > 0 && now - beat > timeout)
        return "its heartbeat stopped " + seconds_text(now - beat) +
               " ago, yet Slurm shows it running";
    return "";
}

/// One look at the study: where each job of the plan stands, Slurm's ids of the live ones,
/// and the live ones Slurm has lost track of (lost_reason).
struct Look {
    std::map<std::string, Standing> standing;
    std::map<std::string, std::string> live_id;
    std::map<std::string, std::string> lost;  // job -> "ID: why"
};

Look look_at_study(const BoundPlan& bound, const SlurmOptions& options, double session_start,
                   const std::map<std::string, int64_t>& submissions) {
    const ExperimentSpec& spec = bound.spec;
    std::map<std::string, RunRecord> runs;
    {
        auto store = ResultStore::open(spec.database);
        const int64_t id = store.get_or_create_experiment(
            spec.name, fs::absolute(spec.path).string(), spec.yaml_text);
        for (auto& r : store.list_runs(id)) runs.emplace(r.name, r);
    }
    const auto latest = latest_entries(read_ledger(spec));
    const auto views = query_slurm(latest);
    const double now = Submitter::now();
    Look look;
    for (const Job& job : bound.jobs) {
        const auto e = latest.find(job.name);
        const auto v = views.find(job.name);
        const bool live = e != latest.end() && v != views.end() && live_state(v->second.state);
        if (live) {
            const std::string why =
                lost_reason(spec, e->second, v->second, options.stale_after_seconds, now);
            if (!why.empty()) look.lost[job.name] = e->second.slurm_id + ": " + why;
        }
        const auto run = runs.find(job.name);
        if (run != runs.end() && run->second.status == "finished" &&
            (run->second.fingerprint.empty() || run->second.fingerprint == job.fingerprint)) {
            look.standing[job.name] = Standing::kFinished;
            continue;
        }
        if (live) {
            look.standing[job.name] = Standing::kLive;
            look.live_id[job.name] = e->second.slurm_id;
            continue;
        }
        const auto done = read_done(job_folder(spec, job));
        const auto made = submissions.find(job.name);
        if (done && done->status == "failed" && done->ended >= session_start)
            look.standing[job.name] = Standing::kFailed;
        else if (made != submissions.end() && made->second >= options.max_attempts)
            look.standing[job.name] = Standing::kGaveUp;
        else
            look.standing[job.name] = Standing::kToSubmit;
    }
    // Fine-tuning whose pretraining failed (or was given up) in this session: blocked.
    for (const Job& job : bound.jobs)
        if (job.kind == Job::Kind::kFinetune && look.standing[job.name] == Standing::kToSubmit) {
            const Standing p = look.standing[job.variant];
            if (p == Standing::kFailed || p == Standing::kGaveUp)
                look.standing[job.name] = Standing::kBlocked;
        }
    return look;
}

/// Submits what `look` marks to submit: pretraining jobs up to --max-in-flight live ones,
/// then one array per snapshot whose pretraining is stored or live. Returns how many jobs
/// were submitted; `waiting` counts the jobs left for a free slot.
int64_t submit_jobs(Submitter& submitter, const BoundPlan& bound, Look& look,
                    std::map<std::string, int64_t>& submissions, int64_t& waiting) {
    const SlurmOptions& options = submitter.options;
    int64_t submitted = 0, live_pretraining = 0;
    waiting = 0;
    for (const Job& job : bound.jobs)
        if (job.kind == Job::Kind::kPretrain && look.standing[job.name] == Standing::kLive)
            ++live_pretraining;
    for (const Job& job : bound.jobs) {
        if (job.kind != Job::Kind::kPretrain || look.standing[job.name] != Standing::kToSubmit)
            continue;
        if (options.max_in_flight > 0 && live_pretraining >= options.max_in_flight) {
            ++waiting;
            continue;
        }
        look.live_id[job.name] = submitter.submit_pretraining(job);
        ++submissions[job.name];
        ++submitted;
        ++live_pretraining;
        submitter.say("submitted " + job.name + " as Slurm job " + look.live_id[job.name]);
    }
    std::map<std::pair<std::string, int64_t>, std::vector<const Job*>> arrays;
    for (const Job& job : bound.jobs)
        if (job.kind == Job::Kind::kFinetune && look.standing[job.name] == Standing::kToSubmit)
            arrays[{job.variant, job.checkpoint_step}].push_back(&job);
    for (const auto& [key, jobs] : arrays) {
        const bool stored = look.standing[key.first] == Standing::kFinished;
        if (!stored && !look.live_id.count(key.first)) {  // its pretraining waits for a slot
            waiting += static_cast<int64_t>(jobs.size());
            continue;
        }
        const std::string after = stored ? "" : look.live_id[key.first];
        const std::string label = key.first + "-step" + std::to_string(key.second);
        std::string safe = label;
        for (char& c : safe)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
        submitter.submit_array(jobs, safe, after);
        for (const Job* j : jobs) ++submissions[j->name];
        submitted += static_cast<int64_t>(jobs.size());
        submitter.say("submitted " + std::to_string(jobs.size()) + " fine-tuning job" +
                      (jobs.size() == 1 ? "" : "s") + " of " + label + " as an array" +
                      (after.empty() ? "" : " after Slurm job " + after));
    }
    return submitted;
}

/// With --wait: scancel each job Slurm shows running although it is lost (lost_reason), so
/// that its fine-tuning (afterok) is submitted again without it, or it is submitted again.
void cancel_lost(const Submitter& submitter, const Look& look) {
    for (const auto& [job, why] : look.lost) {
        const std::string id = why.substr(0, why.find(':'));
        const auto r = run_command({"scancel", id});
        submitter.say(
            job + ": Slurm job " + why +
            (r.status == 0 ? "; cancelled it" : "; scancel failed: " + first_line(r.err)) +
            (look.standing.at(job) == Standing::kFinished
                 ? " (its result is stored; what waits for it is submitted again)"
                 : " (it is submitted again)"));
    }
}

}  // namespace slurm_detail

RunSummary run_with_slurm(const ExperimentSpec& spec_in, const SlurmOptions& options,
                          const RunnerCallbacks& callbacks) {
    const BoundPlan bound = bind_plan(
        spec_in, options.new_runs ? ChangedJobs::kRunBeside : ChangedJobs::kRefuse, options.redo);
    const ExperimentSpec& spec = bound.spec;
    if (options.self_exe.empty())
        throw std::invalid_argument("the Slurm executor needs the path of tupe");
    // The built-in tasks are written once, here, before any fine-tuning job reads them.
    if (spec.glue.data == "builtin") prepare_builtin_tasks(spec);
    fs::create_directories(slurm_dir(spec));
    Submitter submitter{spec, options, callbacks, fs::absolute(spec.path).string(),
                        slurm_cluster_name()};
    const double session_start = Submitter::now();
    std::map<std::string, int64_t> submissions;  // this session's, per job
    std::set<std::string> finished_before;
    RunSummary summary;
    for (bool first = true;; first = false) {
        int64_t open = 0, waiting = 0;
        {
            // Gather, look and submit as the study's one submitter (SubmitLock).
            SubmitLock lock(slurm_dir(spec), [&](const std::string& l) { submitter.say(l); });
            const GatherSummary gathered = gather_study(spec_in);
            for (const auto& line : gathered.refused) submitter.say("not gathered: " + line);
            if (gathered.ingested > 0)
                submitter.say("gathered " + std::to_string(gathered.ingested) + " finished job" +
                              (gathered.ingested == 1 ? "" : "s") + " into " + spec.database);
            Look look = look_at_study(bound, options, session_start, submissions);
            if (options.wait && !look.lost.empty()) {
                cancel_lost(submitter, look);
                look = look_at_study(bound, options, session_start, submissions);
                look.lost.clear();
            }
            for (const auto& [job, why] : look.lost)
                submitter.say(job + ": Slurm job " + why + " (`scancel " +
                              why.substr(0, why.find(':')) + "`, or --wait, submits it again)");
            open = submit_jobs(submitter, bound, look, submissions, waiting);
            summary = RunSummary{};
            for (const auto& [job, s] : look.standing) {
                if (first && s == Standing::kFinished) finished_before.insert(job);
                switch (s) {
                    case Standing::kFinished:
                        (finished_before.count(job) ? summary.skipped : summary.finished)++;
                        break;
                    case Standing::kFailed:
                    case Standing::kGaveUp: ++summary.failed; break;
                    case Standing::kBlocked: ++summary.blocked; break;
                    case Standing::kLive: ++open; break;
                    case Standing::kToSubmit: break;
                }
            }
        }
        if (waiting > 0)
            submitter.say(std::to_string(waiting) + " job" + (waiting == 1 ? " waits" : "s wait") +
                          " for a slot (--max-in-flight " + std::to_string(options.max_in_flight) +
                          ")" +
                          (options.wait ? "" : ": run the same command again to submit them"));
        if (!options.wait) {
            submitter.say(std::to_string(open) + " job" + (open == 1 ? "" : "s") +
                          " in Slurm; `tupe status " + spec.path + "` follows them, `tupe gather " +
                          spec.path + "` stores their results");
            summary.stopped = open + waiting > 0;
            return summary;
        }
        if (open + waiting == 0) return summary;
        if (callbacks.on_progress) {
            PlanProgress p;
            p.total = static_cast<int64_t>(bound.jobs.size());
            p.done = summary.finished + summary.skipped;
            p.current = "waiting for Slurm: " + std::to_string(open) + " jobs pending or running";
            callbacks.on_progress(p);
        }
        const auto until =
            std::chrono::steady_clock::now() +
            std::chrono::milliseconds(static_cast<int64_t>(options.poll_seconds * 1000));
        while (std::chrono::steady_clock::now() < until) {
            if (callbacks.stop && callbacks.stop->load()) {
                summary.stopped = true;
                submitter.say("stopped waiting; the Slurm jobs go on (`tupe cancel " + spec.path +
                              "` cancels them)");
                return summary;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Status and cancel.

SlurmStudyStatus slurm_job_statuses(const ExperimentSpec& spec, double stale_after_seconds) {
    SlurmStudyStatus out;
    const auto ledger = read_ledger(spec);
    out.submitted = !ledger.empty();
    const auto latest = latest_entries(ledger);
    std::map<std::string, SlurmView> views;
    try {
        views = query_slurm(latest);
    } catch (const std::exception& e) {
        out.trouble = e.what();
    }
    const double now = Submitter::now();
    for (const auto& [job, e] : latest) {
        SlurmJobStatus js;
        js.job = job;
        js.slurm_id = e.slurm_id;
        js.state = "UNKNOWN";
        if (const auto v = views.find(job); v != views.end()) {
            js.state = v->second.state;
            js.node = v->second.node;
            js.reason = v->second.reason;
            js.exit_code = v->second.exit_code;
            js.signal = v->second.signal;
            js.lost = lost_reason(spec, e, v->second, stale_after_seconds, now);
        }
        if (const auto done = read_done(slurm_dir(spec) / "jobs" / e.fingerprint))
            js.result = done->status;
        out.jobs.push_back(js);
    }
    return out;
}

std::string slurm_status(const ExperimentSpec& spec, double stale_after_seconds) {
    const SlurmStudyStatus status = slurm_job_statuses(spec, stale_after_seconds);
    if (!status.submitted) return "";
    std::map<std::string, int64_t> counts;
    std::ostringstream lines;
    for (const auto& js : status.jobs) {
        std::string detail;
        if (!js.node.empty() && js.state != "PENDING") detail = " on " + js.node;
        if (js.state == "PENDING" && !js.reason.empty() && js.reason != "None")
            detail = " (" + js.reason + ")";
        if (js.state == "FAILED" || js.state == "NODE_FAIL" || js.state == "OUT_OF_MEMORY" ||
            js.state == "TIMEOUT")
            detail += ", exit code " + std::to_string(js.exit_code) +
                      (js.signal ? ", signal " + std::to_string(js.signal) : "");
        if (!js.result.empty()) detail += ", result " + js.result;
        if (!js.lost.empty())
            detail += ": LOST, " + js.lost + " (`scancel " + js.slurm_id +
                      "`, or `tupe run ... --executor slurm --wait`, submits it again)";
        ++counts[js.state];
        if (js.state != "COMPLETED" || js.result.empty() || !js.lost.empty())
            lines << "  " << js.job << "  slurm " << js.slurm_id << "  " << js.state << detail
                  << "\n";
    }
    // Results in job folders that the study's store does not hold yet.
    int64_t ungathered = 0;
    try {
        const auto latest = latest_entries(read_ledger(spec));
        std::optional<ResultStore> store;
        if (ResultStore::holds_data(spec.database))
            store.emplace(ResultStore::open(spec.database, OpenMode::kReadOnly));
        const auto e = store ? store->find_experiment(spec.name) : std::nullopt;
        for (const auto& [job, entry] : latest) {
            const auto done = read_done(slurm_dir(spec) / "jobs" / entry.fingerprint);
            if (done && (!e || !store->gathered(e->id, job, done->slurm_job + ":" + done->sha256)))
                ++ungathered;
        }
    } catch (const StoreError&) {
        // A store being migrated or locked: the count is left out of this look.
    }
    std::ostringstream out;
    out << "\nSlurm (" << status.jobs.size() << " jobs submitted, newest attempt each):";
    for (const auto& [state, n] : counts) out << " " << state << " " << n;
    out << "\n";
    if (!status.trouble.empty()) out << "  (cannot ask Slurm: " << status.trouble << ")\n";
    out << lines.str();
    if (ungathered > 0)
        out << "  " << ungathered << " job result" << (ungathered == 1 ? " is" : "s are")
            << " in job folders but not yet in the store (`tupe gather " << spec.path
            << "` stores them)\n";
    return out.str();
}

int64_t cancel_study(const ExperimentSpec& spec) {
    const auto latest = latest_entries(read_ledger(spec));
    const auto views = query_slurm(latest);
    std::set<std::string> live;
    for (const auto& [job, v] : views)
        if (live_state(v.state)) live.insert(latest.at(job).slurm_id);
    if (live.empty()) return 0;
    std::vector<std::string> argv = {"scancel"};
    argv.insert(argv.end(), live.begin(), live.end());
    const auto r = run_command(argv);
    if (r.status != 0) throw std::runtime_error("scancel failed: " + first_line(r.err));
    return static_cast<int64_t>(live.size());
}

std::string requeue_this_slurm_job() {
    std::string id;
    if (const char* array = std::getenv("SLURM_ARRAY_JOB_ID")) {
        const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
        id = std::string(array) + "_" + (task ? task : "");
    } else if (const char* job = std::getenv("SLURM_JOB_ID")) {
        id = job;
    }
    if (id.empty()) throw std::runtime_error("not in a Slurm job (SLURM_JOB_ID is not set)");
    const auto r = run_command({"scontrol", "requeue", id});
    if (r.status != 0)
        throw std::runtime_error("scontrol requeue " + id +
                                 " failed: " + first_line(r.err.empty() ? r.out : r.err));
    return "requeued Slurm job " + id + ": its next attempt resumes from the checkpoint";
}

}  // namespace experiments
