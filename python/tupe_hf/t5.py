"""T5's relative bias (Raffel et al. 2020; TUPE's BERT-R and TUPE-R, Eq. 5 and 7), as
engine/src/schemes/t5.cpp: a learned scalar per head and bucket of p_j - p_i, half the buckets
exact and half log-spaced up to max_rel_pos (relative_position_bucket in guolinke/TUPE); with
the [CLS] reset, [CLS]'s row and column take buckets of their own. Not scaled.
Shapes: (T) -> (H, T, T), one table (rel_pos_bins + 1, H) for every layer.
"""

import math
import struct

import torch
from torch import nn

from .scheme_module import SchemeModule, add_bias


def _f32(x):
    """x rounded to float32, so the buckets follow the C++ float arithmetic at their edges."""
    return struct.unpack("f", struct.pack("f", x))[0]


def t5_relative_bucket(relative_position, num_buckets, max_distance):
    """The bidirectional T5 bucket of rel = key - query (n = -rel)."""
    ret = 0
    n = -relative_position
    num_buckets //= 2
    if n < 0:
        ret += num_buckets  # key to the right of the query
    n = abs(n)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    # log(n / max_exact) / log(max_distance / max_exact) in float, as the reference.
    ratio = _f32(
        _f32(math.log(_f32(_f32(n) / _f32(max_exact)))) / _f32(math.log(max_distance / max_exact))
    )
    large = max_exact + int(_f32(ratio * _f32(num_buckets - max_exact)))
    return ret + min(large, num_buckets - 1)


def t5_bias(weight, positions, config):
    """The bias (H, T, T) of table ``weight`` (rel_pos_bins + 1, H) at ``positions`` (T)."""
    t = positions.shape[0]
    p = positions.to("cpu")
    lo, hi = int(p.min()), int(p.max())
    span = hi - lo
    nb, maxd = config.wb("rel_pos_bins"), config.wb("max_rel_pos")
    lut = torch.tensor([t5_relative_bucket(r, nb, maxd) for r in range(-span, span + 1)])
    relpos = p.view(1, t) - p.view(t, 1)  # [i][j] = p_j - p_i
    buckets = lut.index_select(0, (relpos + span).reshape(-1)).view(t, t)
    if config.wb("untie_cls"):
        buckets[:, 0] = nb
        buckets[0, :] = nb // 2
    # (T, T) -> (T, T, H) -> (H, T, T). Not scaled, as the reference.
    return nn.functional.embedding(buckets.to(weight.device), weight).permute(2, 0, 1)


class T5RelativeBias(SchemeModule):
    def __init__(self, owner):
        c = owner.config
        self.config = c
        owner.relative_attention_bias = nn.Embedding(
            c.wb("rel_pos_bins") + 1, c.num_attention_heads
        )
        self.owner = owner

    def contribute(self, positions, dtype, terms):
        bias = t5_bias(self.owner.relative_attention_bias.weight, positions, self.config)
        for layer in terms.layers:
            add_bias(layer, bias)
