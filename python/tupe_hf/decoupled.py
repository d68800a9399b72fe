"""BERT-Ad's decoupled positions (Ke, He, Liu, ICLR 2021, Eq. 6), as
engine/src/schemes/decoupled.cpp: (xW^Q + p'U^Q)(xW^K + p'U^K)^T, the four word/position terms in
attention, from a table of max_len rows (row p_t for token t), p' = LayerNorm(p), one U^Q, U^K
per layer group. Shapes: (T) -> q/k offsets (T, C) per group, added before the head split.
"""

from .scheme_module import SchemeModule, register_position_table, register_projections


class DecoupledPositions(SchemeModule):
    def __init__(self, owner):
        self.owner = owner
        register_position_table(owner, owner.config.max_position_embeddings)
        register_projections(owner)

    def contribute(self, positions, dtype, terms):
        p = self.owner.pos_ln(self.owner.pos.weight.index_select(0, positions))  # (T, C)
        for g, layer in enumerate(terms.layers):
            proj = self.owner.projections[g]
            layer.q_offset = proj.pos_q_linear(p)
            layer.k_offset = proj.pos_k_linear(p)
