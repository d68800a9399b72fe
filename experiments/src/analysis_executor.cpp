// The runner's analysis executor (runner_internal.h): `tupe analyze` on the analysis snapshots
// of a pretraining run (analysis.checkpoints), as a child process when the runner knows the
// tupe executable, else in this process (data files only); the files are recorded as
// artifacts of the pretrain run, so a snapshot whose index.json is recorded is not redone.
// Each snapshot's properties (head means per layer) become metrics of the run at the
// snapshot's step, so they are curves over training. With an `extrapolation:` block,
// `tupe extrapolate` on the final checkpoint, with analysis.ablation `tupe ablate` and with
// analysis.heads `tupe heads` over every snapshot of the run, their files recorded the same way.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "analysis/analysis_index.h"
#include "analysis/analyze.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "experiments/analysis_artifacts.h"
#include "runner_internal.h"

namespace experiments::detail {

namespace fs = std::filesystem;

namespace {

// A path as the store gives it back (absolute, normalised), for comparing with recorded ones.
std::string as_recorded(const fs::path& path) {
    return fs::absolute(path).lexically_normal().generic_string();
}

std::string extrapolation_dir(const Variant& v) {
    return (fs::path(v.config.out_dir) / "extrapolation").string();
}

std::string ablation_dir(const Variant& v) {
    return (fs::path(v.config.out_dir) / "ablation").string();
}

std::string heads_dir(const Variant& v) { return (fs::path(v.config.out_dir) / "heads").string(); }

// The final checkpoint of `v`: its last snapshot, else checkpoint.pt; `what` names the block
// that needs it in the error.
std::string final_checkpoint(const Variant& v, const std::string& what) {
    std::string checkpoint = snapshot_path(v, v.config.train.steps);
    if (!fs::exists(checkpoint))
        checkpoint = (fs::path(v.config.out_dir) / "checkpoint.pt").string();
    if (!fs::exists(checkpoint))
        throw engine::CheckpointError(
            checkpoint, "missing: " + what + " needs '" + v.name + "''s final checkpoint");
    return checkpoint;
}

// The files `names` under `dir` as artifacts of `run_id` (absent ones skipped), the last name
// last: its row is what marks the step as done.
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

}  // namespace

std::string AnalysisExecutor::analysis_dir(const Variant& v, int64_t step) const {
    return (fs::path(v.config.out_dir) / "analysis" / ("step" + std::to_string(step))).string();
}

bool AnalysisExecutor::extrapolation_pending(const Variant& v,
                                             const std::set<std::string>& recorded) const {
    // Needs the tupe executable (the renderers and the figure live in the CLI).
    return ctx_.spec.extrapolation.enabled && !ctx_.options.self_exe.empty() &&
           !recorded.count(as_recorded(fs::path(extrapolation_dir(v)) / "extrapolation.json"));
}

std::vector<int64_t> AnalysisExecutor::pending_steps(const Job& job, int64_t run_id) const {
    const Variant& v = variant_named(ctx_.spec, job.variant);
    // A run folder shared from another study is read only here: its analysis is its owner's.
    if (shared_run_folder(ctx_.spec, v)) return {};
    const auto steps = ctx_.spec.analysis_steps(v);
    std::set<std::string> recorded;
    for (const auto& a : ctx_.store.artifacts(run_id)) recorded.insert(a.path);
    std::set<int64_t> pending;
    for (int64_t step : steps)
        if (!recorded.count(as_recorded(fs::path(analysis_dir(v, step)) / "index.json")))
            pending.insert(step);
    if (extrapolation_pending(v, recorded) || ablation_pending(v, recorded) ||
        heads_pending(v, recorded))
        pending.insert(v.config.train.steps);
    return {pending.begin(), pending.end()};
}

void AnalysisExecutor::run(const Job& job, int64_t run_id) const {
    const ExperimentSpec& spec = ctx_.spec;
    const RunnerOptions& options = ctx_.options;
    const Variant& v = variant_named(spec, job.variant);
    const AnalysisSpec& a = spec.analysis;
    const auto analysed = spec.analysis_steps(v);
    for (int64_t step : pending_steps(job, run_id)) {
        if (ctx_.stopped()) return;
        if (step == v.config.train.steps) {
            std::set<std::string> recorded;
            for (const auto& art : ctx_.store.artifacts(run_id)) recorded.insert(art.path);
            if (extrapolation_pending(v, recorded)) extrapolate(v, run_id);
            if (ablation_pending(v, recorded)) ablate(v, run_id);
            if (heads_pending(v, recorded)) scan_heads(v, run_id);
        }
        if (std::find(analysed.begin(), analysed.end(), step) == analysed.end()) continue;
        const std::string snapshot = snapshot_path(v, step);
        if (!fs::exists(snapshot))
            throw engine::CheckpointError(
                snapshot, "missing: analysis.checkpoints asks for step " + std::to_string(step) +
                              " of '" + v.name +
                              "', which was pretrained without that snapshot (delete " +
                              v.config.out_dir + " to pretrain it again)");
        const std::string dir = analysis_dir(v, step);
        const std::string corpus = a.corpus.empty() ? v.config.data.corpus : a.corpus;
        const std::string vocab = (fs::path(v.config.out_dir) / "vocab.txt").string();
        ctx_.report(1, "analysing step " + std::to_string(step));
        if (!options.self_exe.empty()) {
            std::vector<std::string> args = {options.self_exe,
                                             "analyze",
                                             snapshot,
                                             "--vocab",
                                             vocab,
                                             "--out",
                                             dir,
                                             "--batch",
                                             std::to_string(a.batch_size),
                                             "--db",
                                             spec.database,
                                             "--experiment",
                                             spec.name,
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
            if (a.order_probe) args.push_back("--order-probe");
            args.insert(args.end(), {"--probe-windows", std::to_string(a.probe_windows)});
            if (options.threads > 0)
                args.insert(args.end(), {"--threads", std::to_string(options.threads)});
            run_child(args, "analysis of " + snapshot);
        } else {
            auto ckpt = engine::load_checkpoint(snapshot);
            engine::WordPieceTokenizer tokenizer(engine::Vocab::load(vocab),
                                                 v.config.data.lower_case);
            analysis::AnalyzeOptions analyze_options;
            analyze_options.property_options.length = std::min<int64_t>(
                v.config.data.max_seq_len, ckpt.model->config().max_position_embeddings);
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
                    "figures not drawn: the runner ran without the tupe "
                    "executable (run `tupe analyze` for the PNGs)");
            analysis::write_analysis(out, dir);
            record_analysis_artifacts(ctx_.store, run_id, dir);
        }
        const auto points = property_metrics(dir, step);
        if (!points.empty()) ctx_.store.add_metrics(run_id, points);
        ctx_.say("analysed " + v.name + " at step " + std::to_string(step) + ": " + dir);
    }
}

bool AnalysisExecutor::ablation_pending(const Variant& v,
                                        const std::set<std::string>& recorded) const {
    return ctx_.spec.analysis.enabled && !ctx_.spec.analysis.ablation.empty() &&
           !ctx_.options.self_exe.empty() &&
           !recorded.count(as_recorded(fs::path(ablation_dir(v)) / "ablation.json"));
}

void AnalysisExecutor::ablate(const Variant& v, int64_t run_id) const {
    const std::string& mode = ctx_.spec.analysis.ablation;
    const std::string checkpoint = final_checkpoint(v, "analysis.ablation");
    const std::string dir = ablation_dir(v);
    ctx_.report(1, "ablating");
    std::vector<std::string> args = {ctx_.options.self_exe,
                                     "ablate",
                                     checkpoint,
                                     "--vocab",
                                     (fs::path(v.config.out_dir) / "vocab.txt").string(),
                                     "--mode",
                                     mode,
                                     "--format",
                                     "csv",
                                     "--out",
                                     dir};
    if (ctx_.options.threads > 0)
        args.insert(args.end(), {"--threads", std::to_string(ctx_.options.threads)});
    run_child(args, "ablation of " + checkpoint);
    ctx_.store.add_artifacts(artifact_records(run_id, dir, {"ablation.csv", "ablation.json"},
                                              "ablation",
                                              "tupe ablate --mode " + mode + " of " + checkpoint));
    ctx_.say("ablated " + v.name + ": " + dir);
}

bool AnalysisExecutor::heads_pending(const Variant& v,
                                     const std::set<std::string>& recorded) const {
    return ctx_.spec.analysis.enabled && ctx_.spec.analysis.heads &&
           !ctx_.options.self_exe.empty() &&
           !recorded.count(as_recorded(fs::path(heads_dir(v)) / "heads.json"));
}

void AnalysisExecutor::scan_heads(const Variant& v, int64_t run_id) const {
    final_checkpoint(v, "analysis.heads");  // the scan runs on a finished pretraining
    const std::string dir = heads_dir(v);
    ctx_.report(1, "scanning head types");
    std::vector<std::string> args = {ctx_.options.self_exe,
                                     "heads",
                                     v.config.out_dir,
                                     "--vocab",
                                     (fs::path(v.config.out_dir) / "vocab.txt").string(),
                                     "--format",
                                     "csv",
                                     "--out",
                                     dir};
    if (!ctx_.spec.analysis.figures) args.push_back("--no-figures");
    if (ctx_.options.threads > 0)
        args.insert(args.end(), {"--threads", std::to_string(ctx_.options.threads)});
    run_child(args, "head-type scan of " + v.config.out_dir);
    // The json last: its row is what marks the scan as done.
    ctx_.store.add_artifacts(
        artifact_records(run_id, dir,
                         {"heads.csv", "figures/head_types.png", "figures/head_types_by_head.png",
                          "figures/head_type_scores.png", "heads.json"},
                         "heads", "tupe heads over the snapshots of " + v.config.out_dir));
    ctx_.say("scanned the head types of " + v.name + ": " + dir);
}

void AnalysisExecutor::extrapolate(const Variant& v, int64_t run_id) const {
    const ExtrapolationSpec& x = ctx_.spec.extrapolation;
    const std::string checkpoint = final_checkpoint(v, "the extrapolation block");
    const std::string dir = extrapolation_dir(v);
    const std::string corpus = x.corpus.empty() ? v.config.data.corpus : x.corpus;
    ctx_.report(1, "extrapolating");
    std::vector<std::string> args = {ctx_.options.self_exe,
                                     "extrapolate",
                                     checkpoint,
                                     "--corpus",
                                     corpus,
                                     "--vocab",
                                     (fs::path(v.config.out_dir) / "vocab.txt").string(),
                                     "--lengths",
                                     x.lengths,
                                     "--max-tokens",
                                     std::to_string(x.max_tokens),
                                     "--format",
                                     "csv",
                                     "--out",
                                     dir};
    run_child(args, "extrapolation of " + checkpoint);
    // The json last: its row is what marks the extrapolation as done.
    ctx_.store.add_artifacts(artifact_records(
        run_id, dir, {"extrapolation.csv", "extrapolation.png", "extrapolation.json"},
        "extrapolation", "tupe extrapolate (lengths " + x.lengths + ") of " + checkpoint));
    ctx_.say("extrapolated " + v.name + ": " + dir);
}

}  // namespace experiments::detail
