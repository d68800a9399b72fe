"""Shaw et al.'s relative keys (NAACL 2018; the "relative_key" of transformers 4's BERT) and Huang
et al.'s relative keys and queries (2020; "relative_key_query"), as engine/src/schemes/shaw.cpp:
per layer group a table r of 2k + 1 rows for the distances p_i - p_j clipped to [-k, k]
(k = max_relative_distance, 0 = max_len - 1); logits += q_i . r_ij (and k_j . r_ij), inside the
1/sqrt(d) scaling. The tables sit where transformers 4 kept them and ``tupe export`` writes
them: bert.encoder.layer.G.attention.self.distance_embedding.
Shapes: (T) -> r_ij (T, T, d) per group; terms (B, H, T, T).
"""

import torch
from torch import nn

from .scheme_module import SchemeModule, relative_distance_clip


class ShawTerms:
    """The content slot's terms from r_ij (T, T, d)."""

    def __init__(self, rel_keys, key_query):
        self.rel_keys = rel_keys
        self.key_query = key_query

    def add_terms(self, qs, k, content, scaling, out):
        r = self.rel_keys.to(qs.dtype)
        out.append(("c2p", torch.einsum("bhld,lrd->bhlr", qs, r)))
        if self.key_query:
            out.append(("p2c", torch.einsum("bhrd,lrd->bhlr", k * scaling, r)))


class ShawRelativeKeys(SchemeModule):
    def __init__(self, owner, key_query):
        self.clip = relative_distance_clip(owner.config)
        self.key_query = key_query
        self.tables = []
        for g in range(owner.layer_groups()):
            table = nn.Embedding(2 * self.clip + 1, owner.config.head_dim)
            owner.layers[g].attention.self.distance_embedding = table
            self.tables.append(table)

    def contribute(self, positions, dtype, terms):
        t = positions.shape[0]
        p = positions.view(-1)
        index = (p.view(t, 1) - p.view(1, t)).clamp(-self.clip, self.clip) + self.clip  # (T, T)
        for g, layer in enumerate(terms.layers):
            layer.content.append(ShawTerms(self.tables[g](index), self.key_query))
