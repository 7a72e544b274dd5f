#!/usr/bin/env bash
# Serving many requests from one paged pool, measured with `kvscope serve
# --json` on a GPT-2-124M-shaped random F16 checkpoint (speed does not depend
# on the weights' values): throughput of N requests decoding together vs one
# at a time (--max-running 1), continuous vs static batching on mixed
# lengths, and prefix caching on a 200-token shared prompt. Prints markdown
# tables (docs/serving.md keeps the last run's).
# Usage: tools/bench_serve.sh [path/to/kvscope]   (BENCH_NS="1 2 4 8 16", BENCH_MAX_NEW=32)
set -euo pipefail
# shellcheck source=tools/bench_common.sh
. "$(dirname "$0")/bench_common.sh" "$@"
M="$OUT/gpt2-124m-random-f16"
make_gpt2 "$M" 12 F16
NS=${BENCH_NS:-1 2 4 8 16}
MAX_NEW=${BENCH_MAX_NEW:-32}
W="$OUT/serve"
mkdir -p "$W"

# reqs FILE N MAX_NEW [mixed|shared]: N requests arriving at step 0.
reqs() {
  $PY - "$@" <<'PY'
import json, sys
path, n, max_new, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), (sys.argv[4] if len(sys.argv) > 4 else "")
words = "the cache keeps keys and values of every earlier token so that each step reads them".split()
system = " ".join(words[i % len(words)] for i in range(200))  # about 200 tokens
with open(path, "w") as f:
    for i in range(n):
        q = " ".join(words[(i * 5 + k) % len(words)] for k in range(12))
        r = {"id": "r%d" % i, "prompt": q, "max_new": max_new}
        if kind == "mixed":
            r["max_new"] = max_new * 4 if i % 4 == 0 else max_new // 2
        if kind == "staircase":  # request i stops after 4 (i + 1) tokens: the batch shrinks by one every 4 steps
            r["max_new"] = 4 * (i + 1)
        if kind == "shared":
            r["prompt"] = system + " Question %d: %s" % (i, q)
            r["arrive"] = i * 4
        f.write(json.dumps(r) + "\n")
PY
}
# serve LABEL FILE FLAGS...: the summary record, labelled.
serve() {
  local label=$1 file=$2
  shift 2
  echo "== $label" >&2
  "$KV" serve --model "$M" --requests "$file" --kv-dtype f16 --json "$@" | tail -n 1 |
    $PY -c 'import json,sys; d=json.load(sys.stdin); d["label"]=sys.argv[1]; print(json.dumps(d))' "$label"
}

J="$W/serve.jsonl"
: > "$J"
for N in $NS; do
  reqs "$W/n$N.jsonl" "$N" "$MAX_NEW"
  serve "batch $N" "$W/n$N.jsonl" --max-running 16 >> "$J"
  serve "alone $N" "$W/n$N.jsonl" --max-running 1 >> "$J"
done
reqs "$W/mixed.jsonl" 16 "$MAX_NEW" mixed
serve "continuous" "$W/mixed.jsonl" --max-running 8 --policy continuous >> "$J"
serve "static" "$W/mixed.jsonl" --max-running 8 --policy static >> "$J"
reqs "$W/staircase.jsonl" 16 0 staircase
echo "== staircase" >&2
"$KV" serve --model "$M" --requests "$W/staircase.jsonl" --kv-dtype f16 --json > "$W/staircase_steps.jsonl"
reqs "$W/shared.jsonl" 8 16 shared
serve "no prefix caching" "$W/shared.jsonl" >> "$J"
serve "prefix caching" "$W/shared.jsonl" --prefix-caching >> "$J"

$PY - "$J" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    rows[d["label"]] = d
print("| requests | tokens/s together | tokens/s one at a time | ratio | steps together | steps alone |")
print("|---|---|---|---|---|---|")
for label, d in rows.items():
    if label.startswith("batch "):
        n = label.split()[1]
        a = rows["alone " + n]
        print("| %s | %.1f | %.1f | %.2fx | %d | %d |" % (n, d["tokens_per_s"], a["tokens_per_s"],
              d["tokens_per_s"] / a["tokens_per_s"], d["steps"], a["steps"]))
print()
print("| policy (16 mixed-length requests, R = 8) | tokens/s | steps | mean TTFT ms | mean latency ms | pool use |")
print("|---|---|---|---|---|---|")
for label in ("continuous", "static"):
    d = rows[label]
    print("| %s | %.1f | %d | %.0f | %.0f | %.0f%% |" % (label, d["tokens_per_s"], d["steps"], d["ttft_ms_mean"],
          d["latency_ms_mean"], 100 * d["pool_occupancy_mean"]))
print()
print("| 8 requests, 200-token shared prompt | prompt positions computed | prefix-hit positions | mean TTFT ms | tokens/s |")
print("|---|---|---|---|---|")
for label in ("no prefix caching", "prefix caching"):
    d = rows[label]
    print("| %s | %d | %d | %.0f | %.1f |" % (label, d["prefill_positions"], d["prefix_hit_positions"],
          d["ttft_ms_mean"], d["tokens_per_s"]))
print()
# One run whose batch shrinks from 16 decoding requests to 1: the median step time at each batch size, in decode
# steps of one request (the same process, interleaved in time, so machine load drifts alike for all sizes).
import statistics
by_n = {}
for line in open(sys.argv[1].replace("serve.jsonl", "staircase_steps.jsonl")):
    d = json.loads(line)
    if d["event"] == "step" and all(e["kind"] == "decode" for e in d["batch"]):
        by_n.setdefault(len(d["batch"]), []).append(d["ms"])
one = statistics.median(by_n[1])
print("| decoding requests in the step | median step ms | in single-request decode steps | tokens per single-step time |")
print("|---|---|---|---|")
for n in sorted(by_n):
    m = statistics.median(by_n[n])
    print("| %d | %.1f | %.2f | %.2f |" % (n, m, m / one, n * one / m))
print()
d = rows.get("batch 16") or list(rows.values())[0]
print("KV slots holding tokens (batch run): %.0f%% of the paged pool's allocated slots, %.1f%% of one contiguous "
      "n_ctx reservation per request." % (100 * (1 - d["paged_wasted_frac"]), 100 * (1 - d["contiguous_wasted_frac"])))
PY
