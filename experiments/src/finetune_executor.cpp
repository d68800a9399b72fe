// The runner's fine-tuning executor (runner_internal.h): one task x snapshot x lr x seed job,
// scored after every epoch with the task's GLUE metric (analysis/tasks.h), the best epoch by
// the paper's selection metric recorded as GLUE rows with its per-example predictions. The
// scheduler (runner.cpp) owns the run row's status.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/tensorboard.h"
#include "engine/tokenizer.h"
#include "runner_internal.h"

namespace experiments::detail {

namespace fs = std::filesystem;

void FinetuneExecutor::describe(const Job& job, RunRecord& r) const {
    const ExperimentSpec& spec = ctx_.spec;
    const Variant& v = variant_named(spec, job.variant);
    const TaskInfo& task = find_task(job.task);
    r.seed = static_cast<int64_t>(job.seed);
    if (auto parent = ctx_.store.find_run(ctx_.experiment_id, v.name)) r.parent_run_id = parent->id;
    std::ostringstream cfg;
    cfg << "task = " << job.task << "\ncheckpoint = " << snapshot_path(v, job.checkpoint_step)
        << "\nlr = " << job.lr << "\nseed = " << job.seed
        << "\nepochs = " << (spec.finetune.epochs > 0 ? spec.finetune.epochs : task.default_epochs)
        << "\nbatch_size = " << spec.finetune.batch_size
        << "\nwarmup_ratio = " << spec.finetune.warmup_ratio
        << "\nweight_decay = " << spec.finetune.weight_decay
        << "\nmax_seq_len = " << spec.finetune.max_seq_len << "\n";
    // Written only when changed, so runs recorded before the key existed stay equal.
    if (spec.finetune.classifier_dropout != FinetuneProtocol{}.classifier_dropout)
        cfg << "classifier_dropout = " << spec.finetune.classifier_dropout << "\n";
    if (spec.finetune.shuffle_words) cfg << "shuffle_words = true\n";
    r.config_text = cfg.str();
}

const TaskData& FinetuneExecutor::task_data(const std::string& key) {
    auto it = tasks_.find(key);
    if (it != tasks_.end()) return it->second;
    return tasks_
        .emplace(key, load_task_data(key, glue_dir_cached(), ctx_.spec.finetune.shuffle_words))
        .first->second;
}

const std::string& FinetuneExecutor::glue_dir_cached() {
    if (glue_dir_.empty()) glue_dir_ = glue_dir(ctx_.spec);
    return glue_dir_;
}

bool FinetuneExecutor::run(const Job& job, int64_t run_id) {
    const ExperimentSpec& spec = ctx_.spec;
    const RunnerOptions& options = ctx_.options;
    ResultStore& store = ctx_.store;
    const Variant& v = variant_named(spec, job.variant);
    const std::string snapshot = snapshot_path(v, job.checkpoint_step);
    if (!fs::exists(snapshot))
        throw engine::CheckpointError(snapshot, "missing: the pretraining of '" + v.name +
                                                    "' did not reach step " +
                                                    std::to_string(job.checkpoint_step));
    const TaskData& data = task_data(job.task);
    if (options.dist) options.dist->barrier();  // the other ranks read the tasks now
    auto pretrained = engine::load_checkpoint(snapshot);
    engine::WordPieceTokenizer tokenizer(
        engine::Vocab::load((fs::path(v.config.out_dir) / "vocab.txt").string()),
        v.config.data.lower_case);

    const engine::FinetuneConfig fc = finetune_config(spec, v, job, data.info, options.threads);

    store.delete_metrics_after(run_id, 0);  // a redone job starts its curves afresh
    // TensorBoard: the same points as events under out_dir/finetune/<job>/ (a redone job
    // starts a fresh folder too). The store stays the record: a write failure is said once and
    // ends the events, never the job.
    std::unique_ptr<engine::TensorBoardWriter> events;
    if (v.config.train.tensorboard && (!options.dist || options.dist->rank() == 0)) {
        std::string folder = job.name;  // e.g. tupe-a/step3000/syn-rte/lr0.001/seed1
        for (char& ch : folder)
            if (ch == '/') ch = '_';
        const fs::path dir = fs::path(v.config.out_dir) / "finetune" / folder;
        try {
            std::error_code ec;
            for (const auto& f : engine::tensorboard_event_files(dir.string())) fs::remove(f, ec);
            events = std::make_unique<engine::TensorBoardWriter>(dir.string());
        } catch (const std::exception& e) {
            ctx_.say(std::string("TensorBoard events off for this job: ") + e.what());
        }
    }

    const analysis::MetricKind kind = data.info.metric;
    // Best epoch by the paper's selection metric on the first dev split (MNLI: matched).
    double best = -1e300;
    std::vector<analysis::TaskScores> best_scores;
    std::vector<std::vector<double>> best_predictions;  // per dev split, of the best epoch
    engine::FinetuneCallbacks fcb;
    fcb.stop = ctx_.callbacks.stop;
    fcb.on_step = [&](int64_t step, int64_t total, double loss) {
        char status[64];
        std::snprintf(status, sizeof status, "step %lld/%lld  loss %.3f",
                      static_cast<long long>(step), static_cast<long long>(total), loss);
        ctx_.report(static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, total)),
                    status);
    };
    fcb.on_epoch = [&](const engine::EpochResult& e) {
        const double now = unix_time_now();
        std::vector<MetricPoint> points = {{"train/loss", e.epoch, e.train_loss, now}};
        std::vector<analysis::TaskScores> scores;
        for (size_t i = 0; i < data.dev.size(); ++i) {
            scores.push_back(
                analysis::score_task(analysis::reported_column(data.info, data.dev_names[i]), kind,
                                     e.predictions[i], gold_values(data.info, data.dev[i])));
            for (const auto& [metric, value] : scores.back().metrics)
                points.push_back({data.dev_names[i] + "/" + metric, e.epoch, value, now});
        }
        store.add_metrics(run_id, points);
        if (events) {
            try {
                for (const auto& p : points)
                    events->add_scalar(p.key, p.step, p.value, p.wall_time);
                events->flush();
            } catch (const std::exception& ex) {
                ctx_.say(std::string("TensorBoard events stopped: ") + ex.what());
                events.reset();
            }
        }
        const double primary = analysis::primary_metric(kind, scores.front());
        if (primary > best) {
            best = primary;
            best_scores = scores;
            best_predictions = e.predictions;
        }
    };
    auto result =
        engine::finetune(pretrained.model, tokenizer, data.train, data.dev, fc, fcb, options.dist);
    if (result.stopped) return false;
    for (size_t i = 0; i < best_scores.size(); ++i)
        for (const auto& [metric, value] : best_scores[i].metrics) {
            GlueResultRecord g;
            g.run_id = run_id;
            g.task = analysis::reported_column(data.info, data.dev_names[i]);
            g.split = data.dev_names[i];
            g.metric = metric;
            g.value = value;
            g.checkpoint_step = job.checkpoint_step;
            g.lr = job.lr;
            g.seed = static_cast<int64_t>(job.seed);
            store.add_glue_result(g);
        }
    // The per-example predictions behind those scores: bootstrap intervals and paired
    // comparisons (tupe report, tupe claims) are computed from them.
    for (size_t i = 0; i < best_predictions.size() && i < data.dev.size(); ++i)
        store.set_predictions(
            {run_id, data.dev_names[i], gold_values(data.info, data.dev[i]), best_predictions[i]});
    return true;
}

}  // namespace experiments::detail
