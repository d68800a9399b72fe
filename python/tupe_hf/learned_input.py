"""BERT-A's learned absolute positions at the input (Devlin et al. 2019; HF "absolute"), as
engine/src/schemes/learned_input.cpp: row p_t of bert.embeddings.position_embeddings (max_len, C),
owned by the embeddings, added to token t's word embedding. Shapes: (T) -> (T, C).
"""

from .scheme_module import SchemeModule


class LearnedInputTable(SchemeModule):
    def __init__(self, owner):
        self.owner = owner

    def contribute(self, positions, dtype, terms):
        table = self.owner.input_table()
        terms.input = table.weight.index_select(0, positions.to(table.weight.device))
