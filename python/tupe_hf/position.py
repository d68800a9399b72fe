"""Every positional scheme behind one module, as engine/position.{h,cpp}: PositionEncoding builds
one scheme module per active row (absolute, relative, then the [CLS] reset), computes what
depends only on positions once per forward pass, before the layer loop, and hands each layer a
LayerPosition whose filled slots the attention applies: input (T, C), q/k offsets (T, C),
RoPE's rotation, static bias (H, T, T), content terms (B, H, T, T), the logit scale
1/sqrt(d * attention_scale_factor), and a local layer's window (T, T).
Shapes: B batch, T tokens, C hidden, H heads, d = C / H; token 0 is [CLS].
"""

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from .alibi import AlibiBias
from .cls_reset import ClsReset
from .cope import ContextualPositions
from .deberta import DebertaRelative
from .decoupled import DecoupledPositions
from .fire import FireBiasModule
from .kerple import KerpleBias
from .learned_input import LearnedInputTable
from .rope import RotaryPositions
from .shaw import ShawRelativeKeys
from .sinusoidal import SinusoidalTable
from .t5 import T5RelativeBias
from .untied import UntiedPositions

# The scheme table's rows by their config names (core/engine/src/position_scheme.cpp): the
# module and whether it keeps one set of parameters per layer group (per_layer_group).
ABSOLUTE_SCHEMES = {
    "none": None,
    "input": (LearnedInputTable, False),
    "sinusoidal": (SinusoidalTable, False),
    "untied": (UntiedPositions, True),
    "decoupled": (DecoupledPositions, True),
}
RELATIVE_SCHEMES = {
    "none": None,
    "t5": (T5RelativeBias, False),
    "shaw": (lambda owner: ShawRelativeKeys(owner, key_query=False), True),
    "shaw_key_query": (lambda owner: ShawRelativeKeys(owner, key_query=True), True),
    "rope": (RotaryPositions, False),
    "alibi": (AlibiBias, False),
    "deberta": (DebertaRelative, True),
    "fire": (FireBiasModule, True),
    "kerple_log": (lambda owner: KerpleBias(owner, power=False), True),
    "kerple_power": (lambda owner: KerpleBias(owner, power=True), True),
    "cope": (ContextualPositions, True),
}


def active_schemes(config):
    """engine::active_schemes: (factory, per_layer_group) in the order the modules run."""
    absolute, relative = config.wb("absolute_position"), config.wb("relative_position")
    if absolute not in ABSOLUTE_SCHEMES:
        raise ValueError(f"absolute_position: unknown value {absolute!r}")
    if relative not in RELATIVE_SCHEMES:
        raise ValueError(f"relative_position: unknown value {relative!r}")
    rows = [r for r in (ABSOLUTE_SCHEMES[absolute], RELATIVE_SCHEMES[relative]) if r]
    # TUPE's untied term resets [CLS] from its own table rows 0 and 1.
    if config.wb("untie_cls") and absolute != "untied":
        rows.append((ClsReset, False))
    return rows


def rotate(x, cos, sin, r):
    """RoFormer Eq. 14-16: pairs (2i, 2i+1) of the first r dims rotated; x (B, H, T, d)."""
    d = x.shape[-1]
    head = x[..., :r]
    x1, x2 = head[..., 0::2], head[..., 1::2]  # (B, H, T, r/2)
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    rotated = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2)
    return rotated if r == d else torch.cat([rotated, x[..., r:]], -1)


@dataclass
class LayerPosition:
    """What a layer needs from the positions; None where the scheme leaves a slot empty."""

    scaling: float = 1.0
    q_offset: torch.Tensor | None = None  # (T, C), BERT-Ad
    k_offset: torch.Tensor | None = None
    rope_cos: torch.Tensor | None = None  # (T, r/2)
    rope_sin: torch.Tensor | None = None
    rope_dims: int = 0
    rope_untie_cls: bool = False
    bias: torch.Tensor | None = None  # (H, T, T)
    content: list = field(default_factory=list)
    window: torch.Tensor | None = None  # (T, T), 0 or -inf

    def copy(self):
        return LayerPosition(**{**self.__dict__, "content": list(self.content)})

    def offset_qk(self, q, k):
        """q and k (B, T, C) before the head split, with BERT-Ad's offsets added."""
        if self.q_offset is None:
            return q, k
        return q + self.q_offset.unsqueeze(0), k + self.k_offset.unsqueeze(0)

    def scores(self, q, k):
        """Scaled q.k^T with RoPE's rotation and the content terms, (B, H, T, T)."""
        qs = q * self.scaling
        if self.rope_dims > 0:
            qr = rotate(qs, self.rope_cos, self.rope_sin, self.rope_dims)
            kr = rotate(k, self.rope_cos, self.rope_sin, self.rope_dims)
            s = torch.matmul(qr, kr.transpose(-2, -1))
            if self.rope_untie_cls:
                # [CLS]'s row and column from the unrotated q and k.
                row = torch.matmul(qs[:, :, :1], k.transpose(-2, -1))  # (B, H, 1, T)
                col = torch.matmul(qs[:, :, 1:], k[:, :, :1].transpose(-2, -1))  # (B, H, T-1, 1)
                s = torch.cat([row, torch.cat([col, s[:, :, 1:, 1:]], 3)], 2)
            content = None
        else:
            s = torch.matmul(qs, k.transpose(-2, -1))
            content = s
        extra = []
        for term in self.content:
            term.add_terms(qs, k, content, self.scaling, extra)
        for _, t in extra:
            s = s + t
        return s


@dataclass
class PositionTerms:
    layers: list
    input: torch.Tensor | None = None  # (T, C)

    def for_layer(self, i):
        return self.layers[0] if len(self.layers) == 1 else self.layers[i]


class PositionEncoding(nn.Module):
    """The positional module, registered as bert.position_bias (its parameters' prefix).

    ``layers`` are the encoder's layers (Shaw's tables live in their attention, where
    transformers 4 kept them), ``input_table`` returns bert.embeddings.position_embeddings.
    """

    def __init__(self, config, layers, input_table):
        super().__init__()
        self.config = config
        self._layers = list(layers)
        self._input_table = input_table
        self.projections = None
        rows = active_schemes(config)
        self.groups = self.layer_groups() if any(per_group for _, per_group in rows) else 1
        self.modules_ = [make(self) for make, _ in rows]

    @property
    def layers(self):
        return self._layers

    def input_table(self):
        return self._input_table()

    def layer_groups(self):
        return 1 if self.config.wb("shared_pos_term") else self.config.num_hidden_layers

    def positions(self, seq_len, device):
        offset = self.config.wb("position_offset")
        return torch.arange(offset, offset + seq_len, dtype=torch.long, device=device)

    def forward(self, positions, dtype):
        c = self.config
        t = positions.shape[0]
        scaling = 1.0 / math.sqrt(c.head_dim * c.wb("attention_scale_factor"))
        terms = PositionTerms([LayerPosition(scaling=scaling) for _ in range(self.groups)])
        for module in self.modules_:
            module.contribute(positions, dtype, terms)
        if terms.input is not None and c.wb("scale_input_positions"):
            terms.input = terms.input * (1.0 / math.sqrt(c.hidden_size))
        if c.wb("local_window") > 0:
            terms = self._local_layers(terms, t, dtype, positions.device)
        return terms

    def _local_layers(self, terms, t, dtype, device):
        # ModernBERT (Warner et al. 2024, sec. 2.1.2): every global_every-th layer global, the
        # others attend within |i - j| <= local_window through an additive -inf mask.
        c = self.config
        idx = torch.arange(t)
        far = (idx.view(t, 1) - idx.view(1, t)).abs() > c.wb("local_window")
        window = torch.zeros(t, t, dtype=dtype).masked_fill(far, float("-inf")).to(device)
        layered = PositionTerms([], terms.input)
        for i in range(c.num_hidden_layers):
            lp = terms.for_layer(i).copy()
            if c.local_layer(i):
                lp.window = window
                for module in self.modules_:
                    module.localize(lp)
            layered.layers.append(lp)
        return layered
