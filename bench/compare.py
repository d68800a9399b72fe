#!/usr/bin/python3
"""C++ (`tupe bench`) against PyTorch eager (bench/reference_bert.py) on the same model, batch,
optimizer and threads, in one go: rounds alternate C++ and Python (A B A B) so that load from
other processes falls on both alike; each variant's figure is the median over every timed
step of every round. Prints one table with the speed ratio (PyTorch s/step / C++ s/step, so
> 1 means C++ is faster) per variant, and TUPE's overhead over bert-a in both.

  bench/compare.py                      # small, seq 128, batch 32, 2 threads, fp32, ~4 min
  bench/compare.py --size quickstart --steps 20 --rounds 3   # the quickstart's model, seq 64
  bench/compare.py --size quickstart --finetune --steps 30   # fine-tuning steps (GLUE-shaped)
  bench/compare.py --dtype bf16 --hf    # also HF-style eager (logits at every position)

PyTorch runs twice per round: as Debian installs it (OpenBLAS's own pthreads beside ATen's
OpenMP pool, glibc malloc), and with the run-time `tupe` itself is built with
(cmake/TupeRuntime.cmake: the OpenMP OpenBLAS through LD_LIBRARY_PATH, tcmalloc through
LD_PRELOAD), so the ratio separates what the run-time buys from what the C++ code buys.
--py-runtime default|tuned picks one.
"""

import argparse
import glob
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
    cmd = [
        args.tupe,
        "bench",
        "--preset",
        args.preset,
        "--size",
        args.size,
        "--seq",
        str(args.seq),
        "--batch",
        str(args.batch),
        "--threads",
        str(args.threads),
        "--dtype",
        args.dtype,
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--vocab-size",
        str(args.vocab_size),
        "--format",
        "json",
    ] + (["--finetune"] if args.finetune else [])
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    data = json.loads(out.stdout)
    return data, {v["variant"]: v for v in data["variants"]}


def tuned_env():
    """The environment that gives Python's torch the run-time `tupe` links: the OpenMP build of
    OpenBLAS and tcmalloc. None when either is missing on this machine."""
    omp = glob.glob("/usr/lib/*-linux-gnu/openblas-openmp/libblas.so.3")
    tcm = glob.glob("/usr/lib/*-linux-gnu/libtcmalloc_minimal.so.4")
    if not omp or not tcm:
        return None
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.dirname(omp[0]) + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
    )
    env["LD_PRELOAD"] = tcm[0]
    # The tupe launcher also overrides OpenBLAS's core where it fell back to Prescott-class
    # kernels (docs/performance.md, "OpenBLAS core detection"); the same run-time gets the same
    # core.
    core = launcher_core(args_tupe[0]) if args_tupe else None
    if core and "OPENBLAS_CORETYPE" not in env:
        env["OPENBLAS_CORETYPE"] = core
    return env


args_tupe = []


def launcher_core(tupe):
    """The OPENBLAS_CORETYPE the tupe launcher sets on this machine, or None."""
    try:
        out = subprocess.run(
            [tupe, "doctor", "--no-matmul"], check=True, stdout=subprocess.PIPE, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        if line.startswith("blas core") and "set by the tupe launcher" in line:
            return line.split("OPENBLAS_CORETYPE=")[1].split()[0]
    return None


def run_py(args, style, env=None):
    cmd = [
        sys.executable,
        os.path.join(HERE, "reference_bert.py"),
        "--preset",
        args.preset,
        "--size",
        args.size,
        "--seq",
        str(args.seq),
        "--batch",
        str(args.batch),
        "--threads",
        str(args.threads),
        "--dtype",
        args.dtype,
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--vocab-size",
        str(args.vocab_size),
        "--style",
        style,
    ] + (["--finetune"] if args.finetune else [])
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {r["variant"]: r for r in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--tupe", default=os.environ.get("TUPE", os.path.join(ROOT, "build", "cli", "tupe"))
    )
    ap.add_argument("--preset", default="bert-a,tupe-a,tupe-r")
    ap.add_argument("--size", default="small", choices=["quickstart", "tiny", "small", "base"])
    ap.add_argument("--seq", type=int, default=None, help="default 64 at quickstart, else 128")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--steps", type=int, default=4, help="timed steps per variant and round")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="C++/Python alternations")
    ap.add_argument(
        "--hf",
        action="store_true",
        help="also time HF-style eager (Q/K/V apart, MLM logits at every position)",
    )
    ap.add_argument(
        "--py-runtime",
        default="both",
        choices=["both", "default", "tuned"],
        help="PyTorch as installed, with tupe's run-time (OpenMP OpenBLAS, "
        "tcmalloc), or both (default)",
    )
    ap.add_argument("--json", help="write every measurement to this file")
    ap.add_argument(
        "--finetune",
        action="store_true",
        help="fine-tuning steps (tupe bench --finetune, reference_bert.py --finetune)",
    )
    args = ap.parse_args()
    if args.seq is None:
        args.seq = 64 if args.size == "quickstart" else 128
    # Both sides at the same vocabulary: tupe bench's default for the size.
    args.vocab_size = 8000 if args.size == "quickstart" else 30522
    args_tupe.append(args.tupe)
    env_tuned = tuned_env() if args.py_runtime != "default" else None
    if args.py_runtime == "tuned" and env_tuned is None:
        sys.exit(
            "compare.py: --py-runtime tuned needs libopenblas0-openmp and libtcmalloc-minimal4"
        )
    runtimes = ([("py", None)] if args.py_runtime != "tuned" else []) + (
        [("pyt", env_tuned)] if env_tuned is not None else []
    )
    if not os.access(args.tupe, os.X_OK):
        sys.exit(f"compare.py: no tupe executable at {args.tupe} (build it, or pass --tupe PATH)")

    variants = args.preset.split(",")
    times = {impl: {v: [] for v in variants} for impl in ("cpp", "py", "pyt", "hf")}
    cpp_last, py_last, loads = None, None, [load()]
    started = time.time()
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}: C++ ...", file=sys.stderr, flush=True)
        meta, cpp_last = run_cpp(args)
        for v in variants:
            times["cpp"][v] += cpp_last[v]["times_s"]
        for impl, env in runtimes:
            label = "as installed" if env is None else "with tupe's run-time"
            print(f"round {r + 1}/{args.rounds}: PyTorch {label} ...", file=sys.stderr, flush=True)
            py_last = run_py(args, "same", env)
            for v in variants:
                times[impl][v] += py_last[v]["times"]
        if args.hf:
            print(
                f"round {r + 1}/{args.rounds}: PyTorch, HF style ...", file=sys.stderr, flush=True
            )
            hf = run_py(args, "hf", env_tuned if args.py_runtime == "tuned" else None)
            for v in variants:
                times["hf"][v] += hf[v]["times"]
        loads.append(load())

    med = {impl: {v: statistics.median(t) for v, t in d.items() if t} for impl, d in times.items()}
    names = {"py": "PyTorch", "pyt": "PyTorch+rt"}
    header = ["variant", "params C++/Py", "C++ s/step"]
    for impl, _ in runtimes:
        header += [f"{names[impl]} s/step", f"C++ vs {names[impl]}"]
    if args.hf:
        header += ["HF-style s/step", "C++ vs HF-style"]
    header += (
        ["C++ examples/s"] if args.finetune else ["C++ tok/s", "C++ GFLOP/s", "util", "RSS MiB"]
    )
    rows = [header]
    for v in variants:
        c = med["cpp"][v]
        cv = cpp_last[v]
        same = (
            "same"
            if cv["params"] == py_last[v]["params"]
            else f"{cv['params']}/{py_last[v]['params']} DIFFER"
        )
        row = [v, same, f"{c:.3f}"]
        for impl, _ in runtimes:
            p = med[impl][v]
            row += [f"{p:.3f}", f"{p / c:.2f}x"]
        if args.hf:
            h = med["hf"][v]
            row += [f"{h:.3f}", f"{h / c:.2f}x"]
        if args.finetune:
            row += [f"{args.batch / c:,.0f}"]
        else:
            row += [
                f"{args.batch * args.seq / c:,.0f}",
                f"{cv['flops_per_step'] / c / 1e9:.1f}",
                f"{cv['flops_per_step'] / c / meta['matmul_peak_flops']:.0%}",
                f"{cv['rss_peak_bytes'] / 2**20:.0f}",
            ]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(
        f"size {args.size}, seq {args.seq}, batch {args.batch}, {args.threads} threads, "
        f"{args.dtype}; median of {args.rounds} x {args.steps} steps per variant after "
        f"{args.warmup} warm-up; C++ and PyTorch alternated; "
        + (
            "fine-tuning steps, length-bucketed batches; "
            if args.finetune
            else f"matmul peak {meta['matmul_peak_flops'] / 1e9:.1f} GFLOP/s ({args.dtype}); "
        )
        + f"C++ run-time: BLAS "
        f"threads {meta.get('blas_threading') or 'not OpenBLAS'}, {meta.get('allocator', '?')}"
        + ("; PyTorch = as installed" if args.py_runtime != "tuned" else "")
        + (
            "; PyTorch+rt = with LD_LIBRARY_PATH=openblas-openmp, LD_PRELOAD=tcmalloc"
            + (
                f", OPENBLAS_CORETYPE={env_tuned['OPENBLAS_CORETYPE']}"
                if "OPENBLAS_CORETYPE" in env_tuned
                else ""
            )
            if env_tuned is not None
            else ""
        )
    )
    for r in rows:
        print("  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))))
    if "bert-a" in variants:
        for impl, name in [("cpp", "C++")] + [(i, names[i]) for i, _ in runtimes]:
            over = [
                f"{v} {100 * (med[impl][v] / med[impl]['bert-a'] - 1):+.1f}%"
                for v in variants
                if v != "bert-a"
            ]
            if over:
                print(f"TUPE overhead over bert-a, {name}: " + ", ".join(over))
    print(
        f"load average (1/5/15 min) before and after each round: {' | '.join(loads)}; "
        f"{time.time() - started:.0f} s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"args": vars(args), "times_s": times, "median_s": med, "loads": loads}, f, indent=1
            )


if __name__ == "__main__":
    main()
