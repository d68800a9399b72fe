#!/usr/bin/env python3
"""Helpers for scripts/gpu_check.sh: a synthetic corpus, the bench summary, and the checks
that compare `tupe` against an independent implementation.

  corpus OUT [--sentences N]        a seeded toy corpus (a sentence per line, blank line = doc)
  bench-summary FILE.json ...       one line per variant of `tupe bench --format json`
  hf-compare --export DIR --inspect DIR [--pt FILE]
                                    the exported HF folder (model.safetensors + config.json)
                                    against `tupe inspect`'s per-layer attention logits and
                                    probabilities: a plain-torch BERT written from HF
                                    modeling_bert's formulas always, and transformers'
                                    BertForMaskedLM when it is installed
  weights-compare A.pt B.pt         two `tupe export --out FILE.pt` dicts, tensor by tensor
  run-summary RUN_DIR [--label L]   s/step, tokens/s and losses of a `tupe pretrain` run
                                    (metrics.tsv, config.txt)
  unpack-deb FILE.deb DIR           `dpkg -x` for machines without dpkg (ar + data.tar.*)

Every check prints `figure: ...` lines (gpu_check.sh copies them into its summary) and exits 1
when a comparison is outside its tolerance. Tolerances are relative to the reference tensor's
largest magnitude: fp32 on the CPU on both sides, so 1e-4 leaves room for summation order only.
"""

import argparse
import json
import math
import os
import random
import struct
import sys

TOLERANCE = 1e-4


# ---- corpus ------------------------------------------------------------------------------------

WORDS = {
    "det": "the a this that every some one another".split(),
    "adj": (
        "small large red quiet old young bright dark happy early late green cold warm "
        "heavy light quick slow tall short"
    ).split(),
    "noun": (
        "dog cat river house city tree child teacher garden window road letter ship "
        "mountain market friend student engine story question"
    ).split(),
    "verb": (
        "sees finds follows builds reads carries opens watches answers paints "
        "crosses visits remembers"
    ).split(),
    "prep": "near under behind beside across inside over".split(),
    "adv": "slowly often never quietly again today".split(),
}

# The text `tupe inspect` reads: words of the corpus only, so every word has a vocabulary entry.
INSPECT_TEXT = "the quick dog follows a small cat across the old road near the river ."


def sentence(rng):
    w = lambda k: rng.choice(WORDS[k])  # noqa: E731
    parts = [w("det"), w("adj"), w("noun"), w("verb"), w("det"), w("noun")]
    if rng.random() < 0.5:
        parts += [w("prep"), w("det"), w("adj"), w("noun")]
    if rng.random() < 0.3:
        parts.append(w("adv"))
    return " ".join(parts) + " ."


def cmd_corpus(args):
    rng = random.Random(args.seed)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        for i in range(args.sentences):
            f.write(sentence(rng) + "\n")
            if i % 20 == 19:
                f.write("\n")  # a document per 20 sentences
    print(f"wrote {args.out}: {args.sentences} sentences, seed {args.seed}")
    print(f"inspect text: {INSPECT_TEXT}")
    return 0


# ---- bench summary -----------------------------------------------------------------------------


def cmd_bench_summary(args):
    rc = 0
    for path in args.files:
        try:
            with open(path) as f:
                b = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: cannot read: {e}")
            rc = 1
            continue
        head = (
            f"{b['device']} {b['dtype']} size {b['size']} seq {b['seq']} batch {b['batch']}"
            f" ({b['steps']} steps after {b['warmup']} warm-up)"
        )
        unit, scale = ("TFLOP/s", 1e12) if b["matmul_peak_flops"] >= 1e12 else ("GFLOP/s", 1e9)
        peak = b["matmul_peak_flops"] / scale
        for v in b["variants"]:
            print(
                f"figure: bench {head}: {v['variant']} {v['median_s']:.4f} s/step, "
                f"{v['tokens_per_s']:,.0f} tok/s, {v['achieved_flops'] / scale:.1f} {unit}"
                f" = {100 * v['utilisation']:.0f}% of the measured {peak:.1f} {unit} matmul"
                f" peak, {v['relative_to_first']:.3f}x {b['variants'][0]['variant']},"
                f" loss {v['loss']:.3f}, params {v['params']:,}"
            )
    return rc


# ---- readers -----------------------------------------------------------------------------------


def read_safetensors(path):
    """name -> tensor of a .safetensors file, without the safetensors package."""
    import torch

    dtypes = {
        "F32": torch.float32,
        "F16": torch.float16,
        "BF16": torch.bfloat16,
        "F64": torch.float64,
        "I64": torch.int64,
        "I32": torch.int32,
    }
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = memoryview(blob)[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = dtypes[info["dtype"]]
        if end == begin:
            t = torch.empty(0, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out


def read_npy(path):
    import numpy as np
    import torch

    return torch.from_numpy(np.load(path))


def rel_diff(a, b):
    """max |a - b| / max |b| (b the reference), and max |a - b|."""
    a, b = a.double(), b.double()
    d = (a - b).abs().max().item() if a.numel() else 0.0
    scale = b.abs().max().item() if b.numel() else 0.0
    return (d / scale if scale > 0 else d), d


# ---- a plain-torch BERT from HF modeling_bert's formulas ---------------------------------------
# Post-LN BERT, eval mode (no dropout), one unpadded sequence:
#   embeddings  E = LayerNorm(word[ids] + position[0..T-1] + token_type[types])
#   attention   q, k, v = x Wq^T + bq, ... split into H heads of d = C / H
#               scores = q k^T / sqrt(d); probs = softmax(scores); ctx = probs v
#               a = LayerNorm(x + (ctx Wo^T + bo))
#   FFN         h = LayerNorm(a + (gelu(a Wi^T + bi) Wo2^T + bo2)), erf GELU ("gelu")
#   MLM head    logits = LayerNorm(gelu(h Wt^T + bt)) word^T + bias (decoder tied to word)


class PlainBert:
    def __init__(self, weights, config):
        self.w = {k: v.double() for k, v in weights.items()}
        self.c = config

    def _linear(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _ln(self, x, name):
        import torch.nn.functional as F

        return F.layer_norm(
            x,
            (x.shape[-1],),
            self.w[name + ".weight"],
            self.w[name + ".bias"],
            self.c["layer_norm_eps"],
        )

    def forward(self, ids, types):
        import torch
        import torch.nn.functional as F

        w, c = self.w, self.c
        T = ids.shape[0]
        H = c["num_attention_heads"]
        d = c["hidden_size"] // H
        e = "bert.embeddings."
        x = (
            w[e + "word_embeddings.weight"][ids]
            + w[e + "position_embeddings.weight"][:T]
            + w[e + "token_type_embeddings.weight"][types]
        )  # (T, C)
        x = self._ln(x, e + "LayerNorm")
        hidden, scores_all, probs_all = [x], [], []
        for i in range(c["num_hidden_layers"]):
            p = f"bert.encoder.layer.{i}."
            heads = lambda t: t.view(T, H, d).transpose(0, 1)  # noqa: E731  (T, C) -> (H, T, d)
            q = heads(self._linear(x, p + "attention.self.query"))
            k = heads(self._linear(x, p + "attention.self.key"))
            v = heads(self._linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(1, 2) / math.sqrt(d)  # (H, T, T)
            probs = torch.softmax(scores, dim=-1)
            ctx = (probs @ v).transpose(0, 1).reshape(T, H * d)  # (H, T, d) -> (T, C)
            a = self._ln(
                x + self._linear(ctx, p + "attention.output.dense"),
                p + "attention.output.LayerNorm",
            )
            f = self._linear(F.gelu(self._linear(a, p + "intermediate.dense")), p + "output.dense")
            x = self._ln(a + f, p + "output.LayerNorm")
            hidden.append(x)
            scores_all.append(scores)
            probs_all.append(probs)
        t = self._ln(
            F.gelu(self._linear(x, "cls.predictions.transform.dense")),
            "cls.predictions.transform.LayerNorm",
        )
        logits = t @ w["bert.embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]
        return {"hidden": hidden, "scores": scores_all, "probs": probs_all, "logits": logits}


def centred(t):
    """Row-centred values: softmax is invariant to a per-row constant, so centred log-probs and
    centred pre-softmax logits are the same numbers."""
    return t - t.mean(dim=-1, keepdim=True)


class Checks:
    def __init__(self):
        self.failed = []

    def check(self, what, got, ref, tol=TOLERANCE):
        rel, absd = rel_diff(got, ref)
        ok = rel <= tol
        print(
            f"figure: {what}: max |diff| {absd:.3e}, relative {rel:.3e} "
            f"({'ok' if ok else 'FAILED'}, tolerance {tol:g})"
        )
        if not ok:
            self.failed.append(what)


def compare_transformers(transformers, export, ids, types, ins_logits, ins_probs, ref, L, checks):
    import torch

    try:
        model, info = transformers.BertForMaskedLM.from_pretrained(
            export, attn_implementation="eager", output_loading_info=True
        )
    except TypeError:  # older transformers without attn_implementation
        model, info = transformers.BertForMaskedLM.from_pretrained(export, output_loading_info=True)
    model = model.float().eval()
    missing = [k for k in info.get("missing_keys", []) if "decoder" not in k]
    print(
        f"from_pretrained: missing keys {info.get('missing_keys', [])}, unexpected "
        f"{info.get('unexpected_keys', [])}"
    )
    if missing or info.get("unexpected_keys"):
        checks.failed.append("from_pretrained keys")
    out = model(
        input_ids=ids.unsqueeze(0),
        token_type_ids=types.unsqueeze(0),
        attention_mask=torch.ones_like(ids).unsqueeze(0),
        output_attentions=True,
        output_hidden_states=True,
        return_dict=True,
    )
    if out.attentions is None or len(out.attentions) != L:
        print("transformers returned no attentions (attn_implementation?)")
        checks.failed.append("transformers attentions")
    else:
        hf_probs = torch.stack([a[0] for a in out.attentions])  # L x (1, H, T, T) -> (L, H, T, T)
        checks.check(
            "tupe inspect vs transformers BertForMaskedLM, attention probs (all layers)",
            torch.stack(ins_probs),
            hf_probs,
        )
        # HF returns no pre-softmax scores; log-probs equal them up to a per-row constant.
        checks.check(
            "tupe inspect vs transformers, attention logits row-centred vs row-centred log-probs",
            centred(torch.stack(ins_logits).double()),
            centred(hf_probs.double().clamp_min(1e-300).log()),
            tol=1e-3,
        )
    checks.check(
        "plain-torch BERT vs transformers, MLM logits (T x V)", out.logits[0], ref["logits"]
    )
    checks.check(
        "plain-torch BERT vs transformers, final hidden state",
        out.hidden_states[-1][0],
        ref["hidden"][-1],
    )


def cmd_hf_compare(args):
    import torch

    torch.set_grad_enabled(False)
    with open(os.path.join(args.export, "config.json")) as f:
        config = json.load(f)
    print(
        f"export {args.export}: model_type {config.get('model_type')}, "
        f"{config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"{config['num_attention_heads']} heads, vocab {config['vocab_size']}"
    )
    if config.get("model_type") != "bert":
        print("not a BERT export (only bert-a exports load into BertForMaskedLM)")
        return 1
    weights = read_safetensors(os.path.join(args.export, "model.safetensors"))
    print(
        f"model.safetensors: {len(weights)} tensors, "
        f"{sum(t.numel() for t in weights.values()):,} parameters"
    )
    checks = Checks()
    if args.pt:
        pt = torch.load(args.pt)
        common = sorted(set(pt) & set(weights))
        only = sorted(set(pt) ^ set(weights))
        print(
            f"{args.pt}: {len(pt)} tensors, {len(common)} shared with model.safetensors"
            + (f", differing names: {only}" if only else "")
        )
        worst = max((rel_diff(pt[n].float(), weights[n].float())[0], n) for n in common)
        print(
            f"figure: export .pt vs model.safetensors: worst relative diff {worst[0]:.3e} "
            f"({worst[1]})"
        )
        if worst[0] != 0.0:
            checks.failed.append("export .pt vs model.safetensors")

    ids = read_npy(os.path.join(args.inspect, "input_ids.npy")).long()
    types = torch.zeros_like(ids)
    L = config["num_hidden_layers"]
    ins_logits = [read_npy(os.path.join(args.inspect, f"layer{i}_logits.npy")) for i in range(L)]
    ins_probs = [read_npy(os.path.join(args.inspect, f"layer{i}_probs.npy")) for i in range(L)]
    print(
        f"inspect {args.inspect}: {ids.numel()} tokens, {L} layers of logits and probs, "
        f"shape {tuple(ins_logits[0].shape)}"
    )

    # 1. The plain-torch reference (float64) against tupe inspect: logits and probs per layer.
    ref = PlainBert(weights, config).forward(ids, types)
    checks.check(
        "plain-torch BERT vs tupe inspect, attention logits (all layers)",
        torch.stack(ins_logits),
        torch.stack(ref["scores"]),
    )
    checks.check(
        "plain-torch BERT vs tupe inspect, attention probs (all layers)",
        torch.stack(ins_probs),
        torch.stack(ref["probs"]),
    )

    # 2. transformers' BertForMaskedLM on the same folder.
    try:
        import transformers
    except ImportError:
        print(
            "figure: transformers not installed: skipped the BertForMaskedLM comparison "
            "(the plain-torch BERT above is the reference)"
        )
        return 1 if checks.failed else 0
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    try:
        compare_transformers(
            transformers, args.export, ids, types, ins_logits, ins_probs, ref, L, checks
        )
    except Exception as e:  # an API change in transformers must not hide the figures above
        import traceback

        traceback.print_exc(limit=3)
        print(f"figure: transformers comparison failed: {type(e).__name__}: {e}")
        checks.failed.append("transformers comparison")
    return 1 if checks.failed else 0


def final_validation_loss(run):
    last = None
    with open(os.path.join(run, "metrics.tsv")) as f:
        for line in f:
            cols = line.split("\t")
            if len(cols) >= 4 and cols[1] == "validation" and cols[2] == "loss":
                last = float(cols[3])
    return last


def cmd_weights_compare(args):
    import torch

    a, b = torch.load(args.a), torch.load(args.b)
    if set(a) != set(b):
        print(f"different names: {sorted(set(a) ^ set(b))}")
        return 1

    # As tests/engine/test_distributed.cpp: relative to the tensor's largest value, floored at
    # 1e-3. The floor matters for attention.self.key.bias: softmax ignores a per-row constant, so
    # its gradient is zero up to rounding and it stays at ~1e-9, where any summation order
    # differs by 100%.
    def rel(n):
        x, y = a[n].double(), b[n].double()
        return (x - y).abs().max().item() / max(args.floor, y.abs().max().item())

    worst = max((rel(n), n) for n in a)
    ok = worst[0] <= args.tol
    print(
        f"figure: {args.what}: {len(a)} tensors, worst max|diff| / max(|tensor|, {args.floor:g})"
        f" {worst[0]:.3e} ({worst[1]}; {'ok' if ok else 'FAILED'}, tolerance {args.tol:g})"
    )
    if args.runs:
        la, lb = (final_validation_loss(r) for r in args.runs)
        if la is None or lb is None:
            print(f"no validation loss in {args.runs}")
            return 1
        loss_ok = abs(la - lb) <= 1e-4
        print(
            f"figure: {args.what}: final validation loss {la:.6f} vs {lb:.6f}, |diff| "
            f"{abs(la - lb):.2e} ({'ok' if loss_ok else 'FAILED'}, tolerance 1e-4)"
        )
        ok = ok and loss_ok
    return 0 if ok else 1


def cmd_run_summary(args):
    config = {}
    with open(os.path.join(args.run, "config.txt")) as f:
        for line in f:
            if " = " in line:
                k, v = line.rstrip("\n").split(" = ", 1)
                config[k] = v
    rows = []
    with open(os.path.join(args.run, "metrics.tsv")) as f:
        next(f)
        for line in f:
            step, split, metric, value, elapsed = line.split("\t")
            rows.append((int(step), split, metric, float(value), float(elapsed)))
    train = [(s, v, e) for s, sp, m, v, e in rows if sp == "train" and m == "loss"]
    val = [(s, v) for s, sp, m, v, e in rows if sp == "validation" and m == "loss"]
    # Per-step wall times from the elapsed column (log_interval 1), from step 3 on: the first
    # steps include CUDA context start, kernel selection and the allocator's growth.
    gaps = sorted(b[2] - a[2] for a, b in zip(train, train[1:]) if b[0] == a[0] + 1 and a[0] >= 2)
    tokens = int(config.get("train.batch_size", "0")) * int(config.get("data.max_seq_len", "0"))
    label = args.label or os.path.basename(os.path.normpath(args.run))
    text = (
        f"figure: pretrain {label}: {config.get('model.preset')} {config.get('model.size')}, "
        f"{config.get('train.device')} {config.get('train.dtype')}, batch "
        f"{config.get('train.batch_size')} x seq {config.get('data.max_seq_len')}, "
        f"{train[-1][0] if train else 0} steps"
    )
    if gaps:
        med = gaps[len(gaps) // 2]
        text += f", median {med:.4f} s/step ({tokens / med:,.0f} tok/s, steps 3..)"
    if train:
        text += f", train loss {train[0][1]:.4f} -> {train[-1][1]:.4f}"
    if val:
        text += f", validation loss {val[0][1]:.4f} -> {val[-1][1]:.6f}"
    print(text)
    return 0


# ---- .deb without dpkg -------------------------------------------------------------------------


def cmd_unpack_deb(args):
    import io
    import tarfile

    with open(args.deb, "rb") as f:
        blob = f.read()
    if blob[:8] != b"!<arch>\n":
        print(f"{args.deb}: not an ar archive")
        return 1
    pos = 8
    while pos + 60 <= len(blob):
        name = blob[pos : pos + 16].decode().strip().rstrip("/")
        size = int(blob[pos + 48 : pos + 58].decode().strip())
        body = blob[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                print(f"{args.deb}: {name} needs zstd; install dpkg or unpack it by hand")
                return 1
            with tarfile.open(fileobj=io.BytesIO(body)) as t:
                try:  # Python >= 3.12: keep links as dpkg -x does (libz.so is absolute)
                    t.extractall(args.dir, filter="tar")
                except TypeError:
                    t.extractall(args.dir)
            print(f"unpacked {args.deb} ({name}) into {args.dir}")
            return 0
    print(f"{args.deb}: no data.tar member")
    return 1


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("out")
    c.add_argument("--sentences", type=int, default=20000)
    c.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("bench-summary")
    c.add_argument("files", nargs="+")
    c = sub.add_parser("hf-compare")
    c.add_argument("--export", required=True)
    c.add_argument("--inspect", required=True)
    c.add_argument("--pt")
    c = sub.add_parser("weights-compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--tol", type=float, default=1e-4)
    c.add_argument("--floor", type=float, default=1e-3)
    c.add_argument("--what", default="weights")
    c.add_argument(
        "--runs",
        nargs=2,
        metavar="RUN_DIR",
        help="also compare their final validation losses (metrics.tsv)",
    )
    c = sub.add_parser("run-summary")
    c.add_argument("run")
    c.add_argument("--label")
    c = sub.add_parser("unpack-deb")
    c.add_argument("deb")
    c.add_argument("dir")
    args = p.parse_args()
    return {
        "corpus": cmd_corpus,
        "bench-summary": cmd_bench_summary,
        "hf-compare": cmd_hf_compare,
        "weights-compare": cmd_weights_compare,
        "run-summary": cmd_run_summary,
        "unpack-deb": cmd_unpack_deb,
    }[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
