#!/usr/bin/env bash
# `serve --requests -` and FIFOs: requests served as their lines arrive.
# - All lines present at once (a file on standard input) give exactly the
#   tokens of the same file read whole.
# - A line written after an earlier request has finished joins the queue then:
#   its first step comes after the first request's last one, and the run waits
#   for it rather than ending.
# - A bad line is a usage error naming stdin:LINE; an empty stream says so.
# Runs on the 1-layer micro model. Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -uo pipefail
source "$(dirname "$0")/testlib_cli.sh"

tokens() { # the done records' (id, tokens), sorted: what must not depend on how lines arrived
  /usr/bin/python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
print(sorted((r["id"], r["tokens"]) for r in recs if r.get("event") == "done"))' "$1"
}

printf '%s\n' '{"id": "a", "prompt": "ab", "max_new": 3}' '{"id": "b", "prompt": "ba ab", "max_new": 4, "arrive": 2}' \
  '{"id": "c", "prompt": "ab ba", "max_new": 2}' >"$tmp/reqs.jsonl"
timeout 60 "$kvscope" serve --requests "$tmp/reqs.jsonl" --kv-block 4 --json >"$tmp/file.out" 2>"$tmp/err" ||
  fail "serve --requests FILE: $(head -c 300 "$tmp/err")"
timeout 60 "$kvscope" serve --requests - --kv-block 4 --json <"$tmp/reqs.jsonl" >"$tmp/stdin.out" 2>"$tmp/err" ||
  fail "serve --requests - < FILE: $(head -c 300 "$tmp/err")"
[[ "$(tokens "$tmp/file.out")" == "$(tokens "$tmp/stdin.out")" ]] ||
  fail "stdin gave other tokens than the file: $(tokens "$tmp/stdin.out") vs $(tokens "$tmp/file.out")"
grep -q '"event":"summary"' "$tmp/stdin.out" || fail "serve --requests - has no summary: $(tail -c 300 "$tmp/stdin.out")"

# A FIFO whose second line is written only once the first request is done.
mkfifo "$tmp/fifo"
timeout 60 "$kvscope" serve --requests "$tmp/fifo" --kv-block 4 --json >"$tmp/fifo.out" 2>"$tmp/err" &
pid=$!
{
  echo '{"id": "first", "prompt": "ab", "max_new": 2}'
  for _ in $(seq 600); do
    grep -q '"event":"done"' "$tmp/fifo.out" 2>/dev/null && break
    sleep 0.1
  done
  echo '{"id": "second", "prompt": "ba", "max_new": 2}'
} >"$tmp/fifo"
wait $pid || fail "serve --requests FIFO exited $?: $(head -c 300 "$tmp/err")"
/usr/bin/python3 - "$tmp/fifo.out" <<'PY' || fail "FIFO run: $(head -c 600 "$tmp/fifo.out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
done = {r["id"]: r for r in recs if r.get("event") == "done"}
steps = [r for r in recs if r.get("event") == "step"]
assert set(done) == {"first", "second"}, done
first_last = max(s["step"] for s in steps if any(e["id"] == "first" for e in s["batch"]))
second_first = min(s["step"] for s in steps if any(e["id"] == "second" for e in s["batch"]))
assert second_first > first_last, (first_last, second_first)
assert recs[-1]["event"] == "summary" and recs[-1]["requests"] == 2, recs[-1]
PY

# A bad line: usage error naming the stream and the line.
printf '%s\n' '{"id": "a", "prompt": "ab", "max_new": 2}' '{"id": "a", "prompt": "ab", "max_new": 2}' |
  timeout 60 "$kvscope" serve --requests - --kv-block 4 >/dev/null 2>"$tmp/err"
rc=$?
[[ $rc -eq 2 ]] && grep -qF 'stdin:2: duplicate id "a"' "$tmp/err" ||
  fail "a duplicate id on stdin: exit $rc, $(head -c 300 "$tmp/err")"
timeout 60 "$kvscope" serve --requests - --kv-block 4 </dev/null >/dev/null 2>"$tmp/err"
rc=$?
[[ $rc -eq 2 ]] && grep -qF 'stdin: no requests' "$tmp/err" || fail "an empty stdin: exit $rc, $(head -c 300 "$tmp/err")"

cli_test_end
