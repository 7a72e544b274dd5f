# Sourced by tests/cli_*.sh, whose arguments are KVSCOPE SOURCE_DIR BUILD_DIR:
# kvscope runs on the 1-layer micro model with one thread and no display; $tmp
# is a folder removed on exit; fail counts a failure, cli_test_end reports them.
kvscope="$1" src="$2"
export KVSCOPE_MODEL="$src/tests/fuzz/micro-model" KVSCOPE_THREADS=1
unset DISPLAY WAYLAND_DISPLAY
cli_test_name="$(basename "$0" .sh)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-$cli_test_name.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
cli_test_end() {
  if ((failures)); then
    echo "$cli_test_name: $failures failure(s)" >&2
    exit 1
  fi
  echo "$cli_test_name: ok"
}
