"""KERPLE (Chi et al., NeurIPS 2022, and their GPT-NeoX code), symmetric for an encoder, as
engine/src/schemes/kerple.cpp: with d = |p_i - p_j| and two learned scalars per head and layer
group, the log kernel -r1 ln(1 + r2 d) or the power kernel -r1 d^r2 (0 < r2 <= 2),
r1, r2 >= 0.01; with the [CLS] reset, d = 0 on [CLS]'s row and column.
Shapes: kerple_r1, kerple_r2 (G, H); (T) -> (H, T, T).
"""

import torch
from torch import nn

from .scheme_module import SchemeModule, add_bias

KERPLE_EPS = 1e-2
KERPLE_MAX_POWER = 2.0


class KerpleBias(SchemeModule):
    def __init__(self, owner, power):
        g, h = owner.layer_groups(), owner.config.num_attention_heads
        self.power = power
        self.untie_cls = owner.config.wb("untie_cls")
        owner.kerple_r1 = nn.Parameter(torch.full((g, h), 1.0))
        owner.kerple_r2 = nn.Parameter(torch.full((g, h), 1.0))
        self.owner = owner

    def bias(self, positions, group):
        r1_all, r2_all = self.owner.kerple_r1, self.owner.kerple_r2
        h = r1_all.shape[1]
        r1 = r1_all[group].clamp_min(KERPLE_EPS).view(h, 1, 1)
        x2 = r2_all[group]
        r2 = x2.clamp(KERPLE_EPS, KERPLE_MAX_POWER) if self.power else x2.clamp_min(KERPLE_EPS)
        r2 = r2.view(h, 1, 1)
        t = positions.shape[0]
        p = positions.to(r1_all.device, r1_all.dtype)
        dist = (p.view(1, t) - p.view(t, 1)).abs()  # (T, T)
        if self.untie_cls:
            dist[0, :] = 0
            dist[:, 0] = 0
        if not self.power:
            return -r1 * torch.log1p(r2 * dist.unsqueeze(0))
        # d^r2 as exp(r2 ln d) where d > 0 (d >= 1 there), 0 at d = 0.
        d = dist.unsqueeze(0)
        pw = torch.exp(r2 * torch.log(d.clamp_min(1.0)))
        return -r1 * torch.where(d > 0, pw, torch.zeros_like(pw))

    def contribute(self, positions, dtype, terms):
        for g, layer in enumerate(terms.layers):
            add_bias(layer, self.bias(positions, g))
