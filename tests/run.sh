#!/usr/bin/env bash
# run.sh - the test command: installs dependencies, builds Mantis with
# AddressSanitizer + UBSan in build-test/, fetches the real data sets the
# accuracy test uses (skipped, not failed, when unavailable) and runs the
# whole suite with CTest. Exit status is CTest's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash flows/install-deps.sh
jobs="$(nproc)"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMANTIS_SANITIZE=ON >/dev/null
cmake --build build-test -j"$jobs"
export MANTIS_CACHE="$root/build-test/cache"
if build-test/bin/mantis data --help >/dev/null 2>&1; then
  build-test/bin/mantis data fetch mnist || echo "run.sh: MNIST not fetched; the accuracy test will be skipped" >&2
fi
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd build-test
ctest --output-on-failure -j"$jobs" --timeout 900
