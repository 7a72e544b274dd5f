#!/usr/bin/python3
"""Lists the functions and files of app/, render/ and model/ over the size rules.

The brief's rules: functions under ~80 lines, files under ~600 (data tables
aside). A brace counter is enough for this code base's style (clang-format,
no macros that open braces): comments, string and character literals are
blanked, namespace bodies are entered, and every other top-level `{` that
follows a `)` (a parameter list, possibly with const / noexcept / an
initializer list in between) starts a function whose length is counted to
its matching `}`. Member functions defined inside a class body are counted
too. Usage: scripts/function-sizes.py [--max-lines 80] [--max-file 600] [DIR...]
Exit status 0 always: it reports, the reader judges what is a real seam.
"""
import argparse
import os
import re
import sys


def blank_comments_and_literals(src):
    """Replaces comments and string/char literals with spaces (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """Yields (name, first_line, n_lines) for every function body in the file."""
    src = blank_comments_and_literals(open(path, encoding="utf-8").read())
    line_of = [0] * (len(src) + 1)
    line = 1
    for k, ch in enumerate(src):
        line_of[k] = line
        if ch == "\n":
            line += 1
    stack = []  # one entry per open brace: "ns", "class", "fn" or "block"
    fn_start = None
    i = 0
    while i < len(src):
        ch = src[i]
        if ch == "{":
            head = src[max(0, i - 400) : i]
            head = head[max(head.rfind(";"), head.rfind("}"), head.rfind("{")) + 1 :]
            in_fn = "fn" in stack
            if in_fn:
                stack.append("block")
            elif re.search(r"\bnamespace\b[^()]*$", head) or re.search(r'extern\s*$', head):
                stack.append("ns")
            elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", head):
                stack.append("class")
            elif re.search(r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(final\s*)?(->[^{]*)?$", head) or re.search(
                r"\)\s*:\s*[\w:]+[({]", head
            ):
                stack.append("fn")
                m = re.search(r"([~\w:]+(?:operator\s*\S+)?)\s*\([^()]*(\([^()]*\)[^()]*)*\)[^()]*$", head, re.S)
                fn_start = (m.group(1) if m else "?", line_of[i])
            else:
                stack.append("block")
        elif ch == "}":
            if stack:
                kind = stack.pop()
                if kind == "fn" and fn_start:
                    name, first = fn_start
                    yield name, first, line_of[i] - first + 1
                    fn_start = None
        i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-lines", type=int, default=80)
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("dirs", nargs="*", default=["app", "render", "model"])
    a = ap.parse_args()
    long_fns, long_files = [], []
    for d in a.dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h")):
                    continue
                p = os.path.join(root, f)
                n_lines = sum(1 for _ in open(p, encoding="utf-8"))
                if n_lines > a.max_file:
                    long_files.append((n_lines, p))
                for name, first, n in functions(p):
                    if n > a.max_lines:
                        long_fns.append((n, f"{p}:{first}", name))
    print(f"functions over {a.max_lines} lines: {len(long_fns)}")
    for n, where, name in sorted(long_fns, reverse=True):
        print(f"  {n:4d}  {where}  {name}")
    print(f"files over {a.max_file} lines: {len(long_files)}")
    for n, p in sorted(long_files, reverse=True):
        print(f"  {n:4d}  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
