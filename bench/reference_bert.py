#!/usr/bin/python3
"""PyTorch-eager reference for `tupe bench`: the same BERT-A / TUPE-A / TUPE-R MLM model
(HF modeling_bert structure; TUPE's untied positional term as in /work/shared/TUPE_NOTES.md and
guolinke/TUPE), the same synthetic batch shape, AdamW and gradient clipping, timed per
training step. Shapes: B batch, T tokens, C hidden, H heads, d = C / H, V vocabulary.

Two styles:
  --style same  (default) the algorithm the C++ engine runs: one fused QKV matmul built from
                the three Linear weights, MLM logits only at masked positions;
  --style hf    what HF's modeling_bert does: three Q/K/V matmuls, logits at every position,
                cross-entropy with ignore_index=-100.
Three implementations of the same model (--impl):
  eager     the attention as matmul, softmax and dropout (what PyTorch 1.13 can run);
  sdpa      eager with F.scaled_dot_product_attention (PyTorch >= 2.1), the positional bias and
            padding mask passed as its additive attn_mask and TUPE's 1/sqrt(2d) as its scale:
            every scheme here is an additive bias, so all three presets allow it;
  compile   sdpa under torch.compile (inductor: C++ kernels on the CPU, compiled in the warm-up
            steps; needs g++ and Python.h, Debian's python3-dev).
--finetune times fine-tuning steps instead, as `tupe bench --finetune`: the encoder with HF's
pooler (tanh on [CLS]), dropout and a 2-way classifier, on single-sentence examples whose
lengths are `tupe bench --finetune`'s (the same formula), sorted and cut into batches as the
runner's length buckets do, padded to each batch's longest; AdamW (betas 0.9/0.98, eps 1e-6, no
decay on biases and LayerNorm) and clipping as engine::finetune.
Output: one JSON object per variant on stdout (median s/step, tokens/s, params).
"""

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {  # core/engine/src/config.cpp
    "tiny": dict(hidden=32, layers=2, heads=2, ffn=64, max_pos=128),
    # tupe bench --size quickstart: tiny with experiments/quickstart.yaml's overrides
    "quickstart": dict(hidden=64, layers=2, heads=4, ffn=256, max_pos=128),
    "small": dict(hidden=256, layers=4, heads=4, ffn=1024, max_pos=128),
    "base": dict(hidden=768, layers=12, heads=12, ffn=3072, max_pos=512),
}


def t5_bucket(rel, num_buckets=32, max_distance=128):
    """T5 bidirectional bucket of rel = key - query (relative_position_bucket, guolinke/TUPE)."""
    ret = 0
    n = -rel
    num_buckets //= 2
    if n < 0:
        ret += num_buckets
    n = abs(n)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    large = max_exact + int(
        math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    )
    return ret + min(large, num_buckets - 1)


def bucket_matrix(T, num_buckets=32, max_distance=128, cls_buckets=True):
    b = torch.tensor(
        [[t5_bucket(j - i, num_buckets, max_distance) for j in range(T)] for i in range(T)],
        dtype=torch.long,
    )
    if cls_buckets:  # TUPE-R: others -> [CLS] uses bucket nb, [CLS] -> others bucket nb/2
        b[:, 0] = num_buckets
        b[0, :] = num_buckets // 2
    return b


def norm(ln, x):
    """LayerNorm; 1.13's CPU layer_norm rejects bf16 input with fp32 weights and its CPU autocast
    does not cast for it, so the input is brought to the weights' dtype (as the C++ engine)."""
    return ln(x if x.dtype == ln.weight.dtype else x.to(ln.weight.dtype))


class UntiedPositionBias(nn.Module):
    """TUPE's positional term (H, T, T), computed once per forward and shared by the layers."""

    def __init__(self, C, H, max_pos, rel_pos, eps):
        super().__init__()
        self.H, self.d = H, C // H
        self.pos = nn.Embedding(max_pos + 1, C)  # row 0: [CLS]->others, row 1: others->[CLS]
        self.pos_ln = nn.LayerNorm(C, eps=eps)
        self.pos_q_linear = nn.Linear(C, C)
        self.pos_k_linear = nn.Linear(C, C)
        self.scaling = (self.d * 2.0) ** -0.5
        self.rel = nn.Embedding(33, H) if rel_pos else None
        if rel_pos:
            self.register_buffer("buckets", bucket_matrix(max_pos), persistent=False)

    def forward(self, T):
        H, d = self.H, self.d
        w = norm(self.pos_ln, self.pos.weight[: T + 1])  # (T+1, C)
        q = self.pos_q_linear(w).view(T + 1, H, d).transpose(0, 1) * self.scaling  # (H, T+1, d)
        k = self.pos_k_linear(w).view(T + 1, H, d).transpose(0, 1)
        a = torch.bmm(q, k.transpose(1, 2))  # (H, T+1, T+1)
        theta1, theta2 = a[:, 0, 0], a[:, 1, 1]
        bias = a[:, 1:, 1:]
        # [CLS] reset: column 0 <- theta2, then row 0 <- theta1.
        bias = torch.cat([theta2.view(H, 1, 1).expand(H, T, 1), bias[:, :, 1:]], 2)
        bias = torch.cat([theta1.view(H, 1, 1).expand(H, 1, T), bias[:, 1:, :]], 1)
        if self.rel is not None:
            bias = bias + F.embedding(self.buckets[:T, :T], self.rel.weight).permute(2, 0, 1)
        return bias  # (H, T, T)


class Layer(nn.Module):
    def __init__(self, C, H, Fdim, scale_factor, eps, p, fused_qkv, sdpa):
        super().__init__()
        self.H, self.d, self.fused, self.sdpa, self.p = H, C // H, fused_qkv, sdpa, p
        self.query, self.key, self.value = nn.Linear(C, C), nn.Linear(C, C), nn.Linear(C, C)
        self.attn_out = nn.Linear(C, C)
        self.attn_ln = nn.LayerNorm(C, eps=eps)
        self.inter = nn.Linear(C, Fdim)
        self.out = nn.Linear(Fdim, C)
        self.out_ln = nn.LayerNorm(C, eps=eps)
        self.drop = nn.Dropout(p)
        self.scaling = 1.0 / math.sqrt(self.d * scale_factor)

    def forward(self, x, mask_bias, pos_bias):
        B, T, C = x.shape
        if self.fused:
            w = torch.cat([self.query.weight, self.key.weight, self.value.weight], 0)  # (3C, C)
            b = torch.cat([self.query.bias, self.key.bias, self.value.bias], 0)
            q, k, v = F.linear(x, w, b).chunk(3, -1)
        else:
            q, k, v = self.query(x), self.key(x), self.value(x)
        # (B, T, C) -> (B, H, T, d)
        q = q.view(B, T, self.H, self.d).transpose(1, 2)
        k = k.view(B, T, self.H, self.d).transpose(1, 2)
        v = v.view(B, T, self.H, self.d).transpose(1, 2)
        if self.sdpa:
            bias = mask_bias if pos_bias is None else mask_bias + pos_bias.unsqueeze(0)
            ctx = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=bias.to(q.dtype),
                dropout_p=self.p if self.training else 0.0,
                scale=self.scaling,
            )  # (B, H, T, d)
            ctx = ctx.transpose(1, 2).reshape(B, T, C)
            y = norm(self.attn_ln, self.drop(self.attn_out(ctx)) + x)
            return norm(self.out_ln, self.drop(self.out(F.gelu(self.inter(y)))) + y)
        scores = torch.matmul(q * self.scaling, k.transpose(-2, -1))  # (B, H, T, T)
        if pos_bias is not None:
            scores = scores + pos_bias.unsqueeze(0)  # broadcast over B
        scores = scores + mask_bias
        probs = self.drop(torch.softmax(scores, -1))
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, C)
        y = norm(self.attn_ln, self.drop(self.attn_out(ctx)) + x)
        return norm(self.out_ln, self.drop(self.out(F.gelu(self.inter(y)))) + y)


class BertForMaskedLM(nn.Module):
    def __init__(self, preset, size, vocab, style, sdpa=False):
        super().__init__()
        s = SIZES[size]
        C, H, eps, p = s["hidden"], s["heads"], 1e-12, 0.1
        self.style = style
        tupe = preset in ("tupe-a", "tupe-r")
        self.word = nn.Embedding(vocab, C)
        self.position = None if tupe else nn.Embedding(s["max_pos"], C)
        self.token_type = nn.Embedding(2, C)
        self.emb_ln = nn.LayerNorm(C, eps=eps)
        self.drop = nn.Dropout(p)
        self.pos_bias = (
            UntiedPositionBias(C, H, s["max_pos"], preset == "tupe-r", eps) if tupe else None
        )
        self.layers = nn.ModuleList(
            Layer(C, H, s["ffn"], 2.0 if tupe else 1.0, eps, p, style == "same", sdpa)
            for _ in range(s["layers"])
        )
        self.head_dense = nn.Linear(C, C)
        self.head_ln = nn.LayerNorm(C, eps=eps)
        self.head_bias = nn.Parameter(torch.zeros(vocab))
        for m in self.modules():  # the reference's init_bert_params
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

    def forward(self, ids, attention_mask, labels):
        x = self.encode(ids, attention_mask)
        flat = labels.reshape(-1)
        if self.style == "same":  # logits only at the masked positions
            index = (flat != -100).nonzero().squeeze(1)
            h = x.reshape(-1, x.size(-1)).index_select(0, index)
            targets = flat.index_select(0, index)
        else:  # HF: logits everywhere, ignore_index
            h, targets = x.reshape(-1, x.size(-1)), flat
        t = norm(self.head_ln, F.gelu(self.head_dense(h)))
        logits = F.linear(t, self.word.weight, self.head_bias)
        return F.cross_entropy(logits.float(), targets, ignore_index=-100)

    def encode(self, ids, attention_mask):
        B, T = ids.shape
        x = self.word(ids) + self.token_type.weight[0]
        if self.position is not None:
            x = x + self.position.weight[:T].unsqueeze(0)
        x = self.drop(norm(self.emb_ln, x))
        mask_bias = ((1.0 - attention_mask.to(x.dtype)) * -1e9).view(B, 1, 1, T)
        pos_bias = self.pos_bias(T) if self.pos_bias is not None else None
        for layer in self.layers:
            x = layer(x, mask_bias, pos_bias)
        return x


class BertForSequenceClassification(nn.Module):
    """HF's: the encoder, pooler.dense + tanh on [CLS], dropout, classifier (no MLM head)."""

    def __init__(self, preset, size, vocab, style, sdpa=False):
        super().__init__()
        self.bert = BertForMaskedLM(preset, size, vocab, style, sdpa)
        del self.bert.head_dense, self.bert.head_ln, self.bert.head_bias
        C = SIZES[size]["hidden"]
        self.pooler = nn.Linear(C, C)
        self.drop = nn.Dropout(0.1)
        self.classifier = nn.Linear(C, 2)
        for m in (self.pooler, self.classifier):
            nn.init.normal_(m.weight, 0.0, 0.02)
            nn.init.zeros_(m.bias)

    def forward(self, ids, attention_mask, labels):
        x = self.bert.encode(ids, attention_mask)
        logits = self.classifier(self.drop(torch.tanh(self.pooler(x[:, 0]))))
        return F.cross_entropy(logits.float(), labels)


def finetune_batches(args):
    """tupe bench --finetune's examples: word counts lo + (i * 7919 + 13) % span over
    [seq/8, seq-2], sorted and cut into batches (one chunk of length buckets), each padded to
    its longest; [CLS] first and [SEP] last, random words between."""
    n = args.batch * (args.warmup + args.steps)
    lo, hi = max(1, args.seq // 8), args.seq - 2
    words = sorted(lo + (i * 7919 + 13) % (hi - lo + 1) for i in range(n))
    g = torch.Generator().manual_seed(1)
    batches = []
    for b in range(0, n, args.batch):
        lens = [w + 2 for w in words[b : b + args.batch]]
        T = max(lens)
        ids = torch.randint(5, args.vocab_size, (len(lens), T), generator=g)
        mask = torch.zeros(len(lens), T, dtype=torch.long)
        for r, length in enumerate(lens):
            ids[r, 0], ids[r, length - 1] = 2, 3
            ids[r, length:] = 0
            mask[r, :length] = 1
        labels = torch.arange(len(lens)) % 2
        batches.append((ids, mask, labels))
    order = torch.randperm(len(batches), generator=g).tolist()  # the runner shuffles batches
    return [batches[i] for i in order]


def make_model(cls, preset, args):
    """(module whose parameters are trained, callable that runs it) for --impl."""
    model = cls(preset, args.size, args.vocab_size, args.style, sdpa=args.impl != "eager")
    model.train()
    if args.impl != "compile":
        return model, model
    return model, torch.compile(model)  # inductor, the default backend


def bench_finetune(preset, args):
    torch.manual_seed(1)
    model, run = make_model(BertForSequenceClassification, preset, args)
    params = list(model.parameters())
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "ln" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "ln" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=2e-5,
        betas=(0.9, 0.98),
        eps=1e-6,
    )
    times = []
    for i, batch in enumerate(finetune_batches(args)):
        dt, value = train_step(run, opt, params, batch, preset, args)
        if i >= args.warmup:
            times.append(dt)
    med = statistics.median(times)
    return dict(
        implementation=f"pytorch-{args.impl}-{args.style}-finetune",
        variant=preset,
        size=args.size,
        seq=args.seq,
        batch=args.batch,
        threads=torch.get_num_threads(),
        dtype=args.dtype,
        median_s=med,
        examples_per_s=args.batch / med,
        params=sum(p.numel() for p in params),
        loss=value,
        times=times,
    )


def train_step(model, opt, params, batch, preset, args):
    """One optimizer step as `tupe bench` times it (forward, backward, clipping at 1.0,
    AdamW): (seconds, loss)."""
    ids, mask, labels = batch
    t0 = time.perf_counter()
    opt.zero_grad()
    if args.dtype == "bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(ids, mask, labels)
    else:
        loss = model(ids, mask, labels)
    value = loss.item()
    if not math.isfinite(value):
        sys.exit(f"reference_bert.py: {preset}: non-finite loss {value}")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return time.perf_counter() - t0, value


def synthetic_batch(B, T, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (B, T), generator=g)
    ids[:, 0] = 2  # [CLS]
    chosen = torch.rand(B, T, generator=g) < 0.15  # 15% of positions are MLM targets
    chosen[:, 0] = False
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    return ids, torch.ones(B, T, dtype=torch.long), labels


def bench(preset, args):
    torch.manual_seed(1)
    model, run = make_model(BertForMaskedLM, preset, args)
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)  # as `tupe bench`
    ids, mask, labels = synthetic_batch(args.batch, args.seq, args.vocab_size)
    times = []
    for i in range(args.warmup + args.steps):
        dt, value = train_step(run, opt, params, (ids, mask, labels), preset, args)
        if i >= args.warmup:
            times.append(dt)
    med = statistics.median(times)
    return dict(
        implementation=f"pytorch-{args.impl}-{args.style}",
        variant=preset,
        size=args.size,
        seq=args.seq,
        batch=args.batch,
        threads=torch.get_num_threads(),
        dtype=args.dtype,
        median_s=med,
        tokens_per_s=args.batch * args.seq / med,
        params=sum(p.numel() for p in params),
        loss=value,
        times=times,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="bert-a,tupe-a,tupe-r")
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--seq", type=int, default=None, help="default 64 at quickstart, else 128")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="default 8000 at quickstart (the Brown vocabulary), else 30522",
    )
    ap.add_argument("--style", default="same", choices=["same", "hf"])
    ap.add_argument("--impl", default="eager", choices=["eager", "sdpa", "compile"])
    ap.add_argument(
        "--finetune", action="store_true", help="time fine-tuning steps (as tupe bench --finetune)"
    )
    args = ap.parse_args()
    quick = args.size == "quickstart"
    if args.seq is None:
        args.seq = 64 if quick else 128
    if args.vocab_size is None:
        args.vocab_size = 8000 if quick else 30522
    if args.seq > SIZES[args.size]["max_pos"]:
        sys.exit(
            f"reference_bert.py: --seq {args.seq} exceeds max positions "
            f"{SIZES[args.size]['max_pos']} of size {args.size}"
        )
    if args.impl != "eager" and not hasattr(F, "scaled_dot_product_attention"):
        sys.exit(
            f"reference_bert.py: --impl {args.impl} needs PyTorch >= 2.1, "
            f"this is {torch.__version__}"
        )
    torch.set_num_threads(args.threads)
    for preset in args.preset.split(","):
        if preset not in ("bert-a", "tupe-a", "tupe-r"):
            sys.exit(
                f"reference_bert.py: --preset: unknown variant '{preset}' "
                "(expected bert-a, tupe-a, tupe-r)"
            )
        run = bench_finetune if args.finetune else bench
        print(json.dumps(run(preset, args)), flush=True)


if __name__ == "__main__":
    main()
