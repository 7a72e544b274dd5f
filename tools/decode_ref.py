#!/usr/bin/python3
"""Independent float64 NumPy references for beam search and speculative decoding.

Run with Debian's interpreter (/usr/bin/python3, python3-numpy). The GPT-2
forward, checkpoint writer and safetensors reader are numpy_ref.py's; this
file adds the decoding strategies on top of that no-cache forward.

Beam search (the conventions of Hugging Face transformers' `_beam_search`,
the vectorised rewrite of PR #35802, with early_stopping=False):
  * running beams are ranked by cumulative log-probability (sum of
    log-softmax of the raw logits over the generated tokens);
  * every step expands every running beam over the whole vocabulary and
    keeps the best 2N (beam, token) candidates by cumulative log-probability
    (ties: lower beam index, then lower token id, first);
  * a candidate ending in EOS, or reaching the maximum length, hits a
    stopping criterion. Such a candidate becomes a finished hypothesis only
    when it ranks among the N best of the 2N; its score is
    sum_logprob / (generated length) ** length_penalty, where the generated
    length counts the new tokens including the EOS (prompt not counted).
    The finished set keeps the N best scores;
  * the next running beams are the N best candidates that hit no stopping
    criterion;
  * after each step, with the running beams' generated length g (the same
    for all), the search stops when N hypotheses are finished and the best
    running beam's sum_logprob / g ** length_penalty does not exceed the
    worst finished score ("no live beam can beat them", HF's heuristic for
    early_stopping=False), or when every candidate hit a stopping criterion
    (maximum length: min(prompt + max_new, n_positions + 1) tokens, the last
    token chosen by a forward over n_positions).
  * the result is the finished hypotheses, best score first.

Speculative decoding (Leviathan et al. 2023, Chen et al. 2023): `dist`
gives the "standardized" distribution that temperature, top-k and top-p (and
greedy: one-hot argmax) make of logits, for the target (p) and the draft (q)
alike; a drafted token x is accepted with probability min(1, p(x)/q(x)); at
the first rejection the replacement is drawn from norm(max(0, p - q)); when
all K are accepted the bonus token is drawn from p. The emitted token's
distribution is exactly p, and the probability of accepting a drafted token
is sum_x min(p(x), q(x)).

Modes
  beam    --model DIR --prompt 1,2,3 --beams N --max-new M
          [--length-penalty L] [--kv-dtype D] --out FILE
                                              beam search trace as JSON
  score   --model DIR --in FILE --out FILE    for {"n_prompt": P,
          "sequences": [[ids]...]}: sum of log-softmax of every token after
          the first P, from one no-cache forward per sequence
  dist    --in FILE --out FILE                for {"cases": [{"logits_p",
          "logits_q", "temperature", "top_k", "top_p", "greedy"}]}: p, q,
          residual norm(max(0, p - q)) and sum min(p, q) per case
  beam-suite --out DIR                        random checkpoints whose EOS is
          a token the model often predicts, with beam references
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ref  # noqa: E402  (the float64 forward and checkpoint writer)


def log_softmax(x):
    m = np.max(x)
    return x - m - math.log(np.exp(x - m).sum())


def last_logits(cfg, w, ids, kv=None):
    """Logits after ids; `kv` = {"dtype"}: attention reads K/V rounded as that cache stores them."""
    return numpy_ref.forward_kv(cfg, w, list(ids), kv)[0][-1]


# ----------------------------------------------------------------------------
# Beam search
# ----------------------------------------------------------------------------


def beam_search(cfg, w, prompt, n_beams, max_new, length_penalty=1.0, kv=None):
    """HF-convention beam search (module docstring). Returns a JSON-able trace:
    steps (every candidate, the running beams after the step, newly finished
    hypotheses), the finished hypotheses, the best one, and the smallest gap
    between scores whose order decides the outcome (min_margin)."""
    eos = cfg.get("eos_token_id", -1)
    if eos is None:
        eos = -1
    eos_ids = set(eos) if isinstance(eos, list) else ({eos} if eos >= 0 else set())  # a list stops on any
    P = len(prompt)
    max_length = min(P + max_new, cfg["n_positions"] + 1)
    running = [{"tokens": list(prompt), "logprob": 0.0, "parent": -1}]
    finished = []  # {"tokens", "sum_logprob", "score", "gen_len"}
    steps = []
    min_margin = float("inf")
    reason = ""
    cur_len = P
    while True:
        cands = []
        for b, beam in enumerate(running):
            lp = log_softmax(last_logits(cfg, w, beam["tokens"], kv))
            for t in range(len(lp)):
                cands.append((beam["logprob"] + float(lp[t]), b, t, float(lp[t])))
        # Best first; ties: lower beam, lower token.
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        k = 2 * n_beams
        top = cands[:k]
        # Gaps at the decisions' boundaries: membership of the 2N, rank < N
        # (who may finish), and which non-stopping candidates keep running.
        if len(cands) > k:
            min_margin = min(min_margin, top[-1][0] - cands[k][0])
        if len(top) > n_beams:
            min_margin = min(min_margin, top[n_beams - 1][0] - top[n_beams][0])
        gen_len = cur_len + 1 - P
        hits_max = cur_len + 1 >= max_length
        step = {"cur_len": cur_len, "candidates": [], "running": [], "finished": []}
        new_running = []
        for rank, (s, b, t, tok_lp) in enumerate(top):
            hit = hits_max or t in eos_ids
            c = {"parent": b, "token": t, "logprob": s, "token_logprob": tok_lp, "rank": rank,
                 "stop": hit, "finished": False, "running": False}
            if hit and rank < n_beams:
                toks = running[b]["tokens"] + [t]
                finished.append({"tokens": toks, "sum_logprob": s,
                                 "score": s / (gen_len ** length_penalty), "gen_len": gen_len})
                c["finished"] = True
            elif not hit and len(new_running) < n_beams:
                new_running.append({"tokens": running[b]["tokens"] + [t], "logprob": s, "parent": b})
                c["running"] = True
            step["candidates"].append(c)
        going = [c for c in top if not (hits_max or c[2] in eos_ids)]
        if len(going) > n_beams:
            min_margin = min(min_margin, going[n_beams - 1][0] - going[n_beams][0])
        finished.sort(key=lambda h: -h["score"])
        if len(finished) > n_beams:
            min_margin = min(min_margin, finished[n_beams - 1]["score"] - finished[n_beams]["score"])
        finished = finished[:n_beams]
        cur_len += 1
        running = new_running
        step["running"] = [dict(r) for r in running]
        step["finished"] = [dict(h) for h in finished]
        steps.append(step)
        if hits_max:
            reason = "max_new" if max_length == P + max_new else "context_full"
            break
        if len(finished) == n_beams:
            best_running = running[0]["logprob"] / ((cur_len - P) ** length_penalty)
            worst = finished[-1]["score"]
            min_margin = min(min_margin, abs(best_running - worst))
            if not best_running > worst:
                reason = "eos"
                break
    return {
        "config": cfg,
        "prompt": list(prompt),
        "n_beams": n_beams,
        "max_new": max_new,
        "length_penalty": length_penalty,
        "eos": eos,
        "reason": reason,
        "steps": steps,
        "finished": finished,
        "best": finished[0],
        "min_margin": min_margin,
    }


def score_sequences(cfg, w, n_prompt, sequences):
    """Sum of log-softmax over the tokens after the first n_prompt, one
    no-cache forward per sequence (the last token is never fed)."""
    out = []
    for seq in sequences:
        logits, _, _, _ = numpy_ref.forward(cfg, w, list(seq[:-1]))
        total = 0.0
        for pos in range(n_prompt, len(seq)):
            total += float(log_softmax(logits[pos - 1])[seq[pos]])
        out.append(total)
    return out


# (name, layers, heads, embd, ctx, n_merges, prompt len, beams, max_new, length_penalty)
BEAM_SUITE = [
    ("beam_l2h2d32_n4", 2, 2, 32, 64, 40, 6, 4, 12, 1.0),
    ("beam_l1h2d16_n3_lp2", 1, 2, 16, 48, 30, 5, 3, 10, 2.0),
    ("beam_l2h4d32_n8_lp0", 2, 4, 32, 40, 20, 4, 8, 8, 0.0),
    ("beam_l2h2d32_n2_ctx", 2, 2, 32, 16, 30, 9, 2, 20, 1.0),  # runs into the context end
    ("beam_l2h2d32_n3_eoslist", 2, 2, 32, 64, 40, 6, 3, 12, 1.0),  # eos_token_id is a list of two ids
]

MIN_MARGIN = 1e-3


def pick_eos(cfg, w, prompt, n=1):
    """A token the model predicts often (so that hypotheses finish): the
    most frequent top-3 token along a greedy continuation of the prompt
    (n > 1: the n most frequent, as a list)."""
    ids = list(prompt)
    counts = {}
    for _ in range(8):
        lg = last_logits(cfg, w, ids)
        order = np.argsort(-lg, kind="stable")
        for t in order[1:4]:
            counts[int(t)] = counts.get(int(t), 0) + 1
        ids.append(int(order[0]))
        if len(ids) >= cfg["n_positions"]:
            break
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[0][0] if n == 1 else [t for t, _ in ranked[:n]]


def finished_by_eos(ref):
    """(hypotheses ending on an eos id, those ending on an id after the list's first)."""
    ids = ref["eos"] if isinstance(ref["eos"], list) else [ref["eos"]]
    ends = [h["tokens"][-1] for h in ref["finished"]]
    return sum(1 for t in ends if t in ids), sum(1 for t in ends if t in ids[1:])


def build_beam_suite(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    index = []
    for k, (name, L, H, d, ctx, n_merges, n_prompt, beams, max_new, lp) in enumerate(BEAM_SUITE):
        cdir = os.path.join(out_dir, name)
        V = 256 + n_merges + 1
        numpy_ref.make_checkpoint(cdir, L, H, d, ctx, V, seed=300 + k, std=0.5, wte_std=0.6)
        cfg, w = numpy_ref.load_model(cdir)
        rng = np.random.default_rng(3000 + k)
        ref, best_fin = None, -1
        for attempt in range(30):
            prompt = [int(t) for t in rng.integers(0, V - 1, size=n_prompt)]
            is_list = name.endswith("_eoslist")
            cfg["eos_token_id"] = pick_eos(cfg, w, prompt, 2 if is_list else 1)
            cand = beam_search(cfg, w, prompt, beams, max_new, lp)
            n_eos, n_later = finished_by_eos(cand)
            if is_list and n_later == 0:
                continue  # the list must matter: a hypothesis ends on its second id
            if cand["min_margin"] >= MIN_MARGIN and n_eos > best_fin:
                ref, best_fin = cand, n_eos
                if n_eos >= 1:
                    break
        if ref is None:
            raise RuntimeError("%s: no prompt with a beam margin >= %g" % (name, MIN_MARGIN))
        cfg["eos_token_id"] = ref["eos"]
        with open(os.path.join(cdir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        with open(os.path.join(cdir, "beam_ref.json"), "w") as f:
            json.dump(ref, f)
        index.append({"name": name, "dir": name, "prompt": ref["prompt"], "n_beams": beams,
                      "max_new": max_new, "length_penalty": lp, "eos": ref["eos"],
                      "finished_by_eos": best_fin, "reason": ref["reason"]})
    with open(os.path.join(out_dir, "beam_suite.json"), "w") as f:
        json.dump({"checkpoints": index}, f, indent=1)
    return index


# ----------------------------------------------------------------------------
# Speculative decoding: standardized distributions
# ----------------------------------------------------------------------------


def dist(logits, temperature=1.0, top_k=0, top_p=1.0, greedy=False):
    """The distribution a token is drawn from: softmax(logits / T), then the
    top-k largest, then the smallest best-first prefix whose mass (within
    what top-k kept) reaches top_p, renormalised. Greedy: one-hot on the
    argmax (ties: lower id). Ties in the ranking: lower id first."""
    x = np.asarray(logits, dtype=np.float64)
    V = len(x)
    if greedy:
        out = np.zeros(V)
        out[int(np.argmax(x))] = 1.0
        return out
    p = np.exp((x - x.max()) / temperature)
    p /= p.sum()
    order = sorted(range(V), key=lambda i: (-p[i], i))
    keep = order[:top_k] if top_k and top_k < V else order
    if top_p < 1.0:
        total = sum(p[i] for i in keep)
        cum, n = 0.0, 0
        while n < len(keep):
            cum += p[keep[n]] / total
            n += 1
            if cum >= top_p:
                break
        keep = keep[:max(n, 1)]
    out = np.zeros(V)
    out[keep] = p[keep]
    return out / out.sum()


def residual(p, q):
    r = np.maximum(0.0, p - q)
    s = r.sum()
    return r / s if s > 0 else p.copy()


def dist_cases(cases):
    out = []
    for c in cases:
        kw = {"temperature": c.get("temperature", 1.0), "top_k": c.get("top_k", 0),
              "top_p": c.get("top_p", 1.0), "greedy": c.get("greedy", False)}
        p = dist(c["logits_p"], **kw)
        q = dist(c["logits_q"], **kw)
        out.append({"p": p.tolist(), "q": q.tolist(), "residual": residual(p, q).tolist(),
                    "overlap": float(np.minimum(p, q).sum())})
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("beam")
    b.add_argument("--model", required=True)
    b.add_argument("--prompt", required=True)
    b.add_argument("--beams", type=int, required=True)
    b.add_argument("--max-new", type=int, required=True)
    b.add_argument("--length-penalty", type=float, default=1.0)
    b.add_argument("--kv-dtype", default="f32", help="K/V rows as stored: f32, f16, q8_0, q4_0")
    b.add_argument("--out", required=True)
    s = sub.add_parser("score")
    s.add_argument("--model", required=True)
    s.add_argument("--in", dest="inp", required=True)
    s.add_argument("--out", required=True)
    d = sub.add_parser("dist")
    d.add_argument("--in", dest="inp", required=True)
    d.add_argument("--out", required=True)
    bs = sub.add_parser("beam-suite")
    bs.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    def dump(obj, path):
        if path == "-":
            json.dump(obj, sys.stdout)
        else:
            with open(path, "w") as f:
                json.dump(obj, f)

    if a.mode == "beam":
        cfg, w = numpy_ref.load_model(a.model)
        prompt = [int(t) for t in a.prompt.split(",") if t.strip()]
        dump(beam_search(cfg, w, prompt, a.beams, a.max_new, a.length_penalty, {"dtype": a.kv_dtype}), a.out)
    elif a.mode == "score":
        cfg, w = numpy_ref.load_model(a.model)
        with open(a.inp) as f:
            req = json.load(f)
        dump({"sums": score_sequences(cfg, w, req["n_prompt"], req["sequences"])}, a.out)
    elif a.mode == "dist":
        with open(a.inp) as f:
            req = json.load(f)
        dump({"cases": dist_cases(req["cases"])}, a.out)
    elif a.mode == "beam-suite":
        idx = build_beam_suite(a.out)
        print(json.dumps({"dir": a.out, "checkpoints": [c["name"] for c in idx]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
