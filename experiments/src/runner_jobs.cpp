// The pieces of a job that every rank of a data-parallel job computes alike (runner_internal.h),
// and the job loop of ranks other than 0: they pretrain or fine-tune in step with rank 0,
// which alone writes the results store, checkpoints and files. Also the runner's one-child
// helper (run_child), shared by the scheduler and the analysis executor, the thread that
// keeps its job claims alive (ClaimKeeper), `tupe status` (experiment_status: live claims
// told from stale ones) and the built-in tasks, prepared once however many runners ask.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/run_folder.h"
#include "engine/sha256.h"
#include "engine/tokenizer.h"
#include "experiments/job_identity.h"
#include "experiments/process_pool.h"
#include "experiments/synthetic_tasks.h"
#include "runner_internal.h"

namespace experiments::detail {

std::string glue_dir(const ExperimentSpec& spec) {
    return spec.glue.data == "builtin" ? prepare_builtin_tasks(spec) : spec.glue.data;
}

std::vector<engine::LabeledText> labeled(const TaskInfo& task, const Split& split) {
    std::vector<engine::LabeledText> out;
    out.reserve(split.examples.size());
    for (const auto& e : split.examples) {
        engine::LabeledText t;
        t.text_a = e.text_a;
        t.text_b = e.text_b;
        if (task.regression) {
            t.target = std::stof(e.label);
        } else {
            auto it = std::find(task.labels.begin(), task.labels.end(), e.label);
            t.label = it - task.labels.begin();
        }
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<double> gold_values(const TaskInfo& task, const std::vector<engine::LabeledText>& xs) {
    std::vector<double> out;
    for (const auto& x : xs)
        out.push_back(task.regression ? x.target : static_cast<double>(x.label));
    return out;
}

TaskData load_task_data(const std::string& task_key, const std::string& dir, bool shuffle) {
    TaskData d;
    d.info = find_task(task_key);
    auto splits = load_task(d.info, dir);
    // A minimal pair's two sentences are one bag of words: its bag-of-words view is that bag
    // in one order for both (shuffled from the sorted words), so any model ties every pair.
    const auto bag_order = [](const std::string& text) {
        std::istringstream in(text);
        std::vector<std::string> words;
        for (std::string w; in >> w;) words.push_back(w);
        std::sort(words.begin(), words.end());
        std::string sorted;
        for (const auto& w : words) sorted += (sorted.empty() ? "" : " ") + w;
        return shuffle_words(sorted, 0x5eedULL);
    };
    if (shuffle)
        for (auto& [name, split] : splits)
            for (auto& e : split.examples) {
                if (d.info.zero_shot) {
                    e.text_a = bag_order(e.text_a);
                    e.text_b = bag_order(e.text_b);
                    continue;
                }
                e.text_a = shuffle_words(e.text_a, 0x5eedULL);
                if (!e.text_b.empty()) e.text_b = shuffle_words(e.text_b, 0x5eedULL);
            }
    d.train = labeled(d.info, splits.at("train"));
    for (const auto& name : d.info.dev_splits) {
        d.dev_names.push_back(name);
        d.dev.push_back(labeled(d.info, splits.at(name)));
    }
    return d;
}

engine::FinetuneConfig finetune_config(const ExperimentSpec& spec, const Variant& v, const Job& job,
                                       const TaskInfo& task, int64_t threads) {
    engine::FinetuneConfig fc;
    fc.num_labels = task.regression ? 1 : static_cast<int64_t>(task.labels.size());
    fc.lr = job.lr;
    fc.seed = job.seed;
    fc.epochs = spec.finetune.epochs > 0 ? spec.finetune.epochs : task.default_epochs;
    fc.batch_size = spec.finetune.batch_size;
    fc.warmup_ratio = spec.finetune.warmup_ratio;
    fc.weight_decay = spec.finetune.weight_decay;
    fc.classifier_dropout = spec.finetune.classifier_dropout;
    fc.max_seq_len = std::min(spec.finetune.max_seq_len, v.config.model.max_position_embeddings);
    fc.device = v.config.train.device;
    fc.threads = threads;
    return fc;
}

void run_child(std::vector<std::string> args, const std::string& what,
               const std::vector<std::pair<std::string, std::string>>& env) {
    ChildSpec child;
    child.argv = std::move(args);
    child.env = env;
    child.discard_stdout = true;
    ProcessPool pool;
    const pid_t pid = pool.spawn(child);
    if (pid < 0) throw std::runtime_error("cannot start " + child.argv[0] + " for the " + what);
    const int status = pool.wait(pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error("the " + what + " failed (" +
                                 (WIFEXITED(status)
                                      ? "exit status " + std::to_string(WEXITSTATUS(status))
                                      : std::string("killed by a signal")) +
                                 "; its message is above)");
}

ClaimKeeper::ClaimKeeper(ResultStore store, ClaimOwner owner, std::chrono::milliseconds interval,
                         const std::atomic<bool>* user_stop, std::atomic<bool>& job_stop)
    : store_(std::move(store)),
      owner_(std::move(owner)),
      interval_(interval),
      user_stop_(user_stop),
      job_stop_(job_stop) {
    thread_ = std::thread([this] { loop(); });
}

ClaimKeeper::~ClaimKeeper() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        quit_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void ClaimKeeper::watch(std::int64_t experiment_id, const std::string& job) {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_experiment_ = experiment_id;
    watched_job_ = job;
    ++watch_generation_;
    lost_ = false;
    job_stop_ = user_stop_ && user_stop_->load();
}

void ClaimKeeper::unwatch() { watch(0, ""); }

void ClaimKeeper::quietly(const std::function<void()>& action) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    action();
}

void ClaimKeeper::loop() {
    using Clock = std::chrono::steady_clock;
    auto next_beat = Clock::now();  // the first heartbeat at once
    std::unique_lock<std::mutex> lock(mutex_);
    while (!quit_) {
        wake_.wait_for(lock, std::chrono::milliseconds(50));
        if (quit_) break;
        if (user_stop_ && user_stop_->load()) job_stop_ = true;
        if (Clock::now() < next_beat) continue;
        next_beat = Clock::now() + interval_;
        const std::int64_t experiment = watched_experiment_;
        const std::string job = watched_job_;
        const std::uint64_t generation = watch_generation_;
        lock.unlock();
        bool held = true;
        try {
            std::lock_guard<std::mutex> writing(write_mutex_);
            const auto claims = store_.heartbeat_claims(owner_);
            if (!job.empty()) {
                held = false;
                for (const auto& c : claims)
                    if (c.experiment_id == experiment && c.job == job) held = true;
            }
        } catch (const std::exception&) {
            // A heartbeat that cannot be written (database locked for long): the next one
            // tries again; if they all fail the claims go stale, as for a hung runner.
        }
        lock.lock();
        // Lost only if the job is still the one watched when the claims were read: a job
        // unwatched, then released, meanwhile is not lost.
        if (!held && generation == watch_generation_) {
            lost_ = true;
            job_stop_ = true;
        }
    }
}

RunSummary run_worker_job(const BoundPlan& bound, const RunnerOptions& options,
                          const RunnerCallbacks& callbacks) {
    engine::DistributedContext& dist = *options.dist;
    const ExperimentSpec& spec = bound.spec;
    const Job& job = job_named(bound.jobs, spec, options.only_job);
    const Variant& v = variant_named(spec, job.variant);
    RunSummary summary;
    if (job.kind == Job::Kind::kPretrain) {
        engine::TrainCallbacks tc;
        tc.stop = callbacks.stop;
        tc.snapshot_steps = snapshot_steps(spec, v);
        engine::PretrainConfig config = v.config;  // --threads holds here too
        if (options.threads > 0) config.train.threads = options.threads;
        const auto result = engine::pretrain(config, tc, &dist);
        summary.stopped = result.stopped;
    } else {
        // Rank 0 prepares the built-in tasks (it writes them once); the others read them after.
        dist.barrier();
        const TaskData data = load_task_data(job.task, glue_dir(spec), spec.finetune.shuffle_words);
        const std::string snapshot = snapshot_path(v, job.checkpoint_step);
        auto pretrained = engine::load_checkpoint(snapshot);
        engine::WordPieceTokenizer tokenizer(
            engine::Vocab::load((std::filesystem::path(v.config.out_dir) / "vocab.txt").string()),
            v.config.data.lower_case);
        engine::FinetuneCallbacks fcb;
        fcb.stop = callbacks.stop;
        const auto result =
            engine::finetune(pretrained.model, tokenizer, data.train, data.dev,
                             finetune_config(spec, v, job, data.info, options.threads), fcb, &dist);
        summary.stopped = result.stopped;
    }
    if (!summary.stopped) summary.finished = 1;
    return summary;
}

}  // namespace experiments::detail

namespace experiments {

namespace fs = std::filesystem;
using detail::seconds_between;

std::vector<JobStatus> job_statuses(const ExperimentSpec& study, double claim_timeout_seconds) {
    const BoundPlan bound = bind_plan(study, ChangedJobs::kDescribe);
    const ExperimentSpec& spec = bound.spec;
    const auto& plan = bound.jobs;
    std::map<std::string, RunRecord> runs;
    std::map<std::string, JobClaim> claims;  // held ones, by job
    if (ResultStore::holds_data(spec.database)) {
        auto store = ResultStore::open_for_reading(spec.database);
        if (auto e = store.find_experiment(spec.name)) {
            auto read_claims = [&] {
                for (auto& c : store.list_claims(e->id))
                    if (c.held()) claims[c.job] = c;
            };
            read_claims();
            for (auto& r : store.list_runs(e->id)) runs[r.name] = r;
            // A job that started between the two reads holds its claim by now: look again
            // before calling a running job unclaimed.
            for (const auto& [name, r] : runs)
                if (r.status == "running" && !claims.count(name)) {
                    read_claims();
                    break;
                }
        }
    }
    const double now = unix_time_now();
    std::vector<JobStatus> out;
    for (const auto& job : plan) {
        JobStatus js;
        js.job = job.name;
        js.kind = job.kind == Job::Kind::kPretrain ? "pretrain" : "finetune";
        auto it = runs.find(job.name);
        js.status = it == runs.end() ? "pending" : it->second.status;
        if (it != runs.end()) {
            js.step = it->second.step;
            js.error = it->second.error_message;
        }
        if (!job.change.empty()) {
            // The stored run has another identity: it is not this job's result.
            js.status = "changed";
            js.error = job.change;
        } else if (!job.output_change.empty() && js.status == "finished") {
            // Its outputs were recorded with other settings: `tupe run --redo` replaces them.
            js.status = "changed";
            js.error = "outputs: " + job.output_change;
        }
        const auto held = claims.find(job.name);
        if (js.status != "finished" && held != claims.end()) {
            // The claim says whether the job runs now, whatever its run row last recorded.
            const JobClaim& c = held->second;
            js.owner = c.owner.text();
            js.heartbeat_age_s = static_cast<double>(seconds_between(c.heartbeat_time, now));
            const ClaimHealth health = claim_health(c, claim_timeout_seconds, now);
            js.status = health == ClaimHealth::kLive ? "running" : "stale";
            js.owner_gone = health == ClaimHealth::kOwnerGone;
        } else if (js.status == "running") {
            js.status = "stale";  // left running by a runner that is gone (or an older tupe)
        }
        out.push_back(std::move(js));
    }
    return out;
}

std::string experiment_status(const ExperimentSpec& spec, double claim_timeout_seconds) {
    const auto jobs = job_statuses(spec, claim_timeout_seconds);
    std::map<std::string, int> counts;
    std::ostringstream os;
    for (const auto& js : jobs) {
        ++counts[js.status];
        std::string claim_text;
        const std::string age =
            std::to_string(static_cast<long long>(js.heartbeat_age_s)) + " s ago";
        if (js.status == "running" && !js.owner.empty())
            claim_text = "(" + js.owner + ", heartbeat " + age + ")";
        else if (js.status == "stale" && !js.owner.empty())
            claim_text = "(owner " + js.owner + ", last heartbeat " + age +
                         (js.owner_gone ? ", no such process" : "") + ")";
        else if (js.status == "stale")
            claim_text = "(no runner holds it)";
        const bool pretrain = js.kind == "pretrain";
        if (pretrain || js.status == "failed" || js.status == "running" || js.status == "stale") {
            os << "  " << js.status << std::string(10 - std::min<size_t>(9, js.status.size()), ' ')
               << js.job;
            if (js.step >= 0 && pretrain) os << "  (step " << js.step << ")";
            if (!claim_text.empty()) os << "  " << claim_text;
            if (!js.error.empty()) os << "  " << js.error;
            os << "\n";
        }
    }
    std::ostringstream head;
    head << spec.name << ": " << jobs.size() << " jobs (" << spec.variants.size()
         << " pretraining, " << jobs.size() - spec.variants.size() << " fine-tuning) in "
         << spec.database << "\n ";
    for (const auto& [status, n] : counts) head << " " << status << " " << n;
    head << "\n";
    return head.str() + os.str();
}

std::string experiment_status_json(const ExperimentSpec& spec, double claim_timeout_seconds) {
    const auto jobs = job_statuses(spec, claim_timeout_seconds);
    nlohmann::json j;
    j["experiment"] = spec.name;
    j["database"] = spec.database;
    j["counts"] = nlohmann::json::object();
    j["jobs"] = nlohmann::json::array();
    for (const auto& js : jobs) {
        j["counts"][js.status] = j["counts"].value(js.status, 0) + 1;
        nlohmann::json row = {{"job", js.job}, {"kind", js.kind}, {"status", js.status}};
        row["step"] = js.step >= 0 ? nlohmann::json(js.step) : nlohmann::json(nullptr);
        if (!js.owner.empty()) {
            row["owner"] = js.owner;
            row["heartbeat_age_s"] = js.heartbeat_age_s;
            row["owner_gone"] = js.owner_gone;
        }
        if (!js.error.empty()) row["error"] = js.error;
        j["jobs"].push_back(std::move(row));
    }
    return j.dump(2) + "\n";
}

std::string prepare_builtin_tasks(const ExperimentSpec& spec) {
    const auto& data = spec.variants.front().config.data;
    // One folder per task-data identity (generator version, corpus hash, sizes): a study with
    // other sizes, or another study sharing runs_dir, never rewrites the tasks stored scores
    // came from.
    static FileHashes hashes;
    const fs::path dir = fs::path(spec.runs_dir) / "builtin_tasks" /
                         engine::sha256_hex(task_data_identity(spec, {}, hashes)).substr(0, 12);
    std::ostringstream stamp;
    stamp << "corpus=" << data.corpus << " fraction=" << data.validation_fraction
          << " train=" << spec.glue.synthetic_train << " dev=" << spec.glue.synthetic_dev << "\n";
    // The task folders written: a folder prepared before a task was added is prepared again
    // (the generator writes the earlier tasks' files byte for byte as before, so what was
    // scored on them stays what they hold).
    stamp << "tasks=";
    for (const auto& key : analysis::synthetic_task_keys()) stamp << find_task(key).name << " ";
    stamp << "\n";
    const auto prepared = [&] {
        std::ifstream in(dir / "SOURCE.txt");
        std::stringstream have;
        have << in.rdbuf();
        return in && have.str() == stamp.str();
    };
    if (prepared()) return dir.string();
    // Sentences of the pretraining validation documents only: fine-tuning text the model
    // never saw during pretraining.
    SyntheticOptions options;
    options.train_size = spec.glue.synthetic_train;
    options.dev_size = spec.glue.synthetic_dev;
    options.validation_fraction = data.validation_fraction;
    // Several processes (runners sharing the plan, parallel children) may get here at once:
    // each writes its own copy and moves it into place with one rename, so no reader ever
    // sees a half-written file.
    const std::string pid = std::to_string(getpid());
    const fs::path tmp = dir.string() + ".tmp." + pid;
    std::error_code ec;
    fs::remove_all(tmp, ec);
    write_synthetic_tasks(data.corpus, tmp.string(), options);
    std::ofstream(tmp / "SOURCE.txt") << stamp.str();
    for (int attempt = 0; attempt < 3; ++attempt) {
        fs::rename(tmp, dir, ec);  // fails while `dir` exists with files in it
        if (!ec) return dir.string();
        if (prepared()) {  // another process put the same tasks in place
            fs::remove_all(tmp, ec);
            return dir.string();
        }
        // An out-of-date copy (another corpus or sizes): move it aside, then put ours.
        const fs::path old = dir.string() + ".old." + pid;
        fs::remove_all(old, ec);
        fs::rename(dir, old, ec);
        fs::remove_all(old, ec);
    }
    fs::remove_all(tmp, ec);
    throw engine::InputError(dir.string(), "cannot move the prepared tasks into place");
}

}  // namespace experiments
