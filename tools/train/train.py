#!/usr/bin/python3
"""Train a small GPT-2 on the tokenized mix (work/tok/*.npy). CPU, seeded, AdamW + cosine LR.

Writes work/runs/<name>/{ckpt.pt, config.json, log.csv, train_cmd.txt}.
"""
import argparse
import csv
import json
import math
import os
import sys
import time

# Passive OpenMP waiting: on a shared 2-core machine spinning worker threads starve each other
# (measured: ~3x slower training under contention without this). Must be set before numpy/torch
# load libgomp (numpy's OpenBLAS-OpenMP already does).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F

from model import GPT2, make_config
import bpe

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PARTS = ["stories", "facts", "code"]


def parse_mix(s):
    w = [float(x) for x in s.split(",")]
    w = np.array(w) / sum(w)
    return w


class Sampler:
    """Random windows of T+1 tokens; with prob p_doc_start a window starts exactly at a document's
    first token (no eos before it), so prompts at position 0 look like training data."""

    def __init__(self, arr, eos, rng, p_doc_start=0.25):
        self.arr = torch.from_numpy(arr.astype(np.int64))
        self.starts = np.nonzero(arr == eos)[0] + 1
        self.starts = self.starts[self.starts < len(arr) - 10]
        self.rng = rng
        self.p = p_doc_start
        self.eos = eos

    def get_repeat(self, n, T):
        """Induction-training rows: a random passage of 12-64 tokens repeated until the row is full,
        after an eos: [eos] seg seg seg ... Every token after the first copy is predictable only by
        attending back to the previous occurrence (what makes copy/induction heads form quickly)."""
        out = torch.empty(n, T + 1, dtype=torch.long)
        N = len(self.arr)
        for i in range(n):
            L = int(self.rng.integers(12, 65))
            s = int(self.rng.integers(0, N - L))
            seg = self.arr[s:s + L]
            row = torch.cat([torch.tensor([self.eos])] + [seg] * ((T + 1) // L + 1))
            out[i] = row[:T + 1]
        return out

    def get(self, n, T):
        out = torch.empty(n, T + 1, dtype=torch.long)
        N = len(self.arr)
        for i in range(n):
            if self.rng.random() < self.p:
                s = int(self.starts[self.rng.integers(len(self.starts))])
                s = min(s, N - T - 1)
            else:
                s = int(self.rng.integers(0, N - T - 1))
            out[i] = self.arr[s:s + T + 1]
        return out


def val_windows(tok, path, T):
    """Validation protocol (also in the model card): split the slice on the literal <|endoftext|>,
    tokenize each document on its own, stream = [eos] + doc1 + [eos] + doc2 + ... + [eos],
    cut into consecutive non-overlapping windows of T tokens (the last one may be shorter, >= 2)."""
    text = open(path, encoding="utf-8").read()
    ids = [tok.eos]
    for d in text.split(bpe.EOT):
        ids.extend(tok.encode(d))
        ids.append(tok.eos)
    return [ids[i:i + T] for i in range(0, len(ids), T) if len(ids[i:i + T]) >= 2]


@torch.no_grad()
def evaluate(model, windows, max_windows=None):
    model.eval()
    tot, n = 0.0, 0
    for w in windows[:max_windows] if max_windows else windows:
        x = torch.tensor([w])
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits[0].float(), x[0, 1:], reduction="sum")
        tot += loss.item()
        n += x.shape[1] - 1
    model.train()
    return tot / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="kvscope-tiny")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=160)
    ap.add_argument("--n-positions", type=int, default=256)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--lr", type=float, default=2.5e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--mix", default="0.62,0.18,0.20", help="stories,facts,code sampling weights")
    ap.add_argument("--final-frac", type=float, default=0.1, help="fraction of steps in the facts-heavy phase")
    ap.add_argument("--final-mix", default="0.40,0.45,0.15")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--eval-windows", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stop-at", type=int, default=0, help="stop (and save) after this many steps of the --steps schedule")
    ap.add_argument("--init-from", default="", help="checkpoint to start from (model weights only; fresh optimizer)")
    ap.add_argument("--copy-frac", type=float, default=0.0,
                    help="fraction of batch rows that are repeated story passages (induction training)")
    ap.add_argument("--max-minutes", type=float, default=0, help="benchmark only: stop after this many minutes")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    tokdir = os.path.join(WORK, "tok")
    tok = bpe.Tokenizer(os.path.join(tokdir, "vocab.json"), os.path.join(tokdir, "merges.txt"))
    cfg = make_config(a.n_layer, a.n_head, a.n_embd, a.n_positions, len(tok.vocab), tok.eos)
    model = GPT2(cfg)
    if a.init_from:
        ck = torch.load(a.init_from, map_location="cpu")
        assert ck["cfg"] == cfg, "init-from checkpoint has a different config"
        model.load_state_dict(ck["model"])
        print(f"initialised from {a.init_from} (step {ck['step']})", flush=True)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"params {nparams} ({nparams/1e6:.2f}M), vocab {cfg['vocab_size']}", flush=True)

    samplers = [Sampler(np.load(os.path.join(tokdir, f"{p}.npy")), tok.eos, rng) for p in PARTS]
    valdir = os.path.join(ROOT, "assets", "models", "kvscope-tiny", "val")
    vals = {p: val_windows(tok, os.path.join(valdir, f"{p}.txt"), a.n_positions) for p in PARTS}

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    mix, final_mix = parse_mix(a.mix), parse_mix(a.final_mix)
    final_start = int(a.steps * (1 - a.final_frac))

    run = os.path.join(WORK, "runs", a.name)
    os.makedirs(run, exist_ok=True)
    with open(os.path.join(run, "train_cmd.txt"), "w") as f:
        f.write(" ".join(["/usr/bin/python3"] + sys.argv) + "\n")
    with open(os.path.join(run, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    logf = open(os.path.join(run, "log.csv"), "w", newline="")
    log = csv.writer(logf)
    log.writerow(["step", "tokens", "elapsed_s", "lr", "train_loss", "val_stories", "val_facts", "val_code"])

    T, B = a.n_positions, a.batch
    t0 = time.time()
    ema = None
    tokens = 0
    last = min(a.steps, a.stop_at) if a.stop_at else a.steps
    for step in range(last + 1):
        if step % a.eval_every == 0 or step == last:
            v = [evaluate(model, vals[p], a.eval_windows) for p in PARTS]
            el = time.time() - t0
            print(f"step {step} tok {tokens} {el:.0f}s train {ema if ema else float('nan'):.3f} "
                  f"val s/f/c {v[0]:.3f} {v[1]:.3f} {v[2]:.3f} tok/s {tokens/max(el,1e-9):.0f}", flush=True)
            log.writerow([step, tokens, f"{el:.1f}", f"{opt.param_groups[0]['lr']:.6f}",
                          f"{ema:.4f}" if ema else "", f"{v[0]:.4f}", f"{v[1]:.4f}", f"{v[2]:.4f}"])
            logf.flush()
            torch.save({"model": model.state_dict(), "cfg": cfg, "step": step, "args": vars(a)},
                       os.path.join(run, "ckpt.pt"))
        if step == last:
            break
        if a.max_minutes and time.time() - t0 > a.max_minutes * 60:
            print(f"max-minutes reached at step {step}, {tokens/(time.time()-t0):.0f} tok/s", flush=True)
            break
        # lr: linear warmup, cosine to min_lr_frac
        if step < a.warmup:
            lr = a.lr * (step + 1) / a.warmup
        else:
            pr = (step - a.warmup) / max(1, a.steps - a.warmup)
            lr = a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * pr)))
        for g in opt.param_groups:
            g["lr"] = lr
        m = final_mix if step >= final_start else mix
        n_copy = int(rng.binomial(B, a.copy_frac)) if a.copy_frac > 0 else 0
        counts = rng.multinomial(B - n_copy, m)
        rows = [samplers[i].get(int(c), T) for i, c in enumerate(counts) if c > 0]
        if n_copy:
            rows.append(samplers[0].get_repeat(n_copy, T))
        batch = torch.cat(rows)
        x, y = batch[:, :-1], batch[:, 1:]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += B * T
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 10 == 0:
            print(f"  step {step} loss {loss.item():.3f} ema {ema:.3f} lr {lr:.2e} "
                  f"{tokens/(time.time()-t0):.0f} tok/s", flush=True)
    print(f"done: {step} steps, {tokens} tokens, {time.time()-t0:.0f}s", flush=True)
    with open(os.path.join(run, "done.json"), "w") as f:
        json.dump({"steps": step, "tokens": tokens, "wall_s": time.time() - t0, "params": nparams}, f)


if __name__ == "__main__":
    main()
