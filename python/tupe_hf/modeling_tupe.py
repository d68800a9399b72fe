"""The workbench's BERT-like encoder, its MLM head and its sequence classifier for transformers,
as engine/bert.{h,cpp} and engine/finetune.{h,cpp}:
HF modeling_bert's structure and parameter names, post-LN or pre-LN (with ModernBERT's first
layer and final norm), LayerNorm or RMSNorm, with or without biases, a GELU, GeGLU or SwiGLU
FFN, local-window layers, and every positional scheme through position.py, whose terms are
computed once per forward pass and passed to each layer (TUPE, Sec. 3.2).
Shapes: B batch, T tokens, C hidden, H heads, d = C / H, V vocabulary.
"""

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    SequenceClassifierOutput,
)

from .configuration_tupe import TupeConfig
from .norm import TupeNorm
from .position import PositionEncoding


def _linear(n_in, n_out, config):
    """A Linear layer of the encoder: with its bias unless model.bias is false (ModernBERT)."""
    return nn.Linear(n_in, n_out, bias=config.wb("bias"))


class TupeEmbeddings(nn.Module):
    def __init__(self, config, learned_input):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        if learned_input:
            self.position_embeddings = nn.Embedding(
                config.max_position_embeddings, config.hidden_size
            )
        if config.type_vocab_size > 0:
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = TupeNorm(config.hidden_size, config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, position_input):
        x = self.word_embeddings(input_ids)  # (B, T, C)
        if position_input is not None:  # BERT-A, sinusoidal: positions added to the words
            x = x + position_input.unsqueeze(0)
        if hasattr(self, "token_type_embeddings"):
            if token_type_ids is not None:
                x = x + self.token_type_embeddings(token_type_ids)
            else:
                x = x + self.token_type_embeddings.weight[0]
        return self.dropout(self.LayerNorm(x))


class TupeSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = _linear(config.hidden_size, config.hidden_size, config)
        self.key = _linear(config.hidden_size, config.hidden_size, config)
        self.value = _linear(config.hidden_size, config.hidden_size, config)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, x, mask_bias, position):
        b, t, c = x.shape
        q, k = position.offset_qk(self.query(x), self.key(x))  # BERT-Ad's q/k slot
        v = self.value(x)
        # (B, T, C) -> (B, T, H, d) -> (B, H, T, d)
        q = q.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        scores = position.scores(q, k)  # (B, H, T, T)
        if position.bias is not None:
            scores = scores + position.bias.unsqueeze(0)  # (H, T, T) over the batch
        if mask_bias is not None:
            scores = scores + mask_bias  # (B, 1, 1, T)
        if position.window is not None:
            scores = scores + position.window  # (T, T)
        probs = torch.softmax(scores, -1)
        ctx = torch.matmul(self.dropout(probs), v)  # (B, H, T, d)
        # (B, H, T, d) -> (B, T, H, d) -> (B, T, C)
        return ctx.transpose(1, 2).reshape(b, t, c), probs


class TupeOutput(nn.Module):
    """dense + dropout, then post-LN's norm of the sum (pre-LN: the plain residual sum)."""

    def __init__(self, n_in, n_out, config, with_norm=True):
        super().__init__()
        self.pre_layernorm = config.wb("pre_layernorm")
        self.dense = _linear(n_in, n_out, config)
        if with_norm:
            self.LayerNorm = TupeNorm(n_out, config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, h, residual):
        d = self.dropout(self.dense(h))
        return d + residual if self.pre_layernorm else self.LayerNorm(d + residual)


class TupeAttention(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        self.self = TupeSelfAttention(config)
        # Pre-LN: output.LayerNorm normalises attention's input; ModernBERT's layer 0 has none.
        with_norm = not config.wb("pre_layernorm") or config.attention_input_norm(layer)
        self.output = TupeOutput(config.hidden_size, config.hidden_size, config, with_norm)


class TupeIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ffn = config.wb("ffn")
        rows = config.intermediate_size * (1 if self.ffn == "gelu" else 2)
        self.dense = _linear(config.hidden_size, rows, config)

    def forward(self, x):
        if self.ffn == "gelu":
            return F.gelu(self.dense(x))  # erf GELU, as HF "gelu"
        # Shazeer 2020, Eq. 5-6: GELU(xW) * xV or SiLU(xW) * xV, W and V dense's two halves.
        a, gate = self.dense(x).chunk(2, -1)
        return (F.gelu(a) if self.ffn == "geglu" else F.silu(a)) * gate


class TupeLayer(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        self.pre_layernorm = config.wb("pre_layernorm")
        self.attention_norm = config.attention_input_norm(layer)
        self.attention = TupeAttention(config, layer)
        self.intermediate = TupeIntermediate(config)
        self.output = TupeOutput(config.intermediate_size, config.hidden_size, config)

    def forward(self, x, mask_bias, position):
        attn_out = self.attention.output
        if self.pre_layernorm:
            # x + f(LN(x)); ModernBERT's layer 0 attends over x itself.
            h, probs = self.attention.self(
                attn_out.LayerNorm(x) if self.attention_norm else x, mask_bias, position
            )
            y = attn_out(h, x)
            return self.output(self.intermediate(self.output.LayerNorm(y)), y), probs
        h, probs = self.attention.self(x, mask_bias, position)
        y = attn_out(h, x)
        return self.output(self.intermediate(y), y), probs


class TupeEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList(TupeLayer(config, i) for i in range(config.num_hidden_layers))
        if config.wb("pre_layernorm"):
            self.final_layer_norm = TupeNorm(config.hidden_size, config)


class TupePreTrainedModel(PreTrainedModel):
    config_class = TupeConfig
    config: TupeConfig
    base_model_prefix = "bert"

    @torch.no_grad()
    def _init_weights(self, module):
        # The engine's init (engine/bert.cpp, init_bert_weights): N(0, initializer_range) for
        # every Linear and Embedding, zero biases, unit norms. Loading overwrites all of it.
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.normal_(0.0, std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, TupeNorm):
            module.weight.fill_(1.0)
            if module.bias is not None:
                module.bias.zero_()


class TupePooler(nn.Module):
    """bert.pooler: tanh(dense(h[:, 0])), the [CLS] state, as engine::BertPooler (always with
    its bias, as HF's)."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, h):
        # (B, T, C) -> (B, C)
        return torch.tanh(self.dense(h[:, 0]))


class TupeModel(TupePreTrainedModel):
    """The encoder: bert.embeddings, bert.position_bias (the schemes' parameters, as the
    engine names them), bert.encoder and, as HF's BertModel, bert.pooler unless
    add_pooling_layer is false (the MLM model has none)."""

    def __init__(self, config, add_pooling_layer=True):
        super().__init__(config)
        learned_input = config.wb("absolute_position") == "input"
        self.embeddings = TupeEmbeddings(config, learned_input)
        self.encoder = TupeEncoder(config)
        self.position_bias = PositionEncoding(
            config, self.encoder.layer, lambda: self.embeddings.position_embeddings
        )
        self.pooler = TupePooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        output_attentions=False,
        **kwargs,
    ):
        b, t = input_ids.shape
        words = self.embeddings.word_embeddings.weight
        positions = self.position_bias.positions(t, input_ids.device)
        if self.config.wb("absolute_position") in ("input", "untied", "decoupled"):
            if int(positions.max()) >= self.config.max_position_embeddings:
                raise ValueError(
                    f"sequence of {t} tokens does not fit max_position_embeddings = "
                    f"{self.config.max_position_embeddings}"
                )
        terms = self.position_bias(positions, words.dtype)
        x = self.embeddings(input_ids, token_type_ids, terms.input)
        mask_bias = None
        if attention_mask is not None:
            # (B, T) -> (B, 1, 1, T): 0 for tokens, a large negative number for padding.
            mask_bias = (1.0 - attention_mask.to(x.dtype)).view(b, 1, 1, t) * -1e9
        attentions = []
        for i, layer in enumerate(self.encoder.layer):
            x, probs = layer(x, mask_bias, terms.for_layer(i))
            attentions.append(probs)
        if hasattr(self.encoder, "final_layer_norm"):
            x = self.encoder.final_layer_norm(x)
        return BaseModelOutputWithPooling(
            last_hidden_state=x,
            pooler_output=self.pooler(x) if self.pooler is not None else None,
            attentions=tuple(attentions) if output_attentions else None,
        )


class TupePredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = _linear(config.hidden_size, config.hidden_size, config)
        self.LayerNorm = TupeNorm(config.hidden_size, config)

    def forward(self, h):
        return self.LayerNorm(F.gelu(self.dense(h)))


class TupeLMPredictionHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transform = TupePredictionHeadTransform(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))


class TupeOnlyMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = TupeLMPredictionHead(config)


class _TupeWithHead(TupePreTrainedModel):
    """The encoder (self.bert) and a task head: forward runs the encoder, then ``head``."""

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        labels=None,
        output_attentions=False,
        return_dict=True,
        **kwargs,
    ):
        out = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_attentions=output_attentions,
        )
        return self.head(out, labels)


class TupeForMaskedLM(_TupeWithHead):
    """bert.* and cls.predictions.*; the decoder is the word embeddings (tied, not stored)."""

    def __init__(self, config):
        super().__init__(config)
        self.bert = TupeModel(config, add_pooling_layer=False)
        self.cls = TupeOnlyMLMHead(config)
        self.post_init()

    def head(self, out, labels):
        pred = self.cls.predictions
        # (B, T, C) x (V, C)^T + b -> (B, T, V)
        logits = F.linear(
            pred.transform(out.last_hidden_state),
            self.bert.embeddings.word_embeddings.weight,
            pred.bias,
        )
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return MaskedLMOutput(loss=loss, logits=logits, attentions=out.attentions)


class TupeForSequenceClassification(_TupeWithHead):
    """bert.* (with bert.pooler), dropout and classifier (C -> num_labels): HF's
    BertForSequenceClassification, as engine::BertForSequenceClassification. Loss as
    transformers': mean squared error for one label (regression), cross-entropy otherwise."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = TupeModel(config)
        dropout = getattr(config, "classifier_dropout", None)
        self.dropout = nn.Dropout(config.hidden_dropout_prob if dropout is None else dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def head(self, out, labels):
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, C) -> (B, L)
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = F.mse_loss(logits.view(-1), labels.view(-1).to(logits.dtype))
            else:
                loss = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        return SequenceClassifierOutput(loss=loss, logits=logits, attentions=out.attentions)


__all__ = [
    "TupeForMaskedLM",
    "TupeForSequenceClassification",
    "TupeModel",
    "TupePreTrainedModel",
]
