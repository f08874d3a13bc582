#!/usr/bin/env bash
# run.sh - builds the libFuzzer targets of tests/fuzz with clang and runs them.
#   tests/fuzz/run.sh MINUTES [TARGET...]  each target (default: all) for MINUTES
#                                          minutes, one after another, in build-fuzz/
#                                          (or $MANTIS_FUZZ_BUILD)
#   tests/fuzz/run.sh --smoke BUILD_DIR    the test suite's smoke run: each target a
#                                          few seconds (MANTIS_FUZZ_SECONDS, default 2)
# Seeds are valid files written by Mantis itself (fuzz_seeds), plus the
# regression inputs committed in tests/fuzz/corpus/<target>/ (every crash ever
# found). New inputs go to BUILD/fuzz-corpus, crashes to BUILD/fuzz-crashes.
# Prints executions and crashes per target; exit 1 if anything crashed, 77
# (CTest's skip) when clang's fuzzer runtime is not installed.
set -uo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
targets_all="lut lut_crc approxtrain import8bit idx cifar ckpt ckpt_crc trace trace_crc flow_cfg xml json parsers gemmdump gemmdump_crc blif"
if [ "${1:-}" = "--smoke" ]; then
  build="${2:?usage: run.sh --smoke BUILD_DIR}"
  secs="${MANTIS_FUZZ_SECONDS:-2}"
  shift 2
else
  minutes="${1:?usage: run.sh MINUTES [TARGET...] | run.sh --smoke BUILD_DIR}"
  [[ "$minutes" =~ ^[0-9]+$ ]] && [ "$minutes" -ge 1 ] || { echo "run.sh: MINUTES '$minutes': expected a whole number >= 1" >&2; exit 2; }
  secs=$((minutes * 60))
  build="${MANTIS_FUZZ_BUILD:-$src/build-fuzz}"  # another build directory: two runs side by side
  shift
fi
targets="${*:-$targets_all}"
cc="${MANTIS_FUZZ_CC:-clang-14}"

# skip, with the reason, when clang or its fuzzer runtime is missing
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "SKIPPED: $cc not found (install clang-14 and libclang-rt-14-dev: flows/install-deps.sh)"; exit 77
fi
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
  echo "SKIPPED: $cc cannot link libFuzzer (-fsanitize=fuzzer): $(head -1 "$probe/log") (install libclang-rt-14-dev)"; exit 77
fi

mkdir -p "$build"
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cxx="${cc/clang/clang++}"
if ! { CC="$cc" CXX="$cxx" cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="-O1 -gline-tables-only" \
         -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" -DMANTIS_FUZZ=ON -DMANTIS_CUDA=OFF \
         -DBUILD_TESTING=OFF "${launcher[@]}" >"$build/fuzz-configure.log" 2>&1 || { cat "$build/fuzz-configure.log"; false; }; } ||
   ! cmake --build "$build" -j"$(nproc)" --target fuzz_all >"$build/fuzz-build.log" 2>&1; then
  tail -40 "$build/fuzz-build.log" 2>/dev/null
  echo "run.sh: building the fuzz targets failed" >&2
  exit 2
fi

seeds="$build/fuzz-seeds"
rm -rf "$seeds"
"$build/bin/fuzz_seeds" "$seeds" "$src" || { echo "run.sh: writing the seed corpus failed" >&2; exit 2; }
mkdir -p "$build/fuzz-crashes"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
printf '%-12s %12s %8s %8s\n' target executions seconds crashes
bad=0
for t in $targets; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  dirs=("$corpus" "$seeds/$t")
  [ -d "$src/tests/fuzz/corpus/$t" ] && dirs+=("$src/tests/fuzz/corpus/$t")
  log="$build/fuzz-$t.log"
  start=$(date +%s)
  # -max_len: the 8-bit importer needs its 131,073-byte input; the others stay small and fast
  maxlen=8192
  [ "$t" = import8bit ] && maxlen=140000
  [ "$t" = cifar ] && maxlen=16384
  "$build/bin/fuzz_$t" -max_total_time="$secs" -max_len="$maxlen" -timeout=60 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-crashes/$t-" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  crashes=0
  if [ $rc -ne 0 ]; then
    crashes=1
    bad=1
    grep -m3 -E 'ERROR|runtime error|Test unit written' "$log" | sed "s/^/  $t: /"
  fi
  printf '%-12s %12s %8s %8s\n' "$t" "${execs:-?}" "$(( $(date +%s) - start ))" "$crashes"
done
[ $bad -eq 0 ] || echo "run.sh: crashes in $build/fuzz-crashes (add each to tests/fuzz/corpus/<target>/ with its fix)" >&2
exit $bad
