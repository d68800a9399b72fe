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

With ``--part classifier`` (tests/cli/test_hf_clients.cpp's fine-tuned runs), instead:

3. each WORK/<name>/hf that ``tupe export`` wrote from a fine-tuned run's model.pt loads with
   AutoModelForSequenceClassification (trust_remote_code=True), every tensor used, with
   config.id2label and problem_type as the task's, and its fp32 logits on --text/--text-b equal
   WORK/<name>/classify.json (``tupe classify --format json``) within --tolerance, on the same
   tokens; the same folder loads with AutoModel (the encoder, the pooler) to the same pooled
   output;
4. a random BertForSequenceClassification saved by save_pretrained goes through ``tupe export``
   and loads back with every tensor identical, the pooler and classifier included, and
   ``tupe classify`` on the saved folder equals transformers' logits.

Prints one line per preset (its class and max |delta logprob|, or max |delta logit|); exits 1
on any failure.
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
    AutoModelForSequenceClassification,
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


def load_checked(auto_class, folder, unused=(), **kwargs):
    """``auto_class`` from ``folder`` with every tensor used (but those starting with one of
    ``unused``, e.g. a classifier's head under AutoModel), float32, in eval mode."""
    model, info = auto_class.from_pretrained(folder, output_loading_info=True, **kwargs)
    unexpected = info.get("unexpected_keys", [])
    info["unexpected_keys"] = [k for k in unexpected if not k.startswith(unused)]
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


def classifier_logits(model, tokenizer, text, text_b):
    """(input tokens, fp32 logits (L)) of a text pair."""
    enc = tokenizer(text, text_b, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[0]
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    return tokens, logits.float()


def compare_classification(expected, tokens, logits):
    """Max |delta logit| against ``tupe classify --format json``; raises on other tokens."""
    if tokens != expected["tokens"]:
        raise AssertionError(f"tokens {tokens} in transformers, {expected['tokens']} in tupe")
    if "score" in expected:
        return abs(logits[0].item() - expected["score"])
    want = [entry["logit"] for entry in expected["labels"]]
    return max(abs(a - b) for a, b in zip(logits.tolist(), want, strict=True))


def check_classifier_exports(work, text, text_b, tolerance):
    failures = []
    for folder in sorted(p for p in work.iterdir() if (p / "classify.json").is_file()):
        name = folder.name
        try:
            hf = folder / "hf"
            config = json.loads((hf / "config.json").read_text())
            model = load_checked(AutoModelForSequenceClassification, hf, trust_remote_code=True)
            want = (
                "BertForSequenceClassification"
                if config["model_type"] == "bert"
                else "TupeForSequenceClassification"
            )
            if type(model).__name__ != want:
                raise AssertionError(f"loaded as {type(model).__name__}, expected {want}")
            expected = json.loads((folder / "classify.json").read_text())
            labels = (
                ["score"]
                if "score" in expected
                else [entry["label"] for entry in expected["labels"]]
            )
            got = [model.config.id2label[i] for i in range(model.config.num_labels)]
            if "score" not in expected and got != labels:
                raise AssertionError(f"id2label {got}, tupe's labels {labels}")
            kind = "regression" if "score" in expected else "single_label_classification"
            if model.config.problem_type != kind:
                raise AssertionError(f"problem_type {model.config.problem_type}, expected {kind}")
            with contextlib.redirect_stdout(io.StringIO()):
                tokenizer = AutoTokenizer.from_pretrained(hf)
            tokens, logits = classifier_logits(model, tokenizer, text, text_b)
            delta = compare_classification(expected, tokens, logits)
            # AutoModel: the encoder with its pooler, the classifier's input.
            encoder = load_checked(AutoModel, hf, unused=("classifier.",), trust_remote_code=True)
            enc = tokenizer(text, text_b, return_tensors="pt")
            with torch.no_grad():
                pooled = encoder(**enc).pooler_output
                logits_from_pooled = model.classifier(pooled)[0]
            delta = max(delta, (logits_from_pooled - logits).abs().max().item())
            status = "ok" if delta <= tolerance else "FAIL"
            model_type = config["model_type"]
            print(f"{name}\t{model_type}\t{want}\t{labels}\tmax|dlogit| {delta:.3g}\t{status}")
            if delta > tolerance:
                failures.append(f"{name}: max |delta logit| {delta:.3g} > {tolerance}")
        except Exception as e:  # every classifier is reported, then the test fails
            print(f"{name}\tFAIL\t{type(e).__name__}: {e}")
            failures.append(f"{name}: {type(e).__name__}: {e}")
    return failures


def check_classifier_round_trip(binary, vocab, text, text_b, tolerance):
    """A transformers BertForSequenceClassification through ``tupe export``: every tensor (the
    pooler and classifier included), its labels, and ``tupe classify``."""
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    config = bert_config(vocab, num_labels=3, id2label=labels)
    name = "BertForSequenceClassification"
    with tempfile.TemporaryDirectory(prefix="tupe_hf_classifier") as tmp:
        try:
            model, saved, exported = save_and_export(
                binary, BertForSequenceClassification, config, vocab, Path(tmp), 11
            )
            back = load_checked(AutoModelForSequenceClassification, exported)
            n = expect_same_tensors(model, back)
            if back.config.id2label != labels:
                raise AssertionError(f"id2label {back.config.id2label}")
            tokenizer = AutoTokenizer.from_pretrained(saved)
            tokens, logits = classifier_logits(model, tokenizer, text, text_b)
            expected = json.loads(
                tupe(
                    binary,
                    "classify",
                    str(saved),
                    "--text",
                    text,
                    "--text-b",
                    text_b,
                    "--format",
                    "json",
                )
            )
            delta = compare_classification(expected, tokens, logits)
            said = "the pooler and classifier included; tupe classify on the saved folder"
            return report_round_trip(name, n, said, "max|dlogit|", delta, tolerance)
        except Exception as e:  # reported, then the test fails
            return report_round_trip(name, error=e)


def report_round_trip(name, n=0, said="", measure="", delta=0.0, tolerance=0.0, error=None):
    """Prints a round trip's line; its failures (a list, empty when it passed)."""
    if error is not None:
        print(f"{name}\tFAIL\t{type(error).__name__}: {error}")
        return [f"{name}: {type(error).__name__}: {error}"]
    print(f"{name}: {n} tensors identical after tupe export; {said}: {measure} {delta:.3g}")
    return [f"{name}: {measure} {delta:.3g} > {tolerance}"] if delta > tolerance else []


def bert_config(vocab, **kwargs):
    """A tiny BertConfig over the test's vocabulary."""
    return BertConfig(
        vocab_size=sum(1 for _ in open(vocab)),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        **kwargs,
    )


def save_and_export(binary, cls, config, vocab, tmp, seed):
    """A random ``cls`` saved by save_pretrained (with a BERT folder's tokenizer files, as
    bert-base-uncased ships them), then ``tupe export`` of that folder: (model, saved, exported)."""
    saved, exported = tmp / "saved", tmp / "exported"
    model = cls(config)
    randomize(model, seed)
    model.eval().save_pretrained(saved)
    shutil.copyfile(vocab, saved / "vocab.txt")
    tokenizer_config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True}
    (saved / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    tupe(binary, "export", str(saved), "--out", str(exported))
    return model, saved, exported


def expect_same_tensors(model, back):
    """Every tensor of ``model`` in ``back`` under the same name, bit for bit; their count."""
    got = back.state_dict()
    for key, tensor in model.state_dict().items():
        if key not in got:
            raise AssertionError(f"{key} missing after the round trip")
        if not torch.equal(got[key], tensor):
            raise AssertionError(f"{key} differs after the round trip")
    return len(model.state_dict())


def check_transformers_round_trip(binary, vocab, text, tolerance):
    """A transformers BertForMaskedLM through ``tupe export``: every tensor, and fill-mask."""
    name = "BertForMaskedLM"
    with tempfile.TemporaryDirectory(prefix="tupe_hf_round_trip") as tmp:
        try:
            model, saved, exported = save_and_export(
                binary, BertForMaskedLM, bert_config(vocab), vocab, Path(tmp), 7
            )
            back = load_checked(AutoModelForMaskedLM, exported)
            n = expect_same_tensors(model, back)
            tokenizer = AutoTokenizer.from_pretrained(saved)
            ids, logprobs = mask_logprobs(model, tokenizer, text)
            expected = json.loads(
                tupe(binary, "fill-mask", str(saved), "--text", text, "--format", "json")
            )
            delta = compare(
                expected, ids, logprobs, tokenizer.mask_token_id, tokenizer.unk_token_id
            )
            said = "tupe fill-mask on the saved folder"
            return report_round_trip(name, n, said, "max|dlogprob|", delta, tolerance)
        except Exception as e:  # reported, then the test fails
            return report_round_trip(name, error=e)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work", type=Path, required=True, help="WORK/<preset>/{hf,fill_mask.json}"
    )
    parser.add_argument("--tupe", required=True, help="the tupe executable")
    parser.add_argument("--vocab", type=Path, required=True, help="vocab.txt of the round trip")
    parser.add_argument("--text", required=True)
    parser.add_argument("--text-b", default="", help="the second segment (--part classifier)")
    parser.add_argument("--part", choices=("mlm", "classifier"), default="mlm")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.part == "classifier":
        failures = check_classifier_exports(args.work, args.text, args.text_b, args.tolerance)
        failures += check_classifier_round_trip(
            args.tupe, args.vocab, args.text, args.text_b, args.tolerance
        )
    else:
        failures = check_exports(args.work, args.text, args.tolerance)
        failures += check_transformers_round_trip(args.tupe, args.vocab, args.text, args.tolerance)
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
