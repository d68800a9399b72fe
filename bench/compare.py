#!/usr/bin/python3
"""C++ (`tupe bench`) against PyTorch eager (bench/reference_bert.py) on the same model, batch,
optimizer and threads, in one go: rounds alternate C++ and Python (A B A B) so that load from
other processes falls on both alike; each variant's figure is the median over every timed
step of every round. Prints one table with the speed ratio (PyTorch s/step / C++ s/step, so
> 1 means C++ is faster) per variant, and TUPE's overhead over bert-a in both.

  bench/compare.py                      # small, seq 128, batch 32, 2 threads, fp32, ~4 min
  bench/compare.py --dtype bf16 --hf    # also HF-style eager (logits at every position)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_cpp(args):
    cmd = [args.tupe, "bench", "--preset", args.preset, "--size", args.size, "--seq",
           str(args.seq), "--batch", str(args.batch), "--threads", str(args.threads), "--dtype",
           args.dtype, "--steps", str(args.steps), "--warmup", str(args.warmup), "--format", "json"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    data = json.loads(out.stdout)
    return data, {v["variant"]: v for v in data["variants"]}


def run_py(args, style):
    cmd = [sys.executable, os.path.join(HERE, "reference_bert.py"), "--preset", args.preset,
           "--size", args.size, "--seq", str(args.seq), "--batch", str(args.batch), "--threads",
           str(args.threads), "--dtype", args.dtype, "--steps", str(args.steps), "--warmup",
           str(args.warmup), "--style", style]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {r["variant"]: r for r in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tupe", default=os.environ.get(
        "TUPE", os.path.join(ROOT, "build", "experiments", "tupe")))
    ap.add_argument("--preset", default="bert-a,tupe-a,tupe-r")
    ap.add_argument("--size", default="small")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--steps", type=int, default=4, help="timed steps per variant and round")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="C++/Python alternations")
    ap.add_argument("--hf", action="store_true",
                    help="also time HF-style eager (Q/K/V apart, MLM logits at every position)")
    ap.add_argument("--json", help="write every measurement to this file")
    args = ap.parse_args()
    if not os.access(args.tupe, os.X_OK):
        sys.exit(f"compare.py: no tupe executable at {args.tupe} (build it, or pass --tupe PATH)")

    variants = args.preset.split(",")
    times = {impl: {v: [] for v in variants} for impl in ("cpp", "py", "hf")}
    cpp_last, py_last, loads = None, None, [load()]
    started = time.time()
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}: C++ ...", file=sys.stderr, flush=True)
        meta, cpp_last = run_cpp(args)
        print(f"round {r + 1}/{args.rounds}: PyTorch ...", file=sys.stderr, flush=True)
        py_last = run_py(args, "same")
        for v in variants:
            times["cpp"][v] += cpp_last[v]["times_s"]
            times["py"][v] += py_last[v]["times"]
        if args.hf:
            print(f"round {r + 1}/{args.rounds}: PyTorch, HF style ...", file=sys.stderr, flush=True)
            hf = run_py(args, "hf")
            for v in variants:
                times["hf"][v] += hf[v]["times"]
        loads.append(load())

    med = {impl: {v: statistics.median(t) for v, t in d.items() if t} for impl, d in times.items()}
    header = ["variant", "params C++/Py", "C++ s/step", "PyTorch s/step", "C++ speed-up",
              "C++ tok/s", "C++ GFLOP/s", "util", "RSS MiB"]
    if args.hf:
        header[5:5] = ["HF-style s/step", "vs HF-style"]
    rows = [header]
    for v in variants:
        c, p = med["cpp"][v], med["py"][v]
        cv = cpp_last[v]
        same = "same" if cv["params"] == py_last[v]["params"] else \
            f"{cv['params']}/{py_last[v]['params']} DIFFER"
        row = [v, same, f"{c:.3f}", f"{p:.3f}", f"{p / c:.2f}x",
               f"{args.batch * args.seq / c:,.0f}", f"{cv['flops_per_step'] / c / 1e9:.1f}",
               f"{cv['flops_per_step'] / c / meta['matmul_peak_flops']:.0%}",
               f"{cv['rss_peak_bytes'] / 2**20:.0f}"]
        if args.hf:
            h = med["hf"][v]
            row[5:5] = [f"{h:.3f}", f"{h / c:.2f}x"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(f"size {args.size}, seq {args.seq}, batch {args.batch}, {args.threads} threads, "
          f"{args.dtype}; median of {args.rounds} x {args.steps} steps per variant after "
          f"{args.warmup} warm-up; C++ and PyTorch alternated; matmul peak "
          f"{meta['matmul_peak_flops'] / 1e9:.1f} GFLOP/s ({args.dtype})")
    for r in rows:
        print("  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))))
    if "bert-a" in variants:
        for impl, name in (("cpp", "C++"), ("py", "PyTorch")):
            over = [f"{v} {100 * (med[impl][v] / med[impl]['bert-a'] - 1):+.1f}%"
                    for v in variants if v != "bert-a"]
            if over:
                print(f"TUPE overhead over bert-a, {name}: " + ", ".join(over))
    print(f"load average (1/5/15 min) before and after each round: {' | '.join(loads)}; "
          f"{time.time() - started:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "times_s": times, "median_s": med, "loads": loads}, f,
                      indent=1)


if __name__ == "__main__":
    main()
