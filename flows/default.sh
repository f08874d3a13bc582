#!/usr/bin/env bash
# default.sh - the main job: installs dependencies, builds Mantis (release),
# fetches MNIST, and runs the default flow over rtl/ into results/.
# Extra arguments go to `mantis flow` (e.g. --quick, -j 2, --designs DIR).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash flows/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
build/bin/mantis data fetch mnist
build/bin/mantis data fetch fashion-mnist   # the default flow trains on Fashion-MNIST
exec build/bin/mantis flow "$@"
