// The encoder's normalisation layer: LayerNorm (Ba et al. 2016; with its bias, BERT's, exactly
// torch::nn::LayerNorm), with or without its bias (ModelConfig::norm, ::bias), or RMSNorm
// (Zhang & Sennrich 2019), a scale without a bias. Parameters keep torch's names, `weight` and
// `bias`, so checkpoints from before it load unchanged. Shapes: (..., C) -> (..., C).
#pragma once

#include <torch/torch.h>

#include "engine/config.h"

namespace engine {

struct NormImpl : torch::nn::Module {
    /// Over the last dimension, of `size` features; the kind, eps and bias from `config`.
    NormImpl(int64_t size, const ModelConfig& config)
        : rms(config.norm == "rmsnorm"), eps(config.layer_norm_eps) {
        TORCH_CHECK(config.norm == "layernorm" || config.norm == "rmsnorm",
                    "model.norm must be layernorm or rmsnorm, got ", config.norm);
        // Unit gain, zero bias, as torch::nn::LayerNorm: no random draw, so models built
        // before the norm was this module keep their initialisation.
        weight = register_parameter("weight", torch::ones({size}));
        // RMSNorm is a scale only (Zhang & Sennrich 2019, Eq. 4), whatever model.bias says.
        if (config.bias && !rms) bias = register_parameter("bias", torch::zeros({size}));
    }

    torch::Tensor forward(const torch::Tensor& x) {
        if (!rms) return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
        // RMSNorm (Zhang & Sennrich 2019, Eq. 4): x / RMS(x) * g, RMS(x) = sqrt(mean(x^2) + eps).
        return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
    }

    torch::Tensor weight;  ///< (C), the gain
    torch::Tensor bias;    ///< (C), LayerNorm's shift; undefined for RMSNorm or model.bias false
    bool rms;              ///< RMSNorm: no centring
    double eps;
};
TORCH_MODULE(Norm);

}  // namespace engine
