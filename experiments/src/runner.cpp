// The experiment runner (see runner.h): plan, pretraining with snapshots, the optional analysis
// of chosen snapshots (`tupe analyze`, its files recorded as artifacts of the pretrain run),
// fine-tuning with GLUE-exact scoring, everything recorded in the results store.
#include "experiments/runner.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "analysis/analyze.h"
#include "analysis/metrics.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/finetune.h"
#include "engine/tokenizer.h"
#include "experiments/analysis_artifacts.h"
#include "experiments/build_info.h"
#include "experiments/glue_data.h"
#include "experiments/result_store.h"
#include "experiments/synthetic_tasks.h"
#include "plan_eta.h"
#include "runner_internal.h"

extern char** environ;

namespace experiments {

namespace fs = std::filesystem;
using namespace detail;  // glue_dir, snapshot_path, variant_named, task data, job settings

namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kBuiltinTasks = {"syn-cola", "syn-mrpc", "syn-stsb", "syn-rte"};
// The paper's Table 1 tasks (WNLI left out), in its column order.
const std::vector<std::string> kGlueTasks = {"mnli", "qnli", "qqp", "sst2",
                                             "cola", "mrpc", "rte", "stsb"};

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
        if (spec.glue.data == "builtin") return kBuiltinTasks;
        for (const auto& key : kGlueTasks)
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
          store_(ResultStore::open(spec.database, OpenMode::kReadWrite)) {
        experiment_id_ = store_.get_or_create_experiment(spec.name, spec.path, spec.yaml_text);
    }

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
                !pending_analysis_steps(job, existing->id).empty()) {
                // Pretrained before the analysis block was added (or its analysis failed):
                // analyse the snapshots now; the run stays finished.
                progress_.current = job.name + " (analysis)";
                report(0, "analysing");
                analyse(job, existing->id);
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
    bool stopped() const { return cb_.stop && cb_.stop->load(); }
    void say(const std::string& m) const {
        if (cb_.on_message) cb_.on_message(m);
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

    // The run's row: what it is, where it writes, its resolved config.
    RunRecord record_for(const Job& job) {
        const Variant& v = variant_named(spec_, job.variant);
        RunRecord r = base_record(experiment_id_, job);
        r.out_dir = v.config.out_dir;
        if (job.kind == Job::Kind::kPretrain) {
            // pretrain() sizes the embeddings from the vocabulary; record that size, not the
            // preset's default, so the stored config says what was trained.
            engine::PretrainConfig resolved = v.config;
            try {
                resolved.model.vocab_size =
                    static_cast<int64_t>(engine::Vocab::load(resolved.data.vocab).size());
            } catch (const std::exception&) {
                // No vocabulary yet: pretrain() reports it when the job runs.
            }
            r.config_text = engine::config_to_text(resolved);
            r.seed = static_cast<int64_t>(v.config.train.seed);
            return r;
        }
        const TaskInfo& task = find_task(job.task);
        r.seed = static_cast<int64_t>(job.seed);
        if (auto parent = store_.find_run(experiment_id_, v.name)) r.parent_run_id = parent->id;
        std::ostringstream cfg;
        cfg << "task = " << job.task << "\ncheckpoint = " << snapshot_path(v, job.checkpoint_step)
            << "\nlr = " << job.lr << "\nseed = " << job.seed << "\nepochs = "
            << (spec_.finetune.epochs > 0 ? spec_.finetune.epochs : task.default_epochs)
            << "\nbatch_size = " << spec_.finetune.batch_size
            << "\nwarmup_ratio = " << spec_.finetune.warmup_ratio
            << "\nweight_decay = " << spec_.finetune.weight_decay
            << "\nmax_seq_len = " << spec_.finetune.max_seq_len << "\n";
        // Written only when changed, so runs recorded before the key existed stay equal.
        if (spec_.finetune.classifier_dropout != FinetuneProtocol{}.classifier_dropout)
            cfg << "classifier_dropout = " << spec_.finetune.classifier_dropout << "\n";
        if (spec_.finetune.shuffle_words) cfg << "shuffle_words = true\n";
        r.config_text = cfg.str();
        return r;
    }

    void run_one(const Job& job, RunSummary& summary) {
        progress_.current = job.name;
        begin_timing(job);
        report(0, "starting");
        // One upsert with every column, then the status (which stamps the start time).
        const int64_t run_id = store_.upsert_run(record_for(job));
        store_.set_run_status(run_id, "running");
        try {
            const bool done =
                job.kind == Job::Kind::kPretrain ? pretrain(job, run_id) : finetune(job, run_id);
            if (!done) {
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

    bool pretrain(const Job& job, int64_t run_id) {
        const Variant& v = variant_named(spec_, job.variant);
        store_.add_params(run_id, {{"variant", v.name},
                                   {"preset", v.config.model.preset},
                                   {"size", v.config.model.size},
                                   {"group", v.group},
                                   {"pretrain_seed", std::to_string(v.config.train.seed)}});
        // A resume continues from the checkpoint; points after it (from a killed process)
        // are dropped so no curve holds a step twice.
        const std::string ckpt = engine::checkpoint_path(v.config.out_dir);
        int64_t resume_step = 0;
        if (fs::exists(ckpt)) resume_step = engine::load_checkpoint(ckpt).step;
        store_.delete_metrics_after(run_id, resume_step);

        std::vector<MetricPoint> pending;
        auto flush = [&]() {
            if (pending.empty()) return;
            store_.add_metrics(run_id, pending);
            pending.clear();
        };
        engine::TrainCallbacks tc;
        tc.stop = cb_.stop;
        tc.on_message = cb_.on_message;
        // Snapshots for fine-tuning and for the analysis.
        const std::vector<int64_t> snapshots = snapshot_steps(spec_, v);
        tc.snapshot_steps = snapshots;
        tc.on_step = [&](const engine::StepReport& s) {
            const double now = unix_time_now();
            if (s.step % std::max<int64_t>(1, v.config.train.log_interval) == 0 ||
                s.step == s.total_steps) {
                pending.push_back({"train/loss", s.step, s.loss, now});
                pending.push_back({"train/lr", s.step, s.lr, now});
                pending.push_back(
                    {"train/tokens", s.step, static_cast<double>(s.tokens_seen), now});
                pending.push_back({"train/tokens_per_second", s.step, s.tokens_per_second, now});
            }
            if (pending.size() >= 200) flush();
            char status[96];
            std::snprintf(status, sizeof status, "step %lld/%lld  loss %.3f",
                          static_cast<long long>(s.step), static_cast<long long>(s.total_steps),
                          s.loss);
            report(static_cast<double>(s.step) / static_cast<double>(s.total_steps), status);
        };
        tc.on_eval = [&](const engine::EvalReport& e) {
            const double now = unix_time_now();
            pending.push_back({"validation/loss", e.step, e.loss, now});
            pending.push_back({"validation/accuracy", e.step, e.accuracy, now});
            flush();
        };
        tc.on_checkpoint = [&](const std::string& path, int64_t step) {
            flush();
            store_.set_run_step(run_id, step);
            // Only the snapshots are recorded: checkpoint.pt is overwritten as training goes on.
            if (std::find(snapshots.begin(), snapshots.end(), step) == snapshots.end()) return;
            CheckpointRecord c;
            c.run_id = run_id;
            c.step = step;
            c.path = snapshot_path(v, step);
            c.size = static_cast<int64_t>(fs::file_size(path));
            store_.add_checkpoint(c);
        };
        auto result = engine::pretrain(v.config, tc, options_.dist);
        flush();
        if (result.floor.validation_tokens > 0) {
            char uni[32], bi[32];
            std::snprintf(uni, sizeof uni, "%.6f", result.floor.unigram_nats);
            std::snprintf(bi, sizeof bi, "%.6f", result.floor.bigram_nats);
            store_.add_params(run_id, {{"floor.unigram_nats", uni},
                                       {"floor.bigram_nats", bi},
                                       {"floor.validation_tokens",
                                        std::to_string(result.floor.validation_tokens)}});
        }
        if (result.stopped) return false;
        if (!result.evals.empty()) {
            const std::string warning =
                engine::floor_warning(result.evals.back().loss, result.floor);
            if (!warning.empty()) say(v.name + ": " + warning);
        }
        analyse(job, run_id);
        return !stopped();
    }

    // ---- the analysis step ----------------------------------------------------------------

    std::string analysis_dir(const Variant& v, int64_t step) const {
        return (fs::path(v.config.out_dir) / "analysis" / ("step" + std::to_string(step))).string();
    }

    /// Analysis steps of the job's variant whose index.json is not yet an artifact of run_id.
    std::vector<int64_t> pending_analysis_steps(const Job& job, int64_t run_id) {
        const Variant& v = variant_named(spec_, job.variant);
        const auto steps = spec_.analysis_steps(v);
        if (steps.empty()) return {};
        std::set<std::string> recorded;
        for (const auto& a : store_.artifacts(run_id)) recorded.insert(a.path);
        std::vector<int64_t> pending;
        for (int64_t step : steps)
            if (!recorded.count((fs::path(analysis_dir(v, step)) / "index.json").string()))
                pending.push_back(step);
        return pending;
    }

    /// `tupe analyze` on each pending analysis snapshot of the variant, recorded against
    /// run_id: as a child process when the runner knows the tupe executable (figures
    /// included; the child records through --db), else in this process, data files only.
    void analyse(const Job& job, int64_t run_id) {
        const Variant& v = variant_named(spec_, job.variant);
        const AnalysisSpec& a = spec_.analysis;
        for (int64_t step : pending_analysis_steps(job, run_id)) {
            if (stopped()) return;
            const std::string snapshot = snapshot_path(v, step);
            if (!fs::exists(snapshot))
                throw engine::CheckpointError(
                    snapshot, "missing: analysis.checkpoints asks for step " +
                                  std::to_string(step) + " of '" + v.name +
                                  "', which was pretrained without that snapshot (delete " +
                                  v.config.out_dir + " to pretrain it again)");
            const std::string dir = analysis_dir(v, step);
            const std::string corpus = a.corpus.empty() ? v.config.data.corpus : a.corpus;
            const std::string vocab = (fs::path(v.config.out_dir) / "vocab.txt").string();
            report(1, "analysing step " + std::to_string(step));
            if (!options_.self_exe.empty()) {
                std::vector<std::string> args = {options_.self_exe,
                                                 "analyze",
                                                 snapshot,
                                                 "--vocab",
                                                 vocab,
                                                 "--out",
                                                 dir,
                                                 "--batch",
                                                 std::to_string(a.batch_size),
                                                 "--db",
                                                 spec_.database,
                                                 "--experiment",
                                                 spec_.name,
                                                 "--run",
                                                 job.name};
                if (a.text.empty()) {
                    args.insert(args.end(),
                                {"--corpus", corpus, "--sentences", std::to_string(a.sentences)});
                } else {
                    args.insert(args.end(), {"--text", a.text});
                }
                if (a.max_tokens > 0)
                    args.insert(args.end(), {"--max-tokens", std::to_string(a.max_tokens)});
                if (!a.figures) args.push_back("--no-figures");
                if (options_.threads > 0)
                    args.insert(args.end(), {"--threads", std::to_string(options_.threads)});
                run_child(args, "analysis of " + snapshot);
            } else {
                auto ckpt = engine::load_checkpoint(snapshot);
                engine::WordPieceTokenizer tokenizer(engine::Vocab::load(vocab),
                                                     v.config.data.lower_case);
                analysis::AnalyzeOptions options;
                options.batch_size = a.batch_size;
                options.max_tokens = a.max_tokens;
                std::vector<std::string> sentences;
                if (a.text.empty()) {
                    sentences = analysis::read_sentences(corpus, a.sentences);
                    options.source = corpus;
                } else {
                    sentences = {a.text};
                    options.truncate = false;
                    options.source = "analysis.text";
                }
                auto out = analysis::analyze_model(ckpt.model, tokenizer, sentences, options);
                out.model_name = snapshot;
                if (a.figures)
                    out.notes.push_back(
                        "figures not drawn: the runner ran without the tupe "
                        "executable (run `tupe analyze` for the PNGs)");
                analysis::write_analysis(out, dir);
                record_analysis_artifacts(store_, run_id, dir);
            }
            say("analysed " + v.name + " at step " + std::to_string(step) + ": " + dir);
        }
    }

    /// Runs argv (stdout to /dev/null, stderr kept: a failing child says why in one line) and
    /// throws when it does not exit with status 0.
    void run_child(std::vector<std::string> args, const std::string& what) {
        std::vector<char*> argv;
        for (auto& arg : args) argv.push_back(arg.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        pid_t pid = 0;
        const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) throw std::runtime_error("cannot start " + args[0] + " for the " + what);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            throw std::runtime_error("the " + what + " failed (" +
                                     (WIFEXITED(status)
                                          ? "exit status " + std::to_string(WEXITSTATUS(status))
                                          : std::string("killed by a signal")) +
                                     "; its message is above)");
    }

    const TaskData& task_data(const std::string& key) {
        auto it = tasks_.find(key);
        if (it != tasks_.end()) return it->second;
        return tasks_
            .emplace(key, load_task_data(key, glue_dir_cached(), spec_.finetune.shuffle_words))
            .first->second;
    }

    const std::string& glue_dir_cached() {
        if (glue_dir_.empty()) glue_dir_ = glue_dir(spec_);
        return glue_dir_;
    }

    bool finetune(const Job& job, int64_t run_id) {
        const Variant& v = variant_named(spec_, job.variant);
        const std::string snapshot = snapshot_path(v, job.checkpoint_step);
        if (!fs::exists(snapshot))
            throw engine::CheckpointError(snapshot, "missing: the pretraining of '" + v.name +
                                                        "' did not reach step " +
                                                        std::to_string(job.checkpoint_step));
        const TaskData& data = task_data(job.task);
        if (options_.dist) options_.dist->barrier();  // the other ranks read the tasks now
        auto pretrained = engine::load_checkpoint(snapshot);
        engine::WordPieceTokenizer tokenizer(
            engine::Vocab::load((fs::path(v.config.out_dir) / "vocab.txt").string()),
            v.config.data.lower_case);

        const engine::FinetuneConfig fc =
            finetune_config(spec_, v, job, data.info, options_.threads);

        store_.delete_metrics_after(run_id, 0);  // a redone job starts its curves afresh

        const auto kind = kind_of(data.info);
        // Best epoch by the paper's selection metric on the first dev split (MNLI: matched).
        double best = -1e300;
        std::vector<analysis::TaskScores> best_scores;
        std::vector<std::vector<double>> best_predictions;  // per dev split, of the best epoch
        engine::FinetuneCallbacks fcb;
        fcb.stop = cb_.stop;
        fcb.on_step = [&](int64_t step, int64_t total, double loss) {
            char status[64];
            std::snprintf(status, sizeof status, "step %lld/%lld  loss %.3f",
                          static_cast<long long>(step), static_cast<long long>(total), loss);
            report(static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, total)),
                   status);
        };
        fcb.on_epoch = [&](const engine::EpochResult& e) {
            const double now = unix_time_now();
            std::vector<MetricPoint> points = {{"train/loss", e.epoch, e.train_loss, now}};
            std::vector<analysis::TaskScores> scores;
            for (size_t i = 0; i < data.dev.size(); ++i) {
                scores.push_back(analysis::score_task(reported_task(data.info, data.dev_names[i]),
                                                      kind, e.predictions[i],
                                                      gold_values(data.info, data.dev[i])));
                for (const auto& [metric, value] : scores.back().metrics)
                    points.push_back({data.dev_names[i] + "/" + metric, e.epoch, value, now});
            }
            store_.add_metrics(run_id, points);
            const double primary = analysis::primary_metric(kind, scores.front());
            if (primary > best) {
                best = primary;
                best_scores = scores;
                best_predictions = e.predictions;
            }
        };
        auto result = engine::finetune(pretrained.model, tokenizer, data.train, data.dev, fc, fcb,
                                       options_.dist);
        if (result.stopped) return false;
        for (size_t i = 0; i < best_scores.size(); ++i)
            for (const auto& [metric, value] : best_scores[i].metrics) {
                GlueResultRecord g;
                g.run_id = run_id;
                g.task = reported_task(data.info, data.dev_names[i]);
                g.split = data.dev_names[i];
                g.metric = metric;
                g.value = value;
                g.checkpoint_step = job.checkpoint_step;
                g.lr = job.lr;
                g.seed = static_cast<int64_t>(job.seed);
                store_.add_glue_result(g);
            }
        // The per-example predictions behind those scores: bootstrap intervals and paired
        // comparisons (tupe report, tupe claims) are computed from them.
        for (size_t i = 0; i < best_predictions.size() && i < data.dev.size(); ++i)
            store_.set_predictions({run_id, data.dev_names[i], gold_values(data.info, data.dev[i]),
                                    best_predictions[i]});
        return true;
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

    void run_parallel(const std::vector<const Job*>& jobs, int64_t parallel, RunSummary& summary) {
        TORCH_CHECK(!options_.self_exe.empty(), "parallel jobs need the path of tupe");
        say("running " + std::to_string(jobs.size()) + " fine-tuning jobs, " +
            std::to_string(parallel) + " at a time");
        std::map<pid_t, const Job*> running;
        std::map<pid_t, Clock::time_point> launched;
        size_t next = 0;
        const int64_t threads =
            std::max<int64_t>(1, (options_.threads > 0 ? options_.threads : 2) / parallel);
        while (next < jobs.size() || !running.empty()) {
            while (next < jobs.size() && static_cast<int64_t>(running.size()) < parallel &&
                   !stopped()) {
                const Job* job = jobs[next++];
                std::vector<std::string> args =
                    job_command(*job, {"--threads", std::to_string(threads), "--quiet"});
                std::vector<char*> argv;
                for (auto& a : args) argv.push_back(a.data());
                argv.push_back(nullptr);
                pid_t pid = 0;
                if (posix_spawn(&pid, options_.self_exe.c_str(), nullptr, nullptr, argv.data(),
                                environ) != 0)
                    throw std::runtime_error("cannot start " + options_.self_exe);
                running[pid] = job;
                launched[pid] = Clock::now();
                eta_.start(job->kind, job_tokens(spec_, *job));
                progress_.current = job->name;
                report(0, std::to_string(running.size()) + " running");
            }
            if (running.empty()) break;
            int status = 0;
            const pid_t pid = waitpid(-1, &status, 0);
            if (pid <= 0) continue;
            auto it = running.find(pid);
            if (it == running.end()) continue;
            const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
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
    std::string glue_dir_;
    std::map<std::string, TaskData> tasks_;
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
