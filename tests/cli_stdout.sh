#!/usr/bin/env bash
# Results written to standard output are checked: a subcommand whose stdout
# cannot take them (a full disk, a pipe whose reader has gone while SIGPIPE
# is ignored) exits 1 with a message instead of 0 having written nothing.
# Runs on the 1-layer micro model.
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -uo pipefail
source "$(dirname "$0")/testlib_cli.sh"
needle="cannot write to standard output"

# check HOW RC ARGS...: exit 1 and the message on stderr.
check() {
  local how="$1" rc="$2"
  shift 2
  if [[ $rc -ne 1 ]]; then
    fail "kvscope $* $how exited $rc, expected 1: $(head -c 300 "$tmp/err")"
  elif ! grep -qF "$needle" "$tmp/err"; then
    fail "kvscope $* $how: stderr lacks '$needle': $(head -c 300 "$tmp/err")"
  fi
}

# Into /dev/full (every write fails with ENOSPC).
full() {
  timeout 60 "$kvscope" "$@" >/dev/full 2>"$tmp/err"
  check "> /dev/full" $? "$@"
}

# Into a pipe whose reader has already exited, with SIGPIPE ignored (as a
# shell script or a supervisor may leave it): every write fails with EPIPE.
closed_pipe() {
  (
    trap '' PIPE
    sleep 0.3 # the reader is gone before the first write
    exec timeout 60 "$kvscope" "$@" 2>"$tmp/err"
  ) | true
  check "| (closed pipe)" "${PIPESTATUS[0]}" "$@"
}

printf '%s\n' '{"id": "a", "prompt": "ab", "max_new": 3}' '{"id": "b", "prompt": "ba", "max_new": 2, "arrive": 1}' \
  >"$tmp/reqs.jsonl"
printf 'ab ba ab\n' >"$tmp/text.txt"
runs=(
  "generate --prompt ab --max-new 3"
  "generate --prompt ab --max-new 3 --json"
  "inspect"
  "inspect --json"
  "tokenize --text ab"
  "quantize --type q8_0 --out $tmp/m.gguf"
  "quantize --type q4_0 --out $tmp/m.gguf --json"
  "eval --file $tmp/text.txt"
  "eval --file $tmp/text.txt --json"
  "serve --requests $tmp/reqs.jsonl --kv-block 4"
  "serve --requests $tmp/reqs.jsonl --kv-block 4 --json"
  "--help"
  "serve --help"
)
for r in "${runs[@]}"; do
  read -ra args <<<"$r"
  full "${args[@]}"
  closed_pipe "${args[@]}"
done

# `watch` too, against a llama-server stand-in: Python's http.server serving
# canned slots and metrics files (each scrape writes a record).
mkdir -p "$tmp/llama"
printf '[{"id":0,"n_ctx":64,"is_processing":false}]' >"$tmp/llama/slots"
printf 'llamacpp:requests_processing 0\n' >"$tmp/llama/metrics"
/usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$tmp/llama" >"$tmp/http.log" 2>&1 &
http_pid=$!
trap 'kill "$http_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q "port" "$tmp/http.log" && break; sleep 0.05; done
port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$tmp/http.log" | head -1)
[[ -n "$port" ]] || fail "http.server did not start: $(cat "$tmp/http.log")"
[[ -n "$port" ]] && for r in "watch --llama-server http://127.0.0.1:$port --scrapes 2 --interval 0.05 --seconds 20" \
  "watch --llama-server http://127.0.0.1:$port --scrapes 2 --interval 0.05 --seconds 20 --json"; do
  read -ra args <<<"$r"
  full "${args[@]}"
  closed_pipe "${args[@]}"
done

# The output that does go out is whole lines, one per record, as they happen:
# --json's first line is a complete record.
timeout 60 "$kvscope" serve --requests "$tmp/reqs.jsonl" --kv-block 4 --json 2>/dev/null | head -1 >"$tmp/first"
/usr/bin/python3 -c 'import json,sys; json.loads(open(sys.argv[1]).read())' "$tmp/first" ||
  fail "serve --json | head -1 is not one whole JSON record: $(head -c 300 "$tmp/first")"

cli_test_end
