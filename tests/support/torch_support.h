// Torch-side helpers shared by the engine and analysis tests, header-only so that the support
// library stays torch-free (the app's tests link it): re-drawing a tiny model's weights with a
// large spread, so that positional terms are far from zero and a wrong index or scale shows;
// and the analysis tests' hand-made word vocabulary, token streams over it, and a randomised
// float64 model of it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
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

/// A tiny model's masked-LM loss and every parameter's gradient with a code-path switch on and
/// off: for `on` in {true, false}, `set(on)` before the forward, `restore()` after it (before the
/// backward, which must take the path the forward chose), `check(loss, on)` on the loss (e.g.
/// that the fused node is in its graph exactly when on); then the two losses and each gradient
/// (defined in both or neither) must agree to 1e-5. `label` names the case in failures.
inline void expect_switch_keeps_loss_and_gradients(
    engine::BertForMaskedLM& m, const torch::Tensor& ids, const torch::Tensor& mask,
    const torch::Tensor& labels, const std::function<void(bool)>& set,
    const std::function<void()>& restore,
    const std::function<void(const torch::Tensor&, bool)>& check, const std::string& label) {
    std::vector<torch::Tensor> losses;
    std::vector<std::vector<torch::Tensor>> grads;
    for (bool on : {true, false}) {
        set(on);
        m->zero_grad();
        auto out = m->forward(ids, mask, labels);
        restore();
        check(out.loss, on);
        out.loss.backward();
        losses.push_back(out.loss.detach());
        grads.emplace_back();
        for (auto& p : m->parameters())
            grads.back().push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    }
    EXPECT_LE((losses[0] - losses[1]).abs().max().item<double>(), 1e-5) << label;
    const auto names = m->named_parameters().keys();
    for (size_t i = 0; i < grads[0].size(); ++i) {
        ASSERT_EQ(grads[0][i].defined(), grads[1][i].defined()) << label << " " << names[i];
        if (grads[0][i].defined())
            EXPECT_LE((grads[0][i] - grads[1][i]).abs().max().item<double>(), 1e-5)
                << label << " " << names[i];
    }
}

}  // namespace test_support
