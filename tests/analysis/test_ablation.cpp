// Tests of causal positional ablation (engine::PositionAblation, analysis/ablation.h) on tiny
// randomised float64 models, where the answer is known without the hook: an ablated head's
// logits differ from the intact ones by exactly its static bias and no other head moves;
// removing TUPE's term everywhere is the model with its positional projections set to zero;
// RoPE without its rotation is the same weights run as NoPE; a model without positions has a
// change of exactly 0 everywhere; an input table has only a whole-model row. Then the probe's
// errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "analysis/ablation.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "engine/position.h"
#include "support/test_support.h"
#include "support/torch_support.h"

namespace {

using Mode = engine::PositionAblation::Mode;
constexpr int64_t kAblationPositions = 64;
constexpr int64_t kAblationLength = 20;

engine::BertForMaskedLM ablation_model(const std::string& preset, uint64_t seed = 5) {
    return test_support::randomized_word_model(preset, kAblationPositions, seed);
}

std::vector<int64_t> ablation_stream() { return test_support::word_stream(300, 23, false); }

analysis::AblationReport ablate(engine::BertForMaskedLM& model, Mode mode = Mode::kZero,
                                bool with_share = false) {
    analysis::AblationOptions o;
    o.length = kAblationLength;
    o.windows = 6;
    o.batch_size = 4;  // two batches
    o.mode = mode;
    o.resamples = 200;
    o.with_share = with_share;
    o.source = "test-stream";
    return analysis::positional_ablation(model, ablation_stream(), test_support::word_vocab(), o);
}

// Layer `layer`'s attention logits (B, H, T, T) on a fixed batch, with the model as it is set.
torch::Tensor layer_logits(engine::BertForMaskedLM& model, size_t layer) {
    torch::NoGradGuard no_grad;
    auto ids = torch::tensor(std::vector<int64_t>{2, 5, 6, 7, 8, 9, 10, 11, 12, 3}).view({1, 10});
    auto out = model->bert->forward(ids, {}, {}, true);
    return out.attention_logits.at(layer);
}

}  // namespace

TEST(PositionAblation, AnAblatedHeadLosesExactlyItsBiasAndNoOtherHeadMoves) {
    for (const std::string preset : {"tupe-a", "t5", "alibi"}) {
        SCOPED_TRACE(preset);
        auto model = ablation_model(preset);
        auto& position = *model->bert->position;
        const auto bias = position.forward(10).for_layer(1).bias;  // (H, T, T)
        ASSERT_TRUE(bias.defined());
        const auto intact = layer_logits(model, 1);
        engine::PositionAblation a;
        a.mode = Mode::kZero;
        a.layer = 1;
        a.head = 1;
        position.set_ablation(a);
        const auto ablated = layer_logits(model, 1);
        const auto layer0 = layer_logits(model, 0);
        position.set_ablation({});
        EXPECT_TRUE(torch::allclose(intact.select(1, 1) - ablated.select(1, 1), bias[1], 0, 1e-10));
        EXPECT_TRUE(torch::equal(intact.select(1, 0), ablated.select(1, 0)));
        EXPECT_TRUE(torch::equal(layer0, layer_logits(model, 0)));  // layer 0 untouched
    }
}

TEST(PositionAblation, RemovingTupesTermEverywhereIsTheModelWithoutItsProjections) {
    auto model = ablation_model("tupe-a");
    const auto r = ablate(model);
    // The same weights with U^Q, U^K and their biases at zero: the untied term, the [CLS]
    // reset included, is 0 everywhere.
    auto zeroed = ablation_model("tupe-a");
    {
        torch::NoGradGuard no_grad;
        for (auto& p : zeroed->bert->position->projections->named_parameters()) p.value().zero_();
    }
    const auto z = ablate(zeroed);
    ASSERT_EQ(r.rows.back().layer, -1);
    EXPECT_NEAR(r.rows.back().loss, z.loss, 1e-10);
    EXPECT_NE(r.loss, z.loss);
    EXPECT_EQ(r.rows.size(), 2u * 2u + 1u);  // tiny16: 2 layers x 2 heads, then the whole model
    EXPECT_NE(r.scope.find("per head"), std::string::npos) << r.scope;
}

TEST(PositionAblation, RopeWithoutItsRotationIsTheSameWeightsRunAsNope) {
    auto rope = ablation_model("rope");
    auto nope = ablation_model("nope");
    {
        // RoPE has no positional parameters: every parameter has a twin in the NoPE model.
        torch::NoGradGuard no_grad;
        auto from = rope->named_parameters();
        for (auto& p : nope->named_parameters()) p.value().copy_(from[p.key()]);
    }
    const auto r = ablate(rope);
    const auto n = ablate(nope);
    EXPECT_NEAR(r.rows.back().loss, n.loss, 1e-10);
    EXPECT_GT(std::abs(r.rows.back().delta_loss), 1e-6);
    // The shuffled rotation is a rotation at other positions: not the same as none.
    const auto s = ablate(rope, Mode::kShuffle);
    EXPECT_GT(std::abs(s.rows.back().loss - n.loss), 1e-8);
}

TEST(PositionAblation, WithoutPositionsEveryChangeIsExactlyZero) {
    auto model = ablation_model("nope");
    for (Mode mode : {Mode::kZero, Mode::kMean, Mode::kShuffle}) {
        const auto r = ablate(model, mode);
        EXPECT_EQ(r.scope, "no positional terms: every change is 0");
        ASSERT_EQ(r.rows.size(), 5u);
        for (const auto& row : r.rows) {
            EXPECT_EQ(row.delta_loss, 0.0) << row.layer << " " << row.head;
            EXPECT_EQ(row.ci_lo, 0.0);
            EXPECT_EQ(row.ci_hi, 0.0);
        }
    }
}

TEST(PositionAblation, AnInputTableHasOnlyAWholeModelRowInEveryMode) {
    auto model = ablation_model("bert-a");
    for (Mode mode : {Mode::kZero, Mode::kMean, Mode::kShuffle}) {
        const auto r = ablate(model, mode, /*with_share=*/true);
        ASSERT_EQ(r.rows.size(), 1u);
        EXPECT_EQ(r.rows[0].head, -1);
        EXPECT_GT(std::abs(r.rows[0].delta_loss), 1e-8) << engine::ablation_mode_name(mode);
        EXPECT_LE(r.rows[0].ci_lo, r.rows[0].delta_loss);
        EXPECT_GE(r.rows[0].ci_hi, r.rows[0].delta_loss);
        EXPECT_TRUE(std::isnan(r.share_use_spearman));
        EXPECT_NE(r.scope.find("whole model only"), std::string::npos);
    }
    // Zero and mean are different ablations of a table (its mean row is not zero).
    EXPECT_NE(ablate(model, Mode::kZero).rows[0].loss, ablate(model, Mode::kMean).rows[0].loss);
}

TEST(PositionAblation, EveryPresetRunsAndLeavesTheModelAsItWas) {
    const auto stream = ablation_stream();
    for (const auto& preset : engine::model_presets()) {
        SCOPED_TRACE(preset);
        auto model = ablation_model(preset);
        const auto before = ablate(model, Mode::kShuffle, /*with_share=*/true);
        EXPECT_EQ(model->bert->position->ablation().mode, Mode::kOff);
        EXPECT_FALSE(model->is_training()) << "the fixture's eval mode is kept";
        const auto again = ablate(model, Mode::kShuffle);
        EXPECT_EQ(before.loss, again.loss);  // nothing left switched on
        for (const auto& row : before.rows) {
            EXPECT_TRUE(std::isfinite(row.delta_loss));
            EXPECT_LE(row.ci_lo, row.ci_hi);
            if (row.layer >= 0) EXPECT_TRUE(std::isfinite(row.positional_share));
        }
        EXPECT_GT(before.masked, 0);
    }
}

TEST(PositionAblation, RejectsLayersAndHeadsOutsideTheModel) {
    auto model = ablation_model("tupe-a");
    engine::PositionAblation a;
    a.mode = Mode::kZero;
    a.layer = 2;
    EXPECT_THROW(model->bert->position->set_ablation(a), std::invalid_argument);
    a.layer = 0;
    a.head = -2;
    EXPECT_THROW(model->bert->position->set_ablation(a), std::invalid_argument);
    EXPECT_EQ(engine::parse_ablation_mode("shuffle"), Mode::kShuffle);
    EXPECT_THROW(engine::parse_ablation_mode("random"), std::invalid_argument);
}

TEST(PositionAblation, ShortStreamIsAnInputErrorNamingTheSource) {
    auto model = ablation_model("tupe-a");
    analysis::AblationOptions o;
    o.length = kAblationLength;
    o.source = "short.txt";
    try {
        analysis::positional_ablation(model, test_support::word_stream(10, 1, false),
                                      test_support::word_vocab(), o);
        FAIL() << "expected InputError";
    } catch (const engine::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("short.txt"), std::string::npos) << e.what();
    }
}

namespace {

analysis::AblationReport patch(engine::BertForMaskedLM& model, engine::BertForMaskedLM& donor) {
    analysis::AblationOptions o;
    o.length = kAblationLength;
    o.windows = 6;
    o.batch_size = 4;
    o.mode = Mode::kPatch;
    o.patch_source = donor->bert->position.ptr();
    o.resamples = 200;
    o.with_share = false;
    o.source = "test-stream";
    return analysis::positional_ablation(model, ablation_stream(), test_support::word_vocab(), o);
}

}  // namespace

TEST(PositionPatching, FromAnIdenticalCopyChangesNothing) {
    for (const std::string preset : {"tupe-a", "t5", "rope", "bert-r", "bert-a"}) {
        SCOPED_TRACE(preset);
        auto model = ablation_model(preset), copy = ablation_model(preset);
        const auto r = patch(model, copy);
        EXPECT_EQ(r.mode, "patch");
        ASSERT_FALSE(r.rows.empty());
        for (const auto& row : r.rows)
            EXPECT_EQ(row.delta_loss, 0.0) << row.layer << "/" << row.head;
        // The model's own switch is restored and holds no donor.
        EXPECT_EQ(model->bert->position->ablation().mode, Mode::kOff);
    }
}

TEST(PositionPatching, FromACopyWithZeroPositionalParametersIsTheZeroAblation) {
    for (const std::string preset : {"tupe-a", "t5", "tupe-r"}) {
        SCOPED_TRACE(preset);
        auto model = ablation_model(preset), zeroed = ablation_model(preset);
        {
            torch::NoGradGuard no_grad;
            for (auto& p : zeroed->bert->position->parameters()) p.zero_();
        }
        const auto patched = patch(model, zeroed);
        const auto zero = ablate(model, Mode::kZero);
        ASSERT_EQ(patched.rows.size(), zero.rows.size());
        for (size_t k = 0; k < zero.rows.size(); ++k) {
            EXPECT_NEAR(patched.rows[k].loss, zero.rows[k].loss, 1e-12)
                << zero.rows[k].layer << "/" << zero.rows[k].head;
            EXPECT_NE(zero.rows[k].delta_loss, 0.0);  // the ablation does something
        }
    }
}

TEST(PositionPatching, ADifferentSchemeOrShapeIsRefusedNamingWhatDiffers) {
    auto model = ablation_model("t5");
    auto alibi = ablation_model("alibi");
    auto shorter = test_support::randomized_word_model("t5", kAblationPositions / 2, 5);
    auto& position = *model->bert->position;
    try {
        position.set_patch_source(alibi->bert->position.ptr());
        ADD_FAILURE() << "expected a refusal";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("positions"), std::string::npos) << e.what();
    }
    try {
        position.set_patch_source(shorter->bert->position.ptr());
        ADD_FAILURE() << "expected a refusal";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos)
            << e.what();
    }
    engine::PositionAblation a;
    a.mode = Mode::kPatch;
    EXPECT_THROW(position.set_ablation(a), std::invalid_argument);  // no donor
}
