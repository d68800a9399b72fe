"""TupeConfig: config.json of a ``tupe export`` folder (model_type "tupe").

transformers' BertConfig keys at the top level; every other field of the engine's ModelConfig
(core/engine/include/engine/config.h) in the "tupe_workbench" block, which
analysis/src/hf_import.cpp writes and reads. WORKBENCH_DEFAULTS are ModelConfig's defaults: a
block without a key means the default, as in the C++ importer.
"""

from transformers import PreTrainedConfig

WORKBENCH_DEFAULTS = {
    "preset": "bert-a",
    "size": "tiny",
    "absolute_position": "input",
    "relative_position": "none",
    "rel_pos_bins": 32,
    "max_rel_pos": 128,
    "max_relative_distance": 0,
    "rope_fraction": 1.0,
    "rope_base": 10000.0,
    "position_offset": 0,
    "untie_cls": False,
    "randomized_positions_max": 0,
    "shared_pos_term": True,
    "attention_scale_factor": 1.0,
    "pre_layernorm": False,
    "scale_input_positions": False,
    "norm": "layernorm",
    "bias": True,
    "ffn": "gelu",
    "skip_first_attention_norm": False,
    "local_window": 0,
    "global_every": 3,
    "rope_base_local": 0.0,
}


class TupeConfig(PreTrainedConfig):
    """BertConfig's keys plus the workbench block; ``config.wb("rope_base")`` reads the block."""

    model_type = "tupe"

    vocab_size: int = 30522
    hidden_size: int = 32
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 64
    max_position_embeddings: int = 64
    type_vocab_size: int = 2
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pad_token_id: int | None = 0
    tie_word_embeddings: bool = False
    tupe_workbench: dict | None = None

    def __post_init__(self, **kwargs):
        block = dict(self.tupe_workbench or {})
        unknown = sorted(set(block) - set(WORKBENCH_DEFAULTS))
        if unknown:
            raise ValueError(f"tupe_workbench: unknown keys {unknown}")
        self.tupe_workbench = {**WORKBENCH_DEFAULTS, **block}
        super().__post_init__(**kwargs)

    def wb(self, name):
        """A field of the workbench block (its default where the block has none)."""
        return self.tupe_workbench[name]

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def local_layer(self, layer):
        """ModelConfig::local_layer: a local-window layer (ModernBERT's local attention)."""
        return self.wb("local_window") > 0 and layer % self.wb("global_every") != 0

    def attention_input_norm(self, layer):
        """ModelConfig::attention_input_norm: pre-LN, bar ModernBERT's layer 0."""
        return self.wb("pre_layernorm") and not (
            self.wb("skip_first_attention_norm") and layer == 0
        )


__all__ = ["TupeConfig", "WORKBENCH_DEFAULTS"]
