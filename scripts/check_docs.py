#!/usr/bin/env python3
"""Checks the project's Markdown: links and documented `tupe` command lines.

Files: README.md, CONTRIBUTING.md, app/README.md and docs/*.md.
- Every relative link `[text](path)` or `[text](path#anchor)` (images too) must name an existing
  file or folder, and an anchor must name a heading of that file (GitHub's slugs: lower case,
  punctuation other than hyphens and underscores dropped, each space a hyphen, a repeated slug
  suffixed -1, -2, ...). External http(s) links are counted, listed with --list-external, and
  never fetched.
- With --tupe PATH, every `tupe` command line inside a fenced code block (a line starting with
  `tupe `, `build/cli/tupe `, `./build/cli/tupe ` or another `.../cli/tupe `, after an optional
  `$ `; a trailing backslash continues it; `&&`, `||`, `;` and ` | ` separate commands; a line
  like `tupe run: error: ...` is the program's output and is skipped) must name a subcommand
  that `tupe SUB --help` accepts, and only options (`--name` or `--name=value`, also inside
  `[...]` or `(...)`) that this help text prints. Each subcommand's help is run once. A command
  that needs no input and writes nothing (`doctor`, `completion`) and has no placeholder is
  also run as written and must exit 0.

Prints one line per problem, `FILE:LINE: message`, and exits 1 if there is any; otherwise a
one-line summary and exit status 0. Python 3 standard library only.

    python3 scripts/check_docs.py                          # links only
    python3 scripts/check_docs.py --tupe build/cli/tupe    # links and commands
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*$")
# [text](target "title") and ![alt](target); the text may hold one level of [brackets] and
# newlines, the target balanced (parentheses).
LINK = re.compile(
    r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]"
    r"\(\s*(<[^>]*>|[^()\s]+(?:\([^()\s]*\)[^()\s]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)\s*=\s*\"([^\"]+)\"", re.I)
TUPE_BINARY = re.compile(r"^(?:tupe|(?:\./)?(?:[\w.+-]+/)*cli/tupe)$")
OPTION = re.compile(r"(?<![\w-])--([A-Za-z0-9][A-Za-z0-9_-]*)")


# Documented commands that read no input and write nothing: run as written (run_if_cheap).
RUNNABLE = {"doctor", "completion"}
# A word a reader replaces (FILE, DIR, N, <path>, ...): such a line is only --help-parsed.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_0-9]*$|[<>]|\.\.\.")


def doc_files(root):
    files = ["README.md", "CONTRIBUTING.md", os.path.join("app", "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join("docs", f) for f in os.listdir(docs) if f.endswith(".md"))
    return [f for f in files if os.path.isfile(os.path.join(root, f))]


def strip_code_spans(text):
    """Blanks out inline code spans (`x`, ``x``; they may cross a line end), keeping every
    newline, so that offsets still give line numbers."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "`":
            j = i
            while j < len(text) and text[j] == "`":
                j += 1
            ticks = text[i:j]
            end = text.find(ticks, j)
            if end < 0:
                out.append(text[i:j])
                i = j
                continue
            out.append(re.sub(r"[^\n]", " ", text[i : end + len(ticks)]))
            i = end + len(ticks)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def heading_text(raw):
    """The text GitHub renders for a heading's Markdown source (what its slug is made from)."""
    text = re.sub(r"[ \t]+#+[ \t]*$", "", raw)  # closing hashes
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)  # links -> text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "")
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis markers
    return text.strip()


def slug(text):
    out = []
    for ch in text.lower():
        if ch in " -_" or unicodedata.category(ch)[0] in "LN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


class Document:
    """One Markdown file: its lines, which of them are inside fenced code, its anchors."""

    def __init__(self, root, rel):
        self.rel = rel
        self.path = os.path.join(root, rel)
        with open(self.path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.in_code = []
        self.blocks = []  # (line number of the first content line, [content lines])
        fence, block = None, None
        for number, line in enumerate(self.lines, 1):
            m = FENCE.match(line)
            if fence is None:
                if m:
                    fence, block = m.group(1), (number + 1, [])
                self.in_code.append(fence is not None)
                continue
            self.in_code.append(True)
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and line.strip() == m.group(1)
            ):
                self.blocks.append(block)
                fence, block = None, None
            else:
                block[1].append(line)
        if block is not None:
            self.blocks.append(block)
        self.anchors = set()
        seen = {}
        for line, code in zip(self.lines, self.in_code):
            if code:
                continue
            m = HEADING.match(line)
            if m:
                base = slug(heading_text(m.group(2)))
                n = seen.get(base, 0)
                self.anchors.add(base if n == 0 else "%s-%d" % (base, n))
                seen[base] = n + 1
            for a in HTML_ANCHOR.findall(line):
                self.anchors.add(a)


class Checker:
    def __init__(self, root, tupe):
        self.root = root
        self.tupe = tupe
        self.problems = []
        self.external = []
        self.docs = {}
        self.help = {}  # subcommand -> set of option names, or None when it is not a command
        self.links = 0
        self.commands = 0
        self.ran = 0

    def problem(self, rel, line, message):
        self.problems.append("%s:%d: %s" % (rel, line, message))

    def document(self, path):
        rel = os.path.relpath(path, self.root)
        if rel not in self.docs:
            self.docs[rel] = Document(self.root, rel)
        return self.docs[rel]

    # ---- links ---------------------------------------------------------------------------------
    def check_links(self, doc):
        # A link's text may wrap onto the next line: links are found in whole paragraphs (runs
        # of non-blank lines outside code) and reported at the line where they start.
        paragraph, first = [], 0
        for number, (line, code) in enumerate(zip(doc.lines + [""], doc.in_code + [False]), 1):
            if line.strip() and not code:
                if not paragraph:
                    first = number
                paragraph.append(line)
                continue
            if paragraph:
                self.check_paragraph(doc, first, strip_code_spans("\n".join(paragraph)))
                paragraph = []

    def check_paragraph(self, doc, first, text):
        def line_of(offset):
            return first + text.count("\n", 0, offset)

        for m in AUTOLINK.finditer(text):
            self.external.append((doc.rel, line_of(m.start()), m.group(1)))
        for m in LINK.finditer(text):
            self.links += 1
            self.check_link(doc, line_of(m.start()), m.group(3).strip("<>"))

    def check_link(self, doc, number, target):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            if target.startswith(("http://", "https://")):
                self.external.append((doc.rel, number, target))
            elif not target.startswith("mailto:"):
                self.problem(doc.rel, number, "link to '%s': unsupported scheme" % target)
            return
        path, _, anchor = target.partition("#")
        if path:
            full = os.path.normpath(os.path.join(os.path.dirname(doc.path), path))
            if not os.path.exists(full):
                self.problem(doc.rel, number, "link to '%s': no such file" % path)
                return
        else:
            full = doc.path
        if not anchor:
            return
        if not full.endswith(".md") or not os.path.isfile(full):
            self.problem(
                doc.rel, number, "link to '%s': an anchor in a file that is not Markdown" % target
            )
            return
        target_doc = self.document(full)
        if anchor not in target_doc.anchors:
            near = sorted(a for a in target_doc.anchors if a.startswith(anchor[:6]))
            hint = " (headings there: %s)" % ", ".join(near[:4]) if near else ""
            self.problem(
                doc.rel,
                number,
                "link to '%s': no heading '#%s' in %s%s" % (target, anchor, target_doc.rel, hint),
            )

    # ---- commands ------------------------------------------------------------------------------
    def help_options(self, sub):
        if sub not in self.help:
            try:
                r = subprocess.run(
                    [self.tupe, sub, "--help"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=60,
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                sys.exit("check_docs: cannot run %s %s --help: %s" % (self.tupe, sub, e))
            text = r.stdout.decode("utf-8", "replace")
            self.help[sub] = set(OPTION.findall(text)) | {"help"} if r.returncode == 0 else None
        return self.help[sub]

    def check_commands(self, doc):
        for start, block in doc.blocks:
            logical, first = "", None
            for offset, line in enumerate(block):
                if first is None:
                    first = start + offset
                stripped = line.rstrip()
                if stripped.endswith("\\"):
                    logical += stripped[:-1] + " "
                    continue
                logical += stripped
                self.check_command_line(doc, first, logical)
                logical, first = "", None
            if logical:
                self.check_command_line(doc, first, logical)

    def check_command_line(self, doc, number, text):
        text = text.strip()
        if text.startswith("$ "):
            text = text[2:]
        text = re.sub(r"(^|\s)#.*$", "", text)  # a shell comment
        try:
            tokens = shlex.split(text, posix=True)
        except ValueError:
            tokens = text.split()
        segment = []
        for token in tokens + [";"]:
            parts = (
                re.split(r"(&&|\|\||;)$", token)
                if token not in ("&&", "||", ";", "|")
                else ["", token]
            )
            word, sep = parts[0], parts[1] if len(parts) > 1 else ""
            if word:
                segment.append(word)
            if sep or token == "|":
                self.check_segment(doc, number, segment)
                segment = []

    def check_segment(self, doc, number, tokens):
        if len(tokens) < 2 or not TUPE_BINARY.match(tokens[0]):
            return
        sub = tokens[1]
        if sub.startswith("-") or sub.endswith(":"):
            return  # `tupe --help`, `tupe --version`; `tupe run: error: ...` is output
        self.commands += 1
        options = self.help_options(sub)
        if options is None:
            self.problem(
                doc.rel,
                number,
                "`tupe %s`: no such command (`%s %s --help` fails)" % (sub, self.tupe, sub),
            )
            return
        for token in tokens[2:]:
            token = token.lstrip("[(").rstrip("]),")
            if not token.startswith("--") or len(token) < 3:
                continue
            name = token[2:].split("=", 1)[0]
            if name not in options:
                self.problem(
                    doc.rel,
                    number,
                    "`tupe %s --%s`: `tupe %s --help` lists no such option" % (sub, name, sub),
                )
        self.run_if_cheap(doc, number, tokens)

    def run_if_cheap(self, doc, number, tokens):
        """Runs a documented command that needs no input and writes nothing (RUNNABLE), exactly
        as written but with the built binary; it must exit 0."""
        if tokens[1] not in RUNNABLE or any(PLACEHOLDER.search(t) for t in tokens[2:]):
            return
        self.ran += 1
        try:
            r = subprocess.run(
                [self.tupe] + tokens[1:],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=120,
                cwd=self.root,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            self.problem(doc.rel, number, "`%s` did not finish: %s" % (" ".join(tokens), e))
            return
        if r.returncode != 0:
            last = r.stdout.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            self.problem(
                doc.rel, number, "`%s` exits %d: %s" % (" ".join(tokens), r.returncode, last[0])
            )

    def run(self):
        files = doc_files(self.root)
        for rel in files:
            doc = self.document(os.path.join(self.root, rel))
            self.check_links(doc)
            if self.tupe:
                self.check_commands(doc)
        return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tupe", metavar="PATH", help="the built tupe binary; without it only links are checked"
    )
    parser.add_argument("--root", default=ROOT, help="the repository root (default: %(default)s)")
    parser.add_argument(
        "--list-external",
        action="store_true",
        help="also list the external http(s) links (never fetched)",
    )
    args = parser.parse_args()
    if args.tupe and not os.access(args.tupe, os.X_OK):
        sys.exit("check_docs: %s is not an executable" % args.tupe)
    checker = Checker(os.path.abspath(args.root), args.tupe)
    files = checker.run()
    if args.list_external:
        for rel, number, url in checker.external:
            print("%s:%d: external link %s (not fetched)" % (rel, number, url))
    for p in checker.problems:
        print(p)
    if checker.problems:
        return 1
    what = "%d links (%d external, not fetched)" % (checker.links, len(checker.external))
    if args.tupe:
        what += ", %d tupe command lines against %d subcommands' --help, %d run" % (
            checker.commands,
            sum(1 for v in checker.help.values() if v is not None),
            checker.ran,
        )
    else:
        what += "; commands not checked (no --tupe)"
    print("check_docs: %d files, %s: no problems" % (len(files), what))
    return 0


if __name__ == "__main__":
    sys.exit(main())
