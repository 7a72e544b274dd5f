#!/usr/bin/env bash
# kvscope vs an independent PyTorch Llama forward (tools/torch_llama.py, run by
# tools/torch_bench.py bench: python3-torch on CPU, the same thread count, its
# own KV cache, the better of OpenMP's active and passive waiting per number) on
# a SmolLM2-135M-shaped checkpoint (30 layers, 9 query heads sharing 3 K/V heads
# of 64, SwiGLU 1536, vocab 49152, tied embeddings; random weights, stored in
# BF16 as SmolLM2 ships). kvscope decodes from the BF16 values as stored and
# computes in f32; the reference runs twice, computing in f32 (weights widened
# once at load, its fastest CPU path on most machines) and with bf16 matrices.
# Both decode the same lengths: a prefill of T-1 tokens, then single-token
# steps through the cache, the first attending to T positions.
# Usage: tools/bench_llama.sh [path/to/kvscope]   (make bench runs this)
set -euo pipefail
# shellcheck source=tools/bench_common.sh
. "$(dirname "$0")/bench_common.sh" "$@"
M="$OUT/smollm2-135m-random-bf16"
[ -f "$M/model.safetensors" ] ||
  $PY tools/numpy_ref_llama.py make --out "$M" --layers 30 --heads 9 --kv-heads 3 \
      --embd 576 --inner 1536 --ctx 8192 --vocab 49152 --dtype BF16 --std 0.02 --rope-theta 100000 \
      --synthetic-vocab >/dev/null
LENGTHS=${BENCH_LLAMA_LENGTHS:-256 512}
# auto = the better of active and passive per number (each run twice); on a
# loaded machine active spinning is many times slower, and BENCH_OMP_WAIT=passive
# halves the time the reference takes.
OMP_WAIT=${BENCH_OMP_WAIT:-auto}
N=smollm2-135m-bf16
# Rounds of the three back to back, so each round's ratios compare neighbours in time.
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r/$ROUNDS $N: kvscope" >&2
  # shellcheck disable=SC2086
  "$KV" bench --model "$M" --lengths $LENGTHS --reps 3 --json > "$OUT/$N.kvscope.$r.json"
  for DT in f32 bf16; do
    echo "== round $r/$ROUNDS $N: torch $DT" >&2
    # shellcheck disable=SC2086
    $PY tools/torch_bench.py bench --model "$M" --lengths $LENGTHS --threads "$THREADS" --dtype "$DT" \
      --omp-wait "$OMP_WAIT" --skip-no-cache > "$OUT/$N.torch-$DT.$r.json"
  done
done

$PY - "$OUT" "$ROUNDS" "$N" <<'PYEOF'
import json, statistics, sys
out, rounds, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
med = statistics.median
load = lambda tag: [json.load(open(f"{out}/{name}.{tag}.{r}.json")) for r in range(1, rounds + 1)]
ks, tf, tb = load("kvscope"), load("torch-f32"), load("torch-bf16")
print("| SmolLM2-135M shape, BF16 file | T | kvscope KV decode tok/s | PyTorch f32 | PyTorch bf16 | "
      "kvscope / faster PyTorch (range over rounds) | kvscope decode GB/s | kvscope prefill tok/s | "
      "PyTorch f32 prefill | PyTorch bf16 prefill | kvscope / faster PyTorch prefill |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for i, row in enumerate(ks[0]["rows"]):
    T = row["T"]
    kr = [k["rows"][i] for k in ks]
    fr = [next(x for x in t["rows"] if x["T"] == T) for t in tf]
    br = [next(x for x in t["rows"] if x["T"] == T) for t in tb]
    def ratio(key):
        return [k[key] / max(a[key], b[key]) for k, a, b in zip(kr, fr, br)]
    sd, sp = ratio("kv_decode_tokens_per_s"), ratio("prefill_tokens_per_s")
    m = lambda rows, key: med(x[key] for x in rows)  # noqa: E731
    print(f"| {name} | {T} | {m(kr, 'kv_decode_tokens_per_s'):.1f} | {m(fr, 'kv_decode_tokens_per_s'):.1f} | "
          f"{m(br, 'kv_decode_tokens_per_s'):.1f} | {med(sd):.2f}x ({min(sd):.2f}–{max(sd):.2f}) | "
          f"{m(kr, 'decode_gb_per_s'):.1f} | {m(kr, 'prefill_tokens_per_s'):.0f} | "
          f"{m(fr, 'prefill_tokens_per_s'):.0f} | {m(br, 'prefill_tokens_per_s'):.0f} | "
          f"{med(sp):.2f}x ({min(sp):.2f}–{max(sp):.2f}) |")
bw = [k["read_bandwidth_gb_per_s"] for k in ks]
print(f"\nthreads: {ks[0]['threads']} (both); rounds: {rounds}; torch {tf[0]['torch']}, OpenMP wait: "
      f"{tf[0]['omp_wait']}; memory read bandwidth "
      f"measured by kvscope bench: {min(bw):.1f}–{max(bw):.1f} GB/s (median {med(bw):.1f})")
PYEOF
