"""The fixed sinusoidal table at the input (Vaswani et al. 2017, sec. 3.5), as
engine/src/schemes/sinusoidal.cpp: PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) =
cos(pos / 10000^(2i/C)), computed in float64 and rounded once. Shapes: (T) -> (T, C).
"""

import torch

from .scheme_module import SchemeModule


def sinusoidal_table(positions, hidden_size):
    pos = positions.to("cpu", torch.float64).view(-1, 1)  # (T, 1)
    i = torch.arange(0, hidden_size, 2, dtype=torch.float64)  # 2i
    inv = torch.pow(10000.0, -i / hidden_size).view(1, -1)
    angle = pos * inv  # (T, ceil(C/2))
    table = torch.empty(pos.shape[0], hidden_size, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    odd = hidden_size // 2
    if odd > 0:
        table[:, 1::2] = torch.cos(angle[:, :odd])
    return table.to(positions.device)


class SinusoidalTable(SchemeModule):
    def __init__(self, owner):
        self.hidden_size = owner.config.hidden_size

    def contribute(self, positions, dtype, terms):
        terms.input = sinusoidal_table(positions, self.hidden_size).to(dtype)
