// Torch-side helpers shared by the engine and analysis tests, header-only so that the support
// library stays torch-free (the app's tests link it): re-drawing a tiny model's weights with a
// large spread, so that positional terms are far from zero and a wrong index or scale shows;
// and the analysis tests' hand-made word vocabulary, token streams over it, and a randomised
// float64 model of it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"

namespace test_support {

/// Re-draws every parameter of `module` from N(0, std^2) after torch::manual_seed(seed), without
/// autograd; with `unit_layer_norm_gains`, LayerNorm gains ("LayerNorm.weight", TUPE's
/// "pos_ln.weight") are shifted by +1 so that they stay around 1.
inline void randomize_parameters(torch::nn::Module& module, uint64_t seed, double std,
                                 bool unit_layer_norm_gains) {
    torch::manual_seed(seed);
    torch::NoGradGuard no_grad;
    for (auto& item : module.named_parameters()) {
        item.value().normal_(0.0, std);
        if (unit_layer_norm_gains && (item.key().find("LayerNorm.weight") != std::string::npos ||
                                      item.key().find("pos_ln.weight") != std::string::npos))
            item.value().add_(1.0);
    }
}

/// The five specials and 15 words (ids 5..19) of the analysis tests.
inline engine::Vocab word_vocab() {
    return engine::Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
                                       "sat",   "on",    "mat",   ".",     "dog",    "ran", "a",
                                       "##s",   "red",   "old",   "saw",   "bird",   "near"});
}

/// n ids of word_vocab()'s words (5..19) from std::mt19937(seed): uniform; or, with `skewed`,
/// 5 + a * b / 14 for two uniform draws a, b in 0..14 (towards the low ids, so that the unigram
/// floor is below log 15) and an [UNK] (id 1, never masked) about once in 100 tokens.
inline std::vector<int64_t> word_stream(int64_t n, unsigned seed, bool skewed) {
    std::mt19937 rng(seed);
    std::vector<int64_t> out;
    for (int64_t i = 0; i < n; ++i) {
        if (!skewed) {
            out.push_back(5 + static_cast<int64_t>(rng() % 15));
            continue;
        }
        const auto a = static_cast<int64_t>(rng() % 15);
        const auto b = static_cast<int64_t>(rng() % 15);
        out.push_back(rng() % 100 == 0 ? 1 : 5 + a * b / 14);
    }
    return out;
}

/// A tiny model of word_vocab() (tiny16_config without dropout, `max_positions` positions) with
/// every parameter re-drawn from N(0, 0.3^2) (randomize_parameters, LayerNorm gains around 1),
/// in float64 (so that e.g. RoPE's rotations cancel to rounding), in eval mode.
inline engine::BertForMaskedLM randomized_word_model(const std::string& preset,
                                                     int64_t max_positions, uint64_t seed) {
    engine::BertForMaskedLM model(
        tiny16_config(preset, word_vocab().size(), max_positions, /*dropout=*/false));
    randomize_parameters(*model, seed, 0.3, true);
    model->to(torch::kDouble);
    model->eval();
    return model;
}

}  // namespace test_support
