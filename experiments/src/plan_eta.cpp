#include "plan_eta.h"

#include <algorithm>

#include "engine/cost_model.h"
#include "experiments/glue_data.h"

namespace experiments::detail {

double job_tokens(const ExperimentSpec& spec, const Job& job) {
    const Variant* v = nullptr;
    for (const auto& candidate : spec.variants)
        if (candidate.name == job.variant) v = &candidate;
    if (!v) return 0;
    const auto& t = v->config.train;
    if (job.kind == Job::Kind::kPretrain)
        return static_cast<double>(t.steps) * static_cast<double>(t.batch_size) *
               static_cast<double>(v->config.data.max_seq_len);
    double examples = 10000, epochs = 3;
    try {
        const TaskInfo& task = find_task(job.task);
        if (task.zero_shot) {
            // No training: two sentences per dev pair, one forward pass of about 24 tokens per
            // wordpiece of each, a third of a training step's work per token.
            return static_cast<double>(spec.glue.synthetic_dev) * 2.0 * 24.0 * 24.0 / 3.0;
        }
        if (task.synthetic) {
            examples = static_cast<double>(spec.glue.synthetic_train);
        } else if (const long n = expected_split_size(task, "train"); n > 0) {
            examples = static_cast<double>(n);
        }
        epochs = static_cast<double>(spec.finetune.epochs > 0 ? spec.finetune.epochs
                                                              : task.default_epochs);
    } catch (const std::exception&) {
        // An unknown task fails when the job runs; here it only weighs the estimate.
    }
    const double tokens_per_example =
        0.5 * static_cast<double>(
                  std::min(spec.finetune.max_seq_len, v->config.model.max_position_embeddings));
    return epochs * examples * tokens_per_example * (1.0 + 1.0 / 3.0);
}

double job_work(const ExperimentSpec& spec, const Job& job) {
    const Variant* v = nullptr;
    for (const auto& candidate : spec.variants)
        if (candidate.name == job.variant) v = &candidate;
    if (!v) return 0;
    const engine::ModelConfig& model = v->config.model;
    const bool pretrain = job.kind == Job::Kind::kPretrain;
    // The sequence length the job's tokens come in: pretraining's blocks, fine-tuning's
    // examples at about half the truncation length (job_tokens' assumption).
    const int64_t seq =
        pretrain ? v->config.data.max_seq_len
                 : std::max<int64_t>(
                       1, std::min(spec.finetune.max_seq_len, model.max_position_embeddings) / 2);
    const int64_t masked =
        pretrain ? std::max<int64_t>(
                       1, static_cast<int64_t>(static_cast<double>(seq) * v->config.data.mask_prob))
                 : 0;
    const engine::StepFlops f = engine::count_step_flops(model, 1, seq, masked);
    const double per_token =
        3.0 * (f.encoder + f.positional + (pretrain ? f.head : 0.0)) / static_cast<double>(seq);
    return job_tokens(spec, job) * per_token;
}

void PlanEta::add_pending(Job::Kind kind, double tokens) { pending_[index(kind)] += tokens; }

void PlanEta::start(Job::Kind kind, double tokens) {
    const int k = index(kind);
    pending_[k] = std::max(0.0, pending_[k] - tokens);
    running_[k] += tokens;
}

void PlanEta::finish(Job::Kind kind, double tokens, double seconds) {
    const int k = index(kind);
    running_[k] = std::max(0.0, running_[k] - tokens);
    done_tokens_[k] += tokens;
    done_seconds_[k] += seconds;
}

double PlanEta::seconds_left(bool current, Job::Kind kind, double tokens, double fraction,
                             double elapsed) const {
    std::array<double, 2> rate{-1, -1};
    for (int k = 0; k < 2; ++k) {
        double t = done_tokens_[k], s = done_seconds_[k];
        if (current && index(kind) == k && fraction > 0.02) {
            t += fraction * tokens;
            s += elapsed;
        }
        if (t > 0 && s > 0) rate[k] = s / t;
    }
    if (rate[0] < 0 && rate[1] < 0) return -1;
    for (int k = 0; k < 2; ++k)
        if (rate[k] < 0) rate[k] = rate[1 - k];
    double left = 0;
    for (int k = 0; k < 2; ++k) left += (pending_[k] + running_[k]) * rate[k];
    if (current) left -= std::min(1.0, fraction) * tokens * rate[index(kind)];
    return std::max(0.0, left);
}

}  // namespace experiments::detail
