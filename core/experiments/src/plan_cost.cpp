// What a study's plan costs before it runs (see plan_cost.h).
#include "experiments/plan_cost.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "analysis/evidence.h"
#include "engine/cost_model.h"
#include "experiments/glue_data.h"

namespace experiments {

double job_tokens(const ExperimentSpec& spec, const Variant& v, bool pretrain,
                  const std::string& task_name) {
    const auto& t = v.config.train;
    if (pretrain)
        return static_cast<double>(t.steps) * static_cast<double>(t.batch_size) *
               static_cast<double>(v.config.data.max_seq_len);
    double examples = 10000, epochs = 3;
    try {
        const TaskInfo& task = find_task(task_name);
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
                  std::min(spec.finetune.max_seq_len, v.config.model.max_position_embeddings));
    return epochs * examples * tokens_per_example * (1.0 + 1.0 / 3.0);
}

double job_work(const ExperimentSpec& spec, const Variant& v, bool pretrain,
                const std::string& task) {
    const engine::ModelConfig& model = v.config.model;
    // The sequence length the job's tokens come in: pretraining's blocks, fine-tuning's
    // examples at about half the truncation length (job_tokens' assumption).
    const int64_t seq =
        pretrain ? v.config.data.max_seq_len
                 : std::max<int64_t>(
                       1, std::min(spec.finetune.max_seq_len, model.max_position_embeddings) / 2);
    const int64_t masked =
        pretrain ? std::max<int64_t>(
                       1, static_cast<int64_t>(static_cast<double>(seq) * v.config.data.mask_prob))
                 : 0;
    const engine::StepFlops f = engine::count_step_flops(model, 1, seq, masked);
    const double per_token =
        3.0 * (f.encoder + f.positional + (pretrain ? f.head : 0.0)) / static_cast<double>(seq);
    return job_tokens(spec, v, pretrain, task) * per_token;
}

PlanCounts count_plan(const ExperimentSpec& spec) {
    PlanCounts c;
    c.every_task = spec.glue.tasks.empty();
    for (const auto& v : spec.variants) {
        ++c.pretrain;
        c.pretrain_work += job_work(spec, v, true, "");
        const auto snapshots = static_cast<int>(spec.checkpoint_steps(v).size());
        for (const auto& task : spec.glue.tasks) {
            bool zero_shot = false;
            try {
                zero_shot = find_task(task).zero_shot;
            } catch (const std::exception&) {
                // Counted as fine-tuned; the loader names an unknown task.
            }
            const int jobs =
                zero_shot
                    ? snapshots
                    : snapshots * static_cast<int>(spec.finetune.lrs.size() *
                                                   v.finetune_seeds_or(spec.finetune.seeds).size());
            (zero_shot ? c.zero_shot : c.finetune) += jobs;
            c.finetune_work += jobs * job_work(spec, v, false, task);
        }
        if (spec.analysis.enabled)
            c.analyses += static_cast<int>(spec.analysis_steps(v).size()) +
                          (spec.analysis.ablation.empty() ? 0 : 1) + (spec.analysis.heads ? 1 : 0);
        if (spec.extrapolation.enabled) ++c.analyses;
    }
    return c;
}

double MachineRate::rate_for(const std::string& preset) const {
    if (const auto it = flops_per_second.find(preset); it != flops_per_second.end())
        return it->second;
    std::vector<double> all;
    for (const auto& [name, rate] : flops_per_second) all.push_back(rate);
    return all.empty() ? 0 : analysis::median_of(all);
}

MachineRate parse_bench_json(const std::string& text) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw std::invalid_argument(std::string("tupe bench output: not JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("variants") || !j["variants"].is_array())
        throw std::invalid_argument("tupe bench output: no \"variants\" list");
    MachineRate rate;
    for (const auto& v : j["variants"]) {
        if (!v.contains("variant") || !v.contains("achieved_flops") ||
            !v["achieved_flops"].is_number())
            throw std::invalid_argument(
                "tupe bench output: a variant without \"variant\" and \"achieved_flops\"");
        const double flops = v["achieved_flops"].get<double>();
        if (flops > 0) rate.flops_per_second[v["variant"].get<std::string>()] = flops;
    }
    if (rate.flops_per_second.empty())
        throw std::invalid_argument("tupe bench output: no variant with a positive FLOP/s");
    auto field = [&](const char* key) {
        if (!j.contains(key)) return std::string("?");
        return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
    };
    rate.description = "tupe bench --size " + field("size") + " --seq " + field("seq") +
                       " --batch " + field("batch") + ", " + field("threads") + " threads";
    return rate;
}

PlanEstimate estimate_plan(const ExperimentSpec& spec, const MachineRate& rate) {
    PlanEstimate e;
    for (const auto& v : spec.variants) {
        const double r = rate.rate_for(v.config.model.preset);
        if (r <= 0) continue;
        e.pretrain_seconds += job_work(spec, v, true, "") / r;
        const auto snapshots = static_cast<double>(spec.checkpoint_steps(v).size());
        for (const auto& task : spec.glue.tasks) {
            double jobs = snapshots;
            try {
                if (!find_task(task).zero_shot)
                    jobs *= static_cast<double>(spec.finetune.lrs.size() *
                                                v.finetune_seeds_or(spec.finetune.seeds).size());
            } catch (const std::exception&) {
                // As count_plan: an unknown task counts as fine-tuned.
            }
            e.finetune_seconds += jobs * job_work(spec, v, false, task) / r;
        }
    }
    return e;
}

}  // namespace experiments
