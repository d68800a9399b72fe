// The runner's analysis executor (runner_internal.h): `tupe analyze` on the analysis snapshots
// of a pretraining run (analysis.checkpoints), as a child process when the runner knows the
// tupe executable, else in this process (data files only); the files are recorded as
// artifacts of the pretrain run, so a snapshot whose index.json is recorded is not redone.
#include <filesystem>
#include <set>

#include "analysis/analyze.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "experiments/analysis_artifacts.h"
#include "runner_internal.h"

namespace experiments::detail {

namespace fs = std::filesystem;

std::string AnalysisExecutor::analysis_dir(const Variant& v, int64_t step) const {
    return (fs::path(v.config.out_dir) / "analysis" / ("step" + std::to_string(step))).string();
}

std::vector<int64_t> AnalysisExecutor::pending_steps(const Job& job, int64_t run_id) const {
    const Variant& v = variant_named(ctx_.spec, job.variant);
    const auto steps = ctx_.spec.analysis_steps(v);
    if (steps.empty()) return {};
    std::set<std::string> recorded;
    for (const auto& a : ctx_.store.artifacts(run_id)) recorded.insert(a.path);
    std::vector<int64_t> pending;
    for (int64_t step : steps)
        if (!recorded.count((fs::path(analysis_dir(v, step)) / "index.json").string()))
            pending.push_back(step);
    return pending;
}

void AnalysisExecutor::run(const Job& job, int64_t run_id) const {
    const ExperimentSpec& spec = ctx_.spec;
    const RunnerOptions& options = ctx_.options;
    const Variant& v = variant_named(spec, job.variant);
    const AnalysisSpec& a = spec.analysis;
    for (int64_t step : pending_steps(job, run_id)) {
        if (ctx_.stopped()) return;
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
            if (options.threads > 0)
                args.insert(args.end(), {"--threads", std::to_string(options.threads)});
            run_child(args, "analysis of " + snapshot);
        } else {
            auto ckpt = engine::load_checkpoint(snapshot);
            engine::WordPieceTokenizer tokenizer(engine::Vocab::load(vocab),
                                                 v.config.data.lower_case);
            analysis::AnalyzeOptions analyze_options;
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
        ctx_.say("analysed " + v.name + " at step " + std::to_string(step) + ": " + dir);
    }
}

}  // namespace experiments::detail
