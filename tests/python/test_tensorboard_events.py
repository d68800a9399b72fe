"""TensorBoard's own reader reads every scalar of a resumed `tupe pretrain` run.

A tiny bert-a is pretrained on a synthetic corpus, stopped with SIGINT after a few steps (it
checkpoints and exits 130), and resumed to a few steps more: the run folder then holds two
events files, the second opening with a SessionLog START at the resumed step. TensorBoard's
EventAccumulator (the class its scalar dashboard reads through) loads the folder; its tags,
and every (step, value) of every tag, must equal metrics.tsv's rows (tag = split/metric,
value = the float32 of the row's value) one for one.

Usage: test_tensorboard_events.py --tupe PATH_TO_TUPE
"""

import argparse
import csv
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

WORDS = "the a old red cat dog man house saw liked found near river with small bird".split()


def write_inputs(d: Path) -> Path:
    """A seeded corpus of 24 documents, its vocabulary and a tiny bert-a config."""
    rng = np.random.default_rng(7)
    with open(d / "corpus.txt", "w") as f:
        for _ in range(24):
            for _ in range(6):
                f.write(" ".join(rng.choice(WORDS, size=rng.integers(4, 10))) + " .\n")
            f.write("\n")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."] + WORDS
    (d / "vocab.txt").write_text("\n".join(tokens) + "\n")
    cfg = d / "tiny.yaml"
    cfg.write_text(
        "model:\n  preset: bert-a\n  size: tiny\n  max_position_embeddings: 32\n"
        f"data:\n  corpus: {d / 'corpus.txt'}\n  vocab: {d / 'vocab.txt'}\n"
        f"  cache_dir: {d / 'cache'}\n  max_seq_len: 32\n  validation_fraction: 0.2\n"
        "train:\n  steps: 100000\n  batch_size: 4\n  eval_interval: 2\n  eval_batches: 1\n"
        "  log_interval: 1\n  checkpoint_interval: 1000\n  threads: 1\n"
    )
    return cfg


def metrics_rows(run: Path) -> dict[str, list[tuple[int, float]]]:
    rows: dict[str, list[tuple[int, float]]] = {}
    with open(run / "metrics.tsv") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            tag = f"{r['split']}/{r['metric']}"
            rows.setdefault(tag, []).append((int(r["step"]), float(np.float32(r["value"]))))
    return rows


def last_step(run: Path) -> int:
    try:
        with open(run / "metrics.tsv") as f:
            steps = [int(line.split("\t")[0]) for line in f.readlines()[1:] if line.strip()]
    except FileNotFoundError:
        return -1
    return max(steps, default=-1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tupe", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cfg = write_inputs(d)
        run = d / "run"
        cmd = [args.tupe, "pretrain", "--config", str(cfg), "--out", str(run)]
        first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while last_step(run) < 3 and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
        if first.returncode != 130 or "stopped at step" not in err:
            print(f"FAIL: the first run did not stop on SIGINT (status {first.returncode}):")
            print(err[-2000:])
            return 1
        stopped = int(err.split("stopped at step")[1].split(";")[0])
        resumed = subprocess.run(
            cmd + ["--set", f"train.steps={stopped + 4}"], capture_output=True, text=True
        )
        if resumed.returncode != 0 or f"resumed from {run / 'checkpoint.pt'}" not in resumed.stderr:
            print(f"FAIL: the resume failed (status {resumed.returncode}):")
            print(resumed.stderr[-2000:])
            return 1
        files = sorted(run.glob("events.out.tfevents.*"))
        expected = metrics_rows(run)
        acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        failures = []
        if len(files) != 2:
            failures.append(f"{len(files)} events files, expected 2 (the first and the resume)")
        if tags != sorted(expected):
            failures.append(f"tags {tags} != metrics.tsv's {sorted(expected)}")
        points = 0
        for tag in sorted(expected):
            if tag not in tags:
                continue
            got = [(e.step, e.value) for e in acc.Scalars(tag)]
            points += len(got)
            if got != expected[tag]:
                failures.append(f"{tag}: TensorBoard {got} != metrics.tsv {expected[tag]}")
        print(
            f"stopped at step {stopped}, resumed to {stopped + 4}: {len(files)} events files, "
            f"{len(tags)} tags, {points} scalars read by EventAccumulator"
        )
        for f in failures:
            print("FAIL:", f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
