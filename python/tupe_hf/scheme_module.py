"""What every scheme module shares, as engine/src/schemes/scheme_module.{h,cpp}: the base class,
add_bias, and the table p with its norm and the projections U^Q, U^K that TUPE, BERT-Ad and
DeBERTa register on the position module (``owner``) under the checkpoint's names. The factory,
make_scheme_module, is position.py's (it imports every scheme).
Shapes: T tokens, C hidden, H heads, d = C / H, G layer groups (1 with shared_pos_term).
"""

from torch import nn

from .norm import TupeNorm


class SchemeModule:
    """One scheme: registers its parameters on ``owner`` (a PositionEncoding) in __init__."""

    def contribute(self, positions, dtype, terms):
        """Fills its slots: terms.input (T, C) and its part of each of terms.layers (G)."""
        raise NotImplementedError

    def localize(self, layer):
        """A local layer's change to its slots (RoPE's local base)."""


def add_bias(layer, bias):
    """layer.bias += bias (or = bias where it has none): (H, T, T)."""
    layer.bias = bias if layer.bias is None else layer.bias + bias


class PositionProjection(nn.Module):
    """U^Q, U^K of one group of layers, with biases as the reference unless model.bias is false."""

    def __init__(self, hidden_size, bias):
        super().__init__()
        self.pos_q_linear = nn.Linear(hidden_size, hidden_size, bias=bias)
        self.pos_k_linear = nn.Linear(hidden_size, hidden_size, bias=bias)


def register_position_table(owner, rows):
    """TUPE's and BERT-Ad's table p (rows, C) and its norm, as ``pos`` and ``pos_ln``."""
    c = owner.config
    owner.pos = nn.Embedding(rows, c.hidden_size)
    owner.pos_ln = TupeNorm(c.hidden_size, c)


def register_projections(owner):
    """U^Q, U^K per layer group as ``projections.N``, once (TUPE and DeBERTa share them)."""
    if owner.projections is not None:
        return
    c = owner.config
    owner.projections = nn.ModuleList(
        PositionProjection(c.hidden_size, c.wb("bias")) for _ in range(owner.layer_groups())
    )


def relative_distance_clip(config):
    """The clip k of the schemes that read max_relative_distance: it, or max_len - 1 for 0."""
    k = config.wb("max_relative_distance")
    return k if k > 0 else config.max_position_embeddings - 1
