#!/usr/bin/env bash
# KV cache layouts at GPT-2-124M shape (random F16 weights: speed does not
# depend on them), decode at T = 1024: tokens/s and the memory traffic each
# layout's step sustains (weights + the cache bytes that layout reads), every
# layout measured in the same round, rounds interleaved. make bench runs it.
# Usage: tools/bench_kv.sh [path/to/kvscope]   (BENCH_ROUNDS, KVSCOPE_THREADS)
set -euo pipefail
# shellcheck source=tools/bench_common.sh
. "$(dirname "$0")/bench_common.sh" "$@"
M="$OUT/gpt2-124m-random-f16"
make_gpt2 "$M" 12 F16
T=${BENCH_KV_T:-1024}
LAYOUTS=("f32|" "f16|--kv-dtype f16" "q8_0|--kv-dtype q8_0" "q4_0|--kv-dtype q4_0" "paged B=16|--kv-block 16"
         "paged B=16 q8_0|--kv-block 16 --kv-dtype q8_0" "window 256 + 4 sinks|--kv-window 256 --kv-sinks 4")
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!LAYOUTS[@]}"; do
    flags=${LAYOUTS[$i]#*|}
    echo "== round $r/$ROUNDS ${LAYOUTS[$i]%%|*}" >&2
    # shellcheck disable=SC2086
    "$KV" bench --model "$M" --lengths "$T" --reps 1 --json $flags > "$OUT/kv.$i.$r.json"
  done
done
$PY - "$OUT" "$ROUNDS" "${LAYOUTS[@]}" <<'PYEOF'
import json, statistics, sys
out, rounds, layouts = sys.argv[1], int(sys.argv[2]), [l.split("|")[0] for l in sys.argv[3:]]
med = statistics.median
rows = []
for i, name in enumerate(layouts):
    rs = [json.load(open(f"{out}/kv.{i}.{r}.json"))["rows"][0] for r in range(1, rounds + 1)]
    rows.append((name, rs))
base = med(r["kv_decode_ms"] for r in rows[0][1])
print("| KV layout | T | decode ms (median) | tok/s | bytes read / step | decode GB/s | time vs f32 dense |")
print("|---|---|---|---|---|---|---|")
for name, rs in rows:
    ms = med(r["kv_decode_ms"] for r in rs)
    print(f"| {name} | {rs[0]['T']} | {ms:.2f} | {1000 / ms:.1f} | {rs[0]['decode_read_bytes'] / 1e6:.1f} MB | "
          f"{med(r['decode_gb_per_s'] for r in rs):.1f} | {ms / base:.2f}x |")
PYEOF
