#!/usr/bin/env bash
# install-deps.sh - installs the Debian 12 packages Mantis builds and runs with.
# Idempotent: installs only what is missing; uses sudo when not root.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libgtest-dev verilator yosys gnuplot libopenblas-dev npm
      dataset-fashion-mnist)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
