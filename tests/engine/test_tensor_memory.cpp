// The counting CPU allocator (engine/tensor_memory.h) and, with it, the step-memory estimate
// (engine::estimate_step_memory, core/engine/cost_model.h) against the tensor bytes a real
// training step keeps alive at its peak, for every preset.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <utility>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/cost_model.h"
#include "engine/tensor_memory.h"
#include "engine/train_step.h"

using namespace engine;

TEST(TensorMemory, CountsEveryAllocationAndItsRelease) {
    track_tensor_memory();
    const int64_t before = live_tensor_bytes();
    reset_peak_tensor_bytes();
    {
        auto a = torch::empty({1000}, torch::kFloat);
        EXPECT_EQ(live_tensor_bytes() - before, 4000);
        auto b = torch::empty({10, 10}, torch::kDouble);
        EXPECT_EQ(live_tensor_bytes() - before, 4800);
        auto c = a.clone();  // an op's output is counted like any other tensor
        EXPECT_EQ(live_tensor_bytes() - before, 8800);
    }
    EXPECT_EQ(live_tensor_bytes(), before);
    EXPECT_EQ(peak_tensor_bytes() - before, 8800);
    reset_peak_tensor_bytes();
    EXPECT_EQ(peak_tensor_bytes(), live_tensor_bytes());
    track_tensor_memory();  // a second install changes nothing
    auto d = torch::zeros({256}, torch::kFloat);
    EXPECT_EQ(live_tensor_bytes() - before, 1024);
}

namespace {

MlmTensors memory_test_batch(int64_t B, int64_t T, int64_t vocab) {
    torch::manual_seed(1);
    MlmTensors b;
    b.input_ids = torch::randint(5, vocab, {B, T}, torch::kLong);
    b.input_ids.select(1, 0).fill_(2);
    auto chosen = torch::rand({B, T}) < 0.15;
    chosen.select(1, 0).fill_(false);
    b.labels = torch::where(chosen, b.input_ids, torch::full_like(b.input_ids, -100));
    b.attention_mask = torch::ones({B, T}, torch::kLong);
    b.real_tokens = B * T;
    b.masked_tokens = chosen.sum().item<int64_t>();
    return b;
}

}  // namespace

// `tupe bench` prints the estimate beside the measured RSS; here the estimate is held to the
// counted peak of tensor storage (parameters, gradients, AdamW's moments, activations and the
// step's transients) over two training steps, at a length where the (T, T) terms matter.
TEST(StepMemoryEstimate, WithinTwentyPercentOfTheCountedPeakForEveryPreset) {
    track_tensor_memory();
    // Two shapes: the MLM head and the weights weigh most at (4, 128), the (T, T) terms at
    // (2, 256).
    for (const auto& [B, T] : {std::pair<int64_t, int64_t>{4, 128}, {1, 256}})
        for (const auto& preset : model_presets()) {
            const int64_t V = 2000;
            SCOPED_TRACE(preset + " at B " + std::to_string(B) + ", T " + std::to_string(T));
            ModelConfig config = make_model_config(preset, "tiny");
            config.hidden_size = 64, config.num_attention_heads = 4, config.intermediate_size = 256;
            config.vocab_size = V;
            config.max_position_embeddings = T;
            const MlmTensors batch = memory_test_batch(B, T, V);
            const int64_t base = live_tensor_bytes();
            reset_peak_tensor_bytes();
            int64_t peak = 0, params = 0;
            {
                torch::manual_seed(1);
                BertForMaskedLM model(config);
                model->train();
                torch::optim::AdamW optimizer(model->parameters(),
                                              torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
                params = parameter_groups(*model)["total"];
                MlmStepOptions options;
                for (int i = 0; i < 2; ++i)
                    ASSERT_TRUE(mlm_train_step(model, optimizer, {batch}, options).finite);
                peak = peak_tensor_bytes() - base;
            }
            const StepMemory est =
                estimate_step_memory(config, params, B, T, batch.masked_tokens, /*bf16=*/false);
            const double ratio = static_cast<double>(peak) / est.total();
            std::printf("%-14s counted %8.2f MiB  estimate %8.2f MiB  ratio %.3f\n", preset.c_str(),
                        peak / 1048576.0, est.total() / 1048576.0, ratio);
            EXPECT_GT(ratio, 0.8);
            EXPECT_LT(ratio, 1.2);
        }
}
