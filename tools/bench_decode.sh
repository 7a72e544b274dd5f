#!/usr/bin/env bash
# Speculative decoding and beam-search memory, measured (make bench runs this
# after tools/bench.sh). Every number comes from `kvscope generate --json` in
# this run: plain and speculative tokens/s of the same prompt side by side,
# the measured acceptance rate, Leviathan et al.'s prediction from it, and
# the K/V bytes beam search holds with shared prefixes vs one cache per beam.
# Usage: tools/bench_decode.sh [path/to/kvscope]
set -euo pipefail
# shellcheck source=tools/bench_common.sh
. "$(dirname "$0")/bench_common.sh" "$@"
TINY=assets/models/kvscope-tiny
DRAFT=assets/models/kvscope-draft

# GPT-2-124M-shaped target (random F16 weights: speed does not depend on
# them) and a 2-layer draft of the same width and tokenizer.
make_gpt2 "$OUT/gpt2-124m-random-f16" 12 F16
make_gpt2 "$OUT/gpt2-2layer-random-f16" 2 F16 7

J="$OUT/decode.jsonl"
: > "$J"
spec() {  # label target draft K max_new prompt
  echo "== speculative: $1 K=$4" >&2
  "$KV" generate --model "$2" --draft "$3" --speculate "$4" --max-new "$5" --prompt "$6" --json | tail -n 1 |
    $PY -c 'import json,sys; d=json.load(sys.stdin); d["label"]=sys.argv[1]; print(json.dumps(d))' "$1" >> "$J"
}
for K in 2 4 8; do
  for P in "Once upon a time" "The capital of France is" "Lily and Ben went to the park"; do
    spec "kvscope-tiny / kvscope-draft" "$TINY" "$DRAFT" "$K" 120 "$P"
  done
done
for K in 2 4; do
  spec "GPT-2-124M shape / itself" "$OUT/gpt2-124m-random-f16" "$OUT/gpt2-124m-random-f16" "$K" 24 "The KV cache"
  spec "GPT-2-124M shape / 2-layer" "$OUT/gpt2-124m-random-f16" "$OUT/gpt2-2layer-random-f16" "$K" 24 "The KV cache"
done

B="$OUT/beams.jsonl"
: > "$B"
# A prompt of a few dozen tokens, as a real request has: the beams share it.
BEAM_PROMPT="Once upon a time, in a small village by the sea, there lived a little girl named Lily. She loved to \
play on the beach with her dog, and every morning she"
for N in 4 8; do
  echo "== beams N=$N" >&2
  "$KV" generate --beams "$N" --max-new 48 --prompt "$BEAM_PROMPT" --json |
    $PY -c '
import json, sys
steps = [json.loads(l) for l in sys.stdin if l.strip()]
live = [s for s in steps if s.get("event") != "done"]
peak = max(live, key=lambda s: s["kv_bytes_independent"])
print(json.dumps({"n": int(sys.argv[1]), "steps": len(live), "shared": peak["kv_bytes_shared"],
                  "independent": peak["kv_bytes_independent"], "index": peak["index"],
                  "block": peak.get("block", 0), "cow": live[-1].get("cow_copies", 0)}))' "$N" >> "$B"
done

$PY - "$J" "$B" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = statistics.median
print("| target / draft | K | α (accepted/drafted) | α per test | tokens / target forward | plain tok/s | "
      "speculative tok/s | measured speed-up | cost ratio c | predicted speed-up | verify forward / decode step |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
groups = {}
for r in rows:
    groups.setdefault((r["label"], r["k"]), []).append(r)
for (label, k), rs in groups.items():
    m = lambda key: med(r[key] for r in rs)
    verify = med(r["target_verify_ms"] / r["target_forward_ms"] for r in rs)
    print(f"| {label} | {k} | {m('alpha'):.2f} | {m('alpha_tested'):.2f} | {m('tokens_per_target_forward'):.2f} | "
          f"{med(r['plain']['tokens_per_s'] for r in rs):.1f} | {m('tokens_per_s'):.1f} | {m('speedup'):.2f}x | "
          f"{m('cost_ratio'):.3f} | {m('predicted_speedup'):.2f}x | {verify:.2f}x |")
print("\n(medians over the prompts; greedy; each speculative run and its plain run back to back in one process)")
print("\n| beams | K/V the cache holds (paged, shared blocks once) | one cache per beam | saved | blocks copied on write |")
print("|---|---|---|---|---|")
for l in open(sys.argv[2]):
    b = json.loads(l)
    print(f"| {b['n']} | {b['shared'] / 1024:.0f} KiB | {b['independent'] / 1024:.0f} KiB | "
          f"{100 * (1 - b['shared'] / b['independent']):.0f} % | {b['cow']} |")
print("\n(at the step holding the most K/V; B = 16 positions per block)")
PYEOF
