"""transformers reads what ``tupe export`` writes, and ``tupe`` reads what transformers saves.

Run by tests/cli/test_hf_clients.cpp in the project's environment (TUPE_VENV), after it has
written WORK/<preset>/hf (``tupe export``) and WORK/<preset>/fill_mask.json (``tupe fill-mask
--format json`` on that folder) for every preset:

1. each folder loads with AutoTokenizer and AutoModelForMaskedLM (trust_remote_code=True), every
   tensor used (no missing, unexpected or mismatched key), and its fp32 log-probabilities at the
   [MASK] tokens equal fill_mask.json's within --tolerance;
2. a random BertForMaskedLM saved by save_pretrained goes through ``tupe export`` and loads back
   with identical tensors, and ``tupe fill-mask`` on the saved folder equals transformers; a
   random BertForSequenceClassification's encoder goes through the same way.

Prints one line per preset (its class and max |delta logprob|); exits 1 on any failure.
"""

import argparse
import contextlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from transformers import (
    AutoModel,
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
)


def mask_logprobs(model, tokenizer, text):
    """(input ids (T), log-softmax over the vocabulary at every position (T, V)), fp32."""
    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[0]
    return enc["input_ids"][0], torch.log_softmax(logits.float(), -1)


def compare(expected, ids, logprobs, mask_id, unk_id):
    """Max |delta| over fill-mask's candidates; raises on a different tokenization or top-1."""
    if (ids == unk_id).any():
        raise AssertionError(f"[UNK] in transformers' tokens {ids.tolist()}")
    positions = (ids == mask_id).nonzero().view(-1).tolist()
    want = [m["position"] for m in expected["masks"]]
    if positions != want:
        raise AssertionError(f"[MASK] at {positions} in transformers, at {want} in tupe")
    delta = 0.0
    for m in expected["masks"]:
        row = logprobs[m["position"]]
        for c in m["top"]:
            delta = max(delta, abs(row[c["id"]].item() - c["logprob"]))
        best = m["top"][0]
        if row.max().item() - row[best["id"]].item() > 1e-4:
            raise AssertionError(f"position {m['position']}: tupe's top token {best} is not best")
    return delta


def load_checked(auto_class, folder, **kwargs):
    model, info = auto_class.from_pretrained(folder, output_loading_info=True, **kwargs)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info.get(kind):
            raise AssertionError(f"{folder}: {kind} {sorted(info[kind])}")
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise AssertionError(f"{folder}: not float32")
    return model.eval()


def check_exports(work, text, tolerance):
    failures = []
    for folder in sorted(p for p in work.iterdir() if (p / "hf" / "config.json").is_file()):
        preset = folder.name
        try:
            config = json.loads((folder / "hf" / "config.json").read_text())
            model = load_checked(AutoModelForMaskedLM, folder / "hf", trust_remote_code=True)
            # Without trust_remote_code: transformers asks about the folder's code on a terminal
            # and, answered no (here stdin is empty), reads config.json as a plain config.
            with contextlib.redirect_stdout(io.StringIO()):
                tokenizer = AutoTokenizer.from_pretrained(folder / "hf")
            if type(tokenizer).__name__ not in ("BertTokenizer", "BertTokenizerFast"):
                raise AssertionError(f"tokenizer {type(tokenizer).__name__}")
            want = "BertForMaskedLM" if config["model_type"] == "bert" else "TupeForMaskedLM"
            if type(model).__name__ != want:
                raise AssertionError(f"loaded as {type(model).__name__}, expected {want}")
            expected = json.loads((folder / "fill_mask.json").read_text())
            ids, logprobs = mask_logprobs(model, tokenizer, text)
            delta = compare(
                expected, ids, logprobs, tokenizer.mask_token_id, tokenizer.unk_token_id
            )
            status = "ok" if delta <= tolerance else "FAIL"
            print(f"{preset}\t{config['model_type']}\t{want}\tmax|dlogprob| {delta:.3g}\t{status}")
            if delta > tolerance:
                failures.append(f"{preset}: max |delta logprob| {delta:.3g} > {tolerance}")
        except Exception as e:  # every preset is reported, then the test fails
            print(f"{preset}\tFAIL\t{type(e).__name__}: {e}")
            failures.append(f"{preset}: {type(e).__name__}: {e}")
    return failures


def randomize(model, seed):
    """Every parameter from N(0, 0.3^2) (LayerNorm gains around 1), so that nothing is 0 or 1."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.3)
            if "LayerNorm.weight" in name:
                p.add_(1.0)


def tupe(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"tupe {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def check_transformers_round_trip(binary, vocab, text, tolerance):
    failures = []
    config = BertConfig(
        vocab_size=sum(1 for _ in open(vocab)),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    with tempfile.TemporaryDirectory(prefix="tupe_hf_round_trip") as tmp:
        tmp = Path(tmp)
        for cls, auto_class in (
            (BertForMaskedLM, AutoModelForMaskedLM),
            (BertForSequenceClassification, AutoModel),
        ):
            name = cls.__name__
            try:
                saved, exported = tmp / f"{name}-saved", tmp / f"{name}-exported"
                model = cls(config)
                randomize(model, 7)
                model.eval().save_pretrained(saved)
                # A BERT folder's tokenizer files, as bert-base-uncased ships them.
                shutil.copyfile(vocab, saved / "vocab.txt")
                tokenizer_config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True}
                (saved / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
                tupe(binary, "export", str(saved), "--out", str(exported))
                back = auto_class.from_pretrained(exported).eval()
                # The encoder (and for BertForMaskedLM the head) under the same names; tupe has
                # no pooler and no task head, so those are not carried.
                prefix = "" if cls is BertForMaskedLM else "bert."
                kept = {
                    k: v
                    for k, v in model.state_dict().items()
                    if not k.startswith(("bert.pooler.", "classifier."))
                }
                got = {prefix + k: v for k, v in back.state_dict().items()}
                for key, tensor in kept.items():
                    if key not in got:
                        raise AssertionError(f"{key} missing after the round trip")
                    if not torch.equal(got[key], tensor):
                        raise AssertionError(f"{key} differs after the round trip")
                line = f"{name}: {len(kept)} tensors identical after tupe export"
                if cls is BertForMaskedLM:
                    tokenizer = AutoTokenizer.from_pretrained(saved)
                    ids, logprobs = mask_logprobs(model, tokenizer, text)
                    expected = json.loads(
                        tupe(binary, "fill-mask", str(saved), "--text", text, "--format", "json")
                    )
                    delta = compare(
                        expected, ids, logprobs, tokenizer.mask_token_id, tokenizer.unk_token_id
                    )
                    line += f"; tupe fill-mask on the saved folder: max|dlogprob| {delta:.3g}"
                    if delta > tolerance:
                        failures.append(f"{name}: fill-mask max |delta logprob| {delta:.3g}")
                print(line)
            except Exception as e:  # reported, then the test fails
                print(f"{name}\tFAIL\t{type(e).__name__}: {e}")
                failures.append(f"{name}: {type(e).__name__}: {e}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work", type=Path, required=True, help="WORK/<preset>/{hf,fill_mask.json}"
    )
    parser.add_argument("--tupe", required=True, help="the tupe executable")
    parser.add_argument("--vocab", type=Path, required=True, help="vocab.txt of the round trip")
    parser.add_argument("--text", required=True)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    failures = check_exports(args.work, args.text, args.tolerance)
    failures += check_transformers_round_trip(args.tupe, args.vocab, args.text, args.tolerance)
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
