"""DeBERTa's disentangled attention (He et al., ICLR 2021, Eq. 3-4), as
engine/src/schemes/deberta.cpp: one table P of 2k relative positions for all layers
(k = max_relative_distance, 0 = max_len - 1), projected per layer group to K_r = P W_{k,r} and
Q_r = P W_{q,r}; logits += q_i . K_r[delta(i,j)] (c2p) + k_j . Q_r[delta(j,i)] (p2c),
delta(i, j) = clamp(i - j + k, 0, 2k - 1), inside the scaling.
Shapes: P (2k, C) -> K_r, Q_r (H, 2k, d); delta (T, T); terms (B, H, T, T).
"""

import torch
from torch import nn

from .scheme_module import SchemeModule, register_projections, relative_distance_clip


class DebertaTerms:
    def __init__(self, c2p_keys, p2c_queries, rel_index):
        self.c2p_keys = c2p_keys
        self.p2c_queries = p2c_queries
        self.rel_index = rel_index

    def add_terms(self, qs, k, content, scaling, out):
        b, h, t = qs.shape[0], qs.shape[1], qs.shape[2]
        idx = self.rel_index.view(1, 1, t, t).expand(b, h, t, t)
        c2p_all = torch.matmul(qs, self.c2p_keys.to(qs.dtype).transpose(-2, -1))
        out.append(("c2p", c2p_all.gather(-1, idx)))  # [i][j] = q_i . K_r[delta(i,j)]
        p2c_all = torch.matmul(k * scaling, self.p2c_queries.to(k.dtype).transpose(-2, -1))
        # gather gives [j][i] = k_j . Q_r[delta(j,i)]; transposed to [i][j].
        out.append(("p2c", p2c_all.gather(-1, idx).transpose(-2, -1)))


class DebertaRelative(SchemeModule):
    def __init__(self, owner):
        self.owner = owner
        self.clip = relative_distance_clip(owner.config)
        register_projections(owner)
        owner.rel_embeddings = nn.Embedding(2 * self.clip, owner.config.hidden_size)

    def contribute(self, positions, dtype, terms):
        c = self.owner.config
        t, h, d = positions.shape[0], c.num_attention_heads, c.head_dim
        p = positions.view(-1)
        index = (p.view(t, 1) - p.view(1, t) + self.clip).clamp(0, 2 * self.clip - 1)
        table = self.owner.rel_embeddings.weight  # (2k, C)
        n = table.shape[0]
        for g, layer in enumerate(terms.layers):
            # Q_r = P W_{q,r}, K_r = P W_{k,r}: (2k, C) -> (2k, H, d) -> (H, 2k, d).
            proj = self.owner.projections[g]
            queries = proj.pos_q_linear(table).view(n, h, d).transpose(0, 1)
            keys = proj.pos_k_linear(table).view(n, h, d).transpose(0, 1)
            layer.content.append(DebertaTerms(keys, queries, index))
