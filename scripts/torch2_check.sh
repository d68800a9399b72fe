#!/usr/bin/env bash
# LibTorch 2.x readiness without a GPU (issue 29): compiles every translation unit of the
# headless build (-DTUPE_WITH_QT=OFF, the set the GPU machines build) against the headers of
# Debian 13's libtorch-dev 2.6, on this Debian 12 machine whose own LibTorch is 1.13.
#
#   scripts/torch2_check.sh [--jobs N] [--only REGEX] [--refresh]
#
#   --jobs N        [TUPE_JOBS, default nproc] compilers run at once
#   --only REGEX    only the translation units whose path (relative to the repository)
#                   matches REGEX (Python re.search), e.g. --only distributed
#   --refresh       download and unpack the headers again even when already there
# Environment:
#   TUPE_TORCH2_DIR     [default $HOME/.cache/tupe/torch2] where the headers are unpacked
#   TUPE_TORCH2_BUILD   [default build-torch2 in the repository, ignored by git] the build folder
#   TUPE_TORCH2_SUITE   [default trixie] the Debian suite to take the packages from
#   TUPE_DEBIAN_MIRROR  [default: the first Debian archive in this machine's apt sources]
#
# How:
#   1. The headers. apt-get download, with a private apt configuration (a temporary folder with
#      its own sources.list for the suite on the same mirror, its own lists, cache and an empty
#      dpkg status; no root needed, nothing installed, the system's apt state untouched), of
#      libtorch-dev (ATen, c10, caffe2, torch: every header torch/torch.h and the c10d headers
#      reach; `dpkg -c` and `g++ -H` show nothing else is needed) and libgloo-dev (the Gloo
#      headers that 2.6's ProcessGroupGloo.hpp was built against; they differ from Debian 12's).
#      `dpkg -x` unpacks them into TUPE_TORCH2_DIR (about 50 MB; 12 MB downloaded: the suite's
#      package list, then 2.5 MB of .debs); the next run skips this step.
#   2. The commands. CMake configures the headless build folder against the system LibTorch
#      1.13 (so that CMake configures at all; nothing is built there) and writes
#      compile_commands.json.
#   3. Each entry's compiler command is run with -fsyntax-only: -o/-c and the precompiled-header
#      flags (-include .../cmake_pch.hxx, -Winvalid-pch) dropped, every other -I/-D/-f flag
#      kept, and 2.6's include folders put first (-isystem ROOT/usr/include and
#      -isystem ROOT/usr/include/torch/csrc/api/include before every other -isystem folder and
#      before the compiler's /usr/include: -isystem rather than -I so that 2.6's own warnings do
#      not bury ours, as with 1.13's). Torch TUs also get the compile definitions 2.6's
#      Caffe2Targets.cmake adds (USE_C10D_MPI). A TU without its own #include <torch/torch.h>
#      that leaned on the precompiled header fails here: a real bug in a build without the PCH.
#   4. Two guards that 2.6's headers really are the ones used: a probe TU with
#      static_assert(TORCH_VERSION_MAJOR/MINOR == the .deb's version) on <torch/version.h>,
#      which must pass with the overrides and fail without them; and `g++ -H` on every TU: a
#      TU that reaches any header of 1.13's ATen/c10/caffe2/torch/gloo folders in /usr/include
#      fails with that header named.
# Output: one line per TU (ok / FAILED, seconds), the first error lines of each failure (the
# whole log in BUILD/torch2-logs/), then "N of M translation units compile against LibTorch
# 2.6.0". Exit status: 0 when every TU compiles, 1 when one does not, 2 when the check itself
# could not run (no network, no CMake configure, a probe that failed).
#
# What this does NOT check:
#   - Linking and running. Debian 13's libtorch2.6 cannot be loaded on Debian 12: objdump -T of
#     its libtorch_cpu.so.2.6.0 (and libc10.so) asks for GLIBC_2.38 (__isoc23_strtol & co.),
#     GLIBCXX_3.4.32 and CXXABI_1.3.15 (GCC 13+'s libstdc++), where Debian 12 has glibc 2.36,
#     GLIBCXX_3.4.30 and CXXABI_1.3.13; it also needs trixie's libfmt10, libprotobuf32t64,
#     libdnnl3.6, ... So a symbol that 2.6's headers declare but its libraries do not export
#     (or export with another signature) is not caught; the GPU machine's own build is.
#   - CUDA code paths. Debian's libtorch is built for the CPU only: its headers do declare the
#     CUDA side (c10/cuda/*.h, ATen/cuda/*.h, and c10d's ProcessGroupNCCL.hpp and NCCLUtils.hpp,
#     whose classes are behind #ifdef USE_C10D_NCCL), but compiling them needs the CUDA
#     toolkit's cuda_runtime_api.h, nccl.h and c10/cuda/impl/cuda_cmake_macros.h, none of which
#     is shipped, and torch_cuda/ProcessGroupNCCL are not in its libraries (Debian's non-free
#     nvidia-cuda-dev and libnccl-dev would bring the first two: about 1 GB of .debs). So the
#     headless build is checked as configured here, TUPE_WITH_GLOO on and TUPE_WITH_NCCL off:
#     the NCCL branch of engine/src/distributed.cpp (ProcessGroupNCCL, c10::cuda::set_device,
#     the one include of c10/cuda) is not compiled. CUDA use through torch's device-neutral API
#     (torch::cuda::is_available(), tensors on kCUDA) needs no CUDA header and is compiled.
#   - The Qt build (plotting/, app/ and their tests): none of their files includes LibTorch.
set -uo pipefail
# One { ... } block: bash reads it all before running any of it (edits during a run are safe).
{

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH2_DIR="${TUPE_TORCH2_DIR:-${HOME:-/tmp}/.cache/tupe/torch2}"
BUILD="${TUPE_TORCH2_BUILD:-$ROOT/build-torch2}"
SUITE="${TUPE_TORCH2_SUITE:-trixie}"
MIRROR="${TUPE_DEBIAN_MIRROR:-}"
JOBS="${TUPE_JOBS:-$(nproc)}"
ONLY=""
REFRESH=0
PACKAGES=(libtorch-dev libgloo-dev)
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

usage() { sed -n '2,/^# Output:/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "torch2_check.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) JOBS="${2:?--jobs needs a number}"; shift ;;
        --only) ONLY="${2:?--only needs a regular expression}"; shift ;;
        --refresh) REFRESH=1 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number, got '$JOBS'"
for tool in apt-get dpkg-deb cmake ninja python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done

# ---- 1. the 2.x headers, unpacked once -------------------------------------------------------
# The mirror this machine already uses for Debian: the first URI of a Debian suite (not
# -security) in its apt sources, deb822 (.sources) or one-line (.list) format.
debian_mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        if [[ "$f" == *.sources ]]; then
            awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f"
        else
            awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; break } }' "$f"
        fi
    done | grep -E '^https?://.*/debian/?$' | head -n 1
}

fetch_headers() {
    [ -n "$MIRROR" ] || MIRROR="$(debian_mirror)"
    [ -n "$MIRROR" ] || MIRROR="http://deb.debian.org/debian"
    local tmp apt_opts
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/tupe-torch2-apt.XXXXXX")" || die "mktemp failed"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT
    mkdir -p "$tmp/etc/preferences.d" "$tmp/state/lists/partial" "$tmp/cache/archives/partial" \
        "$tmp/debs" "$tmp/root"
    : > "$tmp/state/status"
    echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main" > "$tmp/etc/sources.list"
    apt_opts=(-q -o "Dir::State=$tmp/state" -o "Dir::State::status=$tmp/state/status"
              -o "Dir::Cache=$tmp/cache" -o "Dir::Etc::SourceList=$tmp/etc/sources.list"
              -o "Dir::Etc::SourceParts=/dev/null" -o "Dir::Etc::Preferences=/dev/null"
              -o "Dir::Etc::PreferencesParts=$tmp/etc/preferences.d"
              -o "APT::Architecture=$(dpkg --print-architecture)" -o "Acquire::Languages=none"
              -o "APT::Sandbox::User=$(id -un)")
    echo "headers: apt-get update + download ${PACKAGES[*]} from $MIRROR $SUITE (private apt state in $tmp)"
    apt-get "${apt_opts[@]}" update > "$tmp/update.log" 2>&1 ||
        { cat "$tmp/update.log" >&2; die "apt-get update of $SUITE failed (network? keyring $KEYRING?)"; }
    (cd "$tmp/debs" && apt-get "${apt_opts[@]}" download "${PACKAGES[@]}") > "$tmp/download.log" 2>&1 ||
        { cat "$tmp/download.log" >&2; die "apt-get download ${PACKAGES[*]} failed"; }
    local deb
    for deb in "$tmp"/debs/*.deb; do
        dpkg-deb -x "$deb" "$tmp/root" || die "dpkg -x $deb failed"
        # shellcheck disable=SC2016 # dpkg-deb expands ${Package}, not the shell
        dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >> "$tmp/packages.txt"
    done
    # Into place in one move, so that an interrupted run leaves no half-unpacked folder.
    mkdir -p "$TORCH2_DIR" || die "cannot create $TORCH2_DIR"
    rm -rf "$TORCH2_DIR/root" "$TORCH2_DIR/packages.txt"
    { mv "$tmp/root" "$TORCH2_DIR/root" && mv "$tmp/packages.txt" "$TORCH2_DIR/packages.txt"; } ||
        die "cannot move the headers into $TORCH2_DIR"
    printf '%s\n' "${PACKAGES[@]}" > "$TORCH2_DIR/complete"
    rm -rf "$tmp"
    trap - EXIT
}

if [ "$REFRESH" = 1 ] || [ ! -f "$TORCH2_DIR/complete" ] ||
    [ "$(cat "$TORCH2_DIR/complete")" != "$(printf '%s\n' "${PACKAGES[@]}")" ]; then
    fetch_headers
fi
echo "headers: $(paste -sd',' "$TORCH2_DIR/packages.txt" | sed 's/,/, /g') in $TORCH2_DIR ($(du -sh "$TORCH2_DIR" | cut -f1))"

# ---- 2. the headless build's compile commands (configured, never built) ----------------------
echo "configure: $BUILD (headless, against the system LibTorch)"
mkdir -p "$BUILD" || die "cannot create $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTUPE_WITH_QT=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DCMAKE_BUILD_TYPE=Release > "$BUILD/torch2-configure.log" 2>&1 ||
    { tail -n 30 "$BUILD/torch2-configure.log" >&2; die "cmake configure failed (log $BUILD/torch2-configure.log)"; }
[ -f "$BUILD/compile_commands.json" ] || die "no $BUILD/compile_commands.json"

# ---- 3./4. the probe, then every TU ----------------------------------------------------------
exec python3 - "$ROOT" "$BUILD" "$TORCH2_DIR" "$JOBS" "$ONLY" <<'PY'
import concurrent.futures as futures
import json
import os
import re
import shlex
import subprocess
import sys
import time

root, build, torch2_dir, jobs, only = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
inc = os.path.join(torch2_dir, "root", "usr", "include")
api_inc = os.path.join(inc, "torch", "csrc", "api", "include")
logs = os.path.join(build, "torch2-logs")
os.makedirs(logs, exist_ok=True)


def show(path):
    """A path as printed: relative to the repository when inside it."""
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


def fail_setup(msg):
    print("torch2_check.sh: " + msg, file=sys.stderr)
    sys.exit(2)


if not os.path.isfile(os.path.join(api_inc, "torch", "version.h")):
    fail_setup("no torch/version.h under " + api_inc + " (remove " + torch2_dir + " and rerun)")

# The expected version, from the .deb (independent of the headers being probed).
deb_version = None
for line in open(os.path.join(torch2_dir, "packages.txt")):
    name, _, version = line.strip().partition(" ")
    if name == "libtorch-dev":
        deb_version = version
m = re.match(r"(?:\d+:)?(\d+)\.(\d+)\.(\d+)", deb_version or "")
if not m:
    fail_setup("cannot read libtorch-dev's version from " + torch2_dir + "/packages.txt")
want_major, want_minor = int(m.group(1)), int(m.group(2))
want_version = ".".join(m.groups())

# Compile definitions 2.x's torch_cpu target adds (Caffe2Targets.cmake), e.g. USE_C10D_MPI.
extra_defs = []
targets = os.path.join(torch2_dir, "root", "usr", "lib")
for dirpath, _, files in os.walk(targets):
    if "Caffe2Targets.cmake" in files:
        text = open(os.path.join(dirpath, "Caffe2Targets.cmake")).read()
        d = re.search(r'INTERFACE_COMPILE_DEFINITIONS "([A-Za-z0-9_;=]+)"', text)
        if d:
            extra_defs = d.group(1).split(";")
        break

# 1.13's headers that 2.x's must shadow: every top-level name of 2.x's include folder, as found
# in the system's /usr/include (ATen, c10, caffe2, torch, gloo, ...).
shadowed = sorted(
    os.path.join("/usr/include", n)
    for n in os.listdir(inc)
    if os.path.exists(os.path.join("/usr/include", n)))

entries = json.load(open(os.path.join(build, "compile_commands.json")))


def argv_of(entry):
    return entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])


def is_torch_tu(argv):
    return any("torch/csrc/api/include" in a for a in argv)


def syntax_only(entry, source=None, overrides=True):
    """The entry's command as a -fsyntax-only run of `source` (default: the entry's own file),
    with 2.x's headers first when overrides."""
    argv = argv_of(entry)
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    out = [argv[0]]
    if overrides:
        out += ["-isystem", inc, "-isystem", api_inc]
        if is_torch_tu(argv):
            present = {a[2:].split("=")[0] for a in argv if a.startswith("-D")}
            out += ["-D" + d for d in extra_defs if d.split("=")[0] not in present]
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "-MT", "-MF", "-MQ"):
            i += 2
            continue
        if a == "-include" and i + 1 < len(argv) and "cmake_pch" in argv[i + 1]:
            i += 2
            continue
        if a in ("-c", "-Winvalid-pch", "-MD", "-MMD") or a.startswith("-include=cmake_pch"):
            i += 1
            continue
        if source is not None and os.path.normpath(os.path.join(entry["directory"], a)) == path:
            out.append(source)
        else:
            out.append(a)
        i += 1
    return out + ["-fsyntax-only", "-H"]


def split_stderr(text):
    """(-H header paths, the rest: diagnostics)."""
    headers, rest, guards = [], [], False
    for line in text.splitlines():
        hm = re.match(r"^\.+ (.*)$", line)
        if hm:
            headers.append(hm.group(1))
        elif line.startswith("Multiple include guards may be useful for:"):
            guards = True
        elif guards and re.match(r"^/\S+$", line):
            continue
        else:
            guards = False
            rest.append(line)
    return headers, rest


def leaks(headers):
    out = []
    for h in headers:
        p = os.path.normpath(h)
        if p.startswith(inc + os.sep):
            continue
        if any(p == s or p.startswith(s + os.sep) for s in shadowed):
            out.append(p)
    return out


# ---- the probe: <torch/version.h> must be 2.x's with the overrides and 1.13's without -------
torch_entries = [e for e in entries if is_torch_tu(argv_of(e))]
if not torch_entries:
    fail_setup("no translation unit in compile_commands.json uses LibTorch")
probe_dir = os.path.join(build, "torch2-probe")
os.makedirs(probe_dir, exist_ok=True)
probe = os.path.join(probe_dir, "probe.cpp")
with open(probe, "w") as f:
    f.write(
        "// Written by scripts/torch2_check.sh: compiles only if <torch/version.h> is %s.%s's.\n"
        "#include <torch/version.h>\n"
        "#pragma message(\"TORCH_VERSION \" TORCH_VERSION)\n"
        "static_assert(TORCH_VERSION_MAJOR == %d && TORCH_VERSION_MINOR == %d, \"wrong LibTorch headers\");\n"
        % (want_major, want_minor, want_major, want_minor))
probe_entry = torch_entries[0]
results = {}
for overrides in (True, False):
    r = subprocess.run(syntax_only(probe_entry, probe, overrides),
                       cwd=probe_entry["directory"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = re.search(r"TORCH_VERSION ([0-9.]+)", r.stdout)
    results[overrides] = (r.returncode, seen.group(1) if seen else "?", r.stdout)
ok_with, ok_without = results[True][0] == 0, results[False][0] == 0
if not ok_with or ok_without:
    print(results[True][2] if not ok_with else results[False][2], file=sys.stderr)
    fail_setup("the probe did not tell the headers apart: with the overrides <torch/version.h> is "
               "%s (%s), without them %s (%s)" % (results[True][1], "ok" if ok_with else "failed",
                                                  results[False][1], "ok" if ok_without else "failed"))
print("probe: <torch/version.h> is %s with the overrides (static_assert %d.%d passes), %s without"
      % (results[True][1], want_major, want_minor, results[False][1]))
if extra_defs:
    print("2.x compile definitions: " + " ".join("-D" + d for d in extra_defs))

# ---- every TU --------------------------------------------------------------------------------
selected = []
for e in entries:
    path = os.path.normpath(os.path.join(e["directory"], e["file"]))
    rel = os.path.relpath(path, root)
    if only and not re.search(only, rel):
        continue
    selected.append((rel, path, e))
if not selected:
    fail_setup("no translation unit matches --only '%s'" % only)
total = len(selected)
print("compiling %d translation unit%s against LibTorch %s headers, %d at a time"
      % (total, "" if total == 1 else "s", want_version, jobs))
sys.stdout.flush()


def check(item):
    rel, path, e = item
    t0 = time.time()
    cmd = syntax_only(e)
    r = subprocess.run(cmd, cwd=e["directory"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    headers, diag = split_stderr(r.stdout)
    leaked = leaks(headers)
    log = os.path.join(logs, re.sub(r"[^A-Za-z0-9.-]", "_", rel) + ".log")
    with open(log, "w") as f:
        f.write(" ".join(shlex.quote(a) for a in cmd) + "\n\n" + "\n".join(diag) + "\n")
        if leaked:
            f.write("\n1.13 headers reached:\n" + "\n".join(leaked) + "\n")
    return rel, r.returncode == 0 and not leaked, time.time() - t0, diag, leaked, log


failures = 0
done = 0
t_start = time.time()
with futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for rel, ok, secs, diag, leaked, log in pool.map(check, selected):
        done += 1
        print("[%d/%d] %-6s %s (%.0f s)" % (done, total, "ok" if ok else "FAILED", rel, secs))
        if not ok:
            failures += 1
            errors = [l for l in diag if re.search(r"\b(error|fatal error):", l)][:6]
            for l in errors:
                print("    " + l.replace(root + "/", "")[:400])
            if leaked:
                print("    reaches 1.13's %s (and %d more)" % (leaked[0], len(leaked) - 1))
            print("    log: " + show(log))
        sys.stdout.flush()
print("checked in %.0f s; full logs in %s" % (time.time() - t_start, show(logs)))
print("%d of %d translation units compile against LibTorch %s" % (total - failures, total, want_version))
sys.exit(1 if failures else 0)
PY

}
