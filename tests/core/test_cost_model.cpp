// The analytic step cost (engine/cost_model.h) against hand-computed values for a tiny config:
// L = 2 layers, C = 8 hidden, H = 2 heads, F = 16 FFN, V = 10 vocabulary, on B = 1 sequence of
// T = 4 tokens with M = 1 masked position (N = B*T = 4, S = B*H*T*T = 32). Per scheme the
// positional FLOPs equal the derivation written in each test; NoPE costs the least; memory
// scales with batch and dtype as the formula says.
#include <gtest/gtest.h>

#include <string>

#include "engine/config.h"
#include "engine/cost_model.h"

namespace {

engine::ModelConfig tiny_cost_config(const std::string& preset) {
    engine::ModelConfig c = engine::make_model_config(preset, "tiny");
    c.num_hidden_layers = 2;
    c.hidden_size = 8;
    c.num_attention_heads = 2;
    c.intermediate_size = 16;
    c.vocab_size = 10;
    c.max_position_embeddings = 4;
    return c;
}

// Encoder, per layer: QKV 2*N*C*3C = 2*4*8*24 = 1536, scores + context 2*2*N*T*C =
// 4*4*4*8 = 512, attention output 2*N*C*C = 2*4*64 = 512, FFN 2*2*N*C*F = 4*4*8*16 = 2048;
// 4608 per layer, 9216 for L = 2.
constexpr double kTinyEncoder = 9216;
// MLM head at M = 1: transform 2*M*C*C = 128, decoder 2*M*C*V = 2*8*10 = 160.
constexpr double kTinyHead = 288;

engine::StepFlops tiny_flops(const engine::ModelConfig& c) {
    return engine::count_step_flops(c, 1, 4, 1);
}

}  // namespace

TEST(CostModel, EncoderAndHeadMatchHandCount) {
    const engine::StepFlops f = tiny_flops(tiny_cost_config("bert-a"));
    EXPECT_DOUBLE_EQ(f.encoder, kTinyEncoder);
    EXPECT_DOUBLE_EQ(f.head, kTinyHead);
    EXPECT_DOUBLE_EQ(f.positional, 0.0);  // a learned input table is a look-up
    EXPECT_DOUBLE_EQ(f.forward(), 9504.0);
    EXPECT_DOUBLE_EQ(f.step(), 3 * 9504.0);
}

TEST(CostModel, TupeUntiedProjectionsAddHandDerivedFlops) {
    // p'U^Q and p'U^K over T+1 = 5 rows: 2*2*5*8*8 = 1280; the (H, 5, 5) correlations
    // 2*5*5*8 = 400; once per forward (shared_pos_term): 1680.
    const engine::StepFlops tupe = tiny_flops(tiny_cost_config("tupe-a"));
    const engine::StepFlops bert = tiny_flops(tiny_cost_config("bert-a"));
    EXPECT_DOUBLE_EQ(tupe.positional, 1680.0);
    EXPECT_DOUBLE_EQ(tupe.step() - bert.step(), 3 * 1680.0);
    EXPECT_DOUBLE_EQ(tupe.encoder, bert.encoder);
    // The same term per layer when it is not shared: 2 * 1680.
    engine::ModelConfig per_layer = tiny_cost_config("tupe-a");
    per_layer.shared_pos_term = false;
    EXPECT_DOUBLE_EQ(tiny_flops(per_layer).positional, 3360.0);
}

TEST(CostModel, BertAdOffsetsPerLayerGroup) {
    // p'U^Q and p'U^K over T = 4 rows: 2*2*4*8*8 = 1024 per group; bert-ad has one per layer.
    const engine::ModelConfig c = tiny_cost_config("bert-ad");
    ASSERT_FALSE(c.shared_pos_term);
    EXPECT_DOUBLE_EQ(tiny_flops(c).positional, 2 * 1024.0);
}

TEST(CostModel, ShawTermsPerLayer) {
    // q.r: 2*N*T*C = 2*4*4*8 = 256 per layer, 512 for L = 2; key-query adds k.r: 1024.
    EXPECT_DOUBLE_EQ(tiny_flops(tiny_cost_config("shaw")).positional, 512.0);
    EXPECT_DOUBLE_EQ(tiny_flops(tiny_cost_config("shaw-kq")).positional, 1024.0);
}

TEST(CostModel, DebertaRelativeProjectionsAndLogits) {
    // k = max_relative_distance = 3, 2k = 6 rows. Q_r, K_r: 2*2*6*8*8 = 1536 per group, two
    // groups (per layer): 3072; c2p + p2c: 2*2*N*2k*C = 4*4*6*8 = 768 per layer: 1536.
    engine::ModelConfig c = tiny_cost_config("deberta");
    c.max_relative_distance = 3;
    EXPECT_DOUBLE_EQ(tiny_flops(c).positional, 3072.0 + 1536.0);
    // k = 0: max_position_embeddings - 1 = 3, the same.
    c.max_relative_distance = 0;
    EXPECT_DOUBLE_EQ(tiny_flops(c).positional, 3072.0 + 1536.0);
}

TEST(CostModel, NopeCostsTheLeast) {
    const double nope = tiny_flops(tiny_cost_config("nope")).step();
    EXPECT_DOUBLE_EQ(nope, 3 * (kTinyEncoder + kTinyHead));
    for (const auto& preset : engine::model_presets())
        EXPECT_LE(nope, tiny_flops(tiny_cost_config(preset)).step()) << preset;
    // Look-ups, biases and rotations are not matmuls: as cheap as NoPE.
    for (const char* preset : {"bert-a", "sinusoidal", "t5", "rope", "alibi"})
        EXPECT_DOUBLE_EQ(tiny_flops(tiny_cost_config(preset)).step(), nope) << preset;
}

TEST(CostModel, FlopsScaleWithBatchAndMaskedTokens) {
    const engine::ModelConfig c = tiny_cost_config("tupe-a");
    const engine::StepFlops one = engine::count_step_flops(c, 1, 4, 1),
                            three = engine::count_step_flops(c, 3, 4, 3);
    EXPECT_DOUBLE_EQ(three.encoder, 3 * one.encoder);
    EXPECT_DOUBLE_EQ(three.head, 3 * one.head);
    EXPECT_DOUBLE_EQ(three.positional, one.positional);  // computed once, not per sequence
}

TEST(CostModel, MemoryMatchesHandCountInFp32) {
    // P = 1000: params 4000, grads 4000, AdamW moments 8000.
    // Per layer (e = 4): (7NC + S + NF)*e = (224 + 32 + 64)*4 = 1280, S*e = 128, NF*e = 256,
    // 2NC*4 = 256, (S + 2NC)*1 = 96: 2016. Embeddings NC*4 + NC = 160. Head: 5MC*4 = 160,
    // MV*e = 40, MV*4 = 40, gradient MV*4 = 40: 280. Backward 2S*4 = 256.
    // Activations 2*2016 + 160 + 280 + 256 = 4728.
    const engine::StepMemory m =
        engine::estimate_step_memory(tiny_cost_config("bert-a"), 1000, 1, 4, 1, false);
    EXPECT_DOUBLE_EQ(m.params, 4000.0);
    EXPECT_DOUBLE_EQ(m.grads, 4000.0);
    EXPECT_DOUBLE_EQ(m.optimizer, 8000.0);
    EXPECT_DOUBLE_EQ(m.activations, 4728.0);
    EXPECT_DOUBLE_EQ(m.total(), 20728.0);
}

TEST(CostModel, MemoryUnderBf16) {
    // bf16 weight copies P*2 = 2000 more. Per layer (e = 2): 640 + 64 + 128 + 256 + 96 = 1184.
    // Head: 160 + 20 + 40 + fp32 copy of the logits 40 + 40 = 300.
    // Activations 2*1184 + 160 + 300 + 256 = 3084.
    const engine::StepMemory m =
        engine::estimate_step_memory(tiny_cost_config("bert-a"), 1000, 1, 4, 1, true);
    EXPECT_DOUBLE_EQ(m.params, 6000.0);
    EXPECT_DOUBLE_EQ(m.activations, 3084.0);
    EXPECT_DOUBLE_EQ(m.total(), 21084.0);
}

TEST(CostModel, MemoryGrowsLinearlyWithBatch) {
    // Every activation term is linear in N, S or M: doubling the batch (and its masked
    // positions) doubles the activations and leaves the weights' share alone.
    const engine::ModelConfig c = tiny_cost_config("tupe-a");
    const engine::StepMemory one = engine::estimate_step_memory(c, 1000, 1, 4, 1, false);
    const engine::StepMemory two = engine::estimate_step_memory(c, 1000, 2, 4, 2, false);
    EXPECT_DOUBLE_EQ(two.activations, 2 * one.activations);
    EXPECT_DOUBLE_EQ(two.params + two.grads + two.optimizer,
                     one.params + one.grads + one.optimizer);
    EXPECT_GT(two.total(), one.total());
    // T = 8 (N = 8, S = 128): per layer (448 + 128 + 128)*4 + 512 + 512 + 512 + 256 = 4608,
    // embeddings 320, head 280, backward 1024: 10840. The S-sized terms grow with T*T, so the
    // sequence-dependent part (without the head's 280) more than doubles: 10560 > 2 * 4448.
    const engine::StepMemory longer = engine::estimate_step_memory(c, 1000, 1, 8, 1, false);
    EXPECT_DOUBLE_EQ(longer.activations, 10840.0);
    EXPECT_GT(longer.activations - 280.0, 2 * (one.activations - 280.0));
}

TEST(CostModel, PositionalTensorsOfTheSchemesThatHaveThem) {
    // B = 1, T = 4 (N = 4), C = 8, H = 2 (d = 4), L = 2 layer groups, fp32; 2k = 2*3 = 6.
    auto positional = [](const std::string& preset) {
        return engine::estimate_step_memory(tiny_cost_config(preset), 1000, 1, 4, 1, false)
            .positional;
    };
    // Shaw: keys 2*T*T*d*4 = 512, q copies 2*N*C*4 = 256.
    EXPECT_DOUBLE_EQ(positional("shaw"), 768.0);
    // shaw-kq: 512 + 3*256 + the second key gradient T*T*d*4 = 256.
    EXPECT_DOUBLE_EQ(positional("shaw-kq"), 1536.0);
    // DeBERTa: per layer 2*B*H*T*2k*4 = 384 and N*C*4 = 128; a gather gradient 192: 1216.
    EXPECT_DOUBLE_EQ(positional("deberta"), 1216.0);
    // FIRE: per group T*T*((32 + H)*4 + 16) = 16*152 = 2432; one hidden gradient 16*128 = 2048.
    EXPECT_DOUBLE_EQ(positional("fire"), 6912.0);
    // KERPLE: per group 2*H*T*T*4 = 256.
    EXPECT_DOUBLE_EQ(positional("kerple-log"), 512.0);
    for (const char* preset : {"bert-a", "tupe-a", "t5", "rope", "alibi"})
        EXPECT_DOUBLE_EQ(positional(preset), 0.0) << preset;
}
