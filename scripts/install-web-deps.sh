#!/usr/bin/env bash
# The browser build's tools (make web / make test-web), Debian 12 packages only,
# plus puppeteer-core and coi-serviceworker from npm. Idempotent and quick when
# everything is there.
#   emscripten 3.1.6 (Debian) compiles; chromium runs the page headless.
#   ImGui 1.86, utf8proc and PCRE2 come as Debian *source* packages
#   (`apt-get source`): their -dev packages hold x86-64 libraries only.
# Usage: scripts/install-web-deps.sh SRC_DIR   (where the sources are unpacked)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=${1:-$ROOT/build-web/src}
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"

PKGS=(emscripten chromium dpkg-dev libeigen3-dev libglm-dev nlohmann-json3-dev libcli11-dev libstb-dev
      fonts-dejavu-core python3)
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
SRCLIST=/etc/apt/sources.list.d/debian-src.sources
need_src=0
for d in imgui-1.86+ds utf8proc-2.8.0 pcre2-10.42; do [[ -d $SRC/$d ]] || need_src=1; done
if [[ $need_src == 1 ]] && ! grep -rqs '^Types: *deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "install-web-deps: adding the deb-src entry $SRCLIST"
  $SUDO tee $SRCLIST >/dev/null <<'SRCEOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRCEOF
  missing+=(update-only)
fi
export DEBIAN_FRONTEND=noninteractive
if [[ ${#missing[@]} -gt 0 ]]; then
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
  pk=(); for p in "${missing[@]}"; do [[ $p != update-only ]] && pk+=("$p"); done
  [[ ${#pk[@]} -gt 0 ]] && $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${pk[@]}"
fi
if [[ $need_src == 1 ]]; then
  mkdir -p "$SRC"
  (cd "$SRC" && for pkg in imgui utf8proc pcre2; do
     ls -d "$pkg"-*/ >/dev/null 2>&1 || apt-get source -q "$pkg" 2>&1 | grep -v unsandboxed || true
   done)
  for d in imgui-1.86+ds utf8proc-2.8.0 pcre2-10.42; do
    [[ -d $SRC/$d ]] || { echo "install-web-deps: $SRC/$d missing after apt-get source" >&2; exit 1; }
  done
fi
# puppeteer-core drives Debian's chromium (no browser download); coi-serviceworker
# makes a plain static host cross-origin isolated (threads).
if [[ ! -d $ROOT/tools/web/node_modules/puppeteer-core || ! -d $ROOT/tools/web/node_modules/coi-serviceworker ]]; then
  (cd "$ROOT/tools/web" && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error)
fi
