#!/usr/bin/python3
"""Export the F16 snapshots a run kept (train.py --snapshot-steps) as ordinary model folders, so the
class can open the same model at several moments of its training, and write the training record the
app's Training view reads.

assets/models/<run>-training/
  step-NNNNN/     config.json, model.safetensors (F16), vocab.json, merges.txt, metrics.json, README.md
  training.json   the loss curve (log.csv rows: step, tokens, train EMA, validation losses) and the
                  checkpoints: step, tokens, folder (relative), validation loss of every slice
The final weights are the default model itself (assets/models/<run>); training.json lists it last.
"""
import argparse
import csv
import json
import os
import shutil

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numpy/torch load libgomp
import numpy as np  # noqa: E402
import torch  # noqa: E402

import bpe  # noqa: E402
import export  # noqa: E402
from model import GPT2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PARTS = ["stories", "facts", "code", "stdlib", "english"]


def val_all(model, tok, val_dir, T):
    return {p: export.val_metrics(model, tok, os.path.join(val_dir, f"{p}.txt"), T) for p in PARTS}


def load_snapshot(run, step, state):
    """The F16 snapshot train.py kept; the step-0 one (not committed, to keep resume/ small) is rebuilt
    exactly: train.py seeds torch and constructs the model before anything else draws from torch's RNG."""
    path = os.path.join(run, "snapshots", f"step_{step:05d}.pt")
    if step == 0 and not os.path.exists(path):
        torch.manual_seed(state["args"]["seed"])
        model = GPT2(state["cfg"])
        return {"model": {k: v.half() for k, v in model.state_dict().items()}, "cfg": state["cfg"], "step": 0,
                "tokens": 0}
    return torch.load(path, map_location="cpu")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="kvscope-tiny")
    ap.add_argument("--steps", default="0,100,300,800", help="snapshots to ship (the final model is the run itself)")
    ap.add_argument("--val-dir", default=None, help="default assets/models/<run>/val")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "assets", "models"))
    ap.add_argument("--work", default=WORK, help="the training work folder (runs/<run>)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    run = os.path.join(a.work, "runs", a.run)
    final_dir = os.path.join(a.models_dir, a.run)
    out = os.path.join(a.models_dir, a.run + "-training")
    val_dir = a.val_dir or os.path.join(final_dir, "val")
    os.makedirs(out, exist_ok=True)
    tok = bpe.Tokenizer(os.path.join(final_dir, "vocab.json"), os.path.join(final_dir, "merges.txt"))
    state = torch.load(os.path.join(run, "state.pt"), map_location="cpu")
    total = state["args"]["steps"]
    ckpts = []
    for s in [int(x) for x in a.steps.split(",")]:
        snap = load_snapshot(run, s, state)
        d = os.path.join(out, f"step-{s:05d}")
        os.makedirs(d, exist_ok=True)
        tensors = {k: v.float().numpy().astype(np.float16) for k, v in snap["model"].items()}
        export.write_safetensors(os.path.join(d, "model.safetensors"), tensors, metadata={"format": "pt"})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(snap["cfg"], f, indent=2)
        for fn in ["vocab.json", "merges.txt"]:
            shutil.copyfile(os.path.join(final_dir, fn), os.path.join(d, fn))
        cfg, _, model = export.load_exported(d)
        m = val_all(model, tok, val_dir, cfg["n_positions"])
        with open(os.path.join(d, "metrics.json"), "w") as f:
            json.dump({"step": s, "tokens": snap["tokens"], "parts": m, "val_dir": os.path.relpath(val_dir, ROOT)}, f,
                      indent=2)
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write(f"# {a.run} at training step {s}\n\nA checkpoint of the default model's own training run "
                    f"(`../../{a.run}/README.md`): the weights after {s} of {total} optimizer steps "
                    f"({snap['tokens'] / 1e6:.2f}M training tokens), same architecture and tokenizer, F16. "
                    f"Open it with `--model`; compare it with the final model to see what training changed.\n\n"
                    "| part | loss (nats/token) | bits/byte |\n|---|---|---|\n" +
                    "".join(f"| {p} | {m[p]['loss']:.4f} | {m[p]['bits_per_byte']:.4f} |\n" for p in PARTS))
        ckpts.append(dict(step=s, tokens=snap["tokens"], dir=os.path.basename(d),
                          val_loss={p: m[p]["loss"] for p in PARTS}))
        print(f"step {s}: " + " ".join(f"{p} {m[p]['loss']:.3f}" for p in PARTS), flush=True)
    fm = json.load(open(os.path.join(final_dir, "metrics.json")))["parts"]
    ckpts.append(dict(step=state["step"], tokens=state["tokens"], dir=f"../{a.run}",
                      val_loss={p: fm[p]["loss"] for p in PARTS}))
    rows = {}  # by step: a resumed run logs its restart step again (the later row wins)
    for r in csv.DictReader(open(os.path.join(run, "log.csv"))):
        rows[int(r["step"])] = dict(step=int(r["step"]), tokens=int(r["tokens"]),
                                    train_loss=float(r["train_loss"]) if r["train_loss"] else None,
                                    **{k: float(v) for k, v in r.items() if k.startswith("val_") and v})
    curve = [rows[s] for s in sorted(rows)]
    rec = dict(model=a.run, total_steps=total, batch_tokens=state["args"]["batch"] * state["args"]["n_positions"],
               note="loss in nats/token; curve validation losses are on the first windows of each slice "
                    "(train.py --eval-windows), checkpoint losses on whole slices (export.val_metrics)",
               curve=curve, checkpoints=ckpts)
    with open(os.path.join(out, "training.json"), "w") as f:
        json.dump(rec, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
