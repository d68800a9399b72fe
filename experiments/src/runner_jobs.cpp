// The pieces of a job that every rank of a data-parallel job computes alike (runner_internal.h),
// and the job loop of ranks other than 0: they pretrain or fine-tune in step with rank 0,
// which alone writes the results store, checkpoints and files. Also the runner's one-child
// helper (run_child), shared by the scheduler and the analysis executor.
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "experiments/process_pool.h"
#include "experiments/synthetic_tasks.h"
#include "runner_internal.h"

namespace experiments::detail {

std::string glue_dir(const ExperimentSpec& spec) {
    return spec.glue.data == "builtin" ? prepare_builtin_tasks(spec) : spec.glue.data;
}

std::string snapshot_path(const Variant& v, int64_t step) {
    return engine::snapshot_path(v.config.out_dir, step);
}

const Variant& variant_named(const ExperimentSpec& spec, const std::string& name) {
    for (const auto& v : spec.variants)
        if (v.name == name) return v;
    throw std::invalid_argument("no variant named '" + name + "' in " + spec.path);
}

const Job& job_named(const std::vector<Job>& plan, const ExperimentSpec& spec,
                     const std::string& name) {
    for (const auto& j : plan)
        if (j.name == name) return j;
    throw std::invalid_argument("no job named '" + name + "' in " + spec.path +
                                " (`tupe status` lists them)");
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
    if (shuffle)
        for (auto& [name, split] : splits)
            for (auto& e : split.examples) {
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

std::vector<int64_t> snapshot_steps(const ExperimentSpec& spec, const Variant& v) {
    std::vector<int64_t> steps = spec.checkpoint_steps(v);
    for (int64_t step : spec.analysis_steps(v))
        if (std::find(steps.begin(), steps.end(), step) == steps.end()) steps.push_back(step);
    std::sort(steps.begin(), steps.end());
    return steps;
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

void run_child(std::vector<std::string> args, const std::string& what) {
    ChildSpec child;
    child.argv = std::move(args);
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

RunSummary run_worker_job(const ExperimentSpec& spec, const RunnerOptions& options,
                          const RunnerCallbacks& callbacks) {
    engine::DistributedContext& dist = *options.dist;
    const auto plan = make_plan(spec);
    const Job& job = job_named(plan, spec, options.only_job);
    const Variant& v = variant_named(spec, job.variant);
    RunSummary summary;
    if (job.kind == Job::Kind::kPretrain) {
        engine::TrainCallbacks tc;
        tc.stop = callbacks.stop;
        tc.snapshot_steps = snapshot_steps(spec, v);
        const auto result = engine::pretrain(v.config, tc, &dist);
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
