"""FIRE (Li et al., ICLR 2024, and their PyTorch listing), made two-sided for an encoder, as
engine/src/schemes/fire.cpp: the bias f_h(x_ij) of an MLP 1 -> 32 -> H per layer group on
x_ij = sign(p_i - p_j) psi(|p_i - p_j|) / (psi(max(L, p_i, p_j)) + 1e-6), psi(d) = ln(|c| d + 1),
c and the threshold L = |L_multiplier| * init_threshold learned; with the [CLS] reset, x = 0 on
[CLS]'s row and column. Shapes: (T) -> x (T, T) -> (H, T, T) per group.
"""

import torch
from torch import nn

from .scheme_module import SchemeModule, add_bias

FIRE_MLP_WIDTH = 32


def fire_input(positions, c, threshold):
    t = positions.shape[0]
    p = positions.to(c.device, c.dtype)

    def psi(d):
        return torch.log(torch.abs(c * d) + 1.0)

    diff = p.view(t, 1) - p.view(1, t)  # [i][j] = p_i - p_j
    later = torch.maximum(p.view(t, 1), p.view(1, t))
    normaliser = psi(torch.maximum(later, threshold)) + 1e-6
    return torch.sign(diff) * psi(diff.abs()) / normaliser


def fire_init_threshold(config):
    """A quarter of max_position_embeddings, at least 1."""
    return max(1.0, config.max_position_embeddings / 4.0)


class FireBias(nn.Module):
    def __init__(self, num_heads, init_threshold):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(1, FIRE_MLP_WIDTH), nn.ReLU(), nn.Linear(FIRE_MLP_WIDTH, num_heads)
        )
        self.c = nn.Parameter(torch.full((), 0.1))
        self.L_multiplier = nn.Parameter(torch.ones(()))
        self.init_threshold = init_threshold

    def forward(self, positions, cls_free):
        x = fire_input(positions, self.c, self.L_multiplier.abs() * self.init_threshold)
        if cls_free:
            keep = torch.ones_like(x)
            keep[0, :] = 0
            keep[:, 0] = 0
            x = x * keep
        # (T, T) -> (T, T, 1) -> MLP -> (T, T, H) -> (H, T, T)
        return self.mlp(x.unsqueeze(-1)).permute(2, 0, 1)


class FireBiasModule(SchemeModule):
    def __init__(self, owner):
        c = owner.config
        self.untie_cls = c.wb("untie_cls")
        owner.fire = nn.ModuleList(
            FireBias(c.num_attention_heads, fire_init_threshold(c))
            for _ in range(owner.layer_groups())
        )
        self.owner = owner

    def contribute(self, positions, dtype, terms):
        for g, layer in enumerate(terms.layers):
            add_bias(layer, self.owner.fire[g](positions, self.untie_cls))
