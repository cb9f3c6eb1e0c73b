#!/usr/bin/env bash
# The GPU benchmark of issue 4, for a machine with an NVIDIA GPU, CUDA, CMake and a Python torch with CUDA (whose
# libtorch weft builds against). No network, no package download. Under 8 minutes, build included.
#
#   bash bench/gpu/run.sh                 # DURATION=15 WARMUP=3 CLS_CLIENTS=64 BE_INFLIGHT=1 JOBS=$(nproc)
#   STAND_IN=1 bash bench/gpu/run.sh      # gpu_spin kernels instead of the three models (no libtorch needed)
#   GPU_TESTS=1 bash bench/gpu/run.sh     # also builds and runs the `gpu`-labelled tests (ctest -L gpu) first;
#                                         # GTEST_SOURCE=DIR builds GoogleTest from source where it is not installed
#   DEVICE=cpu SMALL=1 DURATION=3 WARMUP=1 PYTHON=/usr/bin/python3 bash bench/gpu/run.sh
#                                         # a dry run of the whole script on a machine without a GPU
#
# If the build against torch's libtorch fails, the script says so, builds without libtorch and runs the stand-ins,
# so that the multiplexer's figures come out of the run all the same.
#
# 1. builds the engine, the backends and weft_gpu_bench (bench/gpu/gpu_bench.cc) with -DWEFT_BUILD_SERVER=OFF
#    against torch's own libtorch and CUDA;
# 2. makes detection-, segmentation- and classification-like TorchScript models with random weights
#    (make_models.py);
# 3. runs the perception mix: det PRIORITY_MAX, 4 cameras at 30 Hz; seg PRIORITY_DEFAULT, 2 cameras at 15 Hz;
#    cls PRIORITY_MIN, saturating (CLS_CLIENTS outstanding requests), in arms
#      A each model alone, B one stream shared in FIFO order, C a stream per model, D C + stream priorities,
#      E D + at most BE_INFLIGHT best-effort batches in flight,
#      F and G E with three instances per model on two streams per class, assigned by load (F) or fixed (G);
#    with nvidia-smi's utilization sampled every 200 ms alongside;
# 4. writes bench/results/gpu_<UTC stamp>.json (every arm's output plus the nvidia-smi means) and prints a table:
#    busy fraction (union of busy intervals, from CUDA events), nvidia-smi utilization, goodput (results within
#    their deadline per second: det 33 ms, seg 67 ms, cls 200 ms), det p50/p99 against arm A.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-3}
DEVICE=${DEVICE:-auto}
STAND_IN=${STAND_IN:-0}
SMALL=${SMALL:-0}
GPU_TESTS=${GPU_TESTS:-0}
GTEST_SOURCE=${GTEST_SOURCE:-}
CLS_CLIENTS=${CLS_CLIENTS:-64}
BE_INFLIGHT=${BE_INFLIGHT:-1}
JOBS=${JOBS:-$(nproc)}
WORK=${WORK:-/tmp/weft_gpu_bench}
BUILD=${BUILD:-$WORK/build}
MODELS=$WORK/models
OUT=$ROOT/bench/results
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$WORK" "$OUT"
start=$(date +%s)
say() { echo "=== $* ($(($(date +%s) - start)) s)" >&2; }

say "environment"
HAVE_SMI=0
command -v nvidia-smi >/dev/null && HAVE_SMI=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,persistence_mode,ecc.mode.current \
  --format=csv > "$WORK/gpu.csv" 2>/dev/null || echo "no nvidia-smi" > "$WORK/gpu.csv"
cat "$WORK/gpu.csv" >&2 || true
TORCH_PREFIX=$($PY -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_ABI=$($PY -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
TORCH_VERSION=$($PY -c 'import torch; print(torch.__version__, torch.version.cuda)')
echo "torch $TORCH_VERSION, C++11 ABI $TORCH_ABI, cmake prefix $TORCH_PREFIX" >&2
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

say "build"
# Every weft library must use torch's std::string ABI, not only the backend that links torch.
TESTS_ARGS=(-DWEFT_BUILD_TESTS=OFF)
if [ "$GPU_TESTS" = 1 ]; then
  TESTS_ARGS=(-DWEFT_BUILD_TESTS=ON)
  [ -n "$GTEST_SOURCE" ] && TESTS_ARGS+=(-DWEFT_GTEST_SOURCE_DIR="$GTEST_SOURCE")
fi
build() {  # with_torch
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_SERVER=OFF "${TESTS_ARGS[@]}" \
    -DWEFT_WITH_OPENCV=OFF -DWEFT_WITH_TORCH="$1" -DWEFT_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$NVCC" \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$TORCH_ABI" \
    > "$WORK/cmake.log" 2>&1 || { tail -40 "$WORK/cmake.log" >&2; return 1; }
  grep -E "^-- weft:" "$WORK/cmake.log" >&2 || true
  ninja -C "$BUILD" -j"$JOBS" weft_gpu_bench > "$WORK/build.log" 2>&1 || { tail -60 "$WORK/build.log" >&2; return 1; }
}
if [ "$STAND_IN" != 1 ] && ! build ON; then
  say "the build against libtorch failed (above); building without it and running the gpu_spin stand-ins"
  cp "$WORK/build.log" "$WORK/build_with_torch.log" 2>/dev/null || true
  rm -rf "$BUILD"
  STAND_IN=1
  build OFF
elif [ "$STAND_IN" = 1 ]; then
  build OFF
fi
BENCH=$BUILD/bench/gpu/weft_gpu_bench

if [ "$GPU_TESTS" = 1 ]; then
  say "gpu tests"
  targets=(device_cuda_test multiplexer_cuda_test gpu_metrics_nvml_test cuda_ipc_test shared_memory_cuda_test
    http_cuda_shared_memory_test)
  [ "$STAND_IN" != 1 ] && targets+=(torchscript_cuda_test)
  # The frontends' GPU tests exist only where the server's own dependencies are installed (WEFT_BUILD_SERVER):
  # not on a bare GPU machine. Those that this build has.
  known=$(ninja -C "$BUILD" -t targets all 2>/dev/null | cut -d: -f1)
  built=()
  for t in "${targets[@]}"; do grep -qx "$t" <<< "$known" && built+=("$t"); done
  targets=("${built[@]}")
  # A test that fails to build or pass is reported and the benchmark still runs.
  if ninja -C "$BUILD" -j"$JOBS" "${targets[@]}" > "$WORK/build_tests.log" 2>&1; then
    ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 300 > "$WORK/ctest_gpu.log" 2>&1 || true
    grep -E "tests passed|Failed|Passed|\*\*\*|SKIPPED|Skipped" "$WORK/ctest_gpu.log" >&2 || true
  else
    echo "the gpu tests did not build:" >&2
    grep -E "error" "$WORK/build_tests.log" | head -20 >&2
  fi
fi
# libtorch's shared libraries live beside the Python package.
export LD_LIBRARY_PATH="$($PY -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))'):${LD_LIBRARY_PATH:-}"

if [ "$STAND_IN" = 1 ]; then
  MODELS=stand-in
else
  say "models"
  SMALL=$SMALL $PY "$ROOT/bench/gpu/make_models.py" "$MODELS"
fi

run_arm() {  # label arm [--only model]
  local label=$1 arm=$2; shift 2
  say "arm $label"
  local smi=
  : > "$WORK/smi_$label.csv"
  if [ "$HAVE_SMI" = 1 ]; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 200 > "$WORK/smi_$label.csv" &
    smi=$!
  fi
  "$BENCH" --models "$MODELS" --arm "$arm" --device "$DEVICE" --duration "$DURATION" --warmup "$WARMUP" \
    --cls-clients "$CLS_CLIENTS" --be-inflight "$BE_INFLIGHT" --out "$WORK/arm_$label.json" "$@" \
    || { [ -n "$smi" ] && kill $smi; exit 1; }
  if [ -n "$smi" ]; then
    kill $smi 2>/dev/null || true
    wait $smi 2>/dev/null || true
  fi
}
run_arm A_det A --only det
run_arm A_seg A --only seg
run_arm A_cls A --only cls
for arm in B C D E F G; do run_arm "$arm" "$arm"; done

say "completion paths"
rm -f "$WORK/completion.json" "$WORK/completion.md"
# Host function vs polling thread for the high class (docs/architecture.md, "Completions without polling").
if [ "$DEVICE" != cpu ]; then
  ninja -C "$BUILD" -j"$JOBS" weft_completion_bench > "$WORK/build_completion.log" 2>&1 \
    && "$BUILD/bench/gpu/weft_completion_bench" --out "$WORK/completion.json" | tee "$WORK/completion.md" \
    || echo "the completion benchmark failed (see $WORK/build_completion.log)" >&2
fi

say "report"
$PY - "$WORK" "$OUT/gpu_$STAMP.json" "$TORCH_VERSION" "$MODELS" <<'PY'
import csv, datetime, json, sys
work, out, torch_version, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
labels = ["A_det", "A_seg", "A_cls", "B", "C", "D", "E", "F", "G"]
arms = {}
for label in labels:
    arm = json.load(open(f"{work}/arm_{label}.json"))
    t0, t1 = arm["window_unix_s"]
    samples = []
    for row in csv.reader(open(f"{work}/smi_{label}.csv")):
        try:
            t = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            if t0 <= t <= t1:
                samples.append(float(row[1]))
        except (ValueError, IndexError):
            pass
    arm["nvidia_smi_utilization"] = sum(samples) / len(samples) / 100 if samples else None
    arm["nvidia_smi_samples"] = len(samples)
    arms[label] = arm
alone = arms["A_det"]["models"]["det"]
result = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "torch": torch_version, "models": "gpu_spin stand-ins" if models == "stand-in" else "TorchScript",
          "gpu": open(f"{work}/gpu.csv").read().strip(), "arms": arms}
try:
    result["completion_paths"] = json.load(open(f"{work}/completion.json"))
except (OSError, ValueError):
    pass
json.dump(result, open(out, "w"), indent=1)
print(f"{arms['E']['device']}; models: {result['models']}")
print(f"det alone: p50 {alone['p50_ms']:.2f} ms, p99 {alone['p99_ms']:.2f} ms\n")
print("| arm | busy fraction | nvidia-smi util | goodput /s | det p50 ms | det p99 ms | det p99 / alone | seg p99 ms | cls /s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for label in labels:
    a = arms[label]
    m = a["models"]
    smi = a["nvidia_smi_utilization"]
    det = m.get("det")
    row = [label, f"{100 * a['busy_fraction']:.1f}%", "-" if smi is None else f"{100 * smi:.0f}%", f"{a['goodput_per_s']:.1f}",
           f"{det['p50_ms']:.2f}" if det else "-", f"{det['p99_ms']:.2f}" if det else "-",
           f"{det['p99_ms'] / alone['p99_ms']:.2f}x" if det else "-",
           f"{m['seg']['p99_ms']:.2f}" if "seg" in m else "-", f"{m['cls']['throughput_per_s']:.0f}" if "cls" in m else "-"]
    print("| " + " | ".join(row) + " |")
errors = {f"{l}/{n}": m["first_error"] for l in labels for n, m in arms[l]["models"].items() if m["errors"]}
if errors:
    print("\nerrors:", json.dumps(errors, indent=1))
print(f"\nresults: {out}")
PY
[ -s "$WORK/completion.md" ] && { echo; cat "$WORK/completion.md"; }
say "done"
