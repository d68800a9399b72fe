#!/usr/bin/env python3
"""C++ (`tupe bench`) against PyTorch (bench/reference_bert.py) on the same model, batch,
optimizer and threads, in one go: every round runs every contender once, in turn (A B C A B C),
so that load from other processes falls on all alike; each contender's figure is the median
over every timed step of every round. Prints one table, a row per variant and contender, with
how many times faster each C++ build is (contender s/step / C++ s/step, > 1: C++ is faster),
and TUPE's overhead over bert-a for each contender.

  bench/compare.py                      # small, seq 128, batch 32, all CPUs, fp32, ~4 min
  bench/compare.py --size quickstart --steps 20 --rounds 3   # the quickstart's model, seq 64
  bench/compare.py --size quickstart --finetune --steps 30   # fine-tuning steps (GLUE-shaped)
  bench/compare.py --dtype bf16 --hf    # also HF-style eager (logits at every position)
  # the engine on LibTorch 1.13 and 2.x against PyTorch 2.x eager, SDPA and torch.compile:
  "$(./run.sh venv)/bin/python" bench/compare.py --tupe build/cli/tupe \\
      --tupe build-torch2/cli/tupe --py-impl eager,sdpa,compile --py-runtime tuned

Contenders: every --tupe binary (labelled with the LibTorch its `tupe doctor` reports), and
every --python interpreter (default: the one running this script) x --py-impl x --py-runtime.
PyTorch runs as installed ("default": for Debian's 1.13, OpenBLAS's own pthreads beside ATen's
OpenMP pool and glibc malloc) and/or with the run-time `tupe` is built with ("tuned", +rt in
the table: tcmalloc through LD_PRELOAD, and for a PyTorch on Debian's OpenBLAS the OpenMP
build of it through LD_LIBRARY_PATH; the wheel's PyTorch has MKL and its own OpenMP inside), so
the ratio separates what the run-time buys from what the C++ code buys.
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


def common_args(args):
    return [
        "--preset", args.preset, "--size", args.size, "--seq", str(args.seq),
        "--batch", str(args.batch), "--threads", str(args.threads), "--dtype", args.dtype,
        "--steps", str(args.steps), "--warmup", str(args.warmup),
        "--vocab-size", str(args.vocab_size),
    ] + (["--finetune"] if args.finetune else [])  # fmt: skip


def run_cpp(args, tupe):
    cmd = [tupe, "bench", *common_args(args), "--format", "json"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    data = json.loads(out.stdout)
    return data, {v["variant"]: v for v in data["variants"]}


def run_py(args, python, impl, style, env=None):
    cmd = [python, os.path.join(HERE, "reference_bert.py"), *common_args(args)]
    cmd += ["--style", style, "--impl", impl]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {r["variant"]: r for r in rows}


def doctor(tupe):
    """`tupe doctor --no-matmul` as {key: value}, {} when it fails."""
    try:
        out = subprocess.run(
            [tupe, "doctor", "--no-matmul"], check=True, stdout=subprocess.PIPE, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {ln[:18].strip(): ln[18:].strip() for ln in out.splitlines() if len(ln) > 18}


def tuned_env(core):
    """The environment that gives a Python torch the run-time `tupe` links: tcmalloc, and the
    OpenMP build of OpenBLAS (used only by a torch on the system BLAS). None without tcmalloc."""
    tcm = glob.glob("/usr/lib/*-linux-gnu/libtcmalloc_minimal.so.4")
    if not tcm:
        return None
    env = dict(os.environ)
    env["LD_PRELOAD"] = tcm[0]
    omp = glob.glob("/usr/lib/*-linux-gnu/openblas-openmp/libblas.so.3")
    if omp:
        env["LD_LIBRARY_PATH"] = os.path.dirname(omp[0]) + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
        )
    # The tupe launcher also overrides OpenBLAS's core where it fell back to Prescott-class
    # kernels (docs/performance.md, "OpenBLAS core detection"); the same run-time gets the same
    # core.
    if core and "OPENBLAS_CORETYPE" not in env:
        env["OPENBLAS_CORETYPE"] = core
    return env


def torch_version(python):
    out = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__.split('+')[0])"],
        stdout=subprocess.PIPE,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"compare.py: {python} cannot import torch")
    return out.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--tupe",
        action="append",
        help="a tupe binary (repeatable; default $TUPE or build/cli/tupe)",
    )
    ap.add_argument(
        "--python",
        action="append",
        help="an interpreter with torch for reference_bert.py (repeatable; default this one)",
    )
    ap.add_argument(
        "--py-impl",
        default="eager",
        help="comma list of reference_bert.py --impl: eager, sdpa, compile (2.x only)",
    )
    ap.add_argument("--preset", default="bert-a,tupe-a,tupe-r")
    ap.add_argument("--size", default="small", choices=["quickstart", "tiny", "small", "base"])
    ap.add_argument("--seq", type=int, default=None, help="default 64 at quickstart, else 128")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--steps", type=int, default=4, help="timed steps per variant and round")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of every contender")
    ap.add_argument(
        "--hf",
        action="store_true",
        help="also time HF-style eager (Q/K/V apart, MLM logits at every position)",
    )
    ap.add_argument(
        "--py-runtime",
        default="both",
        choices=["both", "default", "tuned"],
        help="PyTorch as installed, with tupe's run-time (tcmalloc; OpenMP OpenBLAS), or both",
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
    tupes = args.tupe or [os.environ.get("TUPE", os.path.join(ROOT, "build", "cli", "tupe"))]
    pythons = args.python or [sys.executable]
    impls = [i for i in args.py_impl.split(",") if i]
    for i in impls:
        if i not in ("eager", "sdpa", "compile"):
            sys.exit(f"compare.py: --py-impl: unknown '{i}' (expected eager, sdpa, compile)")

    contenders = []  # (key, label, kind, how)
    core = None
    for t in tupes:
        if not os.access(t, os.X_OK):
            sys.exit(f"compare.py: no tupe executable at {t} (build it, or pass --tupe PATH)")
        info = doctor(t)
        label = f"C++ {info.get('libtorch', '?')}"
        if any(c[1] == label for c in contenders):
            label += f" ({t})"
        contenders.append((f"cpp{len(contenders)}", label, "cpp", t))
        bc = info.get("blas core", "")
        if core is None and "set by the tupe launcher" in bc:
            core = bc.split("OPENBLAS_CORETYPE=")[1].split()[0]
    env_tuned = tuned_env(core) if args.py_runtime != "default" else None
    if args.py_runtime == "tuned" and env_tuned is None:
        sys.exit("compare.py: --py-runtime tuned needs libtcmalloc-minimal4")
    runtimes = ([("", None)] if args.py_runtime != "tuned" else []) + (
        [("+rt", env_tuned)] if env_tuned is not None else []
    )
    for py in pythons:
        v = torch_version(py)
        for impl in impls:
            if impl != "eager" and v.startswith("1."):
                sys.exit(f"compare.py: --py-impl {impl} needs PyTorch 2.x; {py} has {v}")
            for suffix, env in runtimes:
                key = f"py{len(contenders)}"
                contenders.append(
                    (key, f"PyTorch {v} {impl}{suffix}", "py", (py, impl, "same", env))
                )
        if args.hf:
            env = env_tuned if args.py_runtime == "tuned" else None
            key = f"py{len(contenders)}"
            contenders.append((key, f"PyTorch {v} HF-style eager", "py", (py, "eager", "hf", env)))

    variants = args.preset.split(",")
    times = {c[0]: {v: [] for v in variants} for c in contenders}
    last, meta, loads = {}, {}, [load()]
    started = time.time()
    for r in range(args.rounds):
        for key, label, kind, how in contenders:
            print(f"round {r + 1}/{args.rounds}: {label} ...", file=sys.stderr, flush=True)
            if kind == "cpp":
                meta[key], last[key] = run_cpp(args, how)
                for v in variants:
                    times[key][v] += last[key][v]["times_s"]
            else:
                last[key] = run_py(args, *how)
                for v in variants:
                    times[key][v] += last[key][v]["times"]
        loads.append(load())

    med = {k: {v: statistics.median(t) for v, t in d.items() if t} for k, d in times.items()}
    cpps = [c for c in contenders if c[2] == "cpp"]
    header = ["variant", "implementation", "s/step"]
    header += [f"{c[1]} is x faster" for c in cpps]
    header += ["params"]
    header += ["examples/s"] if args.finetune else ["tok/s", "GFLOP/s", "util", "RSS MiB"]
    rows = [header]
    ref_params = {v: last[cpps[0][0]][v]["params"] for v in variants}
    for v in variants:
        for key, label, kind, _ in contenders:
            t = med[key][v]
            row = [v, label, f"{t:.4f}"]
            row += [f"{t / med[c[0]][v]:.2f}x" for c in cpps]
            params = last[key][v]["params"]
            row += ["same" if params == ref_params[v] else f"{params} DIFFER"]
            if args.finetune:
                row += [f"{args.batch / t:,.0f}"]
            elif kind == "cpp":
                cv, m = last[key][v], meta[key]
                row += [
                    f"{args.batch * args.seq / t:,.0f}",
                    f"{cv['flops_per_step'] / t / 1e9:.1f}",
                    f"{cv['flops_per_step'] / t / m['matmul_peak_flops']:.0%}",
                    f"{cv['rss_peak_bytes'] / 2**20:.0f}",
                ]
            else:
                flops = last[cpps[0][0]][v]["flops_per_step"]
                row += [f"{args.batch * args.seq / t:,.0f}", f"{flops / t / 1e9:.1f}", "", ""]
            rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    m0 = meta[cpps[0][0]]
    print(
        f"size {args.size}, seq {args.seq}, batch {args.batch}, {args.threads} threads, "
        f"{args.dtype}; median of {args.rounds} x {args.steps} steps per variant after "
        f"{args.warmup} warm-up; contenders alternated; "
        + (
            "fine-tuning steps, length-bucketed batches; "
            if args.finetune
            else f"matmul peak {m0['matmul_peak_flops'] / 1e9:.1f} GFLOP/s ({args.dtype}, "
            f"{cpps[0][1]}); "
        )
        + "; ".join(
            f"{c[1]}: BLAS threads {meta[c[0]].get('blas_threading') or 'not OpenBLAS'}, "
            f"{meta[c[0]].get('allocator', '?')}"
            for c in cpps
        )
        + (
            "; +rt = LD_PRELOAD=tcmalloc"
            + (", LD_LIBRARY_PATH=openblas-openmp" if "LD_LIBRARY_PATH" in env_tuned else "")
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
        print(
            "  ".join(
                x.rjust(w) if i > 1 else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))
            )
        )
    if "bert-a" in variants and len(variants) > 1:
        for key, label, _, _ in contenders:
            over = [
                f"{v} {100 * (med[key][v] / med[key]['bert-a'] - 1):+.1f}%"
                for v in variants
                if v != "bert-a"
            ]
            print(f"TUPE overhead over bert-a, {label}: " + ", ".join(over))
    print(
        f"load average (1/5/15 min) before and after each round: {' | '.join(loads)}; "
        f"{time.time() - started:.0f} s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "args": vars(args),
                    "contenders": {c[0]: c[1] for c in contenders},
                    "times_s": times,
                    "median_s": med,
                    "loads": loads,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
