"""tupe_hf: the workbench's encoders for transformers (``AutoModel``, ``AutoModelForMaskedLM``
and, for a fine-tuned run, ``AutoModelForSequenceClassification``, with
``trust_remote_code=True``).

``tupe export`` copies these files into every folder whose scheme transformers' own BERT cannot
compute, and names them in config.json's ``auto_map``. One module per positional scheme mirrors
engine/src/schemes/ (the same formulas, parameter names and shapes); position.py is
engine/position.{h,cpp} and modeling_tupe.py engine/bert.{h,cpp}.
"""

from .configuration_tupe import TupeConfig
from .modeling_tupe import (
    TupeForMaskedLM,
    TupeForSequenceClassification,
    TupeModel,
    TupePreTrainedModel,
)

__all__ = [
    "TupeConfig",
    "TupeForMaskedLM",
    "TupeForSequenceClassification",
    "TupeModel",
    "TupePreTrainedModel",
]
