#!/usr/bin/env python3
"""Independent NumPy (float64) reference for SnapKV, per K/V head.

Written from the rule (docs/eviction.md; Li et al. 2024, FasterDecoding/SnapKV
snapkv_utils.py update_kv; NVIDIA kvpress SnapKVPress for grouped-query
attention), not from the engine:

  The prompt (L positions) is prefilled dense. If L > N, for each layer and
  query head: the softmax weights of the last W prompt queries (causal), summed
  over those queries, on the first L - W positions; pooled over positions with
  kernel K, stride 1, padding K // 2 (max: -inf padding; avg: zero padding
  counted, count_include_pad); averaged over the query heads sharing a K/V
  head. Each K/V head keeps its top N - W positions (ties keep the later one)
  plus the W window positions. Decoding appends each new position to every
  head and evicts nothing more; query head h attends over what K/V head
  h // (H / Hkv) holds.

Usage
  snapref --model DIR [--llama] --kv-budget N --kv-snap-window W --kv-snap-pool K
          [--kv-snap-pooling max|avg] [--kv-dtype D] [--n-prompt P] [--steps S]
          [--seed S | --prompt ids] --out FILE
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ref as base  # noqa: E402
import numpy_ref_llama as llama  # noqa: E402


def pool1d(x, K, pooling):
    """torch max_pool1d / avg_pool1d(count_include_pad) with stride 1, padding K // 2."""
    r = K // 2
    fill = -math.inf if pooling == "max" else 0.0
    padded = np.concatenate([np.full(r, fill), x, np.full(r, fill)])
    windows = np.array([padded[j:j + K] for j in range(len(x))])
    return windows.max(axis=1) if pooling == "max" else windows.sum(axis=1) / K


def snap_select(win, L, N, W, K, pooling, Hkv):
    """win (H, L): the window's weights summed per query head. Returns, per K/V
    head, the held positions and the smallest gap between a kept and a dropped score."""
    H, M = win.shape[0], L - W
    pooled = np.array([pool1d(win[h, :M], K, pooling) for h in range(H)])
    scores = pooled.reshape(Hkv, H // Hkv, M).mean(axis=1)
    held, margin = [], math.inf
    for g in range(Hkv):
        ranked = sorted(range(M), key=lambda j: (-scores[g][j], -j))
        kept, dropped = ranked[:N - W], ranked[N - W:]
        if kept and dropped:
            lo, hi = scores[g][kept[-1]], scores[g][dropped[0]]
            if lo == hi:
                # An exact tie: max pooling copies one window sum to its neighbours, in the engine
                # as here, and the later position wins; what rounding could change is the order
                # of that value against the others.
                others = [abs(x - lo) for x in scores[g] if x != lo]
                margin = min(margin, min(others) if others else math.inf)
            else:
                margin = min(margin, lo - hi)
        held.append(sorted(kept) + list(range(M, L)))
    return held, margin


def attend(q, held, K, V):
    """One query (H, hd): head h over the rows K/V head h // group holds. Returns (H * hd, weights per head)."""
    H, hd = q.shape
    group = H // len(held)
    out, weights = np.zeros(H * hd), []
    for h in range(H):
        keys = held[h // group]
        Ks = np.array([K[j][h // group] for j in keys])
        Vs = np.array([V[j][h // group] for j in keys])
        a = base.softmax(Ks @ q[h] / math.sqrt(hd))
        weights.append(dict(zip(keys, a)))
        out[h * hd:(h + 1) * hd] = a @ Vs
    return out, weights


def snap_greedy(arch, prompt, n_steps, dtype, N, W, K, pooling, n_top=5):
    """Prefill + n_steps greedy decode steps under SnapKV."""
    n_layer = arch["n_layer"]
    held = [None] * n_layer  # (layer, kv_head) positions
    Ks, Vs = [{} for _ in range(n_layer)], [{} for _ in range(n_layer)]
    tokens, steps, first = list(prompt), [], 0
    qmin, smin = math.inf, math.inf
    L = len(prompt)
    for s in range(n_steps + 1):
        new = list(range(first, len(tokens)))
        pos = np.array(new)
        x = arch["embed"]([tokens[p] for p in new], pos)
        wins = []
        for layer in range(n_layer):
            q, k, v = arch["qkv"](layer, x, pos)
            H, Hkv = q.shape[1], k.shape[1]
            if held[layer] is None:
                held[layer] = [[] for _ in range(Hkv)]
            for i, p in enumerate(new):
                kr, mk = base.stored_row(k[i].reshape(-1), dtype)
                vr, mv = base.stored_row(v[i].reshape(-1), dtype)
                qmin = min(qmin, mk, mv)
                Ks[layer][p], Vs[layer][p] = kr.reshape(k.shape[1:]), vr.reshape(v.shape[1:])
            win = np.zeros((H, L))
            rows = []
            for i, p in enumerate(new):
                for hp in held[layer]:
                    hp.append(p)
                o, wts = attend(q[i], [[j for j in hp if j <= p] for hp in held[layer]], Ks[layer], Vs[layer])
                rows.append(o)
                if s == 0 and p >= L - W:
                    for h in range(H):
                        for j, a in wts[h].items():
                            win[h, j] += a
            wins.append(win)
            x = arch["post"](layer, x, np.array(rows))
        last = arch["logits"](x[-1])
        if s == 0 and L > N:
            for layer in range(n_layer):
                held[layer], m = snap_select(wins[layer], L, N, W, K, pooling, len(held[layer]))
                smin = min(smin, m)
        probs = base.softmax(last)
        order = np.argsort(-last, kind="stable")
        tok = int(order[0])
        steps.append({"index": s, "seq_len": len(tokens), "token": tok, "prob": float(probs[tok]),
                      "margin": float(last[order[0]] - last[order[1]]),
                      "top": [[int(t), float(probs[t])] for t in order[:n_top]],
                      "held_by_head": [[list(hp) for hp in hl] for hl in held],
                      "held": [sorted(set().union(*hl)) for hl in held]})
        first = len(tokens)
        tokens.append(tok)
    return {"prompt": list(prompt), "n_steps": n_steps, "tokens": tokens, "steps": steps,
            "kv": {"dtype": dtype, "evict": "snapkv", "budget": N, "window": W, "pool": K, "pooling": pooling},
            "min_margin": min(st["margin"] for st in steps),
            "min_qmargin": qmin if math.isfinite(qmin) else 1.0,
            "min_evict_margin": smin if math.isfinite(smin) else 1.0}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("snapref", help="greedy reference under SnapKV, per K/V head")
    p.add_argument("--model", required=True)
    p.add_argument("--llama", action="store_true", help="a Llama-family checkpoint (numpy_ref_llama's forward)")
    p.add_argument("--kv-dtype", choices=["f32", "f16", "q8_0", "q4_0"], default="f32")
    p.add_argument("--kv-budget", type=int, required=True)
    p.add_argument("--kv-snap-window", type=int, required=True)
    p.add_argument("--kv-snap-pool", type=int, required=True)
    p.add_argument("--kv-snap-pooling", choices=["max", "avg"], default="max")
    p.add_argument("--n-prompt", type=int, default=12)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt", help="comma-separated token ids (else a random prompt clear of ties)")
    p.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.llama:
        cfg, w = llama.load_model(a.model)
        arch = llama.llama_arch(cfg, w)
    else:
        cfg, w = base.load_model(a.model)
        arch = base.gpt2_arch(cfg, w)
    args = (a.kv_dtype, a.kv_budget, a.kv_snap_window, a.kv_snap_pool, a.kv_snap_pooling)
    if a.prompt:
        ref = snap_greedy(arch, [int(t) for t in a.prompt.split(",") if t.strip()], a.steps, *args)
    else:
        rng = np.random.default_rng(a.seed)
        for _ in range(120):
            prompt = [int(t) for t in rng.integers(0, cfg["vocab_size"] - 1, size=a.n_prompt)]
            ref = snap_greedy(arch, prompt, a.steps, *args)
            if (ref["min_margin"] >= base.MIN_MARGIN and ref["min_qmargin"] >= base.QMARGIN and
                    ref["min_evict_margin"] >= base.EVICT_MARGIN):
                break
        else:
            raise SystemExit("numpy_ref_snapkv: no prompt clear of ties in 120 attempts")
    with open(a.out, "w") as f:
        json.dump(ref, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
