#!/usr/bin/env bash
# Long-run check of the window for leaks (memory or GL objects that grow a
# little with every generation, which no short test would see): the real GUI
# under Xvfb generates to the full context, switches KV CACHE <-> NO CACHE,
# resets, and repeats (kvscope --soak-rounds). Fails when a round does not
# stop at the context limit, resident memory after the last round is more than
# 5 % above the first, live GL objects grow, or any is left once the renderer
# is gone.
#
# Usage: scripts/soak.sh [KVSCOPE_BINARY] [ROUNDS] [MODEL_DIR]
#   defaults: build/kvscope, 20 rounds, the embedded model (256 positions).
# Several minutes on 2 cores. The log (per-round memory) is kept in
# $SOAK_LOG (default: soak.log next to the binary).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
kvscope="${1:-$here/build/kvscope}"
rounds="${2:-${SOAK_ROUNDS:-20}}"
model="${3:-${KVSCOPE_MODEL:-}}"
log="${SOAK_LOG:-$(dirname "$kvscope")/soak.log}"

[[ -x "$kvscope" ]] || { echo "soak: no kvscope binary at $kvscope (make build first)" >&2; exit 2; }
command -v xvfb-run >/dev/null || { echo "soak: xvfb-run is missing (scripts/install-deps.sh installs xvfb)" >&2; exit 2; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-soak.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/config"  # never touch the user's settings

args=(--soak-rounds "$rounds" --screenshot "$tmp/last.png")
[[ -n "$model" ]] && args+=(--model "$model")
echo "soak: $kvscope ${args[*]} (log: $log)"
set +e
timeout "${SOAK_TIMEOUT:-3600}" xvfb-run -a -s "-screen 0 1280x720x24" "$kvscope" "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [[ -n "${SOAK_SCREENSHOT:-}" && -f "$tmp/last.png" ]]; then cp "$tmp/last.png" "$SOAK_SCREENSHOT"; fi
[[ $rc -eq 0 ]] || { echo "soak: FAIL (exit $rc)" >&2; exit 1; }
grep -q "kvscope: soak: ok" "$log" || { echo "soak: FAIL (no verdict)" >&2; exit 1; }
echo "soak: ok"
