#!/usr/bin/env bash
# `kvscope render --beams N` and `--draft DIR`, headless: one PNG per beam-search
# step, three per speculative iteration (draft, verify, resolve), and clear
# errors for a draft with another tokenizer or both strategies at once.
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -euo pipefail
kvscope="$1" src="$2" build="$3"
source "$src/tests/testlib_model.sh"
kvscope_test_model "$src" "$build"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-render-decode.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
unset DISPLAY WAYLAND_DISPLAY
fail() { echo "FAIL: $*" >&2; exit 1; }

"$kvscope" render --model "$MODEL" --prompt "Once upon a time" --beams 3 --steps 5 --camera top \
  --frames "$tmp/beams" --out "$tmp/beams.png" --width 640 --height 360 2> "$tmp/log" || { cat "$tmp/log"; fail "beams"; }
n=$(ls "$tmp/beams" | grep -c '^beam_[0-9]\{4\}\.png$' || true)
[[ "$n" -ge 1 && "$n" -le 5 ]] || fail "expected 1..5 beam frames, got $n"
[[ $(stat -c %s "$tmp/beams.png") -gt 5000 ]] || fail "beams.png looks blank"

# Without --camera, --beams opens on the top view as the window does (the
# front view hides the lanes' labels and the text line): the same picture.
"$kvscope" render --model "$MODEL" --prompt "Once upon a time" --beams 3 --steps 5 \
  --out "$tmp/beams_default.png" --width 640 --height 360 2> "$tmp/log" || { cat "$tmp/log"; fail "beams, default camera"; }
cmp -s "$tmp/beams.png" "$tmp/beams_default.png" || fail "render --beams without --camera differs from --camera top"

draft="$src/assets/models/kvscope-draft"
if [[ "$MODEL" == "$src/assets/models/kvscope-tiny" && -f "$draft/model.safetensors" ]]; then
  "$kvscope" render --model "$MODEL" --prompt "Once upon a time" --draft "$draft" --speculate 3 --steps 6 \
    --frames "$tmp/spec" --width 640 --height 360 2> "$tmp/log" || { cat "$tmp/log"; fail "draft"; }
  for stage in a_draft b_verify c_resolve; do
    [[ -f "$tmp/spec/spec_0000_$stage.png" ]] || fail "no $stage frame for iteration 0"
  done
fi

set +e
"$kvscope" render --model "$MODEL" --prompt x --beams 2 --draft "$MODEL" --out "$tmp/x.png" 2> "$tmp/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "--beams with --draft: exit $rc, expected 2"

# Pages and row formats combine with the beams (as for generate); a sliding window is refused, named.
"$kvscope" render --model "$MODEL" --prompt "Once upon a time" --beams 2 --steps 3 --kv-block 4 --kv-dtype f16 \
  --out "$tmp/paged.png" --width 320 --height 180 2> "$tmp/log" || { cat "$tmp/log"; fail "beams with --kv-block"; }
set +e
"$kvscope" render --model "$MODEL" --prompt x --beams 2 --kv-window 4 --out "$tmp/x.png" 2> "$tmp/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q -- "--kv-window: not available with --beams" "$tmp/err" || fail "--beams with --kv-window: exit $rc, $(cat "$tmp/err")"

# Every flag render takes is used or refused (exit 2, naming it): --bench times the sampling view on a dense
# cache, so what would choose or save something else is refused with it; --temperature samples the draft's
# iterations only; the strategies always run on the KV cache.
refused() {  # refused FLAG-NAMED-IN-THE-MESSAGE ARGS...
  local name="$1"; shift
  set +e
  "$kvscope" render --model "$MODEL" --prompt x "$@" 2> "$tmp/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] && grep -q -- "$name" "$tmp/err" || fail "render $*: exit $rc, expected 2 naming $name: $(cat "$tmp/err")"
}
refused "--beams: not used with --bench" --bench --beams 2
refused "--draft: not used with --bench" --bench --draft /nonexistent
refused "--kv-block: not used with --bench" --bench --kv-block 4
refused "--kv-window: not used with --bench" --bench --kv-window 8
refused "--out: not used with --bench" --bench --out "$tmp/nowhere/x.png"
refused "--temperature needs --draft" --temperature 0.7 --out "$tmp/x.png"
refused "--no-cache: not available with --beams" --beams 2 --no-cache --out "$tmp/x.png"
refused "--length-penalty needs --beams" --length-penalty 2 --out "$tmp/x.png"
echo "render --beams / --draft: ok"
