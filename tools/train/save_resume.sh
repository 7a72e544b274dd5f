#!/bin/sh
# Copy a run's resumable checkpoint into the tracked folder tools/train/resume/<name>/ so it can be
# committed and a later session (or a fresh clone) continues the run: build_model.sh, or
#   cp -r resume/<name>/. work/runs/<name>/ && train.py --name <name> --resume ...
# Copies state.pt (model + optimizer + RNG + step), log.csv, phases.json, train_cmd.txt, config.json, done.json
# and the F16 snapshots named in SNAPSHOTS (default: all but step 30, not shipped, and step 0, which export_snapshots.py rebuilds
# exactly from the seed), plus the tokenizer.
# Usage: save_resume.sh [name]    (default kvscope-tiny)
set -eu
cd "$(dirname "$0")"
name=${1:-kvscope-tiny}
run=work/runs/$name
dst=resume/$name
test -f "$run/state.pt" || { echo "no $run/state.pt"; exit 1; }
mkdir -p "$dst/snapshots" resume/tok
# state.pt is replaced atomically by train.py, so a copy taken while it trains is a consistent file
cp "$run/state.pt" "$dst/state.pt.tmp" && mv "$dst/state.pt.tmp" "$dst/state.pt"
for f in log.csv phases.json train_cmd.txt config.json done.json; do
    if [ -f "$run/$f" ]; then cp "$run/$f" "$dst/$f"; fi
done
for s in ${SNAPSHOTS:-$(cd "$run/snapshots" && ls | grep -v -e step_00000.pt -e step_00030.pt)}; do
    cp "$run/snapshots/$s" "$dst/snapshots/$s"
done
cp work/tok/vocab.json work/tok/merges.txt resume/tok/
/usr/bin/python3 -c "import torch; s = torch.load('$dst/state.pt', map_location='cpu'); print('saved $name at step', s['step'])"
du -sh resume
