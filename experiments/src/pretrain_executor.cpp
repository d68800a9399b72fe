// The runner's pretraining executor (runner_internal.h): one variant's pretraining with its
// snapshots for fine-tuning and analysis, resumed from its checkpoint, its curves, loss floor
// and snapshots recorded in the results store. The scheduler (runner.cpp) owns the run row's
// status; the analysis of the snapshots follows in analysis_executor.cpp. The runner's test
// hook (RunnerOptions::raise_at_step) crashes or hangs this process at a known step.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "engine/tokenizer.h"
#include "experiments/analysis_artifacts.h"
#include "runner_internal.h"

namespace experiments::detail {

namespace fs = std::filesystem;

void PretrainExecutor::describe(const Job& job, RunRecord& r) const {
    const Variant& v = variant_named(ctx_.spec, job.variant);
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
}

bool PretrainExecutor::run(const Job& job, int64_t run_id) const {
    const Variant& v = variant_named(ctx_.spec, job.variant);
    ResultStore& store = ctx_.store;
    store.add_params(run_id, {{"variant", v.name},
                              {"preset", v.config.model.preset},
                              {"size", v.config.model.size},
                              {"group", v.group},
                              {"pretrain_seed", std::to_string(v.config.train.seed)}});
    // A resume continues from the checkpoint; points after it (from a killed process)
    // are dropped so no curve holds a step twice.
    const std::string ckpt = engine::checkpoint_path(v.config.out_dir);
    int64_t resume_step = 0;
    if (fs::exists(ckpt)) resume_step = engine::load_checkpoint(ckpt).step;
    store.delete_metrics_after(run_id, resume_step);

    std::vector<MetricPoint> pending;
    auto flush = [&]() {
        if (pending.empty()) return;
        store.add_metrics(run_id, pending);
        pending.clear();
    };
    engine::TrainCallbacks tc;
    tc.stop = ctx_.callbacks.stop;
    tc.on_message = ctx_.callbacks.on_message;
    // Snapshots for fine-tuning and for the analysis.
    const std::vector<int64_t> snapshots = snapshot_steps(ctx_.spec, v);
    tc.snapshot_steps = snapshots;
    tc.on_step = [&](const engine::StepReport& s) {
        const double now = unix_time_now();
        if (s.step % std::max<int64_t>(1, v.config.train.log_interval) == 0 ||
            s.step == s.total_steps) {
            pending.push_back({"train/loss", s.step, s.loss, now});
            pending.push_back({"train/lr", s.step, s.lr, now});
            pending.push_back({"train/tokens", s.step, static_cast<double>(s.tokens_seen), now});
            pending.push_back({"train/tokens_per_second", s.step, s.tokens_per_second, now});
        }
        if (pending.size() >= 200) flush();
        if (ctx_.options.raise_at_step > 0 && s.step == ctx_.options.raise_at_step &&
            ctx_.simulate_crash) {
            flush();  // the store holds every point up to this step, as after a real crash
            ctx_.simulate_crash();
        }
        char status[96];
        std::snprintf(status, sizeof status, "step %lld/%lld  loss %.3f",
                      static_cast<long long>(s.step), static_cast<long long>(s.total_steps),
                      s.loss);
        ctx_.report(static_cast<double>(s.step) / static_cast<double>(s.total_steps), status);
    };
    tc.on_eval = [&](const engine::EvalReport& e) {
        const double now = unix_time_now();
        pending.push_back({"validation/loss", e.step, e.loss, now});
        pending.push_back({"validation/accuracy", e.step, e.accuracy, now});
        flush();
    };
    tc.on_checkpoint = [&](const std::string& path, int64_t step) {
        flush();
        store.set_run_step(run_id, step);
        // Only the snapshots are recorded: checkpoint.pt is overwritten as training goes on.
        if (std::find(snapshots.begin(), snapshots.end(), step) == snapshots.end()) return;
        CheckpointRecord c;
        c.run_id = run_id;
        c.step = step;
        c.path = snapshot_path(v, step);
        c.size = static_cast<int64_t>(fs::file_size(path));
        // The snapshot is a byte copy of `path`, made right after this call (trainer.cpp).
        c.hash = file_hash(path);
        store.add_checkpoint(c);
    };
    auto result = engine::pretrain(v.config, tc, ctx_.options.dist);
    flush();
    if (result.floor.validation_tokens > 0) {
        char uni[32], bi[32];
        std::snprintf(uni, sizeof uni, "%.6f", result.floor.unigram_nats);
        std::snprintf(bi, sizeof bi, "%.6f", result.floor.bigram_nats);
        store.add_params(
            run_id, {{"floor.unigram_nats", uni},
                     {"floor.bigram_nats", bi},
                     {"floor.validation_tokens", std::to_string(result.floor.validation_tokens)}});
    }
    if (result.stopped) return false;
    if (!result.evals.empty()) {
        const std::string warning = engine::floor_warning(result.evals.back().loss, result.floor);
        if (!warning.empty()) ctx_.say(v.name + ": " + warning);
    }
    return true;
}

}  // namespace experiments::detail
