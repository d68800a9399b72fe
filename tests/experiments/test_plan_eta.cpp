// The plan ETA (experiments/src/plan_eta.h): jobs weighed in encoder tokens and timed per kind,
// so a plan of a few long pretraining jobs and many short fine-tuning jobs is not estimated as
// "jobs left x the first job's time".
#include <gtest/gtest.h>

#include "engine/cost_model.h"
#include "plan_eta.h"

using namespace experiments;
using experiments::detail::PlanEta;

namespace {

constexpr auto kPre = Job::Kind::kPretrain;
constexpr auto kFine = Job::Kind::kFinetune;

ExperimentSpec toy_spec() {
    ExperimentSpec spec;
    Variant v;
    v.name = "bert-a";
    v.config.train.steps = 600;
    v.config.train.batch_size = 32;
    v.config.data.max_seq_len = 64;
    v.config.model.max_position_embeddings = 64;
    spec.variants.push_back(v);
    spec.glue.synthetic_train = 300;
    spec.finetune.epochs = 4;
    spec.finetune.max_seq_len = 128;  // capped by the model's 64 positions
    return spec;
}

}  // namespace

TEST(PlanEta, JobTokensWeighPretrainingAgainstFineTuning) {
    const ExperimentSpec spec = toy_spec();
    Job pre;
    pre.kind = kPre;
    pre.variant = "bert-a";
    EXPECT_DOUBLE_EQ(experiments::detail::job_tokens(spec, pre), 600.0 * 32 * 64);
    Job fine;
    fine.kind = kFine;
    fine.variant = "bert-a";
    fine.task = "syn-cola";
    // 4 epochs x 300 examples x 32 tokens (half of 64), plus a third for evaluation.
    EXPECT_DOUBLE_EQ(experiments::detail::job_tokens(spec, fine), 4.0 * 300 * 32 * (4.0 / 3.0));
    fine.task = "rte";  // GLUE: the train size from GLUE_FORMAT.md
    EXPECT_DOUBLE_EQ(experiments::detail::job_tokens(spec, fine), 4.0 * 2490 * 32 * (4.0 / 3.0));
}

TEST(PlanEta, JobWorkIsTokensTimesTheVariantsFlopsPerToken) {
    ExperimentSpec spec = toy_spec();
    Variant wide = spec.variants[0];
    wide.name = "wide";
    wide.config.model.hidden_size *= 2;
    wide.config.model.intermediate_size *= 2;
    spec.variants.push_back(wide);
    const engine::ModelConfig& m = spec.variants[0].config.model;
    const double mask = spec.variants[0].config.data.mask_prob;
    Job pre;
    pre.kind = kPre;
    pre.variant = "bert-a";
    // Pretraining: 64-token blocks with their masked positions, head included, x3 for backward.
    const engine::StepFlops f = engine::count_step_flops(m, 1, 64, static_cast<int64_t>(64 * mask));
    EXPECT_DOUBLE_EQ(experiments::detail::job_work(spec, pre), 600.0 * 32 * 64 * f.step() / 64.0);
    // Fine-tuning: 32-token examples, no MLM head.
    Job fine;
    fine.kind = kFine;
    fine.variant = "bert-a";
    fine.task = "syn-cola";
    const engine::StepFlops g = engine::count_step_flops(m, 1, 32, 0);
    EXPECT_DOUBLE_EQ(experiments::detail::job_work(spec, fine),
                     4.0 * 300 * 32 * (4.0 / 3.0) * 3.0 * (g.encoder + g.positional) / 32.0);
    // The same tokens on a model twice as wide are more than twice the work.
    pre.variant = "wide";
    EXPECT_GT(experiments::detail::job_work(spec, pre), 2.0 * 600.0 * 32 * 64 * f.step() / 64.0);
    pre.variant = "missing";
    EXPECT_EQ(experiments::detail::job_work(spec, pre), 0.0);
}

TEST(PlanEta, UnknownUntilSomethingIsTimed) {
    PlanEta eta;
    eta.add_pending(kPre, 1000);
    eta.start(kPre, 1000);
    EXPECT_EQ(eta.seconds_left(true, kPre, 1000, 0.0, 0.0), -1);
    EXPECT_EQ(eta.seconds_left(true, kPre, 1000, 0.01, 5.0), -1);  // too early to extrapolate
}

TEST(PlanEta, FineTuningBorrowsThePretrainingRateUntilItHasItsOwn) {
    PlanEta eta;
    eta.add_pending(kPre, 100);
    eta.add_pending(kFine, 10);
    eta.add_pending(kFine, 10);
    eta.start(kPre, 100);
    // Half of the pretraining in 10 s: 0.2 s per token; 50 + 20 tokens left.
    EXPECT_NEAR(eta.seconds_left(true, kPre, 100, 0.5, 10.0), 14.0, 1e-9);
    eta.finish(kPre, 100, 20.0);
    eta.start(kFine, 10);
    // Fine-tuning turns out 10x cheaper per token: 1 s for the first job.
    eta.finish(kFine, 10, 1.0);
    EXPECT_NEAR(eta.seconds_left(false, kPre, 0, 0, 0), 1.0, 1e-9);
    eta.start(kFine, 10);
    EXPECT_NEAR(eta.seconds_left(true, kFine, 10, 0.5, 0.5), 0.5, 1e-9);
    eta.finish(kFine, 10, 1.0);
    EXPECT_NEAR(eta.seconds_left(false, kPre, 0, 0, 0), 0.0, 1e-9);
}
