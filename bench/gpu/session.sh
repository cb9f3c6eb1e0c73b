#!/usr/bin/env bash
# Everything a GPU session checks, in one call to the device machine (15 minutes of device time per session, so one
# prepared run): the `gpu`-labelled tests, then the perception benchmark (bench/gpu/run.sh). Logs and results go
# to $OUT, which the device tool brings back (at most 8 files: the logs, CSVs and arms travel as one archive).
# Prepare here, then run there from the repository root:
#
#   mkdir -p .gpu_carry && cp -r /usr/src/googletest .gpu_carry/     # the GPU machine has no GoogleTest
#   device: run  command="bash bench/gpu/session.sh"  carry=[".gpu_carry"]  timeout_s=590
#
# The last lines printed are the table for docs/benchmarks.md. A failing stage is reported and the next one still
# runs; run.sh falls back to gpu_spin stand-ins if libtorch does not build.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/weft_gpu_session}
export WORK=${WORK:-/tmp/weft_gpu_bench}
mkdir -p "$OUT" "$WORK"
start=$(date +%s)

{
  date -u
  nvidia-smi || true
  command -v nvcc && nvcc --version | tail -2
  cmake --version | head -1
  c++ --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  nproc
} > "$OUT/machine.txt" 2>&1
head -30 "$OUT/machine.txt"

gtest=
if [ ! -f /usr/include/gtest/gtest.h ] && [ -d "$ROOT/.gpu_carry/googletest" ]; then
  gtest=$ROOT/.gpu_carry/googletest
fi
GPU_TESTS=1 GTEST_SOURCE=$gtest timeout "${BENCH_TIMEOUT:-540}" bash "$ROOT/bench/gpu/run.sh" 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}

# The device tool brings back at most 8 files: the result, the GPU tests' log and one archive of everything else.
cp "$ROOT"/bench/results/gpu_*.json "$WORK/ctest_gpu.log" "$OUT/" 2>/dev/null || true
(cd "$WORK" && tar czf "$OUT/gpu_session_files.tgz" --ignore-failed-read -- *.log *.csv arm_*.json *.md 2>/dev/null) || true
echo "=== session: run.sh exit $rc after $(($(date +%s) - start)) s; files in $OUT"
exit "$rc"
