#!/usr/bin/env bash
# Files kvscope writes, when writing fails: `render --out` and `--frames` on a
# "full disk" (a file-size limit, SIGXFSZ ignored: no root needed) exit 1 with
# a clear error and leave the previous PNG intact and no temporary files; a
# missing folder for --out/--video is an error (never created silently);
# --frames DIR is created (and said) when its parent exists; a failing ffmpeg
# fails the command and leaves no video; sizes above the OpenGL driver's
# limit would be usage errors (checked after the context exists).
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -uo pipefail
kvscope="$1" src="$2"
export KVSCOPE_MODEL="$src/tests/fuzz/micro-model" KVSCOPE_THREADS=1
unset DISPLAY WAYLAND_DISPLAY
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-writes.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
render=(render --prompt ab --steps 2 --width 320 --height 180)

# A good PNG first, then the same command on a full disk: exit 1, old file intact.
"$kvscope" "${render[@]}" --out "$tmp/out.png" 2>"$tmp/err" || fail "render --out: $(cat "$tmp/err")"
cp "$tmp/out.png" "$tmp/before.png"
(trap '' XFSZ; ulimit -f 8; exec "$kvscope" "${render[@]}" --camera top --out "$tmp/out.png") 2>"$tmp/err"
rc=$?
[[ $rc -eq 1 ]] || fail "render --out on a full disk exited $rc, expected 1: $(cat "$tmp/err")"
grep -q "out.png" "$tmp/err" && grep -q "File too large" "$tmp/err" || fail "no clear error: $(cat "$tmp/err")"
cmp -s "$tmp/out.png" "$tmp/before.png" || fail "the previous out.png was changed by the failed write"
ls -a "$tmp" | grep -q '\.tmp' && fail "a temporary file was left: $(ls -a "$tmp")"

# --frames on a full disk: exit 1, no empty PNGs left behind.
(trap '' XFSZ; ulimit -f 8; exec "$kvscope" "${render[@]}" --frames "$tmp/frames") 2>"$tmp/err"
rc=$?
[[ $rc -eq 1 ]] || fail "render --frames on a full disk exited $rc, expected 1"
find "$tmp/frames" -name '*.png' -size -1k | grep -q . && fail "--frames left truncated PNGs: $(ls -la "$tmp/frames")"

# Missing folders: an error for --out and --video, created for --frames DIR only.
"$kvscope" "${render[@]}" --out "$tmp/no/such/out.png" 2>"$tmp/err"
rc=$?
[[ $rc -eq 1 ]] && grep -q "does not exist" "$tmp/err" || fail "--out into a missing folder: exit $rc: $(cat "$tmp/err")"
[[ ! -e "$tmp/no" ]] || fail "--out created the missing folder"
"$kvscope" "${render[@]}" --frames "$tmp/new-frames" 2>"$tmp/err" || fail "--frames new folder: $(cat "$tmp/err")"
grep -q "created the folder" "$tmp/err" || fail "--frames did not say it created the folder"
[[ -f "$tmp/new-frames/step_0000.png" ]] || fail "--frames wrote no frame"
"$kvscope" "${render[@]}" --frames "$tmp/no/such/frames" 2>"$tmp/err"
[[ $? -eq 1 && ! -e "$tmp/no" ]] || fail "--frames with a missing parent: $(cat "$tmp/err")"

# A failing ffmpeg: exit 1, its message shown, no video in place.
mkdir -p "$tmp/bin"
printf '#!/bin/sh\ncat >/dev/null\necho "fake ffmpeg: No space left on device" >&2\nexit 1\n' >"$tmp/bin/ffmpeg"
chmod +x "$tmp/bin/ffmpeg"
PATH="$tmp/bin:$PATH" "$kvscope" "${render[@]}" --video "$tmp/v.mp4" 2>"$tmp/err"
rc=$?
[[ $rc -eq 1 ]] || fail "--video with a failing ffmpeg exited $rc"
grep -q "No space left on device" "$tmp/err" || fail "ffmpeg's message not shown: $(cat "$tmp/err")"
grep -q "ffmpeg failed (exit status 1" "$tmp/err" || fail "no exit status: $(cat "$tmp/err")"
grep -q "wrote" "$tmp/err" && fail "reported 'wrote' after ffmpeg failed"
[[ ! -e "$tmp/v.mp4" ]] || fail "a video was left after ffmpeg failed"
ls -a "$tmp" | grep -q '\.tmp' && fail "a temporary video was left: $(ls -a "$tmp")"
PATH="$tmp/bin:$PATH" "$kvscope" "${render[@]}" --video "$tmp/no/such/v.mp4" 2>"$tmp/err"
[[ $? -eq 1 ]] && grep -q "does not exist" "$tmp/err" || fail "--video into a missing folder: $(cat "$tmp/err")"

# render --bench on a model with a 1-position context: says why.
mkdir -p "$tmp/m1"
cp "$KVSCOPE_MODEL"/* "$tmp/m1/"
sed -i 's/"n_positions": 8/"n_positions": 1/; s/"n_ctx": 8/"n_ctx": 1/' "$tmp/m1/config.json"
/usr/bin/python3 - "$tmp/m1/model.safetensors" <<'PY'
# Keep only wpe's first row so the checkpoint matches n_positions = 1.
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
out, off, chunks = {}, 0, []
for k, v in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
    if k == "__metadata__":
        out[k] = v; continue
    s, e = v["data_offsets"]; t = data[s:e]
    if k.endswith("wpe.weight"):
        rows, cols = v["shape"]
        t = t[:len(t) // rows]
        v = dict(v, shape=[1, cols])
    out[k] = dict(v, data_offsets=[off, off + len(t)]); chunks.append(t); off += len(t)
hdr = json.dumps(out).encode()
open(p, "wb").write(struct.pack("<Q", len(hdr)) + hdr + b"".join(chunks))
PY
"$kvscope" render --model "$tmp/m1" --prompt ab --bench --width 320 --height 180 2>"$tmp/err"
rc=$?
[[ $rc -eq 1 ]] && grep -q "needs at least 2" "$tmp/err" || fail "render --bench on a 1-position model: exit $rc: $(cat "$tmp/err")"

if ((failures)); then
  echo "gui_writes: $failures failure(s)" >&2
  exit 1
fi
echo "gui_writes: ok"
