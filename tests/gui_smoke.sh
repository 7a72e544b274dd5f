#!/usr/bin/env bash
# GUI smoke test: the real window under Xvfb for a few hundred frames while
# generating, switching the cache off and on and walking through the
# cameras (the --demo-frames script in app/gui/gui.cpp), then a clean exit with
# no GL errors and a screenshot. Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -euo pipefail
kvscope="$1" src="$2" build="$3"
source "$src/tests/testlib_model.sh"
kvscope_test_model "$src" "$build"
command -v xvfb-run >/dev/null || { echo "FAIL: xvfb-run is missing (scripts/install-deps.sh installs xvfb)" >&2; exit 1; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-gui.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/config"  # never touch the user's settings

# A bad $KVSCOPE_DEMO_VIEW is named with the views it takes and exits 2 (a usage error)
# before the window opens: no screenshot of the wrong view, scripted or not.
for args in "--demo-frames 5 --screenshot $tmp/bad.png" ""; do
  set +e
  # shellcheck disable=SC2086
  KVSCOPE_DEMO_VIEW=bogus timeout 60 "$kvscope" --model "$MODEL" $args > /dev/null 2> "$tmp/bad_err"
  rc=$?
  set -e
  [[ $rc -eq 2 ]] || { cat "$tmp/bad_err" >&2; echo "FAIL: KVSCOPE_DEMO_VIEW=bogus ${args:-(no flags)} exited $rc, not 2" >&2; exit 1; }
  grep -q 'KVSCOPE_DEMO_VIEW: expected timeline, .*serving-static, predict or chat, got "bogus"' "$tmp/bad_err" ||
    { cat "$tmp/bad_err" >&2; echo "FAIL: KVSCOPE_DEMO_VIEW=bogus is not named with the views it takes" >&2; exit 1; }
done
[[ ! -e "$tmp/bad.png" ]] || { echo "FAIL: a screenshot was written for a bad KVSCOPE_DEMO_VIEW" >&2; exit 1; }

frames="${KVSCOPE_SMOKE_FRAMES:-240}"
set +e
timeout 300 xvfb-run -a -s "-screen 0 1280x720x24" \
  "$kvscope" --model "$MODEL" --demo-frames "$frames" --screenshot "$tmp/shot.png" > "$tmp/out" 2> "$tmp/err"
rc=$?
set -e
cat "$tmp/err" >&2
[[ $rc -eq 0 ]] || { echo "FAIL: the window exited with $rc" >&2; exit 1; }
grep -q "demo: $frames frames" "$tmp/err" || { echo "FAIL: the demo did not run $frames frames" >&2; exit 1; }
steps=$(sed -n 's/.*demo: [0-9]* frames, \([0-9]*\) steps.*/\1/p' "$tmp/err")
[[ "${steps:-0}" -ge 10 ]] || { echo "FAIL: only ${steps:-0} steps generated while the window ran" >&2; exit 1; }
[[ "$(head -c 8 "$tmp/shot.png" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || { echo "FAIL: no screenshot" >&2; exit 1; }
[[ ! -e "$tmp/config/kvscope/settings.json" ]] || { echo "FAIL: a demo run wrote settings" >&2; exit 1; }
echo "gui_smoke: ok ($steps steps, $MODEL)"
