#!/usr/bin/env bash
# Batching measured: the cost of one forward over n = 1, 2, 4, 8, 16 new
# positions in decode steps (GPT-2-124M F16 and SmolLM2-135M BF16 shapes),
# prefill at T = 128 and 512, and speculative decoding at K = 4 on the
# 124M-shaped target with a 2-layer draft (random weights: every draft is
# accepted), with Leviathan et al.'s prediction from the measured α and
# cost ratio. Rounds run everything back to back; the tables give medians
# over rounds. BEFORE=path/to/an/older/kvscope adds its prefill and
# speculative numbers, measured in the same rounds. Where Debian's python3-torch
# is installed (KVSCOPE_TRAINING=1 scripts/install-deps.sh), each round also
# times PyTorch's prefill on the same files and thread count
# (tools/torch_bench.py: GPT-2 F32 and F16 computed in f32; the Llama shape in
# f32 and in bf16), beside kvscope's on a GPT-2 F32 file too. The Llama shape's
# prefill also runs with --bf16-products (the inputs rounded to bf16, as
# PyTorch's bf16 path does). Each round also runs `kvscope bench --kernels`
# (one core's multiply-add rates), from which the report gives each forward's
# floor: its products alone on every core at those rates.
# Usage: [BEFORE=old/kvscope] [BENCH_ROUNDS=3] tools/bench_batching.sh [path/to/kvscope]
set -euo pipefail
# shellcheck source=tools/bench_common.sh
. "$(dirname "$0")/bench_common.sh" "$@"
BEFORE=${BEFORE:-}
G="$OUT/gpt2-124m-random-f16"
D="$OUT/gpt2-2layer-random-f16"
S="$OUT/smollm2-135m-random-bf16"
make_gpt2 "$G" 12 F16
make_gpt2 "$D" 2 F16 7
TORCH=0
$PY -c "import torch" 2>/dev/null && TORCH=1
F="$OUT/gpt2-124m-random-f32"
[ "$TORCH" = 0 ] || make_gpt2 "$F" 12 F32
[ -f "$S/model.safetensors" ] ||
  $PY tools/numpy_ref_llama.py make --out "$S" --layers 30 --heads 9 --kv-heads 3 \
      --embd 576 --inner 1536 --ctx 8192 --vocab 49152 --dtype BF16 --std 0.02 --rope-theta 100000 \
      --synthetic-vocab >/dev/null
R="$OUT/batching"
mkdir -p "$R"
rm -f "$R"/*.json

spec() {  # binary tag round
  "$1" generate --model "$G" --draft "$D" --speculate 4 --max-new 32 --prompt "The KV cache" --json | tail -n 1 \
    > "$R/spec.$2.$3.json"
}
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r/$ROUNDS: forward cost by positions" >&2
  "$KV" bench --model "$G" --positions 2 4 8 16 --reps 3 --json > "$R/pos.gpt2.$r.json"
  "$KV" bench --model "$S" --positions 2 4 8 16 --reps 3 --json > "$R/pos.smol.$r.json"
  "$KV" bench --model "$S" --positions 2 4 8 16 --reps 3 --json --bf16-products > "$R/pos.smolbf16.$r.json"
  if [ -n "$BEFORE" ]; then
    "$BEFORE" bench --model "$G" --positions 2 4 8 16 --reps 3 --json > "$R/pos.gpt2.before.$r.json"
    "$BEFORE" bench --model "$S" --positions 2 4 8 16 --reps 3 --json > "$R/pos.smol.before.$r.json"
  fi
  "$KV" bench --kernels --json > "$R/kernels.$r.json"
  echo "== round $r/$ROUNDS: prefill" >&2
  "$KV" bench --model "$G" --lengths 128 512 --reps 1 --json > "$R/pre.gpt2.after.$r.json"
  "$KV" bench --model "$S" --lengths 128 512 --reps 1 --json > "$R/pre.smol.after.$r.json"
  "$KV" bench --model "$S" --lengths 128 512 --reps 1 --json --bf16-products > "$R/pre.smolbf16.after.$r.json"
  if [ -n "$BEFORE" ]; then
    "$BEFORE" bench --model "$G" --lengths 128 512 --reps 1 --json > "$R/pre.gpt2.before.$r.json"
    "$BEFORE" bench --model "$S" --lengths 128 512 --reps 1 --json > "$R/pre.smol.before.$r.json"
  fi
  if [ "$TORCH" = 1 ]; then
    echo "== round $r/$ROUNDS: prefill, PyTorch" >&2
    "$KV" bench --model "$F" --lengths 128 512 --reps 1 --json > "$R/pre.gpt2f32.after.$r.json"
    torch_pre() {  # model tag dtype
      $PY tools/torch_bench.py bench --model "$1" --lengths 128 512 --decode 1 --reps 1 --threads "$THREADS" \
        --dtype "$3" --skip-no-cache > "$R/torch.$2.$3.$r.json"
    }
    torch_pre "$F" gpt2f32 f32
    torch_pre "$G" gpt2 f32
    torch_pre "$S" smol f32
    torch_pre "$S" smol bf16
  fi
  echo "== round $r/$ROUNDS: speculative K=4" >&2
  spec "$KV" after "$r"
  [ -z "$BEFORE" ] || spec "$BEFORE" before "$r"
done
$PY tools/bench_batching_report.py "$R" "$ROUNDS"
