// The runner's analysis executor (runner_internal.h): the outputs a study writes beside a
// pretraining run's checkpoints (job_identity.h, RunOutput): `tupe analyze` on each analysis
// snapshot (analysis.checkpoints), `tupe extrapolate` with an `extrapolation:` block, `tupe
// ablate` with analysis.ablation and `tupe heads` with analysis.heads, each as a child process
// when the runner knows the tupe executable (the analysis also in this process, data files
// only). An output is stored only when its files, its identity (output_identity: the settings
// and the hashes of what it read) and the metrics derived from them (each snapshot's
// properties, "property/<name>" at the snapshot's step) are recorded in one transaction, by
// this process after the child exits; it is done when its marker file is recorded with the
// identity the study asks for now. A run folder shared from another study is read, never
// written: its outputs are the owner's, recorded for this study when their identities agree.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "analysis/analysis_index.h"
#include "analysis/analyze.h"
#include "engine/errors.h"
#include "engine/run_folder.h"
#include "engine/tokenizer.h"
#include "experiments/analysis_artifacts.h"
#include "runner_internal.h"

namespace experiments::detail {

namespace fs = std::filesystem;

namespace {

// The files `names` under `dir` as artifacts of `run_id` (absent ones skipped), the last name
// last: its row is what marks the output as stored.
std::vector<ArtifactRecord> artifact_records(int64_t run_id, const std::string& dir,
                                             const std::vector<std::string>& names,
                                             const std::string& kind,
                                             const std::string& description) {
    std::vector<ArtifactRecord> records;
    for (const auto& name : names) {
        const fs::path path = fs::path(dir) / name;
        if (!fs::exists(path)) continue;  // no PNG from a build without Qt
        ArtifactRecord r;
        r.run_id = run_id;
        r.kind = kind + "-" + path.extension().string().substr(1);
        r.path = path.string();
        r.size = static_cast<std::int64_t>(fs::file_size(path));
        r.hash = file_hash(r.path);
        r.description = description;
        records.push_back(std::move(r));
    }
    return records;
}

// The head means of every layer's properties (index.json "property" entries with head -1) as
// metrics at `step`: "property/<name>/L<l>" per layer and "property/<name>" over the layers.
std::vector<MetricPoint> property_metrics(const std::string& dir, int64_t step) {
    const auto index = analysis::read_index_json((fs::path(dir) / "index.json").string());
    std::map<std::string, std::pair<double, int>> overall;
    std::vector<MetricPoint> points;
    const double now = unix_time_now();
    for (const auto& f : index.files) {
        if (f.what != "property" || f.head != -1 || f.layer < 0) continue;
        for (const auto& [name, value] : f.statistics) {
            if (!std::isfinite(value)) continue;
            points.push_back(
                {"property/" + name + "/L" + std::to_string(f.layer), step, value, now});
            auto& o = overall[name];
            o.first += value, o.second += 1;
        }
    }
    for (const auto& [name, sum] : overall)
        points.push_back({"property/" + name, step, sum.first / sum.second, now});
    return points;
}

// The run that owns a shared run folder, in this study's store; nullopt when the owner's
// record names another store or the store has no such run.
std::optional<RunRecord> owner_run(ResultStore& store, const Variant& v) {
    const auto owner = engine::read_run_owner(v.config.out_dir);
    if (!owner) return std::nullopt;
    const auto experiment = store.find_experiment(owner->experiment);
    if (!experiment) return std::nullopt;
    auto run = store.find_run(experiment->id, owner->job);
    if (!run || canonical_path(run->out_dir) != canonical_path(v.config.out_dir))
        return std::nullopt;
    return run;
}

}  // namespace

bool AnalysisExecutor::pending(const Job& job, int64_t run_id) {
    const Variant& v = variant_named(ctx_.spec, job.variant);
    std::vector<ArtifactRecord> recorded = ctx_.store.artifacts(run_id);
    for (const auto& plan : run_output_plans(ctx_.spec, v, !ctx_.options.self_exe.empty()))
        if (run_output_state(ctx_.spec, v, plan, recorded, hashes_).state !=
            RunOutputState::State::kDone)
            return true;
    return false;
}

void AnalysisExecutor::run(const Job& job, int64_t run_id) {
    const Variant& v = variant_named(ctx_.spec, job.variant);
    const bool shared = shared_run_folder(ctx_.spec, v);
    const auto plans = run_output_plans(ctx_.spec, v, !ctx_.options.self_exe.empty());
    for (const auto& plan : plans) {
        if (ctx_.stopped()) return;
        const auto state =
            run_output_state(ctx_.spec, v, plan, ctx_.store.artifacts(run_id), hashes_);
        if (state.state == RunOutputState::State::kDone) continue;
        for (const auto& [name, path] : plan.inputs)
            if (!fs::exists(path))
                throw engine::CheckpointError(
                    path, "missing: the " + plan.label() + " of '" + v.name +
                              "' reads it (delete " + v.config.out_dir + " to pretrain it again)");
        if (state.identity.empty())
            throw engine::CheckpointError(v.config.out_dir,
                                          "holds no snapshot for the " + plan.label());
        if (shared) {
            copy_owner_output(v, plan, state.identity, run_id);
            continue;
        }
        // A folder of this run's own: what a killed or earlier attempt left is removed, so the
        // recorded files are exactly this attempt's.
        fs::remove_all(plan.dir);
        std::vector<ArtifactRecord> files;
        std::vector<MetricPoint> metrics;
        switch (plan.kind) {
            case RunOutput::kAnalysis: {
                analyze(v, plan, run_id);
                files = analysis_artifacts(run_id, plan.dir);
                metrics = property_metrics(plan.dir, plan.step);
                break;
            }
            case RunOutput::kExtrapolation: files = extrapolate(v, plan, run_id); break;
            case RunOutput::kAblation: files = ablate(v, plan, run_id); break;
            case RunOutput::kHeads: files = scan_heads(v, plan, run_id); break;
        }
        // The marker's row last (the others are ordered by the writer's index).
        std::stable_partition(files.begin(), files.end(), [&](const ArtifactRecord& a) {
            return canonical_path(a.path) != canonical_path(plan.marker);
        });
        for (auto& f : files) f.identity = state.identity;
        ctx_.store.record_output(run_id, plan.dir, files, metrics);
        ctx_.say(v.name + ": " + plan.label() + " in " + plan.dir);
    }
}

void AnalysisExecutor::copy_owner_output(const Variant& v, const RunOutputPlan& plan,
                                         const std::string& identity, int64_t run_id) {
    // plan_binding.cpp refused the study unless the owner recorded this very output.
    const auto owner = owner_run(ctx_.store, v);
    if (!owner)
        throw engine::InputError(v.config.out_dir,
                                 "the owner of this shared run folder has no "
                                 "run in " +
                                     ctx_.spec.database);
    std::vector<ArtifactRecord> files;
    const std::string prefix = canonical_path(plan.dir) + "/";
    for (auto a : ctx_.store.artifacts(owner->id))
        if (canonical_path(a.path).compare(0, prefix.size(), prefix) == 0) {
            if (a.identity != identity)
                throw engine::InputError(a.path, "recorded by the owner of " + v.config.out_dir +
                                                     " with other settings");
            a.run_id = run_id;
            files.push_back(std::move(a));
        }
    std::vector<MetricPoint> metrics;
    if (plan.kind == RunOutput::kAnalysis)
        for (const auto& key : ctx_.store.metric_keys(owner->id))
            if (key.rfind("property/", 0) == 0)
                for (const auto& p : ctx_.store.metrics(owner->id, key, plan.step - 1))
                    if (p.step == plan.step) metrics.push_back(p);
    ctx_.store.record_output(run_id, plan.dir, files, metrics);
    ctx_.say(v.name + ": the " + plan.label() + " of the shared run, as its owner recorded it");
}

void AnalysisExecutor::analyze(const Variant& v, const RunOutputPlan& plan, int64_t) const {
    const ExperimentSpec& spec = ctx_.spec;
    const RunnerOptions& options = ctx_.options;
    const AnalysisSpec& a = spec.analysis;
    const std::string& snapshot = plan.inputs.at(0).second;
    const std::string corpus = a.corpus.empty() ? v.config.data.corpus : a.corpus;
    const std::string vocab = vocab_of(v);
    ctx_.report(1, "analysing step " + std::to_string(plan.step));
    if (!options.self_exe.empty()) {
        std::vector<std::string> args = {options.self_exe, "analyze", snapshot,
                                         "--vocab",        vocab,     "--out",
                                         plan.dir,         "--batch", std::to_string(a.batch_size)};
        if (a.text.empty()) {
            args.insert(args.end(),
                        {"--corpus", corpus, "--sentences", std::to_string(a.sentences)});
        } else {
            args.insert(args.end(), {"--text", a.text});
        }
        if (a.max_tokens > 0)
            args.insert(args.end(), {"--max-tokens", std::to_string(a.max_tokens)});
        if (!a.figures) args.push_back("--no-figures");
        if (a.order_probe) args.push_back("--order-probe");
        args.insert(args.end(), {"--probe-windows", std::to_string(a.probe_windows)});
        if (options.threads > 0)
            args.insert(args.end(), {"--threads", std::to_string(options.threads)});
        run_child(args, "analysis of " + snapshot);
        return;
    }
    auto ckpt = engine::load_checkpoint(snapshot);
    engine::WordPieceTokenizer tokenizer(engine::Vocab::load(vocab), v.config.data.lower_case);
    analysis::AnalyzeOptions analyze_options;
    analyze_options.property_options.length =
        std::min<int64_t>(v.config.data.max_seq_len, ckpt.model->config().max_position_embeddings);
    analyze_options.property_options.windows = a.probe_windows;
    analyze_options.order_options.windows = a.probe_windows;
    analyze_options.order_probe = a.order_probe;
    analyze_options.batch_size = a.batch_size;
    analyze_options.max_tokens = a.max_tokens;
    std::vector<std::string> sentences;
    if (a.text.empty()) {
        sentences = analysis::read_sentences(corpus, a.sentences);
        analyze_options.source = corpus;
    } else {
        sentences = {a.text};
        analyze_options.truncate = false;
        analyze_options.source = "analysis.text";
    }
    auto out = analysis::analyze_model(ckpt.model, tokenizer, sentences, analyze_options);
    out.model_name = snapshot;
    if (a.figures)
        out.notes.push_back(
            "figures not drawn: the runner ran without the tupe executable (run `tupe analyze` "
            "for the PNGs)");
    analysis::write_analysis(out, plan.dir);
}

std::vector<ArtifactRecord> AnalysisExecutor::ablate(const Variant& v, const RunOutputPlan& plan,
                                                     int64_t run_id) const {
    const std::string& mode = ctx_.spec.analysis.ablation;
    const std::string& checkpoint = plan.inputs.at(0).second;
    ctx_.report(1, "ablating");
    std::vector<std::string> args = {ctx_.options.self_exe,
                                     "ablate",
                                     checkpoint,
                                     "--vocab",
                                     vocab_of(v),
                                     "--mode",
                                     mode,
                                     "--format",
                                     "csv",
                                     "--out",
                                     plan.dir};
    if (ctx_.options.threads > 0)
        args.insert(args.end(), {"--threads", std::to_string(ctx_.options.threads)});
    run_child(args, "ablation of " + checkpoint);
    return artifact_records(run_id, plan.dir, {"ablation.csv", "ablation.json"}, "ablation",
                            "tupe ablate --mode " + mode + " of " + checkpoint);
}

std::vector<ArtifactRecord> AnalysisExecutor::scan_heads(const Variant& v,
                                                         const RunOutputPlan& plan,
                                                         int64_t run_id) const {
    ctx_.report(1, "scanning head types");
    std::vector<std::string> args = {ctx_.options.self_exe,
                                     "heads",
                                     v.config.out_dir,
                                     "--vocab",
                                     vocab_of(v),
                                     "--format",
                                     "csv",
                                     "--out",
                                     plan.dir};
    if (!ctx_.spec.analysis.figures) args.push_back("--no-figures");
    if (ctx_.options.threads > 0)
        args.insert(args.end(), {"--threads", std::to_string(ctx_.options.threads)});
    run_child(args, "head-type scan of " + v.config.out_dir);
    return artifact_records(
        run_id, plan.dir,
        {"heads.csv", "figures/head_types.png", "figures/head_types_by_head.png",
         "figures/head_type_scores.png", "heads.json"},
        "heads", "tupe heads over the snapshots of " + v.config.out_dir);
}

std::vector<ArtifactRecord> AnalysisExecutor::extrapolate(const Variant& v,
                                                          const RunOutputPlan& plan,
                                                          int64_t run_id) const {
    const ExtrapolationSpec& x = ctx_.spec.extrapolation;
    const std::string& checkpoint = plan.inputs.at(0).second;
    const std::string corpus = x.corpus.empty() ? v.config.data.corpus : x.corpus;
    ctx_.report(1, "extrapolating");
    std::vector<std::string> args = {ctx_.options.self_exe,
                                     "extrapolate",
                                     checkpoint,
                                     "--corpus",
                                     corpus,
                                     "--vocab",
                                     vocab_of(v),
                                     "--lengths",
                                     x.lengths,
                                     "--max-tokens",
                                     std::to_string(x.max_tokens),
                                     "--format",
                                     "csv",
                                     "--out",
                                     plan.dir};
    run_child(args, "extrapolation of " + checkpoint);
    return artifact_records(
        run_id, plan.dir, {"extrapolation.csv", "extrapolation.png", "extrapolation.json"},
        "extrapolation", "tupe extrapolate (lengths " + x.lengths + ") of " + checkpoint);
}

}  // namespace experiments::detail
