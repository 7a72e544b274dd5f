#!/bin/sh
# A training record to develop and look at the Training tab before a finished run is exported: the
# committed checkpoint in resume/kvscope-tiny (its state.pt as the "final" model, its snapshots and
# step 0 rebuilt from the seed as checkpoints, its log.csv as the loss curve), exported by the same
# scripts build_model.sh uses, into OUT (never into assets/):
#   OUT/models/kvscope-tiny/                 the run's latest weights (export.py)
#   OUT/models/kvscope-tiny-training/        step-NNNNN/ folders + training.json (export_snapshots.py)
# Open it with `kvscope --model OUT/models/kvscope-tiny`. Reads resume/ only; about 2 minutes on 1 core.
set -eu
OUT=${1:?usage: make_training_fixture.sh OUT_DIR [STEPS]}
STEPS=${2:-0,100,300}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/work/runs" "$OUT/models"
OUT=$(cd "$OUT" && pwd)
ln -sfn "$HERE/resume/kvscope-tiny" "$OUT/work/runs/kvscope-tiny"
ln -sfn "$HERE/resume/tok" "$OUT/work/tok"
export OMP_WAIT_POLICY=PASSIVE
cd "$HERE"
/usr/bin/python3 export.py --run kvscope-tiny --work "$OUT/work" --out "$OUT/models/kvscope-tiny" --threads 1
/usr/bin/python3 export_snapshots.py --run kvscope-tiny --work "$OUT/work" --models-dir "$OUT/models" \
    --steps "$STEPS" --threads 1
