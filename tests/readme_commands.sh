#!/usr/bin/env bash
# Every kvscope command that README.md and the docs/ pages show runs, verbatim,
# against the built binary, so the documentation cannot drift from the program.
#  - ```sh blocks: each line (backslash continuations joined) that runs kvscope
#    or build/kvscope is run as written with bash in a scratch folder holding
#    `assets` (a link to the source's), `kvscope` on PATH and `build/kvscope`;
#    it must exit 0, every file it names with --out / --screenshot must be a
#    PNG, and with --json every stdout line must be a JSON object. A window
#    command that would stay open (no --demo-frames) runs headless under
#    xvfb-run for the scripted tour of 240 frames instead
#    (shorter tours end before their saved view is read back).
#  - ```text blocks: each synopsis line `kvscope [SUBCOMMAND] ...` names a
#    subcommand that exists, and every --flag it lists appears in that
#    subcommand's --help.
# Skipped, with a SKIP line saying why: commands that need a model downloaded
# into ~/models (the network), window commands when xvfb-run is missing (a
# display), and `render` and window commands when the binary was built
# without the window (-DKVSCOPE_GUI=OFF: it has no `render`).
# Args: KVSCOPE SOURCE_DIR BUILD_DIR.
set -euo pipefail
kvscope="$1" src="$2"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-readme.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The pages whose commands are checked (pages written alongside join here).
pages=(README.md docs/window.md docs/cli.md docs/kv-layouts.md docs/decoding.md docs/counting.md docs/models.md
       docs/performance.md docs/testing.md docs/architecture.md docs/serving.md docs/eviction.md docs/batching.md
       docs/watch.md)
# Synopsis entries of features that land from branches being merged: reported
# as PENDING while this binary lacks them. Empty this list once they are in.
pending=()

# One record per command: "sh<TAB>page<TAB>command" or "text<TAB>page<TAB>line".
extract() {
  /usr/bin/python3 - "$src" "${pages[@]}" <<'EOF'
import re, sys
src, pages = sys.argv[1], sys.argv[2:]
runs_kvscope = re.compile(r'(^|[\s;&|])(build/)?kvscope(\s|$)')
for page in pages:
    try:
        text = open(f"{src}/{page}", encoding="utf-8").read()
    except FileNotFoundError:
        continue
    for lang, body in re.findall(r'^```(\w*)\n(.*?)^```', text, re.M | re.S):
        if lang == 'sh':
            for line in body.replace('\\\n', ' ').split('\n'):
                line = line.strip()
                if line and not line.startswith('#') and runs_kvscope.search(line):
                    print(f"sh\t{page}\t{line}")
        elif lang == 'text':
            # A synopsis entry: a line starting `kvscope`, with its indented continuation lines.
            entries = []
            for line in body.split('\n'):
                if line == 'kvscope' or line.startswith('kvscope '):
                    entries.append(line.strip())
                elif entries and entries[-1] and line[:1] == ' ' and line.strip():
                    entries[-1] += ' ' + line.strip()
                else:
                    entries.append(None)
            for e in entries:
                if e:
                    print(f"text\t{page}\t{e}")
EOF
}

mkdir -p "$tmp/run/build" "$tmp/bin" "$tmp/home"
ln -s "$src/assets" "$tmp/run/assets"
ln -s "$src/docs" "$tmp/run/docs"  # the example files the pages use (docs/examples)
ln -s "$kvscope" "$tmp/bin/kvscope"
ln -s "$kvscope" "$tmp/run/build/kvscope"
export PATH="$tmp/bin:$PATH" HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/.config"  # never the user's settings
unset DISPLAY WAYLAND_DISPLAY

# Whether this binary has the window and `render`: a -DKVSCOPE_GUI=OFF build
# lists `render` but refuses it, saying so (a built one draws a small PNG).
has_window=1
probe="$("$kvscope" render --prompt x --steps 1 --width 64 --height 64 --out "$tmp/probe.png" 2>&1 < /dev/null || true)"
[[ "$probe" == *"built without the renderer"* ]] && has_window=0

is_pending() {
  local p
  for p in "${pending[@]}"; do [[ "$1" == "$p" ]] && return 0; done
  return 1
}

check_png() {  # FILE: exists and starts with the PNG signature
  [[ -f "$1" ]] || return 1
  [[ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]]
}

run_sh() {  # PAGE COMMAND
  local page="$1" cmd="$2" run="$cmd"
  if [[ "$cmd" == *"~/models"* || "$cmd" == *'$HOME/models'* ]]; then
    echo "SKIP (needs a model downloaded into ~/models): $page: $cmd"
    return
  fi
  # The window: a command with no subcommand. Without --demo-frames it would
  # stay open; run the scripted tour of 240 frames instead.
  local words
  read -r -a words <<< "$(sed -E 's/^([A-Z_]+=[^ ]+ )*//; s/^xvfb-run( +(-a|-s +"[^"]*"))* +//' <<< "$cmd")"
  local sub="${words[1]:-}"
  if [[ $has_window -eq 0 && ( -z "$sub" || "$sub" == -* || "$sub" == render ) ]]; then
    echo "SKIP (this build has no window or render: -DKVSCOPE_GUI=OFF): $page: $cmd"
    return
  fi
  if [[ -z "$sub" || "$sub" == -* ]]; then
    if ! command -v xvfb-run > /dev/null; then
      echo "SKIP (the window needs xvfb-run): $page: $cmd"
      return
    fi
    if [[ "$cmd" != *--demo-frames* ]]; then
      run="xvfb-run -a -s '-screen 0 1280x720x24' $cmd --demo-frames 240 --screenshot window-check.png"
    fi
  fi
  rm -rf "$tmp/run/out" && mkdir -p "$tmp/run/out"
  echo "RUN: $page: $run"
  if ! (cd "$tmp/run" && timeout 600 bash -c "$run") > "$tmp/out" 2> "$tmp/err" < /dev/null; then
    tail -n 20 "$tmp/err" >&2
    fail "$page: the command exits non-zero: $cmd"
  fi
  local f
  for f in $(grep -oE -- '--(out|screenshot) [^ ]+' <<< "$run" | awk '{print $2}'); do
    check_png "$tmp/run/$f" || fail "$page: $cmd wrote no PNG at $f"
    rm -f "$tmp/run/$f"
  done
  if [[ " $cmd " == *" --json "* ]]; then
    /usr/bin/python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no output"
for n, l in enumerate(lines, 1):
    assert isinstance(json.loads(l), dict), f"line {n} is not a JSON object"
' "$tmp/out" || fail "$page: $cmd does not print JSON Lines"
  fi
  if ! grep -qE -- '--(out|screenshot) ' <<< "$run"; then
    [[ -s "$tmp/out" ]] || fail "$page: $cmd printed nothing"
  fi
}

check_synopsis() {  # PAGE LINE
  local page="$1" line="$2" words sub help flag
  read -r -a words <<< "$line"
  sub="${words[1]:-}"
  [[ "$sub" == -* || "$sub" == "["* || "$sub" == "#"* ]] && sub=""
  if [[ $has_window -eq 0 && ( -z "$sub" || "$sub" == render ) ]]; then
    echo "SKIP (this build has no window or render: -DKVSCOPE_GUI=OFF): $page: kvscope ${sub:-(window)}"
    return
  fi
  # A subcommand exists when the top-level --help lists it (CLI11 answers
  # `kvscope nosuch --help` with the top-level help, exit 0).
  if [[ -n "$sub" ]] && ! "$kvscope" --help | sed -n '/^Subcommands:/,$p' | grep -qE "^  $sub( |\$)"; then
    if is_pending "$sub"; then
      echo "PENDING (added by the merge of its branch): $page: kvscope $sub"
      return
    fi
    fail "$page: synopsis names 'kvscope $sub', which is no subcommand (--help fails)"
  fi
  "$kvscope" ${sub:+"$sub"} --help > "$tmp/help" 2>&1 || fail "$page: kvscope ${sub:-} --help exits non-zero"
  help="$(cat "$tmp/help")"
  for flag in $(sed 's/#.*//' <<< "$line" | grep -oE -- '--[a-z0-9-]+' | sort -u); do
    if ! grep -qE -- "(^|[^a-z0-9-])$flag([^a-z0-9-]|\$)" <<< "$help"; then
      if is_pending "$flag"; then
        echo "PENDING (added by the merge of its branch): $page: kvscope ${sub:-(window)} $flag"
        continue
      fi
      fail "$page: synopsis lists $flag for 'kvscope ${sub:-(window)}', which its --help does not know"
    fi
  done
  echo "SYNOPSIS OK: $page: kvscope ${sub:-(window)}"
}

extract > "$tmp/commands" || fail "could not read the commands out of ${pages[*]}"
n_run=0
n_syn=0
while IFS=$'\t' read -r kind page cmd; do
  case "$kind" in
    sh) run_sh "$page" "$cmd"; n_run=$((n_run + 1)) ;;
    text) check_synopsis "$page" "$cmd"; n_syn=$((n_syn + 1)) ;;
  esac
done < "$tmp/commands"
# A page that lost its examples (or an extraction that broke) must not pass quietly.
[[ $n_run -ge 10 ]] || fail "only $n_run commands found in ${pages[*]}: did the extraction break?"
[[ $n_syn -ge 8 ]] || fail "only $n_syn synopsis lines found: did the extraction break?"
echo "PASS: $n_run commands and $n_syn synopsis lines of the documentation"
