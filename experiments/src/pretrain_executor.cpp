// The runner's pretraining executor (runner_internal.h): one variant's pretraining with its
// snapshots for fine-tuning and analysis, resumed from its checkpoint, its curves, loss floor
// and snapshots recorded in the results store. The scheduler (runner.cpp) owns the run row's
// status; the analysis of the snapshots follows in analysis_executor.cpp. The runner's test
// hook (RunnerOptions::raise_at_step) crashes or hangs this process at a known step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "engine/run_folder.h"
#include "engine/tokenizer.h"
#include "experiments/analysis_artifacts.h"
#include "runner_internal.h"

namespace experiments::detail {

namespace fs = std::filesystem;

namespace {

// The points of out_dir/metrics.tsv at steps <= `up_to` that the store lacks (a process killed
// after its checkpoint but before its last points reached the store, or a run resumed at its
// final step), added with the time of this call; the points the store has are kept as they are.
void ingest_missing_metrics(ResultStore& store, int64_t run_id, const std::string& out_dir,
                            int64_t up_to) {
    std::ifstream in(engine::metrics_path(out_dir));
    std::string line;
    std::map<std::string, std::set<int64_t>> have;
    std::vector<MetricPoint> missing;
    const double now = unix_time_now();
    while (std::getline(in, line)) {
        std::istringstream row(line);
        std::string step_text, split, metric, value_text;
        if (!std::getline(row, step_text, '\t') || !std::getline(row, split, '\t') ||
            !std::getline(row, metric, '\t') || !std::getline(row, value_text, '\t'))
            continue;
        int64_t step = 0;
        double value = 0;
        try {
            step = std::stoll(step_text);
            value = std::stod(value_text);
        } catch (const std::exception&) {
            continue;  // the header, or a line cut by a kill
        }
        if (step > up_to) continue;
        const std::string key = split + "/" + metric;
        if (!have.count(key)) {
            auto& steps = have[key];
            for (const auto& p : store.metrics(run_id, key)) steps.insert(p.step);
        }
        if (!have[key].count(step)) missing.push_back({key, step, value, now});
    }
    if (!missing.empty()) store.add_metrics(run_id, missing);
}

}  // namespace

void PretrainExecutor::describe(const Job& job, RunRecord& r) const {
    const Variant& v = variant_named(ctx_.spec, job.variant);
    r.config_text = pretrain_config_text(v);
    r.seed = static_cast<int64_t>(v.config.train.seed);
}

bool PretrainExecutor::record_shared_run(int64_t run_id, const Variant& v) const {
    // Another study's finished run of this very job (plan_binding.cpp checked the owner's
    // fingerprint and the final snapshot): its curves, floor and snapshots are recorded for
    // this study, and nothing is written into the folder.
    ResultStore& store = ctx_.store;
    const std::string& dir = v.config.out_dir;
    const int64_t steps = v.config.train.steps;
    store.delete_metrics_after(run_id, steps);
    ingest_missing_metrics(store, run_id, dir, steps);
    store.set_run_step(run_id, steps);
    std::ifstream floor((fs::path(dir) / "floor.txt").string());
    std::map<std::string, std::string> params;
    for (std::string line; std::getline(floor, line);) {
        const auto eq = line.find(" = ");
        if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
        const std::string key = line.substr(0, eq);
        if (key == "unigram_nats" || key == "bigram_nats" || key == "context_free_nats" ||
            key == "validation_tokens")
            params["floor." + key] = line.substr(eq + 3);
    }
    if (!params.empty()) store.add_params(run_id, params);
    record_missing_snapshots(run_id, v);
    ctx_.say(v.name + ": the finished run of experiment '" +
             engine::read_run_owner(dir)->experiment + "' in " + dir + " (shared, read only)");
    return true;
}

void PretrainExecutor::record_missing_snapshots(int64_t run_id, const Variant& v) const {
    // A snapshot written by a process killed before its row was (or the snapshot a resume
    // starts from, whose on_checkpoint never fires again) gets its row here.
    std::set<int64_t> recorded;
    for (const auto& c : ctx_.store.checkpoints(run_id)) recorded.insert(c.step);
    for (int64_t step : snapshot_steps(ctx_.spec, v)) {
        const std::string path = snapshot_path(v, step);
        std::error_code ec;
        if (recorded.count(step) || !fs::exists(path, ec)) continue;
        CheckpointRecord c;
        c.run_id = run_id;
        c.step = step;
        c.path = path;
        c.size = static_cast<int64_t>(fs::file_size(path, ec));
        c.hash = file_hash(path);
        ctx_.store.add_checkpoint(c);
    }
}

bool PretrainExecutor::run(const Job& job, int64_t run_id) const {
    const Variant& v = variant_named(ctx_.spec, job.variant);
    ResultStore& store = ctx_.store;
    store.add_params(run_id, {{"variant", v.name},
                              {"preset", v.config.model.preset},
                              {"size", v.config.model.size},
                              {"group", v.group},
                              {"pretrain_seed", std::to_string(v.config.train.seed)}});
    if (shared_run_folder(ctx_.spec, v)) return record_shared_run(run_id, v);
    // The folder is this job's from now on: no other study adopts it (plan_binding.cpp).
    engine::write_run_owner(v.config.out_dir,
                            {ctx_.spec.name, job.name, job.fingerprint,
                             fs::path(canonical_path(ctx_.spec.owning_store()))
                                 .lexically_relative(canonical_path(v.config.out_dir))
                                 .generic_string()});
    // A resume continues from the checkpoint; points after it (from a killed process)
    // are dropped so no curve holds a step twice, and the points up to it that never reached
    // the store are taken from the folder's metrics.tsv.
    const std::string ckpt = engine::checkpoint_path(v.config.out_dir);
    int64_t resume_step = 0;
    if (fs::exists(ckpt)) resume_step = engine::load_checkpoint(ckpt).step;
    store.delete_metrics_after(run_id, resume_step);
    if (resume_step > 0) ingest_missing_metrics(store, run_id, v.config.out_dir, resume_step);

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
        if (ctx_.options.step_delay_seconds > 0)
            std::this_thread::sleep_for(
                std::chrono::duration<double>(ctx_.options.step_delay_seconds));
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
    // `tupe run --threads N` holds for the pretraining too: the variant's train.threads (0, all
    // CPUs, by default) would otherwise undo it inside engine::pretrain, and two runners with
    // --threads 1 would put four busy threads on two cores.
    engine::PretrainConfig config = v.config;
    if (ctx_.options.threads > 0) config.train.threads = ctx_.options.threads;
    auto result = engine::pretrain(config, tc, ctx_.options.dist);
    flush();
    record_missing_snapshots(run_id, v);
    store.set_run_step(run_id, result.final_step);  // also when resumed at its final step
    if (result.floor.validation_tokens > 0) {
        char uni[32], bi[32], free[32];
        std::snprintf(uni, sizeof uni, "%.6f", result.floor.unigram_nats);
        std::snprintf(bi, sizeof bi, "%.6f", result.floor.bigram_nats);
        std::snprintf(free, sizeof free, "%.6f", result.floor.context_free_nats);
        store.add_params(
            run_id, {{"floor.unigram_nats", uni},
                     {"floor.bigram_nats", bi},
                     {"floor.context_free_nats", free},
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
