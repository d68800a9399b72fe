// The plan matched to the results store and the run folders (runner.h, bind_plan): the study
// is checked before anything is written, every job gets its identity (job_identity.h), and a
// stored run counts as the job's run only when its identity is the job's. A changed job is
// refused in one line naming what changed, or run beside the stored run as name~FINGERPRINT8
// (--new-runs). A pretraining folder belongs to one study: its owner record (.tupe-run) names
// the experiment and the job, and no other study adopts its checkpoints or rewrites its files.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "analysis/tasks.h"
#include "engine/cost_model.h"
#include "engine/errors.h"
#include "engine/run_folder.h"
#include "experiments/config_loader.h"
#include "experiments/glue_data.h"
#include "experiments/job_identity.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"
#include "experiments/synthetic_tasks.h"
#include "study_layout.h"

namespace experiments {

namespace fs = std::filesystem;

namespace {

std::string same_path(const std::string& p) { return canonical_path(p); }

// One line: what a study file lacks or sets out of range, before any row is written.
[[noreturn]] void refuse(const ExperimentSpec& spec, const std::string& key,
                         const std::string& message) {
    throw ConfigError(spec.path, 0, 0, key, message);
}

void check_file(const ExperimentSpec& spec, const std::string& key, const std::string& path,
                const std::string& example) {
    if (path.empty()) refuse(spec, key, "is not set: the study needs it (e.g. " + example + ")");
    std::error_code error;
    if (fs::is_directory(path, error))
        throw engine::InputError(path, "is a folder; " + key + " names a file");
    if (!fs::exists(path, error))
        throw engine::InputError(path, "no such file (" + key + " of " + spec.path + ")");
}

// A step on the CPU whose activations alone (engine::estimate_step_memory with no parameters,
// fp32: a lower bound) exceed this machine's memory would grow until the system kills it,
// silently: refused now, naming the key. A GPU's memory is not known here.
void check_step_memory(const ExperimentSpec& spec, const Variant& v) {
    const auto& c = v.config;
    const bool cpu =
        c.train.device == "cpu" || (c.train.device == "auto" && !torch::cuda::is_available());
    if (!cpu) return;
    const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                       static_cast<double>(::sysconf(_SC_PAGE_SIZE));
    const int64_t micro = c.train.batch_size / std::max<int64_t>(1, c.train.grad_accum);
    const int64_t T = c.data.max_seq_len;
    const auto masked = static_cast<int64_t>(static_cast<double>(micro * T) * c.data.mask_prob);
    double need = 0;
    try {
        need = engine::estimate_step_memory(c.model, 0, micro, T, masked, false).total();
    } catch (const std::exception&) {
        return;  // an inconsistent scheme is check_config's to report
    }
    if (ram <= 0 || need <= ram) return;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%lld sequences of %lld tokens per step need at least %.0f GB for the "
                  "activations alone, more than this machine's %.0f GB: lower it, or raise "
                  "train.grad_accum",
                  static_cast<long long>(micro), static_cast<long long>(T), need / 1e9, ram / 1e9);
    refuse(spec, "train.batch_size", std::string(line) + " (variant " + v.name + ")");
}

// Ranges the engine would otherwise find only when the job runs, after the plan's rows exist.
void check_config(const ExperimentSpec& spec, const Variant& v) {
    const auto& c = v.config;
    const std::string at = " (variant " + v.name + ")";
    try {
        c.model.validate();
    } catch (const std::invalid_argument& e) {
        refuse(spec, "model", std::string(e.what()) + at);
    }
    auto need = [&](bool ok, const std::string& key, const std::string& what) {
        if (!ok) refuse(spec, key, what + at);
    };
    need(c.train.steps >= 1, "train.steps", "must be >= 1, got " + std::to_string(c.train.steps));
    need(c.train.batch_size >= 1, "train.batch_size",
         "must be >= 1, got " + std::to_string(c.train.batch_size));
    need(c.train.grad_accum >= 1 && c.train.batch_size % c.train.grad_accum == 0,
         "train.grad_accum",
         "must be >= 1 and divide train.batch_size (" + std::to_string(c.train.batch_size) +
             "), got " + std::to_string(c.train.grad_accum));
    need(c.train.warmup_steps >= 0, "train.warmup_steps",
         "must be >= 0, got " + std::to_string(c.train.warmup_steps));
    need(std::isfinite(c.train.lr) && c.train.lr > 0, "train.lr", "must be a positive number");
    need(c.train.eval_interval >= 1, "train.eval_interval", "must be >= 1");
    need(c.train.checkpoint_interval >= 1, "train.checkpoint_interval", "must be >= 1");
    need(c.data.max_seq_len >= 3, "data.max_seq_len",
         "must be >= 3 ([CLS], a token, [SEP]), got " + std::to_string(c.data.max_seq_len));
    need(c.data.max_seq_len <= c.model.max_position_embeddings, "data.max_seq_len",
         "(" + std::to_string(c.data.max_seq_len) + ") exceeds model.max_position_embeddings (" +
             std::to_string(c.model.max_position_embeddings) + ")");
    need(c.data.validation_fraction > 0 && c.data.validation_fraction < 1,
         "data.validation_fraction", "must be in (0, 1)");
    need(c.data.mask_prob > 0 && c.data.mask_prob < 1, "data.mask_prob", "must be in (0, 1)");
    need(c.data.eval_mask_prob >= 0 && c.data.eval_mask_prob < 1, "data.eval_mask_prob",
         "must be in [0, 1) (0 = data.mask_prob)");
    check_file(spec, "data.corpus", c.data.corpus, "data/brown/brown.txt");
    check_file(spec, "data.vocab", c.data.vocab, "data/brown/vocab-8k.txt");
    check_step_memory(spec, v);
}

// Every task's files read once now, so a malformed GLUE file stops the study before the first
// pretraining, not after it.
void check_tasks(const ExperimentSpec& spec, const std::vector<Job>& plan) {
    if (spec.glue.data == "builtin") return;  // generated from the corpus checked above
    std::set<std::string> tasks;
    for (const auto& j : plan)
        if (j.kind == Job::Kind::kFinetune) tasks.insert(j.task);
    for (const auto& key : tasks) {
        const auto& task = analysis::find_task(key);
        load_task(task, spec.glue.data);
        load_test_splits(task, spec.glue.data);
    }
}

// The runs of the study's experiment, by name; empty when the store or the experiment does
// not exist yet (a store another runner is creating this moment is still empty).
std::map<std::string, RunRecord> stored_runs(const ExperimentSpec& spec) {
    std::map<std::string, RunRecord> out;
    if (!ResultStore::holds_data(spec.database)) return out;
    auto store = ResultStore::open_for_reading(spec.database);
    const auto experiment = store.find_experiment(spec.name);
    if (!experiment) return out;
    for (auto& r : store.list_runs(experiment->id)) {
        std::string name = r.name;
        out.emplace(std::move(name), std::move(r));
    }
    return out;
}

class Binder {
  public:
    Binder(BoundPlan& bound, ChangedJobs mode, std::map<std::string, RunRecord> runs)
        : bound_(bound), mode_(mode), runs_(std::move(runs)) {}

    // The job's run name: the stored run with its fingerprint, an adoptable run stored before
    // identities, a free name, or (changed) the name beside the stored run.
    // `renamed`, where given, rewrites a stored identity into today's naming of the same
    // inputs; a stored run it maps onto the job's identity is adopted too.
    void resolve(Job& job, const std::function<bool(const RunRecord&)>& legacy_matches,
                 const std::function<std::string(const std::string&)>& renamed = nullptr) {
        job.base_name = job.name;
        const auto it = runs_.find(job.name);
        if (it == runs_.end()) return;
        const RunRecord& stored = it->second;
        if (stored.fingerprint == job.fingerprint) return;
        if ((stored.identity.empty() && legacy_matches(stored)) ||
            (!stored.identity.empty() && renamed && renamed(stored.identity) == job.identity)) {
            job.adopt = true;
            return;
        }
        const std::string beside = job.name + "~" + job.fingerprint.substr(0, 8);
        const auto other = runs_.find(beside);
        if (other != runs_.end() && other->second.fingerprint == job.fingerprint) {
            job.name = beside;
            return;
        }
        std::string what;
        if (stored.identity.empty()) {
            what = "stored before run identities, with another config";
        } else {
            for (const auto& change : identity_changes(stored.identity, job.identity))
                what += (what.empty() ? "" : "; ") + change;
        }
        job.change = what;
        bound_.changed.push_back(job.name + ": " + what);
        changes_.push_back(stored.identity.empty()
                               ? std::vector<std::string>{what}
                               : identity_changes(stored.identity, job.identity));
        if (mode_ == ChangedJobs::kRunBeside) job.name = beside;
    }

    // One line for the refusal: each changed key once, with the number of jobs it touches.
    std::string summary() const {
        std::map<std::string, int> count;
        std::vector<std::string> order;
        for (const auto& job_changes : changes_)
            for (std::string c : job_changes) {
                if (c.rfind("pretrain.", 0) == 0) c = c.substr(9);
                if (!count.count(c)) order.push_back(c);
                ++count[c];
            }
        std::string out;
        for (size_t i = 0; i < order.size() && i < 4; ++i)
            out += (out.empty() ? "" : "; ") + order[i] + " (" + std::to_string(count[order[i]]) +
                   (count[order[i]] == 1 ? " job)" : " jobs)");
        if (order.size() > 4) out += "; and " + std::to_string(order.size() - 4) + " more";
        return out;
    }

    const std::map<std::string, RunRecord>& runs() const { return runs_; }

  private:
    BoundPlan& bound_;
    ChangedJobs mode_;
    std::map<std::string, RunRecord> runs_;
    std::vector<std::vector<std::string>> changes_;
};

// A pretraining folder belongs to the study whose owner record it holds; a folder with files
// but no record is adopted only when this study's stored run of the job names it.
void check_owner(const ExperimentSpec& spec, const Job& job, const Variant& v,
                 const std::map<std::string, RunRecord>& runs) {
    const std::string& dir = v.config.out_dir;
    std::error_code error;
    if (!fs::exists(dir, error)) return;
    if (const auto holder = engine::RunFolderLock::holder(dir))
        throw engine::InputError(dir, "is in use by " + *holder +
                                          " (`tupe pretrain` writes it); wait for it or give "
                                          "experiment '" +
                                          spec.name + "' another runs_dir");
    if (const auto owner = engine::read_run_owner(dir)) {
        if (owner->experiment != spec.name) {
            // Another study's finished run of the same job (same name and fingerprint: the
            // same config, corpus, vocab and snapshots) is shared: this study reads its
            // snapshots and finds nothing left to train (quickstart_bow reads the quickstart's
            // checkpoints). The folder stays the other study's.
            const bool same_job = owner->job == job.name && owner->fingerprint == job.fingerprint;
            const std::string final_snapshot = detail::snapshot_path(v, v.config.train.steps);
            if (same_job && fs::exists(final_snapshot, error)) return;
            throw engine::InputError(
                dir, "belongs to experiment '" + owner->experiment + "' (job " + owner->job +
                         (same_job ? "), which has not finished it (no " + final_snapshot +
                                         "); let it finish, or give experiment '" + spec.name +
                                         "' its own runs_dir"
                                   : "); give experiment '" + spec.name + "' its own runs_dir"));
        }
        // The owner record names its store (relative to the folder): a study of the same name
        // in another store is another study, which must not resume in, rewrite or re-point the
        // folder. Records without a store (older) are judged by the name alone.
        if (!owner->store.empty()) {
            const std::string owner_store = same_path((fs::path(dir) / owner->store).string());
            if (owner_store != same_path(spec.owning_store()))
                throw engine::InputError(
                    dir, "belongs to experiment '" + owner->experiment + "' (job " + owner->job +
                             ") of the store " + owner_store + ", not " +
                             same_path(spec.owning_store()) + "; give experiment '" + spec.name +
                             "' its own runs_dir");
        }
        if (owner->job != job.name || owner->fingerprint != job.fingerprint)
            throw engine::InputError(dir, "holds job " + owner->job + " (fingerprint " +
                                              owner->fingerprint + ") of experiment '" + spec.name +
                                              "', not job " + job.name + " (fingerprint " +
                                              job.fingerprint + "); move it away to rerun");
        return;
    }
    if (!engine::run_folder_has_files(dir)) return;
    const auto it = runs.find(job.name);
    if (it != runs.end() && it->second.kind == "pretrain" &&
        same_path(it->second.out_dir) == same_path(dir))
        return;  // stored before owner records: this study's own run
    throw engine::InputError(dir, "holds files that no run of experiment '" + spec.name + "' in " +
                                      spec.database +
                                      " recorded (`tupe pretrain` or another study wrote "
                                      "them); move them away or choose another runs_dir");
}

// Each output of the study's pretraining runs (analysis_executor.cpp) against what the store
// recorded: one whose settings or inputs changed is refused in one line naming each change and
// how many outputs it touches, unless `redo` names its block (then it is pending again), or
// listed in bound.changed (kDescribe). A shared run folder's outputs are its owner's: one the
// owner has not recorded with this study's settings is refused (this study may not write it).
void check_outputs(const ExperimentSpec& spec, ChangedJobs mode, const std::set<std::string>& redo,
                   std::vector<Job>& plan, const std::map<std::string, RunRecord>& runs,
                   BoundPlan& bound, FileHashes& hashes) {
    if (!ResultStore::holds_data(spec.database)) return;
    auto store = ResultStore::open_for_reading(spec.database);
    std::map<std::string, int> count;  // "key: old -> new" -> outputs
    std::map<std::string, std::string> unit;
    std::vector<std::string> order;
    std::set<std::string> blocks;
    for (Job& job : plan) {
        if (job.kind != Job::Kind::kPretrain) continue;
        const Variant& v = detail::variant_named(bound.spec, job.variant);
        const bool shared = detail::shared_run_folder(spec, v);
        std::optional<RunRecord> run;
        if (shared) {
            const auto owner = engine::read_run_owner(v.config.out_dir);
            if (const auto e = store.find_experiment(owner->experiment))
                run = store.find_run(e->id, owner->job);
            if (run && same_path(run->out_dir) != same_path(v.config.out_dir)) run.reset();
        } else if (const auto it = runs.find(job.name); it != runs.end()) {
            run = it->second;
        }
        const auto recorded = run ? store.artifacts(run->id) : std::vector<ArtifactRecord>{};
        for (const auto& output : detail::run_output_plans(spec, v, true)) {
            const auto state = detail::run_output_state(spec, v, output, recorded, hashes);
            // The analysis block holds the ablation and the head scan too.
            const std::string block =
                output.kind == RunOutput::kExtrapolation ? "extrapolation" : "analysis";
            if (shared && state.state != detail::RunOutputState::State::kDone &&
                mode != ChangedJobs::kDescribe)
                throw engine::InputError(
                    v.config.out_dir,
                    "is experiment '" + engine::read_run_owner(v.config.out_dir)->experiment +
                        "''s run, read only here: its " + output.label() +
                        (state.state == detail::RunOutputState::State::kChanged
                             ? " was recorded with other settings (" + state.changes.front() + ")"
                             : " is not recorded by its owner") +
                        "; give experiment '" + spec.name + "' its own runs_dir");
            if (state.state != detail::RunOutputState::State::kChanged || redo.count(block))
                continue;
            std::string line;
            for (const auto& c : state.changes) line += (line.empty() ? "" : "; ") + c;
            bound.changed.push_back(job.name + ": " + output.label() + ": " + line);
            job.output_change +=
                (job.output_change.empty() ? "" : "; ") + output.label() + ": " + line;
            blocks.insert(block);
            for (const auto& c : state.changes) {
                if (!count.count(c)) order.push_back(c);
                ++count[c];
                unit[c] = output.kind == RunOutput::kAnalysis ? "snapshot" : "run";
            }
        }
    }
    if (mode != ChangedJobs::kRefuse || order.empty()) return;
    std::string what, flags;
    for (size_t i = 0; i < order.size() && i < 4; ++i)
        what += (what.empty() ? "" : "; ") + order[i] + " (" + std::to_string(count[order[i]]) +
                " " + unit[order[i]] + (count[order[i]] == 1 ? ")" : "s)");
    if (order.size() > 4) what += "; and " + std::to_string(order.size() - 4) + " more";
    for (const auto& b : blocks) flags += " --redo " + b;
    refuse(spec, "",
           "outputs differ from those recorded in " + spec.database + " (" + what +
               "): rerun with" + flags + " to replace them, or give the study another name");
}

}  // namespace

namespace {
BoundPlan bind(const ExperimentSpec& spec, ChangedJobs mode, const std::set<std::string>& redo);
}  // namespace

BoundPlan bind_plan(const ExperimentSpec& spec, ChangedJobs mode,
                    const std::set<std::string>& redo) {
    for (const auto& block : redo)
        if (block != "analysis" && block != "extrapolation")
            throw ConfigError(spec.path, 0, 0, "",
                              "--redo " + block + ": expected analysis or extrapolation");
    if (mode == ChangedJobs::kDescribe) {
        // `tupe status` of a study whose data is missing still lists its jobs, unmatched.
        try {
            return bind(spec, mode, redo);
        } catch (const std::exception&) {
            BoundPlan bound;
            bound.spec = spec;
            bound.jobs = make_plan(spec);
            for (auto& job : bound.jobs) job.base_name = job.name;
            return bound;
        }
    }
    return bind(spec, mode, redo);
}

namespace {

BoundPlan bind(const ExperimentSpec& spec, ChangedJobs mode, const std::set<std::string>& redo) {
    if (spec.variants.empty()) refuse(spec, "variants", "the study has no variants");
    BoundPlan bound;
    bound.spec = spec;
    const bool checking = mode != ChangedJobs::kDescribe;
    if (checking)
        for (const auto& v : spec.variants) check_config(spec, v);
    std::vector<Job> plan = make_plan(spec);
    if (checking) check_tasks(spec, plan);

    Binder binder(bound, mode, stored_runs(spec));
    FileHashes hashes;
    std::map<std::string, JobIdentity> pretrain_ids;  // by the plan's variant name
    std::map<std::string, std::string> renamed;       // plan's variant name -> run name
    for (Job& job : plan) {
        if (job.kind != Job::Kind::kPretrain) continue;
        Variant& v = *std::find_if(bound.spec.variants.begin(), bound.spec.variants.end(),
                                   [&](const Variant& x) { return x.name == job.variant; });
        const JobIdentity id = pretrain_identity(spec, v, hashes);
        pretrain_ids[v.name] = id;
        job.identity = id.text();
        job.fingerprint = id.fingerprint();
        job.cell = id.cell(pooled_keys(false));
        // A lone seed's variant was named without @seedN before one naming rule: its stored
        // run of the same fingerprint keeps its name and folder.
        const std::string legacy = variant_group(job.name);
        if (legacy != job.name && !binder.runs().count(job.name)) {
            const auto old = binder.runs().find(legacy);
            if (old != binder.runs().end() && old->second.fingerprint == job.fingerprint &&
                old->second.kind == "pretrain") {
                renamed[v.name] = legacy;
                v.config.out_dir = (fs::path(spec.runs_dir) / legacy).string();
                v.name = legacy;
                job.name = legacy;
                job.variant = legacy;
            }
        }
        binder.resolve(job, [&](const RunRecord& stored) {
            return stored.config_text == detail::pretrain_config_text(v);
        });
        if (job.name != job.base_name) {
            // Run beside the stored run: its own name and folder; the group stays.
            renamed[v.name] = job.name;
            v.config.out_dir = (fs::path(spec.runs_dir) / job.name).string();
            v.name = job.name;
            job.variant = job.name;
        }
        // A changed job keeping its name is refused below, with what changed.
        if (checking && (job.change.empty() || job.name != job.base_name))
            check_owner(spec, job, v, binder.runs());
    }
    std::vector<std::string> task_keys;
    for (const Job& job : plan)
        if (job.kind == Job::Kind::kFinetune &&
            std::find(task_keys.begin(), task_keys.end(), job.task) == task_keys.end())
            task_keys.push_back(job.task);
    const std::string task_data =
        task_keys.empty() ? "" : task_data_identity(spec, task_keys, hashes);
    const std::string zero_shot_data =
        task_keys.empty() ? "" : zero_shot_task_data_identity(spec, task_keys, hashes);
    for (Job& job : plan) {
        if (job.kind != Job::Kind::kFinetune) continue;
        const std::string plan_variant = job.variant;
        if (const auto r = renamed.find(plan_variant); r != renamed.end()) {
            job.variant = r->second;
            job.name = r->second + job.name.substr(plan_variant.size());
        }
        const Variant& v = detail::variant_named(bound.spec, job.variant);
        const JobIdentity id = finetune_identity(
            spec, v, pretrain_ids.at(plan_variant), job.checkpoint_step, job.task, job.lr, job.seed,
            analysis::find_task(job.task).zero_shot ? zero_shot_data : task_data);
        job.identity = id.text();
        job.fingerprint = id.fingerprint();
        job.cell = id.cell(pooled_keys(true));
        const auto legacy = [&](const RunRecord& stored) {
            // Tasks generated before identities came from generator version 1: the same
            // files as now only where the sizes give version 1.
            return stored.config_text == detail::finetune_config_text(bound.spec, v, job) &&
                   (spec.glue.data != "builtin" ||
                    synthetic_tasks_version(spec.glue.synthetic_train, spec.glue.synthetic_dev) ==
                        1);
        };
        if (analysis::find_task(job.task).zero_shot)
            // A pair-task run stored before its task data was named by the dev split alone
            // (zero_shot_task_data): the same dev pairs, the same scores.
            binder.resolve(job, legacy, [](const std::string& identity) {
                JobIdentity stored = JobIdentity::parse(identity);
                const auto data = stored.fields().find("finetune.task_data");
                if (data != stored.fields().end())
                    stored.set("finetune.task_data", zero_shot_task_data(data->second));
                return stored.text();
            });
        else
            binder.resolve(job, legacy);
    }
    if (mode == ChangedJobs::kRefuse && !bound.changed.empty())
        refuse(spec, "",
               std::to_string(bound.changed.size()) + " of its " + std::to_string(plan.size()) +
                   " jobs differ from the runs stored in " + spec.database + " (" +
                   binder.summary() +
                   "): rerun with --new-runs to run them as new runs beside the stored ones, "
                   "or give the study another name");
    check_outputs(spec, mode, redo, plan, binder.runs(), bound, hashes);
    bound.jobs = std::move(plan);
    return bound;
}

}  // namespace

}  // namespace experiments
