#!/usr/bin/python3
"""The held-out targets on the C++ engine's own greedy output (no torch needed): runs
`kvscope generate --greedy --json` on every hand-written prompt of heldout/prompts.json and applies
heldout_checks' rules. Exit 0 when unseen names are reused in >= 80 % of the prompts and more than
half of the code prompts continue with a body that parses and reads the header's parameters (--require
names or code: only that target decides).
Usage: heldout_engine.py KVSCOPE [--model DIR] [--json OUT] [--require names,code]
"""
import argparse
import json
import os
import subprocess
import sys

import heldout_checks as checks

HERE = os.path.dirname(os.path.abspath(__file__))


def generate(kvscope, model, prompt, max_new):
    cmd = [kvscope, "generate", "--prompt", prompt, "--max-new", str(max_new), "--greedy", "--json"]
    if model:
        cmd += ["--model", model]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().split("\n")[-1])["text"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvscope")
    ap.add_argument("--model", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--require", default="names,code", help="the targets that decide the exit status")
    a = ap.parse_args()
    prompts = json.load(open(os.path.join(HERE, "heldout", "prompts.json")))
    names = [dict(p, output=generate(a.kvscope, a.model, p["prompt"], 60)) for p in prompts["names"]]
    for r in names:
        r["reused"] = checks.name_reused(r["name"], r["output"])
    code = [dict(p, output=generate(a.kvscope, a.model, p["prompt"], 96)) for p in prompts["code"]]
    for r in code:
        r.update(checks.check_code(r["prompt"], r["output"], r["identifiers"]))
    hits, ok = sum(r["reused"] for r in names), sum(r["ok"] for r in code)
    print(f"unseen names reused: {hits}/{len(names)}; code bodies that parse and use the parameters: {ok}/{len(code)}")
    for r in names + code:
        if not r.get("reused", r.get("ok")):
            print(f"  miss: {r['prompt']!r} -> {r['output'][:100]!r}")
    if a.json:
        json.dump(dict(names=names, code=code), open(a.json, "w"), indent=1)
    need = set(a.require.split(","))
    names_ok, code_ok = hits * 10 >= len(names) * 8, ok * 2 > len(code)
    sys.exit(0 if (names_ok or "names" not in need) and (code_ok or "code" not in need) else 1)


if __name__ == "__main__":
    main()
