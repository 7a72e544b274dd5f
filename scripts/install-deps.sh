#!/usr/bin/env bash
# Installs the Debian 12 packages kvscope needs, only those missing.
# Idempotent: when everything is present it returns in well under a second.
set -euo pipefail

# Build + engine + tests
PKGS=(build-essential cmake pkg-config git
      libeigen3-dev nlohmann-json3-dev libutf8proc-dev libpcre2-dev libcli11-dev
      libgtest-dev
      # `kvscope watch`: ZMQ and an HTTP client
      libzmq3-dev cppzmq-dev libcpp-httplib-dev
      # desktop app
      libimgui-dev libglfw3-dev python3-glad libglm-dev libstb-dev
      libgl-dev libegl-dev libgl1-mesa-dri libegl-mesa0 fonts-dejavu-core
      xvfb xauth
      # references for tests, training and benchmarks (/usr/bin/python3)
      python3-numpy python3-regex python3-jinja2
      # the watch tests' publisher and reference (a vLLM-style ZMQ PUB of msgpack batches)
      python3-msgpack python3-zmq
      # function extents for scripts/function-sizes.py
      universal-ctags
      # sanitizer/fuzzer runtimes for clang
      clang libclang-rt-14-dev)
# Optional extras for `make model` / `make bench` (torch needs OpenBLAS first,
# otherwise it falls back to the reference BLAS, ~40x slower).
if [[ "${KVSCOPE_TRAINING:-0}" == 1 ]]; then
  PKGS+=(libopenblas0-openmp python3-torch python3-matplotlib wordnet-base)
fi

missing=()
# node/npm may come from outside Debian (the machine image ships its own).
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
# Another apt/dpkg may hold the lock (CI images run unattended upgrades).
wait_lock() {
  local n=0
  while fuser /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock >/dev/null 2>&1; do
    ((n++ % 10 == 0)) && echo "install-deps: waiting for the dpkg lock..."
    sleep 3
  done
}
export DEBIAN_FRONTEND=noninteractive
wait_lock
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
wait_lock
# libopenblas must come before python3-torch (see above).
if [[ " ${missing[*]} " == *" libopenblas0-openmp "* ]]; then
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends libopenblas0-openmp
fi
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
