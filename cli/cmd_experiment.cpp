// `tupe run`, `tupe status`, `tupe report`, `tupe score`, `tupe glue stats`: experiments,
// the results store and GLUE scoring from the command line.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/metrics.h"
#include "analysis/submission.h"
#include "analysis/tasks.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/bert.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/threads.h"
#include "experiments/claims.h"
#include "experiments/experiment.h"
#include "experiments/factors.h"
#include "experiments/glue_data.h"
#include "experiments/ranking.h"
#include "experiments/report.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"
#include "experiments/slurm.h"
#include "json_progress.h"
#include "launcher.h"

namespace cli {

namespace fs = std::filesystem;

namespace {

std::string self_exe() {
    std::error_code ec;
    auto p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.string();
}

std::string one_file(const Args& args, const char* what) {
    if (args.positionals().size() != 1) throw UsageError(std::string("expected one ") + what);
    return args.positionals()[0];
}

/// TUPE_CLAIM_TIMEOUT in seconds (default 60): how old a job claim's heartbeat may be before
/// `tupe status` calls it stale and another `tupe run` takes the job over.
double claim_timeout_from_env() {
    const char* text = std::getenv(experiments::kClaimTimeoutEnv);
    if (!text || !*text) return experiments::RunnerOptions{}.claim_timeout_seconds;
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (*end != '\0' || !(seconds > 0) || !std::isfinite(seconds))
        throw UsageError(std::string(experiments::kClaimTimeoutEnv) +
                         " must be a positive number of seconds, got '" + text + "'");
    return seconds;
}

/// The test hooks TUPE_TEST_RAISE_AT_STEP=STEP[:KILL|:STOP] (KILL when omitted) and
/// TUPE_TEST_STEP_DELAY=SECONDS into `options`.
void raise_at_step_from_env(experiments::RunnerOptions& options) {
    if (const char* delay = std::getenv(experiments::kStepDelayEnv); delay && *delay) {
        char* end = nullptr;
        const double seconds = std::strtod(delay, &end);
        if (*end != '\0' || !(seconds >= 0) || seconds > 3600)
            throw UsageError(std::string(experiments::kStepDelayEnv) +
                             " must be seconds in [0, 3600], got '" + delay + "'");
        options.step_delay_seconds = seconds;
    }
    const char* env = std::getenv(experiments::kRaiseAtStepEnv);
    if (!env || !*env) return;
    const std::string text = env;
    const auto colon = text.find(':');
    const std::string step = text.substr(0, colon);
    const std::string sig = colon == std::string::npos ? "KILL" : text.substr(colon + 1);
    char* end = nullptr;
    const long long n = std::strtoll(step.c_str(), &end, 10);
    if (step.empty() || *end != '\0' || n < 1 || (sig != "KILL" && sig != "STOP"))
        throw UsageError(std::string(experiments::kRaiseAtStepEnv) +
                         " must be STEP, STEP:KILL or STEP:STOP, got '" + text + "'");
    options.raise_at_step = n;
    options.raise_signal = sig == "KILL" ? SIGKILL : SIGSTOP;
}

}  // namespace

namespace {

/// `tupe run FILE --executor slurm`: the plan submitted as Slurm jobs (experiments/slurm.h).
int run_on_slurm(const Args& args, const experiments::ExperimentSpec& spec) {
    for (const char* local : {"job", "jobs", "nproc-per-node", "job-store", "progress"})
        if (args.has(local))
            throw UsageError(std::string("--") + local +
                             " is for local runs; with --executor slurm each job is a Slurm job "
                             "(--ranks-per-node for data-parallel pretraining)");
    experiments::SlurmOptions o;
    o.self_exe = self_exe();
    o.overrides = args.all("set");
    o.new_runs = args.has("new-runs");
    for (const auto& block : args.all("redo")) o.redo.insert(block);
    o.threads = args.get_int("threads");
    o.nodes = args.get_int("nodes");
    o.ranks_per_node = args.get_int("ranks-per-node");
    o.gpus_per_job = args.get_int("gpus-per-job");
    o.cpus_per_task = args.get_int("cpus-per-task");
    o.partition = args.get("partition");
    o.account = args.get("account");
    o.time = args.get("time");
    o.sbatch_args = args.all("sbatch-arg");
    o.wait = args.has("wait");
    o.max_attempts = args.get_int("max-attempts");
    o.poll_seconds = static_cast<double>(args.get_int("poll"));
    o.signal_before = args.get_int("signal-before");
    o.max_in_flight = args.get_int("max-in-flight");
    o.stale_after_seconds = claim_timeout_from_env();
    const bool quiet = args.has("quiet");
    StopOnSignal stop_on_signal;
    experiments::RunnerCallbacks cb;
    cb.stop = stop_on_signal.flag();
    cb.on_message = [&](const std::string& m) {
        if (!quiet) std::cerr << m << "\n";
    };
    std::string last;
    cb.on_progress = [&](const experiments::PlanProgress& p) {
        const std::string line =
            "[" + std::to_string(p.done) + "/" + std::to_string(p.total) + " stored] " + p.current;
        if (!quiet && line != last) std::cerr << line << "\n";
        last = line;
    };
    const auto summary = experiments::run_with_slurm(spec, o, cb);
    if (!o.wait) return 0;
    if (!quiet)
        std::cerr << spec.name << ": " << summary.finished << " finished, " << summary.skipped
                  << " already done, " << summary.failed << " failed"
                  << (summary.blocked > 0 ? ", " + std::to_string(summary.blocked) + " blocked"
                                          : std::string())
                  << (summary.stopped ? "; stopped waiting (the Slurm jobs go on)" : "") << "\n";
    if (summary.stopped) return 130;
    return summary.failed + summary.blocked > 0 ? 1 : 0;
}

}  // namespace

namespace {

// The runner's options of a local `tupe run`: its arguments, the job-claim settings of the
// environment (TUPE_CLAIM_TIMEOUT, TUPE_CLAIM_FROM) and the test hook.
experiments::RunnerOptions local_runner_options(const Args& args) {
    for (const char* slurm :
         {"nodes", "ranks-per-node", "gpus-per-job", "cpus-per-task", "partition", "account",
          "time", "sbatch-arg", "wait", "max-attempts", "poll", "signal-before", "max-in-flight"})
        if (args.has(slurm))
            throw UsageError(std::string("--") + slurm + " needs --executor slurm");
    if (args.has("job-store") && !args.has("job")) throw UsageError("--job-store needs --job NAME");
    experiments::RunnerOptions options;
    options.only_job = args.get("job");
    options.jobs = args.get_int("jobs");
    options.threads = args.get_int("threads");
    options.self_exe = self_exe();
    options.overrides = args.all("set");
    options.new_runs = args.has("new-runs");
    for (const auto& block : args.all("redo")) options.redo.insert(block);
    options.claim_timeout_seconds = claim_timeout_from_env();
    if (const char* from = std::getenv(experiments::kClaimFromEnv)) options.claim_from = from;
    raise_at_step_from_env(options);
    const long long nproc = args.get_int("nproc-per-node");
    if (nproc < 1 || nproc > 1024) throw UsageError("--nproc-per-node must be in [1, 1024]");
    if (nproc > 1 && engine::distributed_env_present())
        throw UsageError(
            "--nproc-per-node with RANK/WORLD_SIZE already set: use one launcher "
            "(torchrun/srun or --nproc-per-node), not both");
    if (nproc > 1 && args.has("jobs"))
        throw UsageError("--jobs and --nproc-per-node: choose parallel jobs or data-parallel jobs");
    options.nproc_per_node = nproc;
    return options;
}

// `--nproc-per-node N --job NAME`: this process launches the job's N local workers and waits.
int launch_job_workers(const Argv& argv, const experiments::RunnerOptions& options) {
    LaunchSpec launch;
    launch.command = "run";
    launch.nproc = static_cast<int>(options.nproc_per_node);
    launch.threads_each = threads_per_worker(options.threads, launch.nproc);
    launch.worker_args = without_option(argv, "nproc-per-node");
    launch.worker_args = without_option(launch.worker_args, "threads");
    launch.worker_args.insert(launch.worker_args.begin(), {"tupe", "run"});
    launch.worker_args.insert(launch.worker_args.end(),
                              {"--threads", std::to_string(launch.threads_each)});
    launch.failure_hint = "; `tupe status` shows the job, and running the same command redoes it";
    return launch_local_workers(launch);
}

// What a local run prints: the plan, each job as it starts, a progress bar (or plain lines,
// or JSON lines for programs with --progress jsonl) and the summary. Ranks other than 0 of a
// data-parallel job, and --quiet, print nothing but errors.
class RunPrinter {
  public:
    RunPrinter(const Args& args, bool main_rank, size_t jobs)
        : quiet_(args.has("quiet") || !main_rank),
          jsonl_(args.get("progress") == "jsonl" && !quiet_),
          json_(jsonl_, std::cout),
          bar_(static_cast<long long>(jobs) * 100, 1000000) {}

    void plan(const experiments::ExperimentSpec& spec, size_t jobs) {
        if (jsonl_)
            json_.emit({{"event", "plan"},
                        {"experiment", spec.name},
                        {"variants", spec.variants.size()},
                        {"jobs", jobs},
                        {"database", spec.database}});
        else if (!quiet_)
            std::cerr << "experiment " << spec.name << ": " << spec.variants.size() << " variants, "
                      << jobs << " jobs, results in " << spec.database << "\n";
    }

    void attach(experiments::RunnerCallbacks& cb) {
        cb.on_message = [this](const std::string& m) {
            if (jsonl_) return json_.emit({{"event", "message"}, {"text", m}});
            if (quiet_) return;
            bar_.finish();
            std::cerr << m << "\n";
        };
        cb.on_progress = [this](const experiments::PlanProgress& p) {
            if (jsonl_) return json_.progress(p);
            if (quiet_) return;
            if (p.current != last_job_) {
                bar_.finish();
                std::cerr << "[" << p.done + 1 << "/" << p.total << "] " << p.current << "\n";
                last_job_ = p.current;
            }
            // The runner's ETA weighs jobs by their tokens and times each kind (plan_eta.h).
            bar_.update(static_cast<long long>((p.done + p.job_fraction) * 100), p.job_status,
                        p.eta_seconds >= 0 ? p.eta_seconds : NAN);
        };
    }

    void finish() { bar_.finish(); }

    void summary(const std::string& name, const experiments::RunSummary& s) {
        if (jsonl_)
            json_.emit({{"event", "summary"},
                        {"finished", s.finished},
                        {"skipped", s.skipped},
                        {"failed", s.failed},
                        {"blocked", s.blocked},
                        {"stopped", s.stopped}});
        else if (!quiet_)
            std::cerr << name << ": " << s.finished << " finished, " << s.skipped
                      << " already done, " << s.failed << " failed"
                      << (s.blocked > 0 ? ", " + std::to_string(s.blocked) +
                                              " blocked (their pretraining failed: `tupe status`)"
                                        : std::string())
                      << (s.stopped ? "; stopped (run the same command to resume)" : "") << "\n";
    }

  private:
    bool quiet_, jsonl_;
    JsonProgress json_;
    ProgressBar bar_;
    std::string last_job_;
};

}  // namespace

int cmd_run(const Argv& argv) {
    Args args(argv, command_spec("run"));
    auto spec = experiments::load_experiment(one_file(args, "EXPERIMENT.yaml"), args.all("set"));
    if (args.get("executor") == "slurm") return run_on_slurm(args, spec);
    // A cluster job (the Slurm executor's) records into its own store in its job folder,
    // marked done at the end so that `tupe gather` takes it (experiments/slurm.h). Slurm's
    // warning before the time limit (SIGUSR1) stops it at the next step with a checkpoint,
    // and it requeues itself.
    const std::string job_store = args.get("job-store");
    if (!job_store.empty()) catch_warning_signal();
    experiments::RunnerOptions options = local_runner_options(args);
    if (!job_store.empty()) experiments::use_job_store(spec, options, job_store);
    // The plan as the store knows it, the study checked before anything is written (a changed
    // job or output is refused here, in one line, unless --new-runs / --redo).
    const auto bound = experiments::bind_plan(
        spec,
        options.new_runs ? experiments::ChangedJobs::kRunBeside : experiments::ChangedJobs::kRefuse,
        options.redo);
    const experiments::Job* only = nullptr;  // --job NAME
    for (const auto& j : bound.jobs)
        if (j.name == options.only_job) only = &j;
    if (!options.only_job.empty() && !only)
        throw UsageError("no job named '" + options.only_job + "' in " + spec.path +
                         " (`tupe status` lists them)");
    if (options.nproc_per_node > 1 && only) return launch_job_workers(argv, options);
    // A data-parallel worker (started by the launcher above, torchrun or srun) joins its group.
    std::unique_ptr<engine::DistributedContext> group;
    if (engine::distributed_env_present()) {
        if (!only)
            throw UsageError(
                "a data-parallel worker (RANK/WORLD_SIZE set) runs one job: pass "
                "--job NAME, or run the whole plan with --nproc-per-node N");
        std::string device = "cpu";  // the job's variant's train.device picks Gloo or NCCL
        for (const auto& v : bound.spec.variants)
            if (v.name == only->variant) device = v.config.train.device;
        try {
            group = join_worker_group(device, options.threads);
        } catch (const engine::DistributedError& e) {
            std::cerr << "tupe run: error: " << e.what() << "\n";
            return kPeerFailureStatus;
        }
        options.dist = group.get();
    }
    engine::apply_thread_count(options.threads);
    const bool main_rank = !group || group->is_main();

    StopOnSignal stop_on_signal;
    RunPrinter printer(args, main_rank, bound.jobs.size());
    printer.plan(spec, bound.jobs.size());
    experiments::RunnerCallbacks cb;
    cb.stop = stop_on_signal.flag();
    printer.attach(cb);
    experiments::RunSummary summary;
    try {
        summary = experiments::run_experiment(spec, options, cb);
    } catch (const engine::DistributedError& e) {
        printer.finish();
        std::cerr << "tupe run: error: " << e.what() << "\n";
        return kPeerFailureStatus;
    }
    printer.finish();
    if (!main_rank) return summary.stopped ? 130 : 0;
    printer.summary(spec.name, summary);
    if (summary.stopped && !job_store.empty() && warning_signal_caught()) {
        try {
            std::cerr << experiments::requeue_this_slurm_job() << "\n";
        } catch (const std::exception& e) {
            std::cerr << "tupe run: error: " << e.what() << "\n";
        }
    }
    if (summary.stopped) return 130;
    if (!job_store.empty())
        experiments::finish_job_store(job_store, only->name, only->fingerprint,
                                      summary.failed + summary.blocked > 0);
    return summary.failed > 0 ? 1 : 0;
}

int cmd_status(const Argv& argv) {
    Args args(argv, command_spec("status"));
    const auto spec =
        experiments::load_experiment(one_file(args, "EXPERIMENT.yaml"), args.all("set"));
    if (args.get("format") == "json") {
        auto j = nlohmann::json::parse(
            experiments::experiment_status_json(spec, claim_timeout_from_env()));
        // A Slurm study: Slurm's view of each job's newest submission beside the store's.
        const auto slurm = experiments::slurm_job_statuses(spec, claim_timeout_from_env());
        if (slurm.submitted) {
            j["slurm"] = nlohmann::json::array();
            for (const auto& s : slurm.jobs)
                j["slurm"].push_back({{"job", s.job},
                                      {"slurm_id", s.slurm_id},
                                      {"state", s.state},
                                      {"node", s.node},
                                      {"reason", s.reason},
                                      {"exit_code", s.exit_code},
                                      {"signal", s.signal},
                                      {"result", s.result},
                                      {"lost", s.lost}});
            if (!slurm.trouble.empty()) j["slurm_error"] = slurm.trouble;
        }
        std::cout << j.dump(2) << "\n";
    } else
        std::cout << experiments::experiment_status(spec, claim_timeout_from_env())
                  << experiments::slurm_status(spec, claim_timeout_from_env());
    return 0;
}

int cmd_gather(const Argv& argv) {
    Args args(argv, command_spec("gather"));
    const auto spec =
        experiments::load_experiment(one_file(args, "EXPERIMENT.yaml"), args.all("set"));
    const auto g = experiments::gather_study(spec);
    for (const auto& line : g.refused) std::cerr << "tupe gather: not gathered: " << line << "\n";
    std::cout << spec.name << ": " << g.ingested << " job" << (g.ingested == 1 ? "" : "s")
              << " gathered into " << spec.database << ", " << g.already << " gathered before, "
              << g.pending << " without a result yet\n";
    return g.refused.empty() ? 0 : 1;
}

int cmd_cancel(const Argv& argv) {
    Args args(argv, command_spec("cancel"));
    const auto spec =
        experiments::load_experiment(one_file(args, "EXPERIMENT.yaml"), args.all("set"));
    const int64_t n = experiments::cancel_study(spec);
    std::cout << spec.name << ": " << n << " Slurm job" << (n == 1 ? "" : "s") << " cancelled\n";
    return 0;
}

namespace {

/// The results store of `db`, read-only; one line naming the file when it is absent or empty.
experiments::ResultStore open_results(const std::string& db) {
    if (!fs::exists(db))
        throw engine::InputError(
            db, "no results database (run `tupe run EXPERIMENT.yaml` first, or pass --db)");
    auto store = experiments::ResultStore::open_for_reading(db);
    if (store.list_experiments().empty()) throw engine::InputError(db, "holds no experiments");
    return store;
}

/// The experiment --experiment names, or without it every experiment (`all`) or the newest.
std::vector<experiments::ExperimentRecord> chosen_experiments(experiments::ResultStore& store,
                                                              const Args& args, bool all) {
    const auto list = store.list_experiments();
    std::vector<experiments::ExperimentRecord> chosen;
    if (!args.has("experiment")) {
        if (all) return list;
        return {list.back()};
    }
    for (const auto& e : list)
        if (e.name == args.get("experiment")) chosen.push_back(e);
    if (chosen.empty()) {
        std::string names;
        for (const auto& e : list) names += (names.empty() ? "" : ", ") + e.name;
        throw engine::InputError(store.path(), "no experiment named '" + args.get("experiment") +
                                                   "' (has: " + names + ")");
    }
    return chosen;
}

}  // namespace

int cmd_report(const Argv& argv) {
    Args args(argv, command_spec("report"));
    const auto format = experiments::report_format_from_string(args.get("format"));
    auto store = open_results(args.get("db"));
    const bool text = format == experiments::ReportFormat::kTable ||
                      format == experiments::ReportFormat::kMarkdown;
    for (const auto& e : chosen_experiments(store, args, true)) {
        auto report = experiments::load_report(store, e.name);
        if (args.has("paper")) {
            const std::string dir = args.get("resources");
            experiments::add_paper_rows(report, (fs::path(dir) / "paper_table1.tsv").string());
        }
        if (text)
            std::cout << (format == experiments::ReportFormat::kMarkdown ? "### " : "") << e.name
                      << "\n\n";
        if (report.rows.empty())
            std::cout << "(no GLUE results yet)\n";
        else
            std::cout << experiments::render_report(report, format, args.has("mean-std"));
        if (text) std::cout << "\n" << experiments::pretraining_summary(store, e.name);
    }
    return 0;
}

int cmd_claims(const Argv& argv) {
    Args args(argv, command_spec("claims"));
    const auto format = experiments::claims_format_from_string(args.get("format"));
    auto store = open_results(args.get("db"));
    // Parameters counted on the engine's own modules (nothing is trained).
    // Claim 7 counts BERT-Base twice per experiment (seconds each): once per config text.
    std::map<std::string, int64_t> counted;
    auto count = [&counted](const engine::ModelConfig& config) {
        engine::PretrainConfig whole;
        whole.model = config;
        const std::string key = engine::config_to_text(whole);
        if (const auto it = counted.find(key); it != counted.end()) return it->second;
        torch::NoGradGuard no_grad;
        engine::BertForMaskedLM model(config);
        int64_t n = 0;
        for (const auto& p : model->parameters()) n += p.numel();
        counted[key] = n;
        return n;
    };
    const auto chosen = chosen_experiments(store, args, true);
    if (format == experiments::ClaimsFormat::kJson && !args.has("experiment")) {
        // Every experiment: {"experiments": [one claims object per experiment]}.
        nlohmann::json all = {{"experiments", nlohmann::json::array()}};
        for (const auto& e : chosen)
            all["experiments"].push_back(nlohmann::json::parse(experiments::render_claims(
                e.name, experiments::evaluate_claims(store, e.name, count), format)));
        std::cout << all.dump(2) << "\n";
        return 0;
    }
    for (size_t i = 0; i < chosen.size(); ++i) {
        if (i) std::cout << "\n";
        const auto claims = experiments::evaluate_claims(store, chosen[i].name, count);
        std::cout << experiments::render_claims(chosen[i].name, claims, format);
    }
    return 0;
}

int cmd_rank(const Argv& argv) {
    Args args(argv, command_spec("rank"));
    const auto format = experiments::claims_format_from_string(args.get("format"));
    auto store = open_results(args.get("db"));
    experiments::RankOptions options;
    std::stringstream list(args.get("tasks"));
    for (std::string item; std::getline(list, item, ',');)
        if (!item.empty()) options.columns.push_back(item);
    const std::string name = args.required("experiment");
    std::cout << experiments::render_rankings(
        name, experiments::rank_variants(store, name, options), format);
    return 0;
}

int cmd_factors(const Argv& argv) {
    Args args(argv, command_spec("factors"));
    auto store = open_results(args.get("db"));
    // The study as a factorial: levels from the stored configs, effects with 95% intervals.
    const auto table = experiments::load_factor_table(store, args.required("experiment"));
    const auto effects = experiments::main_effects(table, args.get("metric"), args.get("within"));
    std::cout << experiments::render_factor_effects(table, effects, args.get("format"));
    return 0;
}

int cmd_score(const Argv& argv) {
    Args args(argv, command_spec("score"));
    const std::string task_name = args.required("task");
    // Any spelling of a task or of a result column (MNLI-mm): the registry resolves both.
    const analysis::TaskColumn named = analysis::resolve_task_column(task_name);
    const auto& task = named.task ? *named.task : experiments::find_task(task_name);
    const std::string dev = args.required("dev"), predictions = args.required("predictions");
    const auto split = experiments::read_glue_file(task, dev);
    // The submission's index is the 0-based row of the dev file (header excluded).
    std::map<std::string, std::string> gold;
    for (size_t i = 0; i < split.examples.size(); ++i)
        gold[std::to_string(i)] = split.examples[i].label;
    // The column scored: the one named, else the dev split the file is named after
    // ("mismatched" in dev_mismatched.tsv; longest stem first), else the task's first.
    const analysis::DevSplit* column = named.split;
    if (column == nullptr) {
        size_t best = 0;
        column = &task.dev.front();
        const std::string file = fs::path(dev).filename().string();
        for (const auto& d : task.dev) {
            const std::string stem = d.file.rfind("dev_", 0) == 0 ? d.file.substr(4) : d.file;
            if (stem.size() > best && file.find(stem) != std::string::npos) {
                best = stem.size();
                column = &d;
            }
        }
    }
    const std::string metric_task = column->column;
    const auto rows = analysis::read_submission(predictions);
    const auto scores = task.synthetic ? analysis::TaskScores{}
                                       : analysis::score_submission(metric_task, rows, gold,
                                                                    task.labels, predictions);
    if (task.synthetic) throw UsageError("score the built-in synthetic tasks with `tupe report`");
    if (args.get("format") == "json") {
        nlohmann::json j = {{"task", metric_task},
                            {"examples", split.examples.size()},
                            {"metrics", scores.metrics}};
        std::cout << j.dump(2) << "\n";
    } else {
        std::cout << metric_task << " (" << split.examples.size() << " dev examples)\n";
        for (const auto& [k, v] : scores.metrics) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.2f", v);
            std::cout << "  " << k << std::string(10 - std::min<size_t>(9, k.size()), ' ') << buf
                      << "\n";
        }
    }
    return 0;
}

int cmd_glue(const Argv& argv) {
    if (argv.empty() || argv[0] != "stats") throw UsageError("expected `glue stats --dir DIR`");
    Args args(Argv(argv.begin() + 1, argv.end()), command_spec("glue"));
    const std::string format = args.get("format");
    if (format != "table" && format != "json") throw UsageError("--format must be table or json");
    const std::string dir = args.required("dir");
    if (!fs::is_directory(dir)) throw engine::InputError(dir, "not a directory");
    int unreadable = 0;
    std::cout << experiments::glue_stats(dir, format == "json", &unreadable);
    // The report is printed either way; a malformed file still makes the command fail, so a
    // script that checks a download notices it.
    if (unreadable > 0)
        throw engine::InputError(dir, std::to_string(unreadable) +
                                          " split file(s) could not be read; the report names "
                                          "each file and line");
    return 0;
}

}  // namespace cli
