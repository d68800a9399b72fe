// The plan ETA of `tupe run`: jobs weighted by the FLOPs they cost (the tokens they push through
// the encoder times their model's FLOPs per token), timed per kind. A pretraining job of 600
// steps and a fine-tuning job of 5 seconds are not one "job" each; counting them alike put the
// quickstart's early ETA at over an hour for an 8-minute plan. Not a public header.
#pragma once

#include <array>

#include "experiments/experiment.h"
#include "experiments/runner.h"

namespace experiments::detail {

/// experiments::job_tokens (plan_cost.h) of the job's variant: the tokens it trains on; 0 for
/// an unknown variant.
double job_tokens(const ExperimentSpec& spec, const Job& job);

/// experiments::job_work (plan_cost.h) of the job's variant: its FLOPs. The runner's ETA weighs
/// jobs by it, so a base-size or DeBERTa variant is not counted as cheap as a tiny BERT-A one
/// (and the study builder estimates a plan's wall time with the same numbers). 0 for an
/// unknown variant.
double job_work(const ExperimentSpec& spec, const Job& job);

class PlanEta {
  public:
    void add_pending(Job::Kind kind, double tokens);
    /// A job starts (sequential or one of several parallel children).
    void start(Job::Kind kind, double tokens);
    /// It ended after `seconds` of wall time (for parallel children: their share of it).
    void finish(Job::Kind kind, double tokens, double seconds);
    /// Seconds left for every started and pending job, the sequential current job (`current`
    /// true) being `fraction` done after `elapsed` seconds. Each kind runs at its measured
    /// seconds per token, or the other kind's until it has one; -1 before any measurement.
    double seconds_left(bool current, Job::Kind kind, double tokens, double fraction,
                        double elapsed) const;

  private:
    static int index(Job::Kind k) { return k == Job::Kind::kPretrain ? 0 : 1; }
    std::array<double, 2> pending_{}, running_{}, done_tokens_{}, done_seconds_{};
};

}  // namespace experiments::detail
