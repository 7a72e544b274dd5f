# Sourced by tests/gui_*.sh: sets MODEL to a GPT-2 folder to run.
# The shipped default model when it is there, else a small random checkpoint
# written once by tools/numpy_ref.py into the build tree (4 layers, 4 heads,
# width 64, context 128). Built in a temp dir and renamed, so concurrent
# tests never see a half-written folder.
kvscope_test_model() {
  local src="$1" build="$2"
  if [[ -n "${KVSCOPE_MODEL:-}" && -f "$KVSCOPE_MODEL/config.json" ]]; then
    MODEL="$KVSCOPE_MODEL"
  elif [[ -f "$src/assets/models/kvscope-tiny/config.json" && -f "$src/assets/models/kvscope-tiny/model.safetensors" ]]; then
    MODEL="$src/assets/models/kvscope-tiny"
  else
    MODEL="$build/testdata/gui-random-l4h4d64"
    if [[ ! -f "$MODEL/config.json" ]]; then
      mkdir -p "$build/testdata"
      local tmp
      tmp="$(mktemp -d "$build/testdata/gui-model.XXXXXX")"
      /usr/bin/python3 "$src/tools/numpy_ref.py" make --out "$tmp/m" --layers 4 --heads 4 --embd 64 --ctx 128 \
        --seed 7 >/dev/null
      mv -T "$tmp/m" "$MODEL" 2>/dev/null || true  # another test may have won the race
      rm -rf "$tmp"
    fi
    # Its draft for speculative decoding: smaller, same vocabulary (numpy_ref.py
    # writes one tokenizer for every shape).
    DRAFT="$build/testdata/gui-random-draft-l1h2d32"
    if [[ ! -f "$DRAFT/config.json" ]]; then
      local tmp
      tmp="$(mktemp -d "$build/testdata/gui-draft.XXXXXX")"
      /usr/bin/python3 "$src/tools/numpy_ref.py" make --out "$tmp/m" --layers 1 --heads 2 --embd 32 --ctx 128 \
        --seed 8 >/dev/null
      mv -T "$tmp/m" "$DRAFT" 2>/dev/null || true
      rm -rf "$tmp"
    fi
    export DRAFT
  fi
  export MODEL
}
