"""The encoder's normalisation layer, as engine/norm.h: LayerNorm with or without its bias
(model.norm, model.bias), or RMSNorm, x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019,
Eq. 4), eps = layer_norm_eps. Shapes: (..., C) -> (..., C).
"""

import torch
from torch import nn
from torch.nn import functional as F


class TupeNorm(nn.Module):
    def __init__(self, size, config):
        super().__init__()
        self.rms = config.wb("norm") == "rmsnorm"
        self.eps = config.layer_norm_eps
        self.weight = nn.Parameter(torch.ones(size))
        # RMSNorm is a scale only, whatever model.bias says.
        self.bias = nn.Parameter(torch.zeros(size)) if config.wb("bias") and not self.rms else None

    def forward(self, x):
        if not self.rms:
            return F.layer_norm(x, (self.weight.shape[0],), self.weight, self.bias, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
