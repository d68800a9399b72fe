// Tests of the MLM head fitted on a frozen encoder (analysis/mlm_head_fit.h): on a text where
// a word's place in its window fixes it, a head fitted on a random BERT-A's hidden states (its
// learned position table at the input) predicts held-back masked words far better than their
// unigram frequencies,
// while the encoder and the word embeddings stay bit for bit; the fit is reproducible; a
// stream too short for its ten windows is refused naming its source.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/mlm_head_fit.h"
#include "engine/bert.h"
#include "engine/errors.h"
#include "support/torch_support.h"

namespace {

constexpr int64_t kFitLength = 20, kFitWindow = kFitLength - 2;

// word_vocab()'s words (ids 5-19) with period kFitWindow: each window (cut every kFitWindow tokens)
// holds the same word at the same place, so a masked token's position fixes it.
std::vector<int64_t> cycle_stream(int64_t n) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(5 + (i % kFitWindow) % 15);
    return out;
}

analysis::MlmHeadFitOptions fit_options() {
    analysis::MlmHeadFitOptions o;
    o.length = kFitLength;
    o.windows = 100;
    o.steps = 600;
    o.batch_rows = 64;
    o.lr = 1e-2;
    o.eval_every = 25;
    o.source = "cycle";
    return o;
}

std::vector<std::pair<std::string, torch::Tensor>> copy_state(torch::nn::Module& m) {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value().clone());
    return out;
}

TEST(MlmHeadFit, LearnsWhatTheContextFixesAndLeavesTheEncoderAlone) {
    auto model = test_support::randomized_word_model("bert-a", 64, 3);
    const auto before = copy_state(*model);
    const analysis::MlmHeadFit fit = analysis::fit_mlm_head(
        model, cycle_stream(100 * kFitWindow), test_support::word_vocab(), fit_options());
    EXPECT_EQ(fit.windows, 100);
    EXPECT_GT(fit.held_back, 0);
    EXPECT_GT(fit.masked, fit.held_back);
    // The start is the unigram model of the 15 words (3 of them twice as frequent): about
    // 2.65 nats.
    EXPECT_NEAR(fit.start_loss, 2.65, 0.2);
    // The random encoder's state at a [MASK] carries its position, which fixes the word.
    EXPECT_LT(fit.end_loss, 0.5 * fit.start_loss) << fit.end_loss;
    EXPECT_GT(fit.best_step, 0);
    EXPECT_FALSE(model->is_training());
    size_t head_changed = 0;
    for (const auto& [name, tensor] : before) {
        const torch::Tensor& now = model->named_parameters()[name];
        if (name.rfind("cls.", 0) == 0)
            head_changed += torch::equal(now, tensor) ? 0 : 1;
        else
            EXPECT_TRUE(torch::equal(now, tensor)) << name << " changed";
    }
    EXPECT_GE(head_changed, 3u);  // transform.dense, its norm, the bias

    // The same seed fits the same head.
    auto again = test_support::randomized_word_model("bert-a", 64, 3);
    const analysis::MlmHeadFit second = analysis::fit_mlm_head(
        again, cycle_stream(100 * kFitWindow), test_support::word_vocab(), fit_options());
    EXPECT_EQ(second.end_loss, fit.end_loss);
    EXPECT_EQ(second.best_step, fit.best_step);
    EXPECT_TRUE(torch::equal(again->cls->predictions->bias, model->cls->predictions->bias));
}

TEST(MlmHeadFit, RefusesAStreamOfFewerThanTenWindows) {
    auto model = test_support::randomized_word_model("bert-a", 64, 3);
    try {
        analysis::fit_mlm_head(model, cycle_stream(9 * kFitWindow + 5), test_support::word_vocab(),
                               fit_options());
        FAIL() << "no error";
    } catch (const engine::InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("cycle"), std::string::npos) << what;
        EXPECT_NE(what.find("needs 10"), std::string::npos) << what;
    }
}

}  // namespace
