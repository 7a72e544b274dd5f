#!/usr/bin/env bash
# The command line at its limits: every numeric flag's range is enforced with
# exit 2 and a short message naming the flag and the bound; seeds are exact
# 64-bit integers; empty strings where text is expected are usage errors;
# files that are not regular files are refused (a FIFO never blocks); JSON
# carries each token's exact bytes. Runs on the 1-layer micro model.
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -uo pipefail
source "$(dirname "$0")/testlib_cli.sh"

# expect CODE NEEDLE ARGS...: exit code CODE, stderr contains NEEDLE, one line under 200 characters.
expect() {
  local want="$1" needle="$2"
  shift 2
  timeout 60 "$kvscope" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne $want ]]; then
    fail "kvscope $* exited $rc, expected $want: $(head -c 300 "$tmp/err")"
  elif [[ -n "$needle" ]] && ! grep -qF -- "$needle" "$tmp/err"; then
    fail "kvscope $*: stderr lacks '$needle': $(head -c 300 "$tmp/err")"
  elif [[ $want -ne 0 && $(wc -c <"$tmp/err") -gt 200 ]]; then
    fail "kvscope $*: message longer than 200 characters: $(head -c 400 "$tmp/err")"
  fi
}

gen=(generate --prompt "ab" --max-new 1)
# Seeds: exactly 0..2^64-1.
expect 0 "" "${gen[@]}" --temperature 1 --seed 18446744073709551615
expect 2 "--seed" "${gen[@]}" --temperature 1 --seed 18446744073709551616
expect 2 "--seed" "${gen[@]}" --temperature 1 --seed -1
expect 2 "--seed" "${gen[@]}" --temperature 1 --seed 1.5
# Floats: finite, within the stated range, bound printed readably.
for flag in --temperature --top-p --repetition-penalty; do
  for v in nan NaN inf -inf 1e999 "" abc; do expect 2 "$flag" "${gen[@]}" "$flag" "$v"; done
done
expect 2 "1000" "${gen[@]}" --temperature 1e39
expect 2 "(0, 1]" "${gen[@]}" --top-p 0
expect 2 "(0, 1]" "${gen[@]}" --top-p 1.0001
expect 2 "100" "${gen[@]}" --repetition-penalty 1e300
expect 2 "0.01" "${gen[@]}" --repetition-penalty 0
expect 0 "" "${gen[@]}" --temperature 0.5 --top-p 0.9 --top-k 5 --repetition-penalty 1.3
# Integers: whole numbers in range.
expect 2 "--top-k" "${gen[@]}" --top-k -1
expect 2 "--max-new" generate --prompt ab --max-new 0
expect 2 "--max-new" generate --prompt ab --max-new 2.5
expect 2 "--max-new" generate --prompt ab --max-new 99999999999999999999
expect 2 "--reps" bench --reps 0
# Every flag a subcommand takes is used or refused: --positions replaces the lengths table.
expect 2 "excludes" bench --positions 4 --lengths 8
expect 2 "--lengths" bench --lengths 1
expect 2 "--kernels" bench --kernels --lengths 8
expect 2 "--kernels" bench --kernels --model "$src/tests/fuzz/micro-model"
expect 2 "drop --kv-dtype" bench --kernels --kv-dtype f16
expect 2 "--width" render --prompt x --out "$tmp/x.png" --width 100000
expect 2 "--steps" render --prompt x --out "$tmp/x.png" --steps -3
# SnapKV: W < N, both >= 1, an odd kernel, max|avg, and its settings only with its rule.
expect 2 "--kv-snap-window: expected 1 <= W < N = 4" "${gen[@]}" --kv-evict snapkv --kv-budget 4 --kv-snap-window 4
expect 2 "--kv-snap-window" "${gen[@]}" --kv-evict snapkv --kv-budget 4 --kv-snap-window 0
expect 2 "--kv-snap-pool: expected an odd kernel" "${gen[@]}" --kv-evict snapkv --kv-budget 4 --kv-snap-pool 6
expect 2 "--kv-snap-pooling" "${gen[@]}" --kv-evict snapkv --kv-budget 4 --kv-snap-pooling median
expect 2 "--kv-budget: SnapKV needs N >= 2" "${gen[@]}" --kv-evict snapkv --kv-budget 1
expect 2 "--kv-snap-window: needs --kv-evict snapkv" "${gen[@]}" --kv-evict h2o --kv-budget 4 --kv-snap-window 2
expect 2 "--kv-snap-pool" eval --file "$src/README.md" --kv-evict snapkv --kv-budget 8 --kv-snap-pool 0
expect 2 "--kv-snap-window" render --prompt x --out "$tmp/x.png" --kv-evict snapkv --kv-budget 3 --kv-snap-window 5
expect 0 "nothing compressed" "${gen[@]}" --kv-evict snapkv --kv-budget 8
# Text that must not be empty.
expect 2 "--stop" "${gen[@]}" --stop ""
expect 2 "--prompt" generate --prompt ""
expect 2 "--prompt" --prompt ""
# The window's prompt follows generate's rule: not UTF-8 is a usage error, before the window opens.
expect 2 "--prompt: byte 0 (0xFF) is not valid UTF-8" --prompt $'\xff'
expect 2 "--prompt" render --prompt "" --out "$tmp/x.png"
# File and folder names that must not be empty (an empty --model is not the embedded model).
for sub in generate inspect tokenize bench eval render; do
  extra=()
  case $sub in
    generate) extra=(--prompt x) ;; tokenize) extra=(--text x) ;; eval) extra=(--file "$src/README.md") ;;
    render) extra=(--prompt x --out "$tmp/x.png") ;;
  esac
  expect 2 "--model: empty value" $sub "${extra[@]}" --model ""
done
expect 2 "--model: empty value" --model ""
expect 2 "--draft: empty value" generate --prompt x --draft ""
expect 2 "--file: empty value" eval --file ""
expect 2 "--screenshot: empty value" --demo-frames 1 --screenshot ""
for flag in --out --frames --video --draft; do expect 2 "$flag: empty value" render --prompt x "$flag" ""; done
# A video name ffmpeg would read as an option.
expect 2 "--video" render --prompt x --video=-loglevel
# Every flag's range is in its help.
"$kvscope" generate --help >"$tmp/help" 2>&1
for r in "0..18446744073709551615" "[0.001, 1000]" "(0, 1]" "[0.01, 100]" "0..16777216" "1..1048576"; do
  grep -qF -- "$r" "$tmp/help" || fail "generate --help does not state the range $r"
done

# Files that are not regular files: refused, naming the file; a FIFO never blocks.
mkdir -p "$tmp/m"
cp "$KVSCOPE_MODEL"/{config.json,vocab.json,merges.txt} "$tmp/m/"
mkfifo "$tmp/m/model.safetensors"
expect 1 "FIFO" inspect --model "$tmp/m"
rm "$tmp/m/model.safetensors"
mkdir "$tmp/m/model.safetensors"
expect 1 "is a directory" inspect --model "$tmp/m"
rmdir "$tmp/m/model.safetensors"
cp "$KVSCOPE_MODEL/model.safetensors" "$tmp/m/"
rm "$tmp/m/config.json" && mkdir "$tmp/m/config.json"
expect 1 "config.json: is a directory" generate --model "$tmp/m" --prompt ab

# bench: a context shorter than every default length benches the whole context.
expect 0 "" bench --reps 1
grep -qE '^ +8 ' "$tmp/out" || fail "bench on an 8-position model printed no row for T = 8: $(cat "$tmp/out")"

# Text handed to the tokenizer is UTF-8: the byte 0xFF is refused naming the
# flag and its offset (exit 2); the four characters "\xff" are text, shown as
# typed, with their exact bytes in the JSON.
expect 2 "--text: byte 0 (0xFF) is not valid UTF-8" tokenize --json --text $'\xff'
expect 2 "--prompt: byte 2 (0xFF) is not valid UTF-8" generate --prompt $'a\x01\xff' --max-new 1
"$kvscope" tokenize --json --text '\xff' >"$tmp/b.json" || fail "tokenize \\xff"
/usr/bin/python3 - "$tmp/b.json" <<'PY' || fail "tokenize --json bytes"
import json, sys
b = json.load(open(sys.argv[1]))
assert bytes(sum(b["bytes"], [])) == b"\\xff", b
assert "".join(b["pieces"]) == "\\xff", b
PY
"$kvscope" generate --json --prompt $'a\x01\xc3\xbf' --max-new 3 >"$tmp/g.jsonl" || fail "generate --json"
/usr/bin/python3 - "$tmp/g.jsonl" <<'PY' || fail "generate --json bytes"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
pre = lines[0]
assert bytes(sum(pre["pieces_bytes"], [])) == b"a\x01\xc3\xbf", pre["pieces_bytes"]
text = b""
for e in lines[:-1]:
    text += bytes(e["bytes"])
    for c in e["top"]:
        assert isinstance(c["bytes"], list) and math.isfinite(c["prob"])
done = lines[-1]
# The generated text (EOS removed): the steps' bytes, exactly.
assert text.startswith(bytes(done["text_bytes"])), (done["text_bytes"], text)
PY

cli_test_end
