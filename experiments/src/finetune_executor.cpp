// The runner's fine-tuning executor (runner_internal.h): one task x snapshot x lr x seed job,
// scored after every epoch with the task's GLUE metric (analysis/tasks.h), the best epoch by
// the paper's selection metric recorded as GLUE rows with its per-example predictions. The
// best epoch's model also predicts the task's unlabelled test splits (and MNLI's the AX
// diagnostic set), stored with their file indices for `tupe submit --split test`, and with
// finetune.save: best is written to out_dir/finetune/<job>/model.pt as an artifact of the
// run. The scheduler (runner.cpp) owns the run row's status.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <sstream>

#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/tensorboard.h"
#include "engine/threads.h"
#include "engine/tokenizer.h"
#include "experiments/analysis_artifacts.h"
#include "experiments/synthetic_tasks.h"
#include "experiments/zero_shot.h"
#include "runner_internal.h"

namespace experiments::detail {

namespace fs = std::filesystem;

namespace {

/// Named parameters and buffers of a model, copied to the CPU.
using ModelState = std::vector<std::pair<std::string, torch::Tensor>>;

ModelState copy_state(engine::BertForSequenceClassification& model) {
    torch::NoGradGuard no_grad;
    ModelState state;
    for (const auto& p : model->named_parameters())
        state.emplace_back(p.key(), p.value().detach().to(torch::kCPU, false, true));
    for (const auto& b : model->named_buffers())
        state.emplace_back(b.key(), b.value().detach().to(torch::kCPU, false, true));
    return state;
}

void load_state(engine::BertForSequenceClassification& model, const ModelState& state) {
    torch::NoGradGuard no_grad;
    std::map<std::string, const torch::Tensor*> by_name;
    for (const auto& [name, t] : state) by_name[name] = &t;
    auto fill = [&](torch::OrderedDict<std::string, torch::Tensor> dst) {
        for (auto& item : dst) {
            const auto it = by_name.find(item.key());
            TORCH_CHECK(it != by_name.end(), "best-epoch weights lack ", item.key());
            item.value().copy_(*it->second);
        }
    };
    fill(model->named_parameters());
    fill(model->named_buffers());
}

/// The GLUE rows of one dev split's scores: one per metric, at the job's checkpoint, lr, seed.
void add_glue_rows(ResultStore& store, int64_t run_id, const Job& job, const TaskInfo& task,
                   const std::string& split, const analysis::TaskScores& scores) {
    for (const auto& [metric, value] : scores.metrics) {
        GlueResultRecord g;
        g.run_id = run_id;
        g.task = analysis::reported_column(task, split);
        g.split = split;
        g.metric = metric;
        g.value = value;
        g.checkpoint_step = job.checkpoint_step;
        g.lr = job.lr;
        g.seed = static_cast<int64_t>(job.seed);
        store.add_glue_result(g);
    }
}

/// out_dir/finetune/<job>, the job name's '/' as '_': the job's TensorBoard events and model.
/// For a run folder shared from another study (shared_run_folder), which this study never
/// writes: runs_dir/<experiment>-finetune/<variant>/<job> instead.
std::string finetune_job_dir(const ExperimentSpec& spec, const Variant& v, const std::string& job) {
    std::string folder = job;  // e.g. tupe-a/step3000/syn-rte/lr0.001/seed1
    for (char& ch : folder)
        if (ch == '/') ch = '_';
    if (shared_run_folder(spec, v))
        return (fs::path(spec.runs_dir) / (spec.name + "-finetune") / v.name / folder).string();
    return (fs::path(v.config.out_dir) / "finetune" / folder).string();
}

/// A task's test splits with their file layouts (load_test_splits).
using JobTestSplits = std::vector<std::pair<TestSplitInfo, Split>>;

/// The job's TensorBoard writer under out_dir/finetune/<job>/ (old events removed), or null
/// when events are off, on a rank other than 0, or the folder cannot be written.
std::unique_ptr<engine::TensorBoardWriter> open_finetune_events(const JobContext& ctx,
                                                                const Variant& v, const Job& job) {
    std::unique_ptr<engine::TensorBoardWriter> events;
    if (v.config.train.tensorboard && (!ctx.options.dist || ctx.options.dist->rank() == 0)) {
        const fs::path dir = finetune_job_dir(ctx.spec, v, job.name);
        try {
            std::error_code ec;
            for (const auto& f : engine::tensorboard_event_files(dir.string())) fs::remove(f, ec);
            events = std::make_unique<engine::TensorBoardWriter>(dir.string());
        } catch (const std::exception& e) {
            ctx.say(std::string("TensorBoard events off for this job: ") + e.what());
        }
    }
    return events;
}

/// The task's test splits in `glue_dir`, under `shuffle` with their words shuffled.
JobTestSplits load_job_test_splits(const TaskInfo& task, const std::string& glue_dir,
                                   bool shuffle) {
    auto tests = load_test_splits(task, glue_dir);
    if (shuffle)  // the same bag-of-words control as train and dev
        for (auto& [layout, split] : tests)
            for (auto& e : split.examples) {
                e.text_a = shuffle_words(e.text_a, 0x5eedULL);
                if (!e.text_b.empty()) e.text_b = shuffle_words(e.text_b, 0x5eedULL);
            }
    return tests;
}

/// Reports fine-tuning progress: the step of `total` and its loss.
void report_finetune_step(const JobContext& ctx, int64_t step, int64_t total, double loss) {
    char status[64];
    std::snprintf(status, sizeof status, "step %lld/%lld  loss %.3f", static_cast<long long>(step),
                  static_cast<long long>(total), loss);
    ctx.report(static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, total)),
               status);
}

/// Epoch `e`'s scores on every dev split; its curve points (the train loss first) are
/// appended to `points`.
std::vector<analysis::TaskScores> score_finetune_epoch(const TaskData& data,
                                                       const engine::EpochResult& e,
                                                       std::vector<MetricPoint>& points) {
    const double now = unix_time_now();
    points.push_back({"train/loss", e.epoch, e.train_loss, now});
    std::vector<analysis::TaskScores> scores;
    for (size_t i = 0; i < data.dev.size(); ++i) {
        scores.push_back(analysis::score_task(
            analysis::reported_column(data.info, data.dev_names[i]), data.info.metric,
            e.predictions[i], gold_values(data.info, data.dev[i])));
        for (const auto& [metric, value] : scores.back().metrics)
            points.push_back({data.dev_names[i] + "/" + metric, e.epoch, value, now});
    }
    return scores;
}

/// Adds `points` to the TensorBoard events; a failure is said once and ends the events.
void write_finetune_events(std::unique_ptr<engine::TensorBoardWriter>& events,
                           const std::vector<MetricPoint>& points, const JobContext& ctx) {
    if (!events) return;
    try {
        for (const auto& p : points) events->add_scalar(p.key, p.step, p.value, p.wall_time);
        events->flush();
    } catch (const std::exception& ex) {
        ctx.say(std::string("TensorBoard events stopped: ") + ex.what());
        events.reset();
    }
}

/// The best epoch so far by the paper's selection metric on the first dev split (MNLI:
/// matched).
struct FinetuneBestEpoch {
    double primary = -1e300;
    std::vector<analysis::TaskScores> scores;
    std::vector<std::vector<double>> predictions;  // per dev split, of the best epoch
    int64_t epoch = 0;
    ModelState state;  // the best epoch's weights, when they are needed afterwards
};

/// Records the best epoch's GLUE rows and its per-example dev predictions.
void record_best_epoch(ResultStore& store, int64_t run_id, const Job& job, const TaskData& data,
                       const FinetuneBestEpoch& best) {
    for (size_t i = 0; i < best.scores.size(); ++i)
        add_glue_rows(store, run_id, job, data.info, data.dev_names[i], best.scores[i]);
    // The per-example predictions behind those scores: bootstrap intervals and paired
    // comparisons (tupe report, tupe claims) are computed from them.
    for (size_t i = 0; i < best.predictions.size() && i < data.dev.size(); ++i)
        store.set_predictions(
            {run_id, data.dev_names[i], gold_values(data.info, data.dev[i]), best.predictions[i]});
}

/// Saves the best epoch's `model` as `path` and records it as the run's finetuned-model
/// artifact.
void save_best_finetuned(ResultStore& store, int64_t run_id, const std::string& path,
                         engine::BertForSequenceClassification& model,
                         const engine::PretrainConfig& encoder, const TaskInfo& task,
                         int64_t best_epoch) {
    engine::save_finetuned(path, model, encoder, task.key, best_epoch);
    ArtifactRecord a;
    a.run_id = run_id;
    a.kind = "finetuned-model";
    a.path = path;
    a.size = static_cast<int64_t>(fs::file_size(path));
    a.hash = file_hash(path);
    a.description = "fine-tuned weights of epoch " + std::to_string(best_epoch) + " (the best by " +
                    analysis::selection_metric_key(task.metric) + ")";
    store.add_artifact(a);
}

/// Predicts the test splits with `model` and stores them with their file indices (gold NaN).
void store_test_predictions(ResultStore& store, int64_t run_id,
                            engine::BertForSequenceClassification& model,
                            const engine::WordPieceTokenizer& tokenizer, const JobTestSplits& tests,
                            const engine::FinetuneConfig& fc) {
    model->to(engine::resolve_device(fc.device));
    std::vector<std::vector<engine::LabeledText>> sets;
    for (const auto& [layout, split] : tests) {
        std::vector<engine::LabeledText> xs;
        for (const auto& e : split.examples) xs.push_back({e.text_a, e.text_b});
        sets.push_back(std::move(xs));
    }
    const auto predicted = engine::predict_sets(model, tokenizer, sets, fc);
    for (size_t i = 0; i < tests.size(); ++i) {
        PredictionSet p;
        p.run_id = run_id;
        p.split = tests[i].first.name;
        p.predicted = predicted[i];
        p.gold.assign(p.predicted.size(), std::numeric_limits<double>::quiet_NaN());
        for (const auto& e : tests[i].second.examples) p.ids.push_back(e.id);
        store.set_predictions(p);
    }
}

}  // namespace

void FinetuneExecutor::describe(const Job& job, RunRecord& r) const {
    const ExperimentSpec& spec = ctx_.spec;
    const Variant& v = variant_named(spec, job.variant);
    r.seed = static_cast<int64_t>(job.seed);
    if (auto parent = ctx_.store.find_run(ctx_.experiment_id, v.name)) r.parent_run_id = parent->id;
    r.config_text = finetune_config_text(spec, v, job);
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

bool FinetuneExecutor::run_zero_shot(const Job& job, int64_t run_id, const TaskData& data,
                                     engine::BertForMaskedLM& model,
                                     const engine::WordPieceTokenizer& tokenizer,
                                     const engine::FinetuneConfig& fc) {
    // A minimal-pair task (zero_shot.h): no training; the pretrained MLM's
    // pseudo-log-likelihood picks the order it prefers in every dev pair.
    ResultStore& store = ctx_.store;
    engine::apply_thread_count(fc.threads);
    model->to(engine::resolve_device(fc.device));
    ctx_.report(0.0, "scoring pairs (pseudo-log-likelihood)");
    for (size_t i = 0; i < data.dev.size(); ++i) {
        std::vector<std::string> texts;
        for (const auto& e : data.dev[i]) texts.push_back(e.text_a);
        for (const auto& e : data.dev[i]) texts.push_back(e.text_b);
        const auto pll = pseudo_log_likelihoods(model, tokenizer, texts, fc.max_seq_len);
        const auto n = static_cast<long>(data.dev[i].size());
        const auto predicted =
            prefer_pairs({pll.begin(), pll.begin() + n}, {pll.begin() + n, pll.end()});
        const auto gold = gold_values(data.info, data.dev[i]);
        const auto scores =
            analysis::score_task(analysis::reported_column(data.info, data.dev_names[i]),
                                 data.info.metric, predicted, gold);
        std::vector<MetricPoint> points;
        const double now = unix_time_now();
        for (const auto& [metric, value] : scores.metrics)
            points.push_back({data.dev_names[i] + "/" + metric, 0, value, now});
        add_glue_rows(store, run_id, job, data.info, data.dev_names[i], scores);
        store.add_metrics(run_id, points);
        store.set_predictions({run_id, data.dev_names[i], gold, predicted});
        ctx_.report(static_cast<double>(i + 1) / static_cast<double>(data.dev.size()), "scored");
    }
    return true;
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
    if (data.info.zero_shot)
        return run_zero_shot(job, run_id, data, pretrained.model, tokenizer, fc);
    // TensorBoard: the same points as events under out_dir/finetune/<job>/ (a redone job
    // starts a fresh folder too). The store stays the record: a write failure is said once and
    // ends the events, never the job.
    std::unique_ptr<engine::TensorBoardWriter> events = open_finetune_events(ctx_, v, job);

    // The task's test splits present in its folder (GLUE_FORMAT.md: unlabelled, an index
    // column first; MNLI's also the AX diagnostic set), predicted after training by the best
    // epoch's model. Read per job: small against the fine-tuning itself.
    const JobTestSplits tests =
        load_job_test_splits(data.info, glue_dir_cached(), spec.finetune.shuffle_words);
    const bool save_best = spec.finetune.save == "best";
    const bool keep_best = save_best || !tests.empty();

    FinetuneBestEpoch best;
    engine::FinetuneCallbacks fcb;
    fcb.stop = ctx_.callbacks.stop;
    fcb.on_step = [&](int64_t step, int64_t total, double loss) {
        report_finetune_step(ctx_, step, total, loss);
    };
    fcb.on_epoch = [&](const engine::EpochResult& e) {
        std::vector<MetricPoint> points;
        const std::vector<analysis::TaskScores> scores = score_finetune_epoch(data, e, points);
        store.add_metrics(run_id, points);
        write_finetune_events(events, points, ctx_);
        const double primary = analysis::primary_metric(data.info.metric, scores.front());
        if (primary > best.primary) {
            best.primary = primary;
            best.scores = scores;
            best.predictions = e.predictions;
            best.epoch = e.epoch;
        }
    };
    fcb.on_epoch_model = [&](const engine::EpochResult& e,
                             engine::BertForSequenceClassification& model) {
        if (keep_best && e.epoch == best.epoch) best.state = copy_state(model);
    };
    auto result =
        engine::finetune(pretrained.model, tokenizer, data.train, data.dev, fc, fcb, options.dist);
    if (result.stopped) return false;
    record_best_epoch(store, run_id, job, data, best);
    if (keep_best && !best.state.empty()) {
        engine::BertForSequenceClassification model(pretrained.model->config(), fc.num_labels,
                                                    fc.classifier_dropout);
        load_state(model, best.state);
        model->eval();
        if (save_best)
            save_best_finetuned(
                store, run_id,
                (fs::path(finetune_job_dir(spec, v, job.name)) / "model.pt").string(), model,
                pretrained.config, data.info, best.epoch);
        if (!tests.empty()) store_test_predictions(store, run_id, model, tokenizer, tests, fc);
    }
    return true;
}

}  // namespace experiments::detail
