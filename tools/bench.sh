#!/usr/bin/env bash
# kvscope vs the PyTorch reference (tools/torch_bench.py: python3-torch, CPU,
# same thread count, its own KV cache), on the same safetensors files, in one run
# (GPT-2 shapes; tools/bench_llama.sh does the Llama-architecture shape).
# Usage: tools/bench.sh [path/to/kvscope]   (make bench does this)
set -euo pipefail
# shellcheck source=tools/bench_common.sh
. "$(dirname "$0")/bench_common.sh" "$@"

# A GPT-2-124M-shaped checkpoint in F32, and the same shape stored in F16:
# kvscope decodes from the half-precision weights as stored; the PyTorch
# reference computes in f32 (its CPU F16 matmul is slow).
make_gpt2 "$OUT/gpt2-124m-random-f16" 12 F16
$PY tools/torch_bench.py make-124m --out "$OUT/gpt2-124m-random" --tokenizer-dir "$GPT2_TOK" >/dev/null

run() {  # name dir round lengths...
  local name=$1 dir=$2 r=$3; shift 3
  echo "== round $r/$ROUNDS $name: kvscope" >&2
  "$KV" bench --model "$dir" --lengths "$@" --reps 3 --json > "$OUT/$name.kvscope.$r.json"
  echo "== round $r/$ROUNDS $name: torch" >&2
  $PY tools/torch_bench.py bench --model "$dir" --lengths "$@" --threads "$THREADS" > "$OUT/$name.torch.$r.json"
}
# Rounds, each running both implementations back to back on every model: on a
# shared machine memory bandwidth and CPU time drift by tens of percent over
# minutes, so each round's speed-up compares neighbours in time, and the
# table reports the median over rounds with the range of speed-ups.
for r in $(seq 1 "$ROUNDS"); do
  run gpt2-124m "$OUT/gpt2-124m-random" "$r" 256 512
  run gpt2-124m-f16 "$OUT/gpt2-124m-random-f16" "$r" 256 512
  run kvscope-tiny assets/models/kvscope-tiny "$r" 64 128 255
done

$PY - "$OUT" "$ROUNDS" <<'PYEOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
med = statistics.median
print("| model | T | kvscope KV decode tok/s | PyTorch KV decode tok/s | speed-up (range over rounds) | "
      "kvscope decode GB/s | kvscope prefill tok/s | PyTorch prefill tok/s | NO CACHE / KV time | FLOP ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
bandwidth = []
for name in ("gpt2-124m", "gpt2-124m-f16", "kvscope-tiny"):
    ks = [json.load(open(f"{out}/{name}.kvscope.{r}.json")) for r in range(1, rounds + 1)]
    ts = [json.load(open(f"{out}/{name}.torch.{r}.json")) for r in range(1, rounds + 1)]
    bandwidth += [k["read_bandwidth_gb_per_s"] for k in ks]
    for i, row in enumerate(ks[0]["rows"]):
        T = row["T"]
        kr = [k["rows"][i] for k in ks]
        tr = [next(x for x in t["rows"] if x["T"] == T) for t in ts]
        kd = [x["kv_decode_tokens_per_s"] for x in kr]
        td = [x["kv_decode_tokens_per_s"] for x in tr]
        sp = [a / b for a, b in zip(kd, td)]
        print(f"| {name} | {T} | {med(kd):.1f} | {med(td):.1f} | {med(kd) / med(td):.2f}x ({min(sp):.2f}–{max(sp):.2f}) | "
              f"{med(x['decode_gb_per_s'] for x in kr):.1f} | {med(x['prefill_tokens_per_s'] for x in kr):.0f} | "
              f"{med(x['prefill_tokens_per_s'] for x in tr):.0f} | {med(x['time_ratio'] for x in kr):.1f} | "
              f"{kr[0]['flop_ratio']:.1f} |")
# Within each mode, time follows that mode's counters: growth of the median
# step time from the shortest to the longest length vs growth of its FLOPs.
print("\n| model | lengths | NO CACHE time growth | NO CACHE FLOP growth | KV time growth | KV FLOP growth |")
print("|---|---|---|---|---|---|")
for name in ("gpt2-124m", "gpt2-124m-f16", "kvscope-tiny"):
    ks = [json.load(open(f"{out}/{name}.kvscope.{r}.json")) for r in range(1, rounds + 1)]
    a, b = 0, len(ks[0]["rows"]) - 1
    def m(i, key):
        return med(k["rows"][i][key] for k in ks)
    ra, rb = ks[0]["rows"][a], ks[0]["rows"][b]
    print(f"| {name} | {ra['T']} → {rb['T']} | {m(b, 'no_cache_ms') / m(a, 'no_cache_ms'):.2f}x | "
          f"{rb['no_cache_flops'] / ra['no_cache_flops']:.2f}x | {m(b, 'kv_decode_ms') / m(a, 'kv_decode_ms'):.2f}x | "
          f"{rb['kv_flops'] / ra['kv_flops']:.2f}x |")
print(f"\nthreads: {ks[0]['threads']}; rounds: {rounds}; memory read bandwidth measured by kvscope bench: "
      f"{min(bandwidth):.1f}–{max(bandwidth):.1f} GB/s (median {med(bandwidth):.1f})")
PYEOF
