// Torch-side helpers shared by the engine and analysis tests, header-only so that the support
// library stays torch-free (the app's tests link it): re-drawing a tiny model's weights with a
// large spread, so that positional terms are far from zero and a wrong index or scale shows.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

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

}  // namespace test_support
