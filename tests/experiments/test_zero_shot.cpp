// Tests of the zero-shot pair scorer (experiments/zero_shot.h): the batched pseudo-log-likelihood
// against one masked forward pass per wordpiece, its independence of the batching, and a model
// blind to order (NoPE) tying every pair, so that the pair tasks score it exactly at chance.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"
#include "experiments/zero_shot.h"
#include "support/torch_support.h"

namespace {

using test_support::randomize_parameters;
using test_support::tiny_config;
using test_support::word_vocab;

const std::vector<std::string> kTexts = {"the cat sat on the mat .",
                                         "a dog ran",
                                         "the old red bird saw a cat near the mat .",
                                         "cats",
                                         "",
                                         "the dog sat near a bird"};

// The reference: one forward pass per masked wordpiece, the log-probability of the original.
double pll_one_by_one(engine::BertForMaskedLM& model, const engine::WordPieceTokenizer& tok,
                      const std::string& text) {
    torch::NoGradGuard no_grad;
    const auto ids = tok.encode(text, {}, 64).input_ids;
    double total = 0;
    for (size_t p = 1; p + 1 < ids.size(); ++p) {
        auto input = torch::tensor(ids).unsqueeze(0);
        auto labels = torch::full_like(input, -100);
        input[0][static_cast<int64_t>(p)] = tok.vocab().mask_id();
        labels[0][static_cast<int64_t>(p)] = ids[p];
        auto out = model->forward(input, torch::ones_like(input), labels);
        total += torch::log_softmax(out.logits, -1)[0][ids[p]].item<double>();
    }
    return total;
}

engine::BertForMaskedLM random_model(const std::string& preset, uint64_t seed) {
    engine::BertForMaskedLM model(tiny_config(preset, word_vocab().size()));
    randomize_parameters(*model, seed, 0.3, true);
    model->eval();
    return model;
}

TEST(ZeroShot, PseudoLogLikelihoodIsTheSumOfOneMaskedPassPerWordpiece) {
    engine::WordPieceTokenizer tok(word_vocab());
    auto model = random_model("tupe-a", 3);
    // A budget of 64 tokens splits the texts over several batches of several widths.
    for (const int64_t budget : {int64_t{16384}, int64_t{64}}) {
        const auto pll = experiments::pseudo_log_likelihoods(model, tok, kTexts, 64, budget);
        ASSERT_EQ(pll.size(), kTexts.size());
        for (size_t i = 0; i < kTexts.size(); ++i)
            EXPECT_NEAR(pll[i], pll_one_by_one(model, tok, kTexts[i]), 1e-4)
                << "text " << i << ", budget " << budget;
    }
    EXPECT_EQ(experiments::pseudo_log_likelihoods(model, tok, {""}, 64).front(), 0.0);
    // "cats" is two wordpieces (cat ##s): two terms, each a log-probability.
    const double two = experiments::pseudo_log_likelihoods(model, tok, {"cats"}, 64).front();
    EXPECT_LT(two, 0.0);
    EXPECT_GT(two, -2 * std::log(static_cast<double>(word_vocab().size())) * 10);
}

TEST(ZeroShot, AModelBlindToOrderTiesEveryPairAndScoresExactlyChance) {
    engine::WordPieceTokenizer tok(word_vocab());
    auto nope = random_model("nope", 5);
    auto bert = random_model("bert-a", 5);
    const std::vector<std::string> a = {"the cat sat on the mat", "a dog ran near the bird",
                                        "the old bird saw a red cat", "cat the sat"};
    const std::vector<std::string> b = {"cat the sat on the mat", "a dog near ran the bird",
                                        "the bird old saw a cat red", "the cat sat"};
    const auto nope_a = experiments::pseudo_log_likelihoods(nope, tok, a, 64);
    const auto nope_b = experiments::pseudo_log_likelihoods(nope, tok, b, 64);
    EXPECT_EQ(experiments::prefer_pairs(nope_a, nope_b), std::vector<double>(a.size(), 0.0));
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(nope_a[i], nope_b[i], 1e-4) << i;
    // A model with positions tells some of the same pairs apart.
    const auto bert_a = experiments::pseudo_log_likelihoods(bert, tok, a, 64);
    const auto bert_b = experiments::pseudo_log_likelihoods(bert, tok, b, 64);
    int differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += std::abs(bert_a[i] - bert_b[i]) > 1e-3;
    EXPECT_GE(differ, 3);
    EXPECT_EQ(experiments::prefer_pairs({-10.0, -10.0, -10.0}, {-9.0, -11.0, -10.0 + 1e-9}),
              (std::vector<double>{1.0, 0.0, 0.0}));
    EXPECT_THROW(experiments::prefer_pairs({1.0}, {}), std::invalid_argument);
}

}  // namespace
