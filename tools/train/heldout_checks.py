#!/usr/bin/python3
"""The held-out pass/fail rules, without torch: used by evaluate.py on the PyTorch reference and,
reading the C++ engine's greedy output, by the project's tests.

  name_reused(name, output)                  the continuation uses the introduced name again
  check_code(prompt, output, identifiers)    the generated function body parses with ast and
                                             uses one of the prompt's parameters

As a program: reads JSON lines {"kind": "name"|"code", "prompt", "output", "name"|"identifiers"}
on stdin and prints one JSON object with the pass counts per kind.
"""
import ast
import json
import re
import sys


def name_reused(name, output):
    return re.search(r"\b" + re.escape(name) + r"\b", output) is not None


def function_lines(output, max_lines=8):
    """The generated function body: continuation lines up to the first non-indented non-empty line,
    at most max_lines non-empty ones, without a last line that the token limit may have cut."""
    lines = output.split("\n")
    if not output.endswith("\n"):
        lines = lines[:-1]
    body = []
    for ln in lines:
        if ln.strip() and not ln.startswith((" ", "\t")):
            break
        body.append(ln)
        if len([b for b in body if b.strip()]) >= max_lines:
            break
    while body and not body[-1].strip():
        body.pop()
    return body


def check_code(prompt, output, identifiers, min_lines=2):
    """Passes when prompt + body (at least min_lines non-empty lines, or a shorter body that
    returns) parses with ast and the body reads one of the prompt's identifiers."""
    body = function_lines(output)
    try:
        tree = ast.parse(prompt + "\n".join(body) + "\n")
        n_lines = len([b for b in body if b.strip()])
        parses = n_lines >= min_lines or (n_lines >= 1 and any(isinstance(n, ast.Return) for n in ast.walk(tree)))
    except SyntaxError:
        tree, parses = None, False
    used = set()
    if tree is not None and tree.body:
        for st in getattr(tree.body[0], "body", []):
            for n in ast.walk(st):
                if isinstance(n, ast.Name) and n.id in identifiers:
                    used.add(n.id)
    return dict(body_lines=len(body), parses=parses, uses=sorted(used), ok=parses and bool(used))


def main():
    res = {"name": [0, 0], "code_parses": [0, 0], "code_ok": [0, 0]}
    for line in sys.stdin:
        if not line.strip():
            continue
        r = json.loads(line)
        if r["kind"] == "name":
            res["name"][0] += name_reused(r["name"], r["output"])
            res["name"][1] += 1
        else:
            c = check_code(r["prompt"], r["output"], r["identifiers"])
            res["code_parses"][0] += c["parses"]
            res["code_ok"][0] += c["ok"]
            res["code_parses"][1] += 1
            res["code_ok"][1] += 1
    print(json.dumps(res))


if __name__ == "__main__":
    main()
