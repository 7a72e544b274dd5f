#!/usr/bin/env bash
# Runs kvscope_render_tests: the headless render test (real pixels from the
# real renderer through EGL surfaceless, no display or GPU needed) and the
# window's display-free logic (engine worker thread, FLOP curves, settings).
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -euo pipefail
src="$2" build="$3"
source "$src/tests/testlib_model.sh"
kvscope_test_model "$src" "$build"
unset DISPLAY WAYLAND_DISPLAY
exec "$build/kvscope_render_tests"
