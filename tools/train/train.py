#!/usr/bin/python3
"""Train a small GPT-2 on the tokenized mix (work/tok/*.npy). CPU, seeded, AdamW + cosine LR. Resumable.

One run = one LR schedule of --steps steps, trained in phases: each invocation trains until
--stop-at (or the end) and writes a resumable checkpoint; `--resume` continues exactly where the
checkpoint left off (model, optimizer, RNG = data-stream position, step, EMA, token count).

Writes work/runs/<name>/:
  state.pt        resumable checkpoint (atomic: temp + rename), every --ckpt-every steps, at the end
                  of a phase, and on SIGTERM / SIGINT
  ckpt.pt         the latest weights only (what export.py reads)
  snapshots/step_NNNNN.pt   F16 weights at --snapshot-steps (the "training made visible" checkpoints)
  log.csv         step, tokens, elapsed, lr, train EMA, validation losses per part (appended on resume)
  phases.json     one entry per invocation: steps covered, wall time, tokens, command
  config.json, train_cmd.txt, done.json (when the whole schedule has finished)
"""
import argparse
import csv
import hashlib
import json
import math
import os
import signal
import sys
import time

# Passive OpenMP waiting: on a shared 2-core machine spinning worker threads starve each other
# (measured: ~3x slower training under contention without this). Must be set before numpy/torch
# load libgomp (numpy's OpenBLAS-OpenMP already does).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bpe  # noqa: E402
from model import GPT2, make_config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
PARTS = ["stories", "facts", "code", "stdlib", "english"]  # sampled, and each has a validation slice
EXTRA_PARTS = ["names", "recall", "coderecall", "heroes"]  # sampled only once a --mix gives them weight (weights 6-9); no validation slice
TRAIN_PARTS = PARTS + EXTRA_PARTS
# arguments that define the run: a resumed invocation must use the same values
SCHEDULE_ARGS = ["seed", "n_layer", "n_head", "n_embd", "n_positions", "batch", "steps", "lr", "min_lr_frac",
                 "warmup", "wd", "mix", "final_frac", "final_mix", "copy_frac", "p_doc_start", "copy_random"]
CHANGEABLE = ["steps", "mix", "final_mix", "copy_frac", "copy_random"]
# arguments added after the first checkpoints were written: a checkpoint without them used these values
ARG_DEFAULTS = {"copy_random": 0.0}


def parse_mix(s):
    """Weights of TRAIN_PARTS; the parts left out at the end (mixes written before they were added) get none."""
    w = np.array([float(x) for x in s.split(",")])
    assert len(PARTS) <= len(w) <= len(TRAIN_PARTS), f"--mix needs {len(PARTS)} to {len(TRAIN_PARTS)} weights " \
        f"({','.join(TRAIN_PARTS)})"
    w = np.concatenate([w, np.zeros(len(TRAIN_PARTS) - len(w))])
    return w / w.sum()


def draw_parts(rng, n, mix):
    """Rows per part. Only parts with weight take part in the draw, so adding a part of weight zero leaves
    the random stream (and a resumed run) exactly as before."""
    live = np.nonzero(mix)[0]
    counts = np.zeros(len(mix), dtype=np.int64)
    counts[live] = rng.multinomial(n, mix[live])
    return counts


def draw_part(rng, mix):
    live = np.nonzero(mix)[0]
    return int(live[rng.choice(len(live), p=mix[live])])


class Sampler:
    """Random windows of T+1 tokens; with prob p_doc_start a window starts exactly at a document's
    first token (no eos before it), so prompts at position 0 look like training data."""

    def __init__(self, arr, eos, rng, p_doc_start):
        self.arr = torch.from_numpy(arr.astype(np.int64))
        self.starts = np.nonzero(arr == eos)[0] + 1
        self.starts = self.starts[self.starts < len(arr) - 10]
        self.rng = rng
        self.p = p_doc_start
        self.eos = eos

    def get_repeat(self, n, T, random_frac=0.0):
        """Induction rows: a passage of 12-64 tokens repeated until the row is full, after an eos:
        [eos] seg seg seg ... Every token after the first copy is predictable only by attending back to
        the previous occurrence (makes copy/induction heads form). With probability random_frac the
        passage is L tokens drawn from random corpus positions (the corpus's unigram distribution, no
        sequence structure): then nothing but the earlier copy predicts the repeats, and the first copy,
        which nothing can predict, is not scored. Returns (rows (n, T+1), first scored target per row)."""
        out = torch.empty(n, T + 1, dtype=torch.long)
        first = [0] * n
        N = len(self.arr)
        for i in range(n):
            L = int(self.rng.integers(12, 65))
            if random_frac > 0 and self.rng.random() < random_frac:
                seg = self.arr[torch.from_numpy(self.rng.integers(0, N, L))]
                first[i] = L + 1  # targets 0..L: the first copy and the repeat's first token
            else:
                s = int(self.rng.integers(0, N - L))
                seg = self.arr[s:s + L]
            row = torch.cat([torch.tensor([self.eos])] + [seg] * ((T + 1) // L + 1))
            out[i] = row[:T + 1]
        return out, first

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
        tot += F.cross_entropy(logits[0].float(), x[0, 1:], reduction="sum").item()
        n += x.shape[1] - 1
    model.train()
    return tot / n


def lr_at(a, step):
    """Linear warm-up, then cosine from a.lr down to a.min_lr_frac * a.lr at a.steps."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    pr = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * pr)))


def file_sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def atomic_save(obj, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="kvscope-tiny")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=160)
    ap.add_argument("--n-positions", type=int, default=256)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--steps", type=int, default=2200, help="length of the whole LR schedule")
    ap.add_argument("--lr", type=float, default=2.5e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--mix", default="0.42,0.12,0.22,0.08,0.16", help="sampling weights of " + ",".join(TRAIN_PARTS) + " (the last ones may be left out: 0)")
    ap.add_argument("--final-frac", type=float, default=0.1, help="fraction of steps in the facts-heavy phase")
    ap.add_argument("--final-mix", default="0.34,0.34,0.15,0.05,0.12")
    ap.add_argument("--copy-frac", type=float, default=0.06,
                    help="fraction of batch rows that are repeated passages (induction training)")
    ap.add_argument("--copy-random", type=float, default=0.0,
                    help="fraction of the induction rows made of random corpus tokens (first copy not scored)")
    ap.add_argument("--p-doc-start", type=float, default=0.25)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=12)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--snapshot-steps", default="0,30,100,300,800,1600",
                    help="also keep F16 weights at these steps (the final step is always kept)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stop-at", type=int, default=0, help="end this phase after this step (0 = end of schedule)")
    ap.add_argument("--resume", action="store_true", help="continue from work/runs/<name>/state.pt")
    ap.add_argument("--resume-from", default="", help="continue from this state.pt instead")
    ap.add_argument("--allow-schedule-change", action="store_true",
                    help="--resume with different " + ", ".join("--" + k.replace("_", "-") for k in CHANGEABLE) +
                         " (a curriculum change between phases; the cosine continues on the new length)")
    ap.add_argument("--val-dir", default=os.path.join(HERE, "val"))
    ap.add_argument("--heldout", default=os.path.join(HERE, "heldout", "story.txt"))
    return ap.parse_args(argv)


class Stop:
    """SIGTERM / SIGINT ask the loop to write a checkpoint and exit at the next step boundary."""

    def __init__(self):
        self.flag = False
        signal.signal(signal.SIGTERM, self.set)
        signal.signal(signal.SIGINT, self.set)

    def set(self, signum, frame):
        print(f"signal {signum}: will checkpoint and stop after this step", flush=True)
        self.flag = True


def main():
    a = parse_args()
    stop = Stop()
    torch.set_num_threads(a.threads)
    run = os.path.join(WORK, "runs", a.name)
    os.makedirs(os.path.join(run, "snapshots"), exist_ok=True)
    tokdir = os.path.join(WORK, "tok")
    tok = bpe.Tokenizer(os.path.join(tokdir, "vocab.json"), os.path.join(tokdir, "merges.txt"))
    data_sha = {p: file_sha(os.path.join(tokdir, f"{p}.npy")) for p in TRAIN_PARTS
                if p in PARTS or os.path.exists(os.path.join(tokdir, f"{p}.npy"))}
    data_sha["merges.txt"] = file_sha(os.path.join(tokdir, "merges.txt"))

    state = None
    if a.resume or a.resume_from:
        src = a.resume_from or os.path.join(run, "state.pt")
        state = torch.load(src, map_location="cpu")
        for k in SCHEDULE_ARGS:
            if k in CHANGEABLE and a.allow_schedule_change:
                continue
            if state["args"].get(k, ARG_DEFAULTS.get(k)) != getattr(a, k):
                sys.exit(f"--resume: --{k.replace('_', '-')} is {getattr(a, k)!r} but the checkpoint {src} was "
                         f"trained with {state['args'].get(k, ARG_DEFAULTS.get(k))!r}")
        for k, v in state["data_sha"].items():
            if data_sha.get(k) != v:
                sys.exit(f"--resume: work/tok/{k} differs from the data the checkpoint {src} was trained on "
                         f"(rebuild it with make_data.py / train_bpe.py and the same seed)")
        print(f"resuming from {src} at step {state['step']}", flush=True)

    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    cfg = make_config(a.n_layer, a.n_head, a.n_embd, a.n_positions, len(tok.vocab), tok.eos)
    model = GPT2(cfg)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"params {nparams} ({nparams/1e6:.2f}M), vocab {cfg['vocab_size']}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    step, tokens, ema, elapsed0 = 0, 0, None, 0.0
    if state:
        assert state["cfg"] == cfg, "checkpoint config differs"
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        rng.bit_generator.state = state["np_rng"]
        torch.set_rng_state(state["torch_rng"])
        step, tokens, ema, elapsed0 = state["step"], state["tokens"], state["ema"], state["elapsed_s"]

    mix, final_mix = parse_mix(a.mix), parse_mix(a.final_mix)
    for p, w in zip(TRAIN_PARTS, mix + final_mix):
        if w > 0 and p not in data_sha:
            sys.exit(f"--mix gives {p} weight but work/tok/{p}.npy is missing (make_data.py, train_bpe.py)")
    samplers = [Sampler(np.load(os.path.join(tokdir, f"{p}.npy")), tok.eos, rng, a.p_doc_start) if p in data_sha
                else None for p in TRAIN_PARTS]
    vals = {p: val_windows(tok, os.path.join(a.val_dir, f"{p}.txt"), a.n_positions) for p in PARTS}
    vals["heldout"] = val_windows(tok, a.heldout, a.n_positions)
    final_start = int(a.steps * (1 - a.final_frac))
    snap_steps = {int(s) for s in a.snapshot_steps.split(",") if s} | {a.steps}

    with open(os.path.join(run, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    cmd = " ".join(["/usr/bin/python3"] + sys.argv)
    with open(os.path.join(run, "train_cmd.txt"), "a") as f:
        f.write(cmd + "\n")
    log_path = os.path.join(run, "log.csv")
    cols = ["step", "tokens", "elapsed_s", "lr", "train_loss"] + [f"val_{p}" for p in PARTS + ["heldout"]]
    rows = []
    if state and os.path.exists(log_path):  # drop rows logged after the checkpoint we resume from
        rows = [r for r in csv.DictReader(open(log_path)) if int(r["step"]) < step]
    logf = open(log_path, "w", newline="")
    log = csv.DictWriter(logf, fieldnames=cols)
    log.writeheader()
    log.writerows(rows)
    logf.flush()

    def save_state():
        atomic_save({"model": model.state_dict(), "opt": opt.state_dict(), "np_rng": rng.bit_generator.state,
                     "torch_rng": torch.get_rng_state(), "step": step, "tokens": tokens, "ema": ema,
                     "elapsed_s": elapsed0 + time.time() - t0, "cfg": cfg, "args": vars(a), "data_sha": data_sha},
                    os.path.join(run, "state.pt"))
        atomic_save({"model": model.state_dict(), "cfg": cfg, "step": step, "args": vars(a)},
                    os.path.join(run, "ckpt.pt"))

    T, B = a.n_positions, a.batch
    t0, cpu0 = time.time(), time.process_time()
    phase_start, tokens_start = step, tokens
    last = min(a.steps, a.stop_at) if a.stop_at else a.steps
    while True:
        if step in snap_steps and not os.path.exists(os.path.join(run, "snapshots", f"step_{step:05d}.pt")):
            atomic_save({"model": {k: v.detach().half() for k, v in model.state_dict().items()}, "cfg": cfg,
                         "step": step, "tokens": tokens}, os.path.join(run, "snapshots", f"step_{step:05d}.pt"))
        if step % a.eval_every == 0 or step == last:
            v = {p: evaluate(model, w, a.eval_windows) for p, w in vals.items()}
            el = elapsed0 + time.time() - t0
            print(f"step {step} tok {tokens} {el:.0f}s train {ema if ema else float('nan'):.3f} val "
                  + " ".join(f"{p[:5]} {x:.3f}" for p, x in v.items())
                  + f" tok/s {(tokens - tokens_start) / max(time.time() - t0, 1e-9):.0f}", flush=True)
            log.writerow(dict(step=step, tokens=tokens, elapsed_s=f"{el:.1f}", lr=f"{lr_at(a, step):.6f}",
                              train_loss=f"{ema:.4f}" if ema else "", **{f"val_{p}": f"{x:.4f}" for p, x in v.items()}))
            logf.flush()
        if step == last or stop.flag:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(a, step)
        m = final_mix if step >= final_start else mix
        n_copy = int(rng.binomial(B, a.copy_frac)) if a.copy_frac > 0 else 0
        counts = draw_parts(rng, B - n_copy, m)
        rows = [samplers[i].get(int(c), T) for i, c in enumerate(counts) if c > 0]
        first = []
        if n_copy:
            rep, first = samplers[draw_part(rng, mix)].get_repeat(n_copy, T, a.copy_random)
            rows.append(rep)
        batch = torch.cat(rows)
        x, y = batch[:, :-1], batch[:, 1:].clone()
        for i, f in enumerate(first):  # the induction rows are the last n_copy rows
            y[B - n_copy + i, :f] = -100  # cross_entropy's ignore_index
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += B * T
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        step += 1
        if step % 10 == 0:
            print(f"  step {step} loss {loss.item():.3f} ema {ema:.3f} lr {lr_at(a, step - 1):.2e} "
                  f"{(tokens - tokens_start) / (time.time() - t0):.0f} tok/s", flush=True)
        if step % a.ckpt_every == 0 and step != last:
            save_state()
    save_state()
    wall = time.time() - t0
    cpu = time.process_time() - cpu0
    ph_path = os.path.join(run, "phases.json")
    phases = json.load(open(ph_path)) if os.path.exists(ph_path) else []
    phases = [p for p in phases if p["end_step"] <= phase_start]
    phases.append(dict(start_step=phase_start, end_step=step, tokens=tokens - tokens_start, wall_s=wall, cpu_s=cpu, cmd=cmd,
                       interrupted=stop.flag and step != last))
    with open(ph_path + ".tmp", "w") as f:
        json.dump(phases, f, indent=1)
    os.replace(ph_path + ".tmp", ph_path)
    print(f"{'interrupted' if stop.flag and step != last else 'phase done'}: step {step}/{a.steps}, "
          f"{tokens} tokens, {wall:.0f}s this phase", flush=True)
    if step == a.steps:
        with open(os.path.join(run, "done.json"), "w") as f:
            json.dump({"steps": step, "tokens": tokens, "wall_s": sum(p["wall_s"] for p in phases),
                       "params": nparams}, f)


if __name__ == "__main__":
    main()
