#!/bin/sh
# Rebuild kvscope's embedded models from scratch: data -> BPE -> train (main + draft) -> export -> cards.
# Deterministic from SEED (thread-level float nondeterminism aside). About an hour on 2 CPU cores.
# Needs Debian's /usr/bin/python3 with python3-torch, numpy, regex, matplotlib; npm (for countries-list).
set -eu
cd "$(dirname "$0")"
PY=/usr/bin/python3
SEED=${SEED:-1234}
# Passive OpenMP waiting: spinning threads starve each other on a shared 2-core machine.
export OMP_WAIT_POLICY=PASSIVE
mkdir -p work/runs
rm -f work/runs/kvscope-tiny-p1/done.json work/runs/kvscope-tiny/done.json work/runs/kvscope-draft/done.json
$PY make_data.py --seed "$SEED"
$PY train_bpe.py --seed "$SEED" --merges 3000
# main model, phase 1: 1000 steps of the 1400-step cosine schedule (stories/facts/code mix)
nice -n 10 $PY train.py --name kvscope-tiny-p1 --seed "$SEED" --stop-at 1000 2>&1 | tee work/runs/kvscope-tiny-p1.log
# phase 2: re-warmed, stories-heavy, 12% repeated-passage rows so copy/induction heads form; last 10% facts-heavy
nice -n 10 $PY train.py --name kvscope-tiny --seed "$((SEED + 1))" --init-from work/runs/kvscope-tiny-p1/ckpt.pt \
    --steps 700 --warmup 50 --lr 1.5e-3 --copy-frac 0.12 --mix 0.65,0.17,0.18 --eval-every 100 \
    2>&1 | tee work/runs/kvscope-tiny.log
nice -n 15 $PY train.py --name kvscope-draft --seed "$SEED" --n-layer 2 --n-head 4 --n-embd 64 \
    --steps 500 --warmup 50 --lr 3e-3 --eval-every 100 --threads 1 2>&1 | tee work/runs/kvscope-draft.log
# tee hides python's exit status under sh: check that both runs finished
test -f work/runs/kvscope-tiny-p1/done.json && test -f work/runs/kvscope-tiny/done.json && test -f work/runs/kvscope-draft/done.json
$PY export.py --run kvscope-tiny
$PY export.py --run kvscope-draft
$PY make_card.py --name kvscope-tiny
$PY make_card.py --name kvscope-draft --draft
echo "done: assets/models/kvscope-tiny and assets/models/kvscope-draft"
