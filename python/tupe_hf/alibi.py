"""ALiBi (Press, Smith, Lewis, ICLR 2022, sec. 3), symmetric for an encoder, as
engine/src/schemes/alibi.cpp: -m_h |p_i - p_j|, not scaled, m_h = 2^(-8h/H) (interleaved for H
not a power of two, as their reference code); with the [CLS] reset, [CLS]'s row and column carry
no distance. Shapes: (T) -> (H, T, T), the same for every layer.
"""

import torch

from .scheme_module import SchemeModule, add_bias


def alibi_slopes(num_heads):
    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    closest = 1
    while closest * 2 <= num_heads:
        closest *= 2
    slopes = power_of_2(closest)
    if closest != num_heads:
        slopes += power_of_2(2 * closest)[0::2][: num_heads - closest]
    return slopes


class AlibiBias(SchemeModule):
    def __init__(self, owner):
        self.config = owner.config

    def contribute(self, positions, dtype, terms):
        t, h = positions.shape[0], self.config.num_attention_heads
        p = positions.to(dtype)
        dist = (p.view(1, t) - p.view(t, 1)).abs()  # (T, T)
        if self.config.wb("untie_cls"):
            dist[0, :] = 0  # [CLS]'s row and column carry no distance
            dist[:, 0] = 0
        m = torch.tensor(alibi_slopes(h), dtype=torch.float64).to(positions.device, dtype)
        bias = -m.view(h, 1, 1) * dist.unsqueeze(0)
        for layer in terms.layers:
            add_bias(layer, bias)
