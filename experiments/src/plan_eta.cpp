#include "plan_eta.h"

#include <algorithm>

#include "experiments/plan_cost.h"

namespace experiments::detail {

namespace {

const Variant* eta_variant(const ExperimentSpec& spec, const std::string& name) {
    for (const auto& candidate : spec.variants)
        if (candidate.name == name) return &candidate;
    return nullptr;
}

}  // namespace

double job_tokens(const ExperimentSpec& spec, const Job& job) {
    const Variant* v = eta_variant(spec, job.variant);
    return v ? experiments::job_tokens(spec, *v, job.kind == Job::Kind::kPretrain, job.task) : 0;
}

double job_work(const ExperimentSpec& spec, const Job& job) {
    const Variant* v = eta_variant(spec, job.variant);
    return v ? experiments::job_work(spec, *v, job.kind == Job::Kind::kPretrain, job.task) : 0;
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
