// Where a study's results live and what they are (study_layout.h): run folders and snapshots,
// the stored config texts, and the outputs each pretraining run owes the study.
#include "study_layout.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "analysis/tasks.h"
#include "engine/run_folder.h"
#include "engine/tokenizer.h"
#include "engine/trainer.h"

namespace experiments::detail {

namespace fs = std::filesystem;

std::string snapshot_path(const Variant& v, int64_t step) {
    return engine::snapshot_path(v.config.out_dir, step);
}

bool shared_run_folder(const ExperimentSpec& spec, const Variant& v) {
    const auto owner = engine::read_run_owner(v.config.out_dir);
    return owner && owner->experiment != spec.name;
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

std::vector<int64_t> snapshot_steps(const ExperimentSpec& spec, const Variant& v) {
    std::vector<int64_t> steps = spec.checkpoint_steps(v);
    for (const auto& more : {spec.analysis_steps(v), spec.kept_steps(v)})
        for (int64_t step : more)
            if (std::find(steps.begin(), steps.end(), step) == steps.end()) steps.push_back(step);
    std::sort(steps.begin(), steps.end());
    return steps;
}

std::string pretrain_config_text(const Variant& v) {
    // pretrain() sizes the embeddings from the vocabulary; record that size, not the
    // preset's default, so the stored config says what was trained.
    engine::PretrainConfig resolved = v.config;
    try {
        resolved.model.vocab_size =
            static_cast<int64_t>(engine::Vocab::load(resolved.data.vocab).size());
    } catch (const std::exception&) {
        // No vocabulary yet: pretrain() reports it when the job runs.
    }
    return engine::config_to_text(resolved);
}

std::string finetune_config_text(const ExperimentSpec& spec, const Variant& v, const Job& job) {
    const TaskInfo& task = find_task(job.task);
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
    // Nothing above but the checkpoint, max_seq_len and shuffle_words applies to a pair task.
    if (task.zero_shot) cfg << "protocol = zero-shot pseudo-log-likelihood (no training)\n";
    return cfg.str();
}

std::string vocab_of(const Variant& v) {
    return (fs::path(v.config.out_dir) / "vocab.txt").string();
}

// The final checkpoint of `v`: its last snapshot, else checkpoint.pt.
namespace {

std::string final_checkpoint_path(const Variant& v) {
    std::string checkpoint = snapshot_path(v, v.config.train.steps);
    std::error_code error;
    if (!fs::exists(checkpoint, error))
        checkpoint = (fs::path(v.config.out_dir) / "checkpoint.pt").string();
    return checkpoint;
}

// The checkpoint-STEP.pt snapshots of the run folder by step (what `tupe heads` scans).
std::vector<std::pair<std::string, std::string>> folder_snapshots(const Variant& v) {
    static const std::regex snapshot(R"(checkpoint-(\d+)\.pt)");
    std::vector<std::pair<int64_t, std::string>> steps;
    std::error_code error;
    for (fs::directory_iterator it(v.config.out_dir, error), end; !error && it != end;
         it.increment(error)) {
        std::smatch m;
        const std::string name = it->path().filename().string();
        if (std::regex_match(name, m, snapshot))
            steps.emplace_back(std::stoll(m[1].str()), it->path().string());
    }
    std::sort(steps.begin(), steps.end());
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [step, path] : steps)
        out.emplace_back("snapshot" + std::to_string(step), path);
    return out;
}

}  // namespace

std::string RunOutputPlan::label() const {
    if (kind == RunOutput::kAnalysis) return "analysis of step " + std::to_string(step);
    return run_output_name(kind);
}

std::vector<RunOutputPlan> run_output_plans(const ExperimentSpec& spec, const Variant& v,
                                            bool with_executable) {
    std::vector<RunOutputPlan> out;
    const fs::path dir(v.config.out_dir);
    const std::string vocab = vocab_of(v);
    for (int64_t step : spec.analysis_steps(v)) {
        RunOutputPlan p;
        p.kind = RunOutput::kAnalysis;
        p.step = step;
        p.dir = (dir / "analysis" / ("step" + std::to_string(step))).string();
        p.marker = (fs::path(p.dir) / "index.json").string();
        p.inputs = {{"checkpoint", snapshot_path(v, step)}, {"vocab", vocab}};
        out.push_back(std::move(p));
    }
    // The other outputs need the tupe executable (their renderers live in the CLI).
    if (!with_executable) return out;
    const int64_t last = v.config.train.steps;
    const auto add = [&](RunOutput kind, const char* folder, const char* marker) {
        RunOutputPlan p;
        p.kind = kind;
        p.step = last;
        p.dir = (dir / folder).string();
        p.marker = (fs::path(p.dir) / marker).string();
        p.inputs = {{"checkpoint", final_checkpoint_path(v)}, {"vocab", vocab}};
        out.push_back(std::move(p));
    };
    if (spec.extrapolation.enabled)
        add(RunOutput::kExtrapolation, "extrapolation", "extrapolation.json");
    if (spec.analysis.enabled && !spec.analysis.ablation.empty())
        add(RunOutput::kAblation, "ablation", "ablation.json");
    if (spec.analysis.enabled && spec.analysis.heads) {
        add(RunOutput::kHeads, "heads", "heads.json");
        out.back().inputs = folder_snapshots(v);
        out.back().inputs.emplace_back("vocab", vocab);
    }
    return out;
}

RunOutputState run_output_state(const ExperimentSpec& spec, const Variant& v,
                                const RunOutputPlan& plan,
                                const std::vector<ArtifactRecord>& recorded, FileHashes& hashes) {
    RunOutputState s;
    std::error_code error;
    for (const auto& [name, path] : plan.inputs)
        if (!fs::exists(path, error)) return s;  // not pretrained that far yet: pending
    if (plan.kind == RunOutput::kHeads && plan.inputs.size() < 2) return s;
    s.identity = output_identity(spec, v, plan.kind, plan.inputs, hashes).text();
    const std::string marker = canonical_path(plan.marker);
    const auto row = std::find_if(recorded.begin(), recorded.end(), [&](const ArtifactRecord& a) {
        return canonical_path(a.path) == marker;
    });
    if (row == recorded.end()) return s;
    if (row->identity == s.identity) {
        s.state = RunOutputState::State::kDone;
    } else {
        s.state = RunOutputState::State::kChanged;
        s.changes = row->identity.empty()
                        ? std::vector<std::string>{"recorded without its settings (before "
                                                   "output identities)"}
                        : identity_changes(row->identity, s.identity);
    }
    return s;
}

}  // namespace experiments::detail
