#!/usr/bin/env bash
# `kvscope render` end to end, headless (EGL surfaceless, no DISPLAY): PNG of
# the last step, one PNG per step, sizes, cameras, modes, and clear errors.
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -euo pipefail
kvscope="$1" src="$2" build="$3"
source "$src/tests/testlib_model.sh"
kvscope_test_model "$src" "$build"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-render.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
unset DISPLAY WAYLAND_DISPLAY  # must not need a display

fail() { echo "FAIL: $*" >&2; exit 1; }
png_size() {  # prints "W H" from the PNG header
  local f="$1"
  [[ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || fail "$f is not a PNG"
  local w h
  w=$((16#$(od -An -tx1 -j16 -N4 "$f" | tr -d ' \n')))
  h=$((16#$(od -An -tx1 -j20 -N4 "$f" | tr -d ' \n')))
  echo "$w $h"
}

# From another directory: the shaders are embedded, nothing is read from the tree.
(cd "$tmp" && "$kvscope" render --model "$MODEL" --prompt "The capital of France is" --steps 6 \
   --out last.png --frames frames --width 640 --height 360) 2> "$tmp/log" || { cat "$tmp/log"; fail "render failed"; }
[[ "$(png_size "$tmp/last.png")" == "640 360" ]] || fail "last.png is $(png_size "$tmp/last.png"), expected 640 360"
n=$(ls "$tmp/frames" | grep -c '^step_[0-9]\{4\}\.png$' || true)
[[ "$n" -ge 1 && "$n" -le 6 ]] || fail "expected 1..6 frames (one per step), got $n"
[[ -f "$tmp/frames/step_0000.png" ]] || fail "no frame for the prefill (step_0000.png)"
# A real picture, not a blank frame: PNG of a uniform image compresses to almost nothing.
[[ $(stat -c %s "$tmp/last.png") -gt 20000 ]] || fail "last.png is suspiciously small"
# It says what it drew with: the steps, and the offscreen GL context it made (platform · renderer · version).
grep -q "^kvscope: rendered [0-9]* steps\? ([0-9]* positions) with [^ ].* · .* · " "$tmp/log" ||
  fail "no 'rendered N steps (P positions) with <GL context>' line: $(cat "$tmp/log")"

for cam in front top side follow; do
  "$kvscope" render --model "$MODEL" --prompt "def " --steps 4 --camera "$cam" --no-cache --layer 1 --head 0 \
    --width 320 --height 200 --out "$tmp/$cam.png" 2> "$tmp/log" || { cat "$tmp/log"; fail "camera $cam"; }
  [[ "$(png_size "$tmp/$cam.png")" == "320 200" ]] || fail "$cam.png has the wrong size"
done

# Mistakes get one clear line and exit code 1 (runtime) or 2 (usage).
# A layer or head the model lacks is a usage error, like --layer -1.
for bad in "--layer 99:layers" "--head 99:heads" "--layer -1:layer/head index"; do
  flags="${bad%%:*}" named="${bad#*:}"
  set +e
  "$kvscope" render --model "$MODEL" --prompt "x" --steps 2 $flags --out "$tmp/x.png" 2> "$tmp/err"; rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$flags: exit $rc, expected 2"
  grep -q -- "${flags%% *}.*$named" "$tmp/err" || fail "$flags: message does not name the $named: $(cat "$tmp/err")"
done
set +e
"$kvscope" render --model "$MODEL" --prompt "x" --steps 2 --out /proc/kvscope-cannot-write.png 2> "$tmp/err"; rc=$?
set -e
[[ $rc -eq 1 ]] || fail "unwritable --out: exit $rc, expected 1"
grep -q "PNG" "$tmp/err" || fail "unwritable --out: $(cat "$tmp/err")"
set +e
"$kvscope" render --model "$tmp/no-such-model" --prompt "x" --out "$tmp/x.png" 2> "$tmp/err"; rc=$?
set -e
[[ $rc -eq 1 ]] || fail "missing model: exit $rc, expected 1"
set +e
"$kvscope" render --model "$MODEL" --prompt "x" --steps 2 --text-scale 3 --out "$tmp/x.png" 2> "$tmp/err"; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "--text-scale 3: exit $rc, expected 2"
grep -q -- "--text-scale" "$tmp/err" || fail "--text-scale 3: $(cat "$tmp/err")"
# A projector's text scale renders headless.
"$kvscope" render --model "$MODEL" --prompt "Once upon a time" --steps 4 --text-scale 2.5 --out "$tmp/big.png" \
  2> "$tmp/log" || { cat "$tmp/log"; fail "--text-scale 2.5"; }
[[ "$(png_size "$tmp/big.png")" == "1280 720" ]] || fail "big.png is $(png_size "$tmp/big.png"), expected 1280 720"
# Presentation mode and the attention heatmap grid render headless.
"$kvscope" render --model "$MODEL" --prompt "Once upon a time" --steps 8 --presentation --heatmaps \
  --width 800 --height 450 --out "$tmp/teach.png" 2> "$tmp/log" || { cat "$tmp/log"; fail "--presentation --heatmaps"; }
[[ "$(png_size "$tmp/teach.png")" == "800 450" ]] || fail "teach.png has the wrong size"
[[ $(stat -c %s "$tmp/teach.png") -gt 20000 ]] || fail "teach.png is suspiciously small"

# --video: a clear message when ffmpeg is missing (exit 1, nothing written)...
mkdir -p "$tmp/nobin"
set +e
PATH="$tmp/nobin" "$kvscope" render --model "$MODEL" --prompt "x" --steps 2 --video "$tmp/none.mp4" 2> "$tmp/err"; rc=$?
set -e
[[ $rc -eq 1 ]] || fail "--video without ffmpeg: exit $rc, expected 1"
grep -q "ffmpeg is not installed" "$tmp/err" || fail "--video without ffmpeg: $(cat "$tmp/err")"
[[ ! -e "$tmp/none.mp4" ]] || fail "--video without ffmpeg wrote a file"
# ...and with one, raw RGBA frames of exactly W x H go down the pipe, with progress on stderr.
mkdir -p "$tmp/fakebin"
cat > "$tmp/fakebin/ffmpeg" <<'EOF'
#!/bin/sh
# stands in for ffmpeg: the output file is the last argument; store the raw stream there.
for a in "$@"; do out="$a"; done
exec cat > "$out"
EOF
chmod +x "$tmp/fakebin/ffmpeg"
PATH="$tmp/fakebin:$PATH" "$kvscope" render --model "$MODEL" --prompt "Once upon a time" --steps 3 \
  --width 320 --height 180 --video "$tmp/out.mp4" 2> "$tmp/log" || { cat "$tmp/log"; fail "--video with ffmpeg"; }
frames=$(sed -n 's/.*wrote .* (\([0-9]*\) frames.*/\1/p' "$tmp/log")
[[ -n "$frames" && "$frames" -gt 30 ]] || fail "--video: no frame count in the log: $(cat "$tmp/log")"
grep -q "video: step" "$tmp/log" || fail "--video: no progress on stderr"
[[ $(stat -c %s "$tmp/out.mp4") -eq $((frames * 320 * 180 * 4)) ]] || fail "--video: $(stat -c %s "$tmp/out.mp4") bytes piped, expected $frames frames of 320x180 RGBA"
echo "gui_render: ok ($MODEL)"
