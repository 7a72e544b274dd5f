#!/usr/bin/python3
"""Where a training run stands, as Markdown (for RESUME.md): step, tokens, time, the last validation
losses and the snapshots kept. Usage: run_status.py [run dir] (default work/runs/kvscope-tiny)."""
import csv
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
run = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "work", "runs", "kvscope-tiny")
st = torch.load(os.path.join(run, "state.pt"), map_location="cpu")
a = st["args"]
rows = list(csv.DictReader(open(os.path.join(run, "log.csv"))))
phases = json.load(open(os.path.join(run, "phases.json"))) if os.path.exists(os.path.join(run, "phases.json")) else []
snaps = sorted(os.listdir(os.path.join(run, "snapshots"))) if os.path.isdir(os.path.join(run, "snapshots")) else []
print(f"- `{os.path.basename(run)}`: checkpoint at **step {st['step']} of {a['steps']}** "
      f"({st['tokens'] / 1e6:.2f}M tokens, {st['elapsed_s'] / 60:.0f} min of training wall time so far); "
      + (f"train loss (EMA) {st['ema']:.3f}" if st["ema"] else ""))
if rows:
    r = rows[-1]
    print(f"- last evaluation (step {r['step']}, first {a['eval_windows']} windows of each slice, nats/token): " +
          ", ".join(f"{k[4:]} {float(v):.3f}" for k, v in r.items() if k.startswith("val_")))
print(f"- snapshots kept: {', '.join(s[5:10].lstrip('0') or '0' for s in snaps) or 'none'}")
for p in phases:
    print(f"- invocation: steps {p['start_step']}-{p['end_step']}, {p['wall_s'] / 60:.0f} min wall"
          f"{', interrupted' if p.get('interrupted') else ''}")
