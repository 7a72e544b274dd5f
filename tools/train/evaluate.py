#!/usr/bin/python3
"""Held-out evaluation of a model against the default model's targets.

Targets (all on text written by hand or by a different process than the training generators):
  names     greedy continuations of hand-written prompts that introduce a never-seen name reuse it
            (heldout/prompts.json; target >= 80 %)
  story     bits/byte on the hand-written children's story heldout/story.txt (v1 vs v2)
  code      greedy continuations of hand-written `def ...:` prompts parse with ast for at least a few
            lines and use the prompt's parameters (target: most samples)
  capitals  "The capital of X is" answered correctly, greedy (target >= 95 %)
  val       loss and bits/byte on every validation slice (val/<part>.txt)
  draft     with --draft DIR: sum over the vocabulary of min(p, q) of the draft (q) and the target
            (p) at every position of the validation slices = the expected probability that the
            target accepts one drafted token in speculative sampling (Leviathan et al. 2023, sec. 3)

A model is an exported folder (config.json + model.safetensors + tokenizer) or a checkpoint .pt
(train.py's ckpt.pt / state.pt / snapshots/step_*.pt) used with --tok DIR.
Usage: evaluate.py MODEL [--tok DIR] [--draft MODEL] [--only names,story,...] [--json OUT]
       evaluate.py --check-unseen      (the prompts' names never occur in work/data/*.train.txt)
"""
import argparse
import glob
import json
import math
import os
import re

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numpy/torch load libgomp
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bpe  # noqa: E402
import heldout_checks as checks  # noqa: E402
import export  # noqa: E402
from model import GPT2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
PARTS = ["stories", "facts", "code", "stdlib", "english"]


def load(path, tokdir=None):
    """(model, tokenizer) from an exported folder or a checkpoint file."""
    if os.path.isdir(path):
        _, _, model = export.load_exported(path)
        tokdir = tokdir or path
    else:
        ck = torch.load(path, map_location="cpu")
        model = GPT2(ck["cfg"])
        model.load_state_dict({k: v.float() for k, v in ck["model"].items()})
        model.eval()
        tokdir = tokdir or os.path.join(WORK, "tok")
    tok = bpe.Tokenizer(os.path.join(tokdir, "vocab.json"), os.path.join(tokdir, "merges.txt"))
    return model, tok


@torch.no_grad()
def greedy(model, tok, prompt, max_new):
    ids = tok.encode(prompt)
    new = []
    for _ in range(max_new):
        if len(ids) >= model.cfg["n_positions"]:
            break
        t = int(torch.argmax(model(torch.tensor([ids]))[0, -1]))
        if t == tok.eos:
            break
        ids.append(t)
        new.append(t)
    return tok.decode(new)


def eval_names(model, tok, prompts, max_new=60):
    rows = []
    for p in prompts:
        out = greedy(model, tok, p["prompt"], max_new)
        hit = checks.name_reused(p["name"], out)
        rows.append(dict(prompt=p["prompt"], name=p["name"], output=out, reused=hit))
    return dict(rate=sum(r["reused"] for r in rows) / len(rows), hits=sum(r["reused"] for r in rows),
                total=len(rows), rows=rows)


def eval_code(model, tok, prompts, max_new=96):
    rows = []
    for p in prompts:
        out = greedy(model, tok, p["prompt"], max_new)
        rows.append(dict(prompt=p["prompt"], output=out, **checks.check_code(p["prompt"], out, p["identifiers"])))
    return dict(parse_rate=sum(r["parses"] for r in rows) / len(rows),
                reuse_rate=sum(bool(r["uses"]) for r in rows) / len(rows),
                ok_rate=sum(r["ok"] for r in rows) / len(rows), total=len(rows), rows=rows)


def eval_capitals(model, tok):
    countries = json.load(open(os.path.join(WORK, "data", "countries.json")))
    ok, n, wrong = 0, 0, []
    for c in countries:
        if not c["capital"]:
            continue
        n += 1
        out = greedy(model, tok, f"The capital of {c['name']} is", len(tok.encode(" " + c["capital"])) + 1)
        k = len(c["capital"]) + 1
        good = out.startswith(" " + c["capital"]) and out[k:k + 1] in (".", " ", "\n", "")
        ok += good
        if not good:
            wrong.append((c["name"], c["capital"], out))
    return dict(rate=ok / n, correct=ok, total=n, wrong=wrong)


@torch.no_grad()
def eval_draft(target, draft, tok, paths, max_windows=8):
    """Mean over positions of sum_v min(p_v, q_v) (the expected acceptance of one drafted token)."""
    tot, n = {}, {}
    T = min(target.cfg["n_positions"], draft.cfg["n_positions"])
    for name, path in paths.items():
        ids = export.val_stream(tok, path)
        s, c = 0.0, 0
        for w in [ids[i:i + T] for i in range(0, len(ids), T)][:max_windows]:
            x = torch.tensor([w])
            p = F.softmax(target(x)[0].double(), -1)
            q = F.softmax(draft(x)[0].double(), -1)
            s += torch.minimum(p, q).sum(-1).sum().item()
            c += len(w)
        tot[name], n[name] = s / c, c
    return dict(expected_acceptance=tot, positions=n)


def story_names(text):
    """Capitalised words of a story that never occur in lower case in it and occur at least once
    inside a sentence (not only after . ! ? or a quote): its characters' names."""
    words = re.findall(r"[A-Za-z]+", text)
    lower = {w for w in words if w.islower()}
    mid = {m.group(1) for m in re.finditer(r"[a-z,] ([A-Z][a-z]+)", text)}
    return sorted({w for w in mid if w.lower() not in lower and len(w) > 2})


@torch.no_grad()
def copy_heads(model, tok, path, max_windows=40):
    """Per (layer, head): the mean attention that a query predicting a token of a repeated name puts
    on the same token in the name's earlier occurrence(s). For the name's first token this is the
    copy pattern; for later tokens of a multi-token name it is the induction pattern (attend to the
    token that followed the previous occurrence of the current token). Returns (L x H list, events)."""
    T, L, H = model.cfg["n_positions"], model.cfg["n_layer"], model.cfg["n_head"]
    acc, n = torch.zeros(L, H, dtype=torch.float64), 0
    text = open(path, encoding="utf-8").read()
    for doc in text.split(bpe.EOT)[:max_windows]:
        names = story_names(doc)
        ids = [tok.eos]
        spans = []  # (start, end) token spans of name occurrences, in order
        for w in bpe.PAT.findall(doc):
            t = tok.bpe(bpe.to_unicode(w))
            if w.strip() in names:
                spans.append((len(ids), len(ids) + len(t), w.strip()))
            ids.extend(t)
        ids = ids[:T]
        _, atts = model(torch.tensor([ids]), return_attn=True)
        A = torch.stack([a[0] for a in atts]).double()  # (L, H, T, T)
        seen = {}
        for s, e, nm in spans:
            if e > len(ids):
                break
            if nm in seen:
                for k in range(s, e):
                    prev = [ps + (k - s) for ps in seen[nm]]
                    acc += A[:, :, k - 1, prev].sum(-1)
                    n += 1
            seen.setdefault(nm, []).append(s)
    return (acc / max(n, 1)).tolist(), n


def check_unseen(prompts):
    text = "".join(open(f, encoding="utf-8").read() for f in sorted(glob.glob(os.path.join(WORK, "data", "*.train.txt"))))
    bad = [p["name"] for p in prompts if re.search(r"\b" + re.escape(p["name"]) + r"\b", text)]
    print(f"{len(prompts) - len(bad)}/{len(prompts)} prompt names never occur in the training data; seen: {bad}")
    return not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--tok", default=None)
    ap.add_argument("--draft", default=None)
    ap.add_argument("--only", default="names,story,code,capitals,val")
    ap.add_argument("--val-dir", default=os.path.join(HERE, "val"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check-unseen", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    prompts = json.load(open(os.path.join(HERE, "heldout", "prompts.json")))
    if a.check_unseen:
        raise SystemExit(0 if check_unseen(prompts["names"]) else 1)
    model, tok = load(a.model, a.tok)
    only = a.only.split(",")
    res = {"model": a.model}
    T = model.cfg["n_positions"]
    if "story" in only:
        res["story"] = export.val_metrics(model, tok, os.path.join(HERE, "heldout", "story.txt"), T)
        print(f"hand-written story: {res['story']['bits_per_byte']:.4f} bits/byte, loss {res['story']['loss']:.4f}")
    if "val" in only:
        res["val"] = {}
        for p in PARTS:
            path = os.path.join(a.val_dir, f"{p}.txt")
            if os.path.exists(path):
                res["val"][p] = export.val_metrics(model, tok, path, T)
                print(f"val {p}: loss {res['val'][p]['loss']:.4f} bits/byte {res['val'][p]['bits_per_byte']:.4f}")
    if "heads" in only:
        h, n = copy_heads(model, tok, os.path.join(a.val_dir, "stories.txt"))
        res["copy_heads"] = dict(mean_weight=h, events=n)
        print(f"copy/induction heads over {n} repeated-name tokens:")
        for li, row in enumerate(h):
            print(f"   L{li} " + " ".join(f"{x:.2f}" for x in row))
    if "names" in only:
        res["names"] = eval_names(model, tok, prompts["names"])
        print(f"unseen names reused: {res['names']['hits']}/{res['names']['total']}")
        for r in res["names"]["rows"][:4]:
            print(f"   {r['prompt']!r} -> {r['output'][:120]!r}")
    if "code" in only:
        res["code"] = eval_code(model, tok, prompts["code"])
        c = res["code"]
        print(f"code: parses {c['parse_rate']:.2f}, reuses identifiers {c['reuse_rate']:.2f}, both {c['ok_rate']:.2f}")
        for r in c["rows"][:3]:
            print("   " + (r["prompt"] + r["output"]).replace("\n", "\n   ")[:400])
    if "capitals" in only:
        res["capitals"] = eval_capitals(model, tok)
        print(f"capitals: {res['capitals']['correct']}/{res['capitals']['total']}")
    if a.draft:
        draft, _ = load(a.draft, a.tok)
        paths = {p: os.path.join(a.val_dir, f"{p}.txt") for p in PARTS}
        paths["heldout_story"] = os.path.join(HERE, "heldout", "story.txt")
        res["draft"] = eval_draft(model, draft, tok, paths)
        print("draft expected acceptance: " + ", ".join(f"{k} {v:.3f}" for k, v in res["draft"]["expected_acceptance"].items()))
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(res, f, indent=1, ensure_ascii=False)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
