#!/usr/bin/python3
"""Lists the functions and files of app/, render/ and model/ over the size limits.

The limits this code base keeps: a function at most ~80 lines, a file at most
~600 (data tables aside), so that each reads on a screen or two and splits
along a real seam rather than wherever it happened to grow. Function extents
come from Universal Ctags (Debian's universal-ctags: --fields=+ne gives each
definition's first and last line), which parses C++ itself: function-try-blocks
(`) try {`), constructors with initializer lists and member functions defined
in a class body are all counted. Lambdas are counted as part of the function
that holds them, not on their own.
Usage: scripts/function-sizes.py [--max-lines 80] [--max-file 600] [DIR...]
Exit status 0 when it could read every file (it reports; the reader judges
what is a real seam), 1 when ctags is missing or fails.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

# Debian installs Universal Ctags as ctags-universal (ctags is an alternative
# that may point at Exuberant Ctags, which gives no end lines).
CTAGS_NAMES = ("ctags-universal", "universal-ctags", "ctags")


def find_ctags():
    for name in CTAGS_NAMES:
        path = shutil.which(name)
        if not path:
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        if "Universal Ctags" in out:
            return path
    return None


def functions(ctags, paths):
    """Yields (path, name, first_line, n_lines) for every function definition."""
    cmd = [ctags, "--langmap=C++:+.h", "--languages=C++", "--kinds-C++=f", "--fields=+ne",
           "--output-format=json", "-o", "-"] + paths
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {res.returncode}: {res.stderr.strip()}")
    for row in res.stdout.splitlines():
        tag = json.loads(row)
        if tag.get("_type") != "tag" or "end" not in tag:
            continue
        name = tag["name"]
        if name.startswith("__anon"):  # a lambda: part of its enclosing function
            continue
        scope = tag.get("scope", "")
        scope = re.sub(r"(^|::)(kvscope|__anon\w+)(?=::|$)", "", scope).strip(":")
        qualified = f"{scope}::{name}" if scope else name
        yield tag["path"], qualified, tag["line"], tag["end"] - tag["line"] + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-lines", type=int, default=80)
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("dirs", nargs="*", default=["app", "render", "model"])
    a = ap.parse_args()
    ctags = find_ctags()
    if not ctags:
        print("function-sizes.py: needs Universal Ctags (apt-get install universal-ctags); "
              "found none of " + ", ".join(CTAGS_NAMES), file=sys.stderr)
        return 1
    paths, long_files = [], []
    for d in a.dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith((".cpp", ".h")):
                    p = os.path.join(root, f)
                    paths.append(p)
                    n_lines = sum(1 for _ in open(p, encoding="utf-8"))
                    if n_lines > a.max_file:
                        long_files.append((n_lines, p))
    long_fns = []
    try:
        for path, name, first, n in functions(ctags, sorted(paths)):
            if n > a.max_lines:
                long_fns.append((n, f"{path}:{first}", name))
    except RuntimeError as e:
        print(f"function-sizes.py: {e}", file=sys.stderr)
        return 1
    print(f"functions over {a.max_lines} lines: {len(long_fns)}")
    for n, where, name in sorted(long_fns, reverse=True):
        print(f"  {n:4d}  {where}  {name}")
    print(f"files over {a.max_file} lines: {len(long_files)}")
    for n, p in sorted(long_files, reverse=True):
        print(f"  {n:4d}  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
