"""CoPE, contextual position encoding (Golovneva, Wang, Weston, Sukhbaatar 2024, arXiv
2405.18719), made two-sided for an encoder, as engine/src/schemes/cope.cpp: gates
g_ij = sigmoid(q_i . k_j / sqrt(d)); the position of key j for query i is the sum of the gates
g_it over the tokens t whose positions lie between them (both ends included), capped at k
(max_relative_distance, 0 = max_len - 1); e[p] interpolated between rows floor p and ceil p;
logits += q_i . e[p_ij] / sqrt(d); keys at or left of the query read cope_left, keys to the
right cope_right. Shapes: tables (G, k + 1, d); gates, counts, term (B, H, T, T).
"""

import torch
from torch import nn

from .scheme_module import SchemeModule, relative_distance_clip


class CopeTerms:
    def __init__(self, table, order, lo, hi, side, cap):
        self.table, self.order, self.lo, self.hi, self.side, self.cap = (
            table,
            order,
            lo,
            hi,
            side,
            cap,
        )

    def add_terms(self, qs, k, content, scaling, out):
        b, h, t = qs.shape[0], qs.shape[1], qs.shape[2]
        logits = content if content is not None else torch.matmul(qs, k.transpose(-2, -1))
        gates = torch.sigmoid(logits)  # (B, H, T, T)
        if self.order is not None:
            gates = gates.index_select(-1, self.order)  # keys in position order
        # prefix[..., s] = the sum of the first s gates: (B, H, T, T + 1)
        prefix = torch.cat([torch.zeros_like(gates[..., :1]), gates.cumsum(-1)], -1)
        count = prefix.gather(-1, self.hi.expand(b, h, t, t)) - prefix.gather(
            -1, self.lo.expand(b, h, t, t)
        )
        p = count.clamp_max(self.cap)
        floor = p.floor()
        w = p - floor
        # (B, H, T, d) x (d, 2n) -> (B, H, T, 2n): the left table's rows, then the right's.
        per_row = torch.matmul(qs, self.table.to(qs.dtype).transpose(0, 1))
        at_floor = per_row.gather(-1, floor.long() + self.side)
        at_ceil = per_row.gather(-1, p.ceil().long() + self.side)
        out.append(("c2p", at_ceil * w + at_floor * (1 - w)))


class ContextualPositions(SchemeModule):
    def __init__(self, owner):
        c = owner.config
        self.cap = relative_distance_clip(c)
        g = owner.layer_groups()
        owner.cope_left = nn.Parameter(torch.zeros(g, self.cap + 1, c.head_dim))
        owner.cope_right = nn.Parameter(torch.zeros(g, self.cap + 1, c.head_dim))
        self.owner = owner

    def contribute(self, positions, dtype, terms):
        t = positions.shape[0]
        n = min(self.cap, t) + 1
        p = positions.view(-1)
        sorted_p, order = torch.sort(p, stable=True)
        if torch.equal(order, torch.arange(t, device=order.device)):
            order = None
        a = torch.minimum(p.view(t, 1), p.view(1, t))  # [i][j]: the span's ends
        b = torch.maximum(p.view(t, 1), p.view(1, t))
        lo = torch.searchsorted(sorted_p, a, right=False)
        hi = torch.searchsorted(sorted_p, b, right=True)
        side = (p.view(1, t) > p.view(t, 1)).long() * n
        for g, layer in enumerate(terms.layers):
            table = torch.cat([self.owner.cope_left[g, :n], self.owner.cope_right[g, :n]])
            layer.content.append(
                CopeTerms(
                    table,
                    order,
                    lo.view(1, 1, t, t),
                    hi.view(1, 1, t, t),
                    side.view(1, 1, t, t),
                    float(self.cap),
                )
            )
