#!/usr/bin/env python3
"""List dead links and dead file paths in the repository's markdown.

    python3 scripts/doc-paths.py [FILE.md ...]

Checks, in README.md, ARCHITECTURE.md, CONTRIBUTING.md, docs/*.md and
crates/rungs-core/tests/vectors/README.md (or the files named):

- every relative markdown link names a file or directory git tracks, and
  its #anchor a heading of that page;
- every backticked path (`src/link/peer.rs`, `docs/turns.md`, a bare
  `agreement.rs`) names a tracked file or directory, looked up from the
  page's directory, the repository root and the usual top directories;
- no link leaves the repository (http:, https:, mailto:);
- every C name (`rungs_...`, `RUNGS_...`) is declared in include/*.h or
  appears in the code (environment variables, crate names), so a renamed
  function leaves no tutorial behind. docs/abi-changes.md is exempt: it
  names what was removed.

Placeholders (`DIR/NAME.args`, `turn-logs/ID.rlog`), timings (`3/9`) and
build outputs (`target/...`, `.../build/...`) are skipped. Exits 1 when it
found anything, so a make target can run it.
"""

import glob
import os
import re
import subprocess
import sys

DEFAULT = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "crates/rungs-core/tests/vectors/README.md"]
SEARCH_DIRS = ["", "src", "tests", "docs", "include", "examples-c", "ffi-tests", "tools", "scripts"]

# Files the build writes (under target/), named bare in the docs.
GENERATED = {"link-libs.txt", "rungs.pc", "rungs.def", "rungs.lib"}
PATH_TOKEN = re.compile(r"^[\w.\-]+(/[\w.\-]+)+/?$|^[\w\-]+\.(rs|md|c|h|sh|txt|toml|mk|args|vec|py)$")


def tracked_paths():
    out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout
    files = set(out.split())
    dirs = set()
    for f in files:
        d = os.path.dirname(f)
        while d:
            dirs.add(d)
            d = os.path.dirname(d)
    basenames = {os.path.basename(f) for f in files}
    return files, dirs, basenames


def anchors(path):
    """GitHub's anchors for a page's headings."""
    found = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^#+ (.*)", line)
            if m:
                text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
                found.add(text.replace(" ", "-"))
    return found


def is_placeholder(token):
    parts = re.split(r"[/.]", token)
    return (
        any(p.isupper() and len(p) > 1 for p in parts)
        or re.search(r"\d+/\d+$", token) is not None
        or re.match(r"^\w{1,3}/\w{1,4}$", token) is not None
        or token.startswith(("target/", "/"))
        or "/build/" in token
        or "*" in token
        or any(p.startswith("_") for p in token.split("/"))
        or os.path.basename(token) in GENERATED
    )


C_NAME = re.compile(r"\b(?:rungs|RUNGS)_[A-Za-z0-9_]*[A-Za-z0-9]\b")


def stale_c_names(pages, files):
    """C names in the pages that neither the headers nor the code know."""
    docs = set(pages) | {f for f in files if f.endswith(".md")}
    known = set()
    for f in files:
        if f in docs or not os.path.isfile(f):
            continue
        try:
            known.update(C_NAME.findall(open(f, encoding="utf-8").read()))
        except UnicodeDecodeError:
            continue
    found = []
    for page in pages:
        if page.endswith("abi-changes.md"):
            continue
        text = open(page, encoding="utf-8").read()
        for name in sorted(set(C_NAME.findall(text)) - known):
            if name == "rungs_x" or name.startswith("rungs_x_"):
                continue  # the docs' placeholder for any object
            found.append(f"{page}: C name neither the header nor the code knows: {name}")
    return found


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    # Module paths are written as they stand inside their crate
    # (`session/lockstep/turns.rs`): look them up in every crate too.
    search = SEARCH_DIRS + sorted(
        glob.glob("crates/*/src") + glob.glob("crates/*/src/bin") + glob.glob("crates/*/tests")
    )
    files, dirs, basenames = tracked_paths()
    exists = lambda p: os.path.normpath(p) in files or os.path.normpath(p) in dirs
    pages = argv or [
        f for f in DEFAULT + sorted(files) if f in files and (f in DEFAULT or re.match(r"^docs/[^/]+\.md$", f))
    ]
    pages = list(dict.fromkeys(pages))
    problems = []
    for page in pages:
        text = open(page, encoding="utf-8").read()
        base = os.path.dirname(page)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                problems.append(f"{page}: link out of the repository: {target}")
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(base, path)) if path else page
            if path and not exists(full):
                problems.append(f"{page}: dead link: {target}")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append(f"{page}: dead anchor: {target}")
        for m in re.finditer(r"`([^`\s]+)`", text):
            token = m.group(1).rstrip(",.:;")
            if not PATH_TOKEN.match(token) or is_placeholder(token):
                continue
            if "/" not in token and token in basenames:
                continue
            if not any(exists(os.path.join(d, token)) for d in [base] + search):
                problems.append(f"{page}: no such path: `{token}`")
    problems += stale_c_names(pages, files)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
