// The shared MLM optimizer step: the fused AdamW against LibTorch's own AdamW (same state,
// same checkpoints), gradient clipping folded into the update, and the data-parallel hook's
// view of the gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

#include "../../engine/src/optim_util.h"
#include "engine/bert.h"
#include "engine/train_step.h"
#include "support/test_support.h"

using namespace engine;

namespace {

// Hidden 16, 2 heads, 50 tokens, 16 positions, no dropout.
ModelConfig tiny_config(const std::string& preset) {
    return test_support::tiny16_config(preset, 50, 16, /*dropout=*/false);
}

MlmTensors tiny_batch(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
    torch::manual_seed(seed);
    MlmTensors b;
    b.input_ids = torch::randint(5, vocab, {B, T}, torch::kLong);
    b.input_ids.select(1, 0).fill_(2);
    auto chosen = torch::rand({B, T}) < 0.3;
    chosen.select(1, 0).fill_(false);
    chosen.select(1, 1).fill_(true);  // at least one target per row
    b.labels = torch::where(chosen, b.input_ids, torch::full_like(b.input_ids, -100));
    b.attention_mask = torch::ones({B, T}, torch::kLong);
    b.real_tokens = B * T;
    b.masked_tokens = chosen.sum().item<int64_t>();
    return b;
}

// Two groups as BERT uses them (decayed and not), BERT-like hyper-parameters.
torch::optim::AdamW make_optimizer(std::vector<torch::Tensor> a, std::vector<torch::Tensor> b) {
    auto opts = [](double wd) {
        return std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(3e-3).betas({0.9, 0.98}).eps(1e-6).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::move(a), opts(0.01));
    groups.emplace_back(std::move(b), opts(0.0));
    return torch::optim::AdamW(groups, torch::optim::AdamWOptions(3e-3));
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& v) {
    std::vector<torch::Tensor> out;
    for (const auto& t : v) out.push_back(t.detach().clone().requires_grad_(true));
    return out;
}

}  // namespace

// train.schedule's closed forms: linear is BERT's; WSD holds the peak, then decays over the
// last decay_fraction of the steps linearly or as 1 - sqrt.
TEST(LrSchedule, LinearAndWarmupStableDecay) {
    using engine::detail::scheduled_lr;
    EXPECT_DOUBLE_EQ(scheduled_lr("linear", 1.0, 4, 10, 100, 0.2),
                     engine::detail::linear_warmup_decay(1.0, 4, 10, 100));
    EXPECT_DOUBLE_EQ(scheduled_lr("linear", 1.0, 55, 10, 100, 0.2), 0.5);
    for (const std::string s : {"wsd", "wsd-sqrt"}) {
        EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 4, 10, 100, 0.2), 0.5) << s;  // warm-up
        EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 10, 10, 100, 0.2), 1.0) << s;
        EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 79, 10, 100, 0.2), 1.0) << s;  // stable
        EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 80, 10, 100, 0.2), 1.0) << s;  // decay starts
        EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 100, 10, 100, 0.2), 0.0) << s;
    }
    EXPECT_DOUBLE_EQ(scheduled_lr("wsd", 1.0, 95, 10, 100, 0.2), 0.25);
    EXPECT_DOUBLE_EQ(scheduled_lr("wsd-sqrt", 1.0, 85, 10, 100, 0.2), 0.5);
    // The decay never starts inside the warm-up.
    EXPECT_DOUBLE_EQ(scheduled_lr("wsd", 1.0, 10, 10, 12, 1.0), 1.0);
    EXPECT_THROW(scheduled_lr("cosine", 1.0, 0, 0, 10, 0.2), std::invalid_argument);
}

TEST(FusedAdamW, MatchesTorchAdamWOverSteps) {
    torch::manual_seed(3);
    std::vector<torch::Tensor> a = {torch::randn({7, 5}), torch::randn({40000})};
    std::vector<torch::Tensor> b = {torch::randn({13})};
    for (auto& t : a) t.requires_grad_(true);
    for (auto& t : b) t.requires_grad_(true);
    auto a2 = clones(a), b2 = clones(b);
    auto reference = make_optimizer(a, b), fused = make_optimizer(a2, b2);
    for (int step = 0; step < 5; ++step) {
        const double scale = step % 2 ? 0.37 : 1.0;  // as a clipping coefficient would be
        for (size_t i = 0; i < a.size(); ++i) {
            auto g = torch::randn_like(a[i]) * (step + 1);
            a[i].mutable_grad() = g * scale;
            a2[i].mutable_grad() = g.clone();
        }
        auto g = torch::randn_like(b[0]);
        b[0].mutable_grad() = g * scale;
        b2[0].mutable_grad() = g.clone();
        reference.step();
        ASSERT_TRUE(engine::detail::fused_adamw_step(fused, scale));
        for (size_t i = 0; i < a.size(); ++i)
            EXPECT_TRUE(torch::allclose(a[i], a2[i], 1e-5, 1e-6)) << "step " << step << " a" << i;
        EXPECT_TRUE(torch::allclose(b[0], b2[0], 1e-5, 1e-6)) << "step " << step;
    }
    // The moments are torch's own state: the same values under the same keys.
    std::ostringstream s1, s2;
    torch::serialize::OutputArchive o1, o2;
    reference.save(o1);
    fused.save(o2);
    auto load = [](torch::serialize::OutputArchive& out, std::vector<torch::Tensor> a,
                   std::vector<torch::Tensor> b) {
        std::ostringstream buf;
        out.save_to(buf);
        std::istringstream in(buf.str());
        torch::serialize::InputArchive archive;
        archive.load_from(in);
        auto opt = make_optimizer(std::move(a), std::move(b));
        opt.load(archive);
        return opt;
    };
    auto from_reference = load(o1, a, b), from_fused = load(o2, a2, b2);
    // One more step from each loaded state with the same gradient: still equal.
    for (size_t i = 0; i < a.size(); ++i) {
        auto g = torch::randn_like(a[i]);
        a[i].mutable_grad() = g;
        a2[i].mutable_grad() = g.clone();
    }
    b[0].mutable_grad() = torch::zeros_like(b[0]);
    b2[0].mutable_grad() = torch::zeros_like(b2[0]);
    from_reference.step();
    from_fused.step();
    for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(torch::allclose(a[i], a2[i], 1e-5, 1e-6)) << "after reload, a" << i;
}

TEST(FusedAdamW, DeclinesWhatItCannotFuse) {
    auto p = torch::randn({4}, torch::kDouble).requires_grad_(true);
    p.mutable_grad() = torch::ones_like(p);
    torch::optim::AdamW opt(std::vector<torch::Tensor>{p}, torch::optim::AdamWOptions(1e-3));
    auto before = p.detach().clone();
    EXPECT_FALSE(engine::detail::fused_adamw_step(opt, 1.0));
    EXPECT_TRUE(torch::equal(before, p.detach()));
    auto q = torch::randn({4}).requires_grad_(true);
    q.mutable_grad() = torch::ones_like(q);
    torch::optim::AdamW ams(std::vector<torch::Tensor>{q},
                            torch::optim::AdamWOptions(1e-3).amsgrad(true));
    EXPECT_FALSE(engine::detail::fused_adamw_step(ams, 1.0));
}

TEST(MlmTrainStep, FusedAndTorchUpdatesAgree) {
    for (const std::string preset : {"bert-a", "tupe-r"}) {
        const auto config = tiny_config(preset);
        torch::manual_seed(11);
        BertForMaskedLM m1(config);
        BertForMaskedLM m2(config);
        {
            torch::NoGradGuard g;
            auto p1 = m1->parameters(), p2 = m2->parameters();
            for (size_t i = 0; i < p1.size(); ++i) p2[i].copy_(p1[i]);
        }
        torch::optim::AdamW o1(m1->parameters(),
                               torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
        torch::optim::AdamW o2(m2->parameters(),
                               torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
        MlmStepOptions fused, plain;
        fused.clip_norm = plain.clip_norm = 0.5;  // small enough to clip
        plain.fused_adamw = false;
        for (int step = 0; step < 4; ++step) {
            const auto batch = tiny_batch(3, 10, config.vocab_size, 100 + step);
            const auto r1 = mlm_train_step(m1, o1, {batch}, fused);
            const auto r2 = mlm_train_step(m2, o2, {batch}, plain);
            EXPECT_NEAR(r1.loss, r2.loss, 1e-5) << preset << " step " << step;
            EXPECT_NEAR(r1.grad_norm, r2.grad_norm, 1e-4 * r2.grad_norm) << preset;
            EXPECT_GT(r2.grad_norm, 0.5) << "the test should exercise clipping";
        }
        auto p1 = m1->named_parameters(), p2 = m2->named_parameters();
        for (const auto& item : p1)
            EXPECT_TRUE(torch::allclose(item.value(), p2[item.key()], 1e-4, 1e-5))
                << preset << " " << item.key();
    }
}

TEST(MlmTrainStep, EveryGradientDefinedForTheHookAndAccumulationWeighted) {
    const auto config = tiny_config("tupe-a");
    torch::manual_seed(5);
    BertForMaskedLM model(config);
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
    MlmStepOptions options;
    options.clip_norm = 0;
    options.fused_adamw = false;
    const auto a = tiny_batch(2, 8, config.vocab_size, 1),
               b = tiny_batch(2, 8, config.vocab_size, 2);
    // Gradients seen by the hook for the two micro-batches together ...
    std::vector<torch::Tensor> seen;
    options.after_backward = [&] {
        for (const auto& p : model->parameters()) {
            ASSERT_TRUE(p.grad().defined());
            seen.push_back(p.grad().clone());
        }
    };
    const auto snapshot = [&] {
        std::vector<torch::Tensor> v;
        for (const auto& p : model->parameters()) v.push_back(p.detach().clone());
        return v;
    };
    const auto before = snapshot();
    mlm_train_step(model, opt, {a, b}, options);
    // ... equal the gradient of the loss over all masked tokens of both, computed directly.
    {
        torch::NoGradGuard g;
        auto params = model->parameters();
        for (size_t i = 0; i < params.size(); ++i) params[i].copy_(before[i]);
    }
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    auto ids = torch::cat({a.input_ids, b.input_ids}), labels = torch::cat({a.labels, b.labels});
    model->forward(ids, torch::ones_like(ids), labels).loss.backward();
    auto params = model->parameters();
    ASSERT_EQ(seen.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
        auto expected =
            params[i].grad().defined() ? params[i].grad() : torch::zeros_like(params[i]);
        EXPECT_TRUE(torch::allclose(seen[i], expected, 1e-4, 1e-6)) << i;
    }
}
