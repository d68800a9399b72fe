"""TUPE's untied positional correlation with the [CLS] reset (Ke, He, Liu, ICLR 2021, Eq. 6-9 and
App. B; guolinke/TUPE's get_abs_pos_bias), as engine/src/schemes/untied.cpp: the bias
(p'_i U^Q)(p'_j U^K)^T / sqrt(d * factor), p' = LayerNorm(p), from a table of max_len + 1 rows
(row 0 "[CLS] to others", row 1 "others to [CLS]", token t at position p_t uses row p_t + 1),
one U^Q, U^K per layer group. Shapes: (T) -> (H, T, T) per group.
"""

import math

import torch

from .scheme_module import SchemeModule, add_bias, register_position_table, register_projections


def untied_rows(owner, rows, group):
    """A = (p'U^Q / sqrt(d * factor))(p'U^K)^T over the table rows ``rows`` (n): (H, n, n)."""
    c = owner.config
    h, d, n = c.num_attention_heads, c.head_dim, rows.shape[0]
    proj = owner.projections[group]
    weight = owner.pos_ln(owner.pos.weight.index_select(0, rows))  # p' (n, C)
    # (n, C) -> (n, H, d) -> (H, n, d); the query side carries 1/sqrt(d * factor).
    scale = 1.0 / math.sqrt(d * c.wb("attention_scale_factor"))
    pos_q = proj.pos_q_linear(weight).view(n, h, d).transpose(0, 1) * scale
    pos_k = proj.pos_k_linear(weight).view(n, h, d).transpose(0, 1)
    return torch.bmm(pos_q, pos_k.transpose(1, 2))


def untied_correlation(owner, positions, group):
    """(theta1 (H), theta2 (H), body (H, T, T)): rows 0 and 1 asked for on their own, T + 2 rows."""
    p = positions.long().to(owner.pos.weight.device)
    a = untied_rows(owner, torch.cat([torch.arange(2, device=p.device), p + 1]), group)
    return a[:, 0, 0], a[:, 1, 1], a[:, 2:, 2:]


class UntiedPositions(SchemeModule):
    def __init__(self, owner):
        self.owner = owner
        register_position_table(owner, owner.config.max_position_embeddings + 1)
        register_projections(owner)

    def contribute(self, positions, dtype, terms):
        t, h = positions.shape[0], self.owner.config.num_attention_heads
        for g, layer in enumerate(terms.layers):
            theta1, theta2, bias = untied_correlation(self.owner, positions, g)
            if self.owner.config.wb("untie_cls"):
                # [CLS] reset: column 0 <- theta2, then row 0 <- theta1 (row wins at [0, 0]).
                bias = torch.cat([theta2.view(h, 1, 1).expand(h, t, 1), bias[:, :, 1:]], 2)
                bias = torch.cat([theta1.view(h, 1, 1).expand(h, 1, t), bias[:, 1:]], 1)
            add_bias(layer, bias)
