"""RoPE (Su et al., RoFormer, Eq. 14-16), as engine/src/schemes/rope.cpp: each pair (2i, 2i+1) of
the first r = rope_dims dimensions of q and k rotated by p_t * theta_i, theta_i = base^(-2i/r);
the rotation itself is position.py's LayerPosition.scores. ModernBERT's local layers take
rope_base_local. Shapes: (T) -> cos, sin (T, r/2).
"""

import torch

from .scheme_module import SchemeModule


def rope_dims(config):
    """The dimensions of each head RoPE rotates: head_dim * rope_fraction, down to pairs."""
    return int(config.head_dim * config.wb("rope_fraction")) // 2 * 2


def rope_frequencies(dims, base):
    """theta_i = base^(-2i / r), i = 0..r/2-1, float64."""
    i2 = torch.arange(0, dims, 2, dtype=torch.float64)
    return torch.pow(torch.tensor(base, dtype=torch.float64), -i2 / dims)


class RotaryPositions(SchemeModule):
    def __init__(self, owner):
        self.config = owner.config
        self.dims = rope_dims(owner.config)
        self.local = None

    def _angles(self, positions, dtype, base):
        angle = positions.to("cpu", torch.float64).view(-1, 1) * rope_frequencies(
            self.dims, base
        ).view(1, -1)
        return (
            torch.cos(angle).to(positions.device, dtype),
            torch.sin(angle).to(positions.device, dtype),
        )

    def contribute(self, positions, dtype, terms):
        c = self.config
        cos, sin = self._angles(positions, dtype, c.wb("rope_base"))
        self.local = None
        if c.wb("rope_base_local") > 0:
            self.local = self._angles(positions, dtype, c.wb("rope_base_local"))
        for layer in terms.layers:
            layer.rope_cos, layer.rope_sin, layer.rope_dims = cos, sin, self.dims
            layer.rope_untie_cls = c.wb("untie_cls")

    def localize(self, layer):
        if self.local is not None:
            layer.rope_cos, layer.rope_sin = self.local
