#!/usr/bin/env bash
# `cmake --install` gives a kvscope that runs anywhere: installed to a temporary
# prefix, the prefix moved elsewhere, the binary started from a third folder
# generates with its default model (found relative to the executable, no
# path of the build or source tree involved).
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -euo pipefail
kvscope="$1" src="$2" build="$3"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install failed"; }
[[ -x "$tmp/prefix/bin/kvscope" ]] || fail "no bin/kvscope in the installed tree"
[[ -f "$tmp/prefix/share/kvscope/assets/models/kvscope-tiny/config.json" ]] || fail "the default model was not installed"
[[ -f "$tmp/prefix/share/kvscope/assets/kv_configs.json" ]] || fail "kv_configs.json was not installed"
mv "$tmp/prefix" "$tmp/moved"
mkdir "$tmp/elsewhere"
out="$(cd "$tmp/elsewhere" && env -u KVSCOPE_MODEL -u KVSCOPE_ASSETS -u KVSCOPE_KV_CONFIGS \
       "$tmp/moved/bin/kvscope" generate --prompt "Once upon a time" --max-new 4 2> "$tmp/err")" \
  || { cat "$tmp/err"; fail "the moved install could not generate"; }
[[ -n "$out" ]] || fail "the moved install generated nothing"
info="$(cd "$tmp/elsewhere" && env -u KVSCOPE_MODEL "$tmp/moved/bin/kvscope" inspect 2>&1)" || fail "inspect failed: $info"
grep -q "$tmp/moved/share/kvscope/assets" <<< "$info" || grep -q "kvscope-tiny" <<< "$info" || fail "inspect names no model: $info"
# Nothing points back into the source tree.
if strings "$tmp/moved/bin/kvscope" | grep -qF "$src/assets"; then fail "the binary names $src/assets"; fi
echo "install: ok ($(du -sh "$tmp/moved" | cut -f1) installed, generated: $out)"
