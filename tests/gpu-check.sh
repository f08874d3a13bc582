#!/usr/bin/env bash
# gpu-check.sh - the one-call device check (gpu/README.md, "Device check").
#
#   bash tests/gpu-check.sh prepare   on this machine: builds what the device
#       needs (Release, no sanitizers, portable ISA, CUDA for sm_90 only, no
#       SystemC or OpenBLAS) into build-gpucheck/pkg - the binaries, the
#       shared libraries they need beside them, an MNIST subset - checks it is
#       under 60 MiB, and prints the device command and what to carry
#       (PREPARE_TABLE6=1: with all of MNIST, gzipped, which table6 reads;
#       11 MiB that the binaries, 17 MiB each, left no room for at 32a953a).
#   bash tests/gpu-check.sh run       on the machine with the GPU, from the
#       repository root with build-gpucheck/pkg carried along: nvidia-smi -L,
#       every GPU test with MANTIS_REQUIRE_GPU=1 (a skip is a failure),
#       python/tests/test_cuda.py under the device's python3 (the Python
#       front end's layers on CUDA tensors against the CPU, bit for bit), the
#       GEMM benchmark against cuBLAS, and `mantis train --device cuda`
#       against `--device cpu` on short runs of LeNet-300-100 (also with the
#       masked FMAq STEs and an 8-bit integer table's table/approx backward),
#       LeNet-5, vit-tiny and ResNet-20 (CIFAR-shaped data made from the MNIST
#       subset; LeNet-5 and ResNet-20 also with the integer table, ste),
#       compared byte for byte, with each run's wall and epoch seconds; then
#       `mantis bench train --device cuda` (PyTorch FP32 and ours in one run),
#       a profiled ResNet-20 run (MANTIS_GPU_PROFILE) and full-epoch timings
#       until 6 minutes have passed. Logs go
#       to $OUT (at most 8 files; build-gpucheck/out without it); the last
#       line is "N passed, N failed" and the exit status is 0 only when
#       nothing failed. Without a GPU it says so and exits 1. A shorter
#       check for a short lease: CHECK_TRAIN (an ERE the "model config"
#       comparisons must match), CHECK_BENCH_TRAIN (bench train model sets,
#       ";" between them; empty: none), CHECK_PROFILE (the profiled runs,
#       LONG_SUM:CONFIG[:0], default "0:lut 15:lut 16:lut 0:lut-fmaq"; lut
#       or lut-fmaq; :0 with MANTIS_GPU_TILES=0) and
#       CHECK_EPOCHS (the full epochs, "model config" with ";" between).
#   bash tests/gpu-check.sh table6    on the device, a second call: the
#       accumulator paper's Table 6 (Appendix C.3: the 4-layer 1024-wide MLP,
#       M4E3 accumulators with bias 5, Adam 1e-3, batch 16, StepLR 0.95) on
#       all of MNIST (carried gzipped in the package), one `mantis train
#       --model mlp1024 --device cuda` per row: FP32, Identity with and
#       without underflow, Immediate/OF, Immediate/DIFF with and without
#       underflow, Recursive/OF, Identity with 2 more mantissa bits. Epochs:
#       TABLE6_EPOCHS (default 2; the paper trains up to 100); rows stop
#       being started after TABLE6_BUDGET seconds (default 400). Prints the
#       table (final test accuracy, seconds per epoch, gpu_path) into
#       $OUT/table6.log and every run's JSON into $OUT/table6-runs.txt.
#       TABLE6_DEVICE=cpu TABLE6_SUBSET=N runs the same rows on this
#       machine's CPU (a dry run of the script).
#   bash tests/gpu-check.sh layouts   on the device, a second call: whole
#       trainings (`bench train --device cuda`, ResNet-20 on 5,120 images,
#       LeNet-5) with the long-sum layout the default picks and with each
#       forced (MANTIS_GPU_LONG_SUM), then full ResNet-20 epochs; into
#       $OUT/layouts.log, after test_cuda.py again; runs stop being started
#       after LAYOUTS_BUDGET s; LAYOUTS_RESNET / LAYOUTS_LENET pick layouts.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
top=build-gpucheck
pkg=$top/pkg
limit_mib=60

usage() {
  sed -n '2,38p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() {
  echo "gpu-check: $*" >&2
  exit 2
}

# The first N records of an IDX file (header count rewritten): MNIST subsets.
idx_head() { # SRC DST N HEADER_BYTES RECORD_BYTES
  local src=$1 dst=$2 n=$3 hdr=$4 rec=$5
  {
    head -c 4 "$src"
    printf "\\x$(printf %02x $((n >> 24 & 255)))\\x$(printf %02x $((n >> 16 & 255)))"
    printf "\\x$(printf %02x $((n >> 8 & 255)))\\x$(printf %02x $((n & 255)))"
    tail -c +9 "$src" | head -c $((hdr - 8 + n * rec))
  } >"$dst"
}

# An IDX file of 60,000 records made of SRC's records repeated (header count
# rewritten): MNIST-shaped data of the full set's size for timings.
replicate_idx() { # SRC DST HEADER_BYTES RECORD_BYTES
  local src=$1 dst=$2 hdr=$3 rec=$4 n=60000 i
  mkdir -p "$(dirname "$dst")"
  {
    head -c 4 "$src"
    printf "\\x$(printf %02x $((n >> 24 & 255)))\\x$(printf %02x $((n >> 16 & 255)))"
    printf "\\x$(printf %02x $((n >> 8 & 255)))\\x$(printf %02x $((n & 255)))"
    tail -c +9 "$src" | head -c $((hdr - 8))
    for i in $(seq 60); do tail -c +$((hdr + 1)) "$src"; done | head -c $((n * rec))
  } >"$dst"
}

# CIFAR-shaped data for ResNet-20 in DST (the loader wants 10,000 records
# per file): 64 distinct records (label k % 10, then 3072 bytes of the
# MNIST subset's images) repeated in data_batch_1.bin; the other five files
# link to it. Deterministic; what the pixels show does not matter here.
synth_cifar() { # MNIST_DIR DST
  local mn=$1 dst=$2 k f
  rm -rf "$dst"
  mkdir -p "$dst/rec"
  for k in $(seq 0 63); do
    {
      printf "\\x$(printf %02x $((k % 10)))"
      tail -c +$((17 + k * 3072)) "$mn/train-images-idx3-ubyte" | head -c 3072
    } >"$dst/rec/$k"
  done
  (cd "$dst/rec" && cat $(seq 0 63)) >"$dst/block"
  for k in 1 2 3 4 5 6 7 8; do # 64 -> 16384 records
    cat "$dst/block" "$dst/block" >"$dst/block2" && mv "$dst/block2" "$dst/block"
  done
  head -c $((10000 * 3073)) "$dst/block" >"$dst/data_batch_1.bin"
  rm -rf "$dst/rec" "$dst/block"
  for f in data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
    ln -s data_batch_1.bin "$dst/$f.bin"
  done
}

prepare() {
  local build=$top/build jobs
  mkdir -p "$top"
  jobs="$(nproc)"
  export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-$(command -v ccache || true)}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-$(command -v ccache || true)}"
  # PkgConfig disabled: no OpenBLAS (the baseline the device does not need)
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMANTIS_SANITIZE=OFF -DMANTIS_NATIVE=OFF \
    -DMANTIS_SYSTEMC=OFF -DMANTIS_CUDA=ON -DMANTIS_CUDA_ARCHS=90 -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
    >"$top/cmake.log" 2>&1 ||
    { cat "$top/cmake.log" >&2; die "cmake failed"; }
  grep -q 'the GPU half (gpu/\*.cu) is built' "$top/cmake.log" ||
    die "CMake did not enable CUDA (no nvcc?): the device check needs the CUDA half built (see $top/cmake.log)"
  nice cmake --build "$build" -j"$jobs" --target mantis test_gpu mantis_shared >"$top/build.log" 2>&1 ||
    { tail -30 "$top/build.log" >&2; die "build failed (full log: $top/build.log)"; }

  rm -rf "$pkg"
  mkdir -p "$pkg/bin" "$pkg/lib" "$pkg/mnist" "$pkg/pylib"
  cp "$build/bin/mantis" "$build/bin/test_gpu" "$pkg/bin/"
  strip "$pkg/bin/mantis" "$pkg/bin/test_gpu"
  # the Python front end's library, with the one dependency the device's
  # Python may lack (OpenMP's runtime); its C++ runtime is the one PyTorch
  # loads there (a newer one, which the older build runs on)
  cp "$build/lib/libmantis.so" "$pkg/pylib/"
  strip "$pkg/pylib/libmantis.so"
  cp -L "$(ldd "$pkg/pylib/libmantis.so" | awk '/libgomp\.so/ {print $3}')" "$pkg/pylib/" ||
    die "libmantis.so does not link OpenMP's runtime as expected"
  # the shared libraries beside them, but not the C library itself (it must
  # be the device's own) nor the CUDA driver (the device's, loaded by the
  # static CUDA runtime)
  local lib
  for lib in $(ldd "$pkg/bin/mantis" "$pkg/bin/test_gpu" | awk '/=> \// {print $3}' | sort -u); do
    case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so* | libnvidia*) ;;
    *) cp -L "$lib" "$pkg/lib/" ;;
    esac
  done

  # MNIST: 1024 training and 1024 test images
  local mn=data/mnist
  if [ ! -f "$mn/train-images-idx3-ubyte" ]; then
    "$build/bin/mantis" data fetch mnist --dir "$top/mnist-full" >&2 || die "no MNIST ($mn absent, fetch failed)"
    mn=$top/mnist-full
  fi
  idx_head "$mn/train-images-idx3-ubyte" "$pkg/mnist/train-images-idx3-ubyte" 1024 16 784
  idx_head "$mn/train-labels-idx1-ubyte" "$pkg/mnist/train-labels-idx1-ubyte" 1024 8 1
  idx_head "$mn/t10k-images-idx3-ubyte" "$pkg/mnist/t10k-images-idx3-ubyte" 1024 16 784
  idx_head "$mn/t10k-labels-idx1-ubyte" "$pkg/mnist/t10k-labels-idx1-ubyte" 1024 8 1
  # all of MNIST, gzipped, for `table6` (about 11 MiB), with PREPARE_TABLE6=1
  rm -rf "$pkg/mnist-full"
  local f
  if [ "${PREPARE_TABLE6:-0}" = 1 ]; then
    mkdir -p "$pkg/mnist-full"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
      gzip -9c "$mn/$f" >"$pkg/mnist-full/$f.gz" || die "cannot compress $mn/$f"
    done
  fi
  git rev-parse HEAD >"$pkg/REVISION" 2>/dev/null || echo unknown >"$pkg/REVISION"
  git status --porcelain 2>/dev/null | grep -q . && echo "(with uncommitted changes)" >>"$pkg/REVISION"

  local bytes
  bytes=$(du -sb "$pkg" | cut -f1)
  [ "$bytes" -lt $((limit_mib << 20)) ] || die "$pkg is $((bytes >> 20)) MiB, over the ${limit_mib} MiB a device run carries"
  echo "gpu-check: $pkg ready: $((bytes >> 10)) KiB ($(ls "$pkg/lib" | tr '\n' ' '))"
  echo "gpu-check: on the device, from the repository root (a copy of this working tree):"
  echo "  command: bash tests/gpu-check.sh run"
  echo "  carry:   [\"$pkg\"]"
  echo "  timeout: 480 s (the check takes under 7 minutes); logs come back in \$OUT"
}

# Step 4's comparisons, a "model name" line each: fp32 and FMAq over the
# bf16 LUT for every model; the masked STEs (the accumulator paper's Table 6
# setting: M4E3, bias 5) on the dense-only model; an integer table's
# quantization-aware layers (gpu/qat.cu) with each backward rule.
train_specs() {
  local model name names
  for model in lenet300 lenet5 vit-tiny resnet20; do
    names="fp32 lut-fmaq"
    [ $model = lenet300 ] && names="$names ste-imm-diff ste-rec-of int8-table int8-approx"
    { [ $model = lenet5 ] || [ $model = resnet20 ]; } && names="$names int8-ste"
    for name in $names; do echo "$model $name"; done
  done | grep -E -- "${CHECK_TRAIN:-.}"
}

# One run of a comparison: train_one MODEL NAME DEV into $jd/MODEL-NAME-DEV
# .json, .log, .wall (seconds) and .rc (exit status); run()'s locals
# (mantis, jd, top, root, pkg) in scope.
train_one() {
  local model=$1 name=$2 dev=$3 data sub args t1 j="$jd/$1-$2-$3"
  case $model in
  # (ResNet-20 on 256 images: its FMAq run on 1024 took over 150 s on the H100 machine's 16 cores)
  resnet20) data="cifar10 --data-dir $top/cifar" sub="--subset 256 --test-subset 256 --batch 128" ;;
  *) data="mnist --data-dir $root/$pkg/mnist" sub="--subset 1024 --test-subset 1024 --batch 64" ;;
  esac
  case $name in
  fp32) args="--mul fp32" ;;
  ste-imm-diff) args="--mul mbm --man-bits 7 --acc M4E3 --acc-bias 5 --no-underflow --ste imm-diff" ;;
  ste-rec-of) args="--mul fp32 --acc M4E3 --acc-bias 5 --ste rec-of" ;;
  int8-*) args="--lut $top/int8u.lut --int-backward ${name#int8-}" ;;
  *) args="--mul mbm --man-bits 7 --acc M7E4 --acc-bias 10 --prod M7E4 --prod-bias 12" ;;
  esac
  # (ResNet-20's FMAq on one step: its CPU run on 256 images took 101 s of the check)
  [ $model = resnet20 ] && [ $name = lut-fmaq ] && sub="--subset 128 --test-subset 128 --batch 128"
  t1=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout 150 "$mantis" train --model $model --data $data --epochs 1 $sub --seed 1 $args --device $dev \
    --threads 0 --json "$j.json" >"$j.log" 2>&1
  echo $? >"$j.rc"
  awk -v a="$t1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }' >"$j.wall"
}

# The Python front end on CUDA tensors (python/tests/test_cuda.py: every
# layer's bits on a CUDA tensor against the CPU tensor's) under the device's
# own python3 and PyTorch, into $1/python.log; a skip is a failure. Only the
# pylib folder on the library path: PyTorch keeps its own C++ runtime. Uses
# the caller's say, fail, passed and failed (run's, layouts').
python_check() {
  local t0=$SECONDS rc
  local py="" cand pyout="$1/python.log" np nf
  for cand in ${MANTIS_PYTHON:-} python3 /usr/bin/python3; do # the first that has both (Debian's is not PATH's python3 everywhere)
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch, pytest' >/dev/null 2>&1; then
      py=$cand
      break
    fi
  done
  if [ -n "$py" ]; then
    LD_LIBRARY_PATH="$root/$pkg/pylib" MANTIS_LIB="$root/$pkg/pylib/libmantis.so" PYTHONPATH="$root/python" \
      PYTHONDONTWRITEBYTECODE=1 timeout 150 "$py" -m pytest -q -p no:cacheprovider -rs python/tests/test_cuda.py \
      >"$pyout" 2>&1
    rc=$?
    np=$(grep -oE '[0-9]+ passed' "$pyout" | tail -1 | cut -d' ' -f1)
    nf=$(grep -oE '[0-9]+ (failed|skipped|error|errors)' "$pyout" | awk '{s += $1} END {print s + 0}')
    passed=$((passed + ${np:-0}))
    failed=$((failed + nf))
    say "python test_cuda.py: ${np:-0} passed, $nf failed, skipped or in error, exit $rc, $((SECONDS - t0)) s ($("$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)' 2>&1))"
    [ "$rc" -eq 0 ] || [ "$nf" -gt 0 ] || fail "python test_cuda.py exited $rc (see python.log)"
  else
    fail "no python3 with torch and pytest (tried ${MANTIS_PYTHON:-} python3 /usr/bin/python3): the Python front end was not checked"
  fi
}

run() {
  [ -x "$pkg/bin/test_gpu" ] || die "$pkg is missing: run 'bash tests/gpu-check.sh prepare' first and carry $pkg"
  local out="${OUT:-$top/out}" passed=0 failed=0
  mkdir -p "$out"
  local log="$out/gpu-check.log"
  : >"$log"
  say() { echo "$*" | tee -a "$log"; }
  pass() { passed=$((passed + 1)); say "PASS $*"; }
  fail() { failed=$((failed + 1)); say "FAIL $*"; }
  finish() {
    say "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
  }
  export LD_LIBRARY_PATH="$root/$pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local mantis="$root/$pkg/bin/mantis"
  say "gpu-check: revision $(tr '\n' ' ' <"$pkg/REVISION"), $(date -u +%FT%TZ)"

  # 1. the device
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >>"$log" 2>&1 && nvidia-smi -L | grep -q '^GPU'; then
    pass "nvidia-smi -L"
  else
    fail "nvidia-smi -L: no NVIDIA GPU here (nvidia-smi missing or it lists none)"
    finish
  fi

  # the CPU halves of step 4's comparisons, in the background from here on
  local jd=$top/train dev rc
  rm -rf "$jd"
  mkdir -p "$jd"
  synth_cifar "$root/$pkg/mnist" "$top/cifar" || fail "CIFAR-shaped data for resnet20 could not be made"
  "$mantis" lutgen --int-exact 8 -o "$top/int8u.lut" >>"$out/train.log" 2>&1 || fail "mantis lutgen --int-exact 8 failed"
  (
    train_specs | while read -r m n; do train_one "$m" "$n" cpu; done
  ) &
  local cpu_refs=$!

  # 2. every GPU test; a skip is a failure. Left out: the tests of the
  # no-device paths and of the build configuration (they skip where a device
  # is present or nvcc is absent; CI runs them)
  local t0=$SECONDS
  local host_only="GpuHost.UnavailableGpuIsReported:GpuHost.CliDeviceCudaSaysWhyNot:GpuHost.CudaHalfBuiltWhereNvccIs"
  MANTIS_REQUIRE_GPU=1 MANTIS_TEST_BIN="$mantis" MANTIS_TEST_MNIST="$root/$pkg/mnist" \
    timeout 240 "$pkg/bin/test_gpu" --gtest_filter="-$host_only" >"$out/test_gpu.log" 2>&1
  rc=$?
  local ok bad
  ok=$(grep -c '^\[       OK \]' "$out/test_gpu.log")
  bad=$(grep -cE '^\[  (FAILED  |SKIPPED )\] [A-Za-z0-9_]+\.[A-Za-z0-9_]+ \(' "$out/test_gpu.log")
  passed=$((passed + ok))
  failed=$((failed + bad))
  say "test_gpu: $ok passed, $bad failed or skipped, exit $rc, $((SECONDS - t0)) s"
  grep -E '^\[  (FAILED  |SKIPPED )\] [A-Za-z0-9_]+\.[A-Za-z0-9_]+ \(' "$out/test_gpu.log" | tee -a "$log"
  [ "$rc" -eq 0 ] || [ "$bad" -gt 0 ] || fail "test_gpu exited $rc (see test_gpu.log)"

  python_check "$out"

  # 3. the GEMM benchmark against cuBLAS at sizes that fit
  t0=$SECONDS
  if timeout 200 "$mantis" bench gemm --device cuda --sizes 1024,4096,8192 --reps 1 >"$out/bench_gemm.log" 2>&1; then
    pass "bench gemm --device cuda ($((SECONDS - t0)) s)"
  else
    fail "bench gemm --device cuda (exit $?; see bench_gemm.log)"
  fi
  tee -a "$log" <"$out/bench_gemm.log" >/dev/null

  # 4. training on the GPU against the CPU, byte for byte (less the timings
  # and what only --device cuda reports); the cuda runs must have stayed on
  # the device ("gpu_path": "resident"). Wall seconds of each run and the
  # epoch's training seconds (its JSON) go to the log: the resident path's
  # timing. The CPU runs started in the background before step 2 (most of
  # the step's time: they overlap the GPU tests); the JSON files and each
  # run's own log stay out of $OUT (its file count), in $top/train.
  wait "$cpu_refs"
  local spec_model spec_name j
  while read -r spec_model spec_name; do
    train_one "$spec_model" "$spec_name" cuda
    j="$jd/$spec_model-$spec_name"
    for dev in cpu cuda; do
      say "train $spec_model $spec_name --device $dev: exit $(cat "$j-$dev.rc" 2>/dev/null), wall $(cat "$j-$dev.wall" 2>/dev/null) s, epoch $(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' "$j-$dev.json" 2>/dev/null | head -1) s$(sed -n 's/.*"gpu_path": \(".*"\).*/, gpu_path \1/p' "$j-$dev.json" 2>/dev/null)$(sed -n 's/.*"device_peak_bytes": \([0-9]*\).*/, device peak \1 bytes/p' "$j-$dev.json" 2>/dev/null)"
      { echo "== $spec_model $spec_name $dev"; cat "$j-$dev.log" "$j-$dev.json" 2>/dev/null; echo; } >>"$out/train.log"
    done
    strip_json() { grep -v '"gpu_path"\|"device_peak_bytes"' "$1" | sed 's/, "seconds".*//'; }
    if [ -s "$j-cpu.json" ] && [ -s "$j-cuda.json" ] && cmp -s <(strip_json "$j-cpu.json") <(strip_json "$j-cuda.json"); then
      pass "train $spec_model $spec_name: --device cuda equals --device cpu"
    else
      fail "train $spec_model $spec_name: --device cuda differs from --device cpu (or a run failed; see train.log)"
      diff <(strip_json "$j-cpu.json" 2>/dev/null) <(strip_json "$j-cuda.json" 2>/dev/null) | head -10 | tee -a "$log"
    fi
    if grep -q '"gpu_path": "resident"' "$j-cuda.json" 2>/dev/null; then
      pass "train $spec_model $spec_name --device cuda: device-resident"
    else
      fail "train $spec_model $spec_name --device cuda: not device-resident ($(grep '"gpu_path"' "$j-cuda.json" 2>/dev/null))"
    fi
  done < <(train_specs)

  # 5. `mantis bench train --device cuda`: PyTorch FP32 (TF32 off) and ours
  # in one run, as ratios (issue 31's goals), under the python3 of step 2b:
  # the LeNets on 60,000 MNIST-shaped images (the subset repeated),
  # ResNet-20 on 5,120 CIFAR-shaped ones (its whole set would outrun the call)
  replicate_idx "$root/$pkg/mnist/train-images-idx3-ubyte" "$top/mnist60k/train-images-idx3-ubyte" 16 784
  replicate_idx "$root/$pkg/mnist/train-labels-idx1-ubyte" "$top/mnist60k/train-labels-idx1-ubyte" 8 1
  cp "$root/$pkg/mnist"/t10k-* "$top/mnist60k/"
  local bt
  local -a bts=("--models lenet300,lenet5" "--models resnet20 --subset 5120")
  [ -n "${CHECK_BENCH_TRAIN+x}" ] && IFS=';' read -r -a bts <<<"$CHECK_BENCH_TRAIN"
  for bt in "${bts[@]}"; do
    t0=$SECONDS
    if [ "$SECONDS" -gt 330 ]; then
      say "bench train --device cuda $bt: skipped (the check has run $SECONDS s)"
      continue
    fi
    # shellcheck disable=SC2086
    timeout 120 "$mantis" bench train --device cuda $bt --reps 1 --data-dir "$top/mnist60k" --python "${py:-python3}" \
      --mantis "$mantis" >>"$out/bench_train.log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
      pass "bench train --device cuda $bt ($((SECONDS - t0)) s)"
    else
      fail "bench train --device cuda $bt (exit $rc; see bench_train.log)"
    fi
  done
  [ -f "$out/bench_train.log" ] && tee -a "$log" <"$out/bench_train.log" >/dev/null # (none when every one was skipped)

  # 6. full-epoch timings on the GPU (the issue's anchors: LeNets on 60,000
  # MNIST-shaped images at batch 64, ResNet-20 on 50,000 CIFAR-shaped ones at
  # batch 128): MNIST's 1024-image subset repeated to 60,000, the CIFAR-shaped
  # set above. Timings only (what the pixels are does not change the work);
  # skipped once the check has run 6 minutes (a ResNet-20 one after 5), to
  # stay inside its call.
  # where a ResNet-20 step's time goes (MANTIS_GPU_PROFILE: each node kind's
  # forward and backward seconds, and each GEMM shape's with its kernel,
  # synchronised), on 20 steps: with the LUT under the default's kernels and
  # with kernel 3p (15, 16: operands packed beforehand, untimed so far)
  # forced on the long sums, and with FMAq over the LUT under the default's
  # (d2566e1 timed the default against MANTIS_GPU_TILES=0, ":0");
  # CHECK_PROFILE picks others
  local ls prof pcfg pargs tiles pj
  for prof in ${CHECK_PROFILE:-0:lut 15:lut 16:lut 0:lut-fmaq}; do
    ls=${prof%%:*} pcfg=${prof#*:} tiles=1
    case $pcfg in *:0) pcfg=${pcfg%:0} tiles=0 ;; esac
    pargs="--mul mbm --man-bits 7"
    [ "$pcfg" = lut-fmaq ] && pargs="$pargs --acc M7E4 --acc-bias 10 --prod M7E4 --prod-bias 12"
    pj="$jd/profile-resnet20-$pcfg-$ls-$tiles.json"
    # shellcheck disable=SC2086
    MANTIS_GPU_TILES=$tiles MANTIS_GPU_LONG_SUM=$ls MANTIS_GPU_PROFILE=1 timeout 60 "$mantis" train --model resnet20 \
      --data cifar10 --data-dir $top/cifar --epochs 1 --subset 2560 --test-subset 128 --batch 128 --seed 1 $pargs \
      --device cuda --json "$pj" >>"$out/train.log" 2>&1
    rc=$?
    say "profile resnet20 $pcfg (20 steps, long sums ${ls/#0/chosen by shape}, tiles Mid/Half ${tiles/#0/off}) --device cuda: exit $rc, epoch $(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' "$pj" 2>/dev/null | head -1) s, $(sed -n 's/.*"gpu_profile": \("[^"]*"\).*/\1/p' "$pj" 2>/dev/null)"
    say "  GEMMs: $(sed -n 's/.*"gpu_gemm_profile": \("[^"]*"\).*/\1/p' "$pj" 2>/dev/null)"
    [ "$rc" -eq 0 ] || fail "profile resnet20 $pcfg (kernel $ls, tiles $tiles) --device cuda exited $rc (see train.log)"
  done
  local spec data sub args t1 wall
  local -a epoch_specs=("lenet300 fp32" "lenet300 lut" "lenet5 fp32" "lenet5 lut" "resnet20 fp32" "resnet20 lut"
    "resnet20 lut-fmaq" "lenet300 lut-fmaq" "lenet5 int8" "resnet20 int8")
  [ -n "${CHECK_EPOCHS+x}" ] && IFS=';' read -r -a epoch_specs <<<"$CHECK_EPOCHS"
  for spec in "${epoch_specs[@]}"; do
    set -- $spec
    local limit=360
    [ "$1" = resnet20 ] && limit=300 # (a ResNet-20 epoch may take its whole 100 s timeout)
    if [ "$SECONDS" -gt "$limit" ]; then
      say "epoch $1 $2 --device cuda: skipped (the check has run $SECONDS s)"
      continue
    fi
    case $1 in
    resnet20) data="cifar10 --data-dir $top/cifar" sub="--test-subset 1024 --batch 128" ;;
    *) data="mnist --data-dir $top/mnist60k" sub="--test-subset 1024 --batch 64" ;;
    esac
    case $2 in
    fp32) args="--mul fp32" ;;
    lut) args="--mul mbm --man-bits 7" ;;
    int8) args="--lut $top/int8u.lut --int-backward ste" ;;
    *) args="--mul mbm --man-bits 7 --acc M7E4 --acc-bias 10 --prod M7E4 --prod-bias 12" ;;
    esac
    t1=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout 100 "$mantis" train --model $1 --data $data --epochs 1 $sub --seed 1 $args --device cuda \
      --json "$jd/epoch-$1-$2.json" >>"$out/train.log" 2>&1
    rc=$?
    wall=$(awk -v a="$t1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    say "epoch $1 $2 --device cuda: exit $rc, wall $wall s, train $(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' "$jd/epoch-$1-$2.json" 2>/dev/null | head -1) s$(sed -n 's/.*"gpu_path": \(".*"\).*/, gpu_path \1/p' "$jd/epoch-$1-$2.json" 2>/dev/null)$(sed -n 's/.*"device_peak_bytes": \([0-9]*\).*/, device peak \1 bytes/p' "$jd/epoch-$1-$2.json" 2>/dev/null)"
    [ "$rc" -eq 0 ] || fail "epoch $1 $2 --device cuda exited $rc (see train.log)"
  done
  finish
}

# The accumulator paper's Table 6 (see the header): one training per row.
table6() {
  [ -x "$pkg/bin/mantis" ] || die "$pkg is missing: run 'bash tests/gpu-check.sh prepare' first and carry $pkg"
  [ -d "$pkg/mnist-full" ] || die "$pkg has no mnist-full: prepare it with PREPARE_TABLE6=1"
  local out="${OUT:-$top/out}" dev="${TABLE6_DEVICE:-cuda}" epochs="${TABLE6_EPOCHS:-2}"
  local budget="${TABLE6_BUDGET:-400}" sub="" mn="$top/mnist-table6" f rc failed=0
  [ -n "${TABLE6_SUBSET:-}" ] && sub="--subset $TABLE6_SUBSET --test-subset $TABLE6_SUBSET"
  mkdir -p "$out" "$mn"
  export LD_LIBRARY_PATH="$root/$pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gzip -dc "$pkg/mnist-full/$f.gz" >"$mn/$f" || die "cannot unpack $pkg/mnist-full/$f.gz"
  done
  local log="$out/table6.log"
  : >"$log"
  : >"$out/table6-runs.txt"
  echo "table6: revision $(tr '\n' ' ' <"$pkg/REVISION"), device $dev, $epochs epochs${sub:+, $sub}, $(date -u +%FT%TZ)" |
    tee -a "$log"
  local rows=(
    "fp32|FP32 baseline|--mul fp32"
    "id-uf|Identity, underflow|--mul fp32 --acc M4E3 --acc-bias 5"
    "id-nouf|Identity, no underflow|--mul fp32 --acc M4E3 --acc-bias 5 --no-underflow"
    "imm-of|Immediate/OF, underflow|--mul fp32 --acc M4E3 --acc-bias 5 --ste imm-of"
    "imm-diff-uf|Immediate/DIFF, underflow|--mul fp32 --acc M4E3 --acc-bias 5 --ste imm-diff"
    "imm-diff-nouf|Immediate/DIFF, no underflow|--mul fp32 --acc M4E3 --acc-bias 5 --ste imm-diff --no-underflow"
    "rec-of|Recursive/OF, underflow|--mul fp32 --acc M4E3 --acc-bias 5 --ste rec-of"
    "id-m6|Identity, M6E3 (2 more mantissa bits)|--mul fp32 --acc M6E3 --acc-bias 5"
  )
  printf '%-40s %10s %12s  %s\n' "row (paper: Table 6)" "test acc" "s / epoch" "path" | tee -a "$log"
  local row name what args j acc secs path
  for row in "${rows[@]}"; do
    IFS='|' read -r name what args <<<"$row"
    if [ "$SECONDS" -gt "$budget" ]; then
      printf '%-40s %s\n' "$what" "not run (the call has run $SECONDS s; TABLE6_BUDGET=$budget)" | tee -a "$log"
      continue
    fi
    j="$top/table6-$name.json"
    # shellcheck disable=SC2086
    "$root/$pkg/bin/mantis" train --model mlp1024 --data mnist --data-dir "$mn" --epochs "$epochs" $sub --seed 1 \
      $args --device "$dev" --json "$j" >>"$log" 2>&1
    rc=$?
    acc=$(sed -n 's/.*"final_test_acc": \([0-9.]*\).*/\1/p' "$j" 2>/dev/null | head -1)
    secs=$(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' "$j" 2>/dev/null | tr '\n' ' ')
    path=$(sed -n 's/.*"gpu_path": "\(.*\)".*/\1/p' "$j" 2>/dev/null | head -1)
    [ "$rc" -eq 0 ] || { failed=$((failed + 1)); path="exit $rc (see table6.log)"; }
    printf '%-40s %10s %12s  %s\n' "$what" "${acc:--}" "${secs:--}" "${path:-cpu}" | tee -a "$log"
    { echo "== $name: $what"; cat "$j" 2>/dev/null; echo; } >>"$out/table6-runs.txt"
  done
  [ "$failed" -eq 0 ]
}

# The long-sum layouts in whole trainings (a second call, after `run`):
# `mantis bench train --device cuda` with the default's own choice and with
# each layout forced (MANTIS_GPU_LONG_SUM), ResNet-20 on 5,120 CIFAR-shaped
# images and LeNet-5 on 60,000 MNIST-shaped ones, then a whole ResNet-20
# epoch (50,000) with the default; into $OUT/layouts.log, after
# python_check. Stops starting runs after LAYOUTS_BUDGET seconds (default
# 330); LAYOUTS_RESNET and LAYOUTS_LENET name the layouts to time (default
# "default 5 6 7 8 9 10" and "default 8 10").
layouts() {
  [ -x "$pkg/bin/mantis" ] || die "$pkg is missing: run 'bash tests/gpu-check.sh prepare' first and carry $pkg"
  local out="${OUT:-$top/out}" budget="${LAYOUTS_BUDGET:-330}" py="" cand ls rc failed=0 passed=0 bt
  mkdir -p "$out" "$top/mnist60k" "$top/train"
  local log="$out/layouts.log"
  : >"$log"
  say() { echo "$*" | tee -a "$log"; }
  fail() { failed=$((failed + 1)); say "FAIL $*"; }
  export LD_LIBRARY_PATH="$root/$pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local mantis="$root/$pkg/bin/mantis"
  for cand in ${MANTIS_PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch' >/dev/null 2>&1; then
      py=$cand
      break
    fi
  done
  synth_cifar "$root/$pkg/mnist" "$top/cifar" || die "CIFAR-shaped data could not be made"
  replicate_idx "$root/$pkg/mnist/train-images-idx3-ubyte" "$top/mnist60k/train-images-idx3-ubyte" 16 784
  replicate_idx "$root/$pkg/mnist/train-labels-idx1-ubyte" "$top/mnist60k/train-labels-idx1-ubyte" 8 1
  cp "$root/$pkg/mnist"/t10k-* "$top/mnist60k/"
  echo "layouts: revision $(tr '\n' ' ' <"$pkg/REVISION"), $(date -u +%FT%TZ)" | tee -a "$log"
  python_check "$out"
  for bt in "--models resnet20 --subset 5120" "--models lenet5"; do
    local layouts="${LAYOUTS_RESNET:-default 5 6 7 8 9 10}"
    [ "$bt" = "--models lenet5" ] && layouts="${LAYOUTS_LENET:-default 8 10}"
    for ls in $layouts; do
      if [ "$SECONDS" -gt "$budget" ]; then
        echo "bench train $bt, long sums $ls: not run (the call has run $SECONDS s)" | tee -a "$log"
        continue
      fi
      echo "== bench train $bt, long sums $ls" >>"$log"
      # shellcheck disable=SC2086
      if [ "$ls" = default ]; then
        timeout 100 "$mantis" bench train --device cuda $bt --reps 1 --data-dir "$top/mnist60k" --python "${py:-python3}" \
          --mantis "$mantis" >>"$log" 2>&1
      else
        MANTIS_GPU_LONG_SUM=$ls timeout 100 "$mantis" bench train --device cuda $bt --reps 1 --data-dir "$top/mnist60k" \
          --python "${py:-python3}" --mantis "$mantis" >>"$log" 2>&1
      fi
      rc=$?
      [ "$rc" -eq 0 ] || failed=$((failed + 1))
      echo "bench train $bt, long sums $ls: exit $rc" | tee -a "$log"
      grep -E '^(resnet20|lenet5) +(torch|fp32|lut-mbm|fmaq-M7E4) ' "$log" | tail -4
    done
  done
  local spec
  for spec in "lut --mul mbm --man-bits 7" "fp32 --mul fp32"; do
    set -- $spec
    local name=$1
    shift
    if [ "$SECONDS" -gt "$budget" ]; then
      echo "epoch resnet20 $name: not run (the call has run $SECONDS s)" | tee -a "$log"
      continue
    fi
    timeout 120 "$mantis" train --model resnet20 --data cifar10 --data-dir "$top/cifar" --epochs 1 --test-subset 1024 \
      --batch 128 --seed 1 "$@" --device cuda --json "$top/train/layouts-$name.json" >>"$log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
    echo "epoch resnet20 $name (50,000 images) --device cuda: exit $rc, train $(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' "$top/train/layouts-$name.json" 2>/dev/null | head -1) s" | tee -a "$log"
  done
  [ "$failed" -eq 0 ]
}

case "${1:-}" in
prepare) prepare ;;
run) run ;;
table6) table6 ;;
layouts) layouts ;;
-h | --help | help) usage ;;
*)
  usage >&2
  exit 2
  ;;
esac
