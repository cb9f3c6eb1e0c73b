#!/usr/bin/env bash
# Everything a GPU session checks, in one call to the device machine (15 minutes of device time per session, so one
# prepared run): the `gpu`-labelled tests, then the perception benchmark (bench/gpu/run.sh). Logs and results go
# to $OUT, which the device tool brings back (at most 8 files: the logs, CSVs and arms travel as one archive).
# Prepare here, then run there from the repository root:
#
#   mkdir -p .gpu_carry && cp -r /usr/src/googletest .gpu_carry/     # the GPU machine has no GoogleTest
#   bash bench/gpu/bundle_server_tests.sh    # optional: the frontends' GPU tests, built here (.gpu_carry/server_tests)
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

# The GPU tests that need the server's dependencies, built and carried from the build machine
# (bench/gpu/bundle_server_tests.sh): a few seconds, run first so that their result comes back whatever happens next.
carried=$ROOT/.gpu_carry/server_tests
if [ -d "$carried" ]; then
  for t in http_cuda_shared_memory_test shared_memory_cuda_test cuda_ipc_test; do
    echo "=== $t"
    LD_LIBRARY_PATH=$carried/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} WEFT_SOURCE_DIR=$ROOT \
      WEFT_CUDA_IPC_EXPORTER=$carried/cuda_ipc_exporter timeout 120 "$carried/$t" 2>&1 | tail -60
  done > "$OUT/server_tests.log" 2>&1
  grep -E "^=== |PASSED|FAILED|SKIPPED|error" "$OUT/server_tests.log" | head -40
  # The real server and client: 1 MiB through the identity model at 4 connections, tensors in the request, in
  # system shared memory and in CUDA shared memory, over HTTP and gRPC (5 s each).
  if [ -x "$carried/weft" ]; then
    (
      export LD_LIBRARY_PATH=$carried/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
      "$carried/weft" serve --model-repository "$ROOT/examples/models" --allow-shared-memory --http-port 18000 \
        --grpc-port 18001 --metrics-port 18002 > "$WORK/serve.log" 2>&1 &
      server=$!
      for _ in $(seq 50); do
        python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:18000/v2/health/ready")' \
          2> /dev/null && break
        sleep 0.2
      done
      for protocol in http grpc; do
        port=18000
        [ "$protocol" = grpc ] && port=18001
        for mode in none system cuda; do
          extra=()
          [ "$protocol" = http ] && [ "$mode" = none ] && extra=(--binary)
          echo "=== $protocol $mode"
          "$carried/weft" bench --model identity --shape INPUT0:262144 --concurrency 4 --duration 5 --warmup 1 \
            --protocol "$protocol" --url "127.0.0.1:$port" --shared-memory "$mode" "${extra[@]}" 2>&1 | tail -12
        done
      done
      kill -TERM "$server"
      wait "$server"
      echo "=== weft serve exit $?"
      tail -5 "$WORK/serve.log"
    ) > "$OUT/server_bench.log" 2>&1
    grep -E "^=== |^throughput|^latency|error" "$OUT/server_bench.log" | head -40
  fi
fi

gtest=
if [ ! -f /usr/include/gtest/gtest.h ] && [ -d "$ROOT/.gpu_carry/googletest" ]; then
  gtest=$ROOT/.gpu_carry/googletest
fi
GPU_TESTS=1 GTEST_SOURCE=$gtest timeout "${BENCH_TIMEOUT:-540}" bash "$ROOT/bench/gpu/run.sh" 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}

# The device tool brings back at most 8 files: the result, the GPU tests' logs and one archive of everything else.
cp "$ROOT"/bench/results/gpu_*.json "$WORK/ctest_gpu.log" "$OUT/" 2>/dev/null || true
(cd "$WORK" && tar czf "$OUT/gpu_session_files.tgz" --ignore-failed-read -- *.log *.csv arm_*.json *.md 2>/dev/null) || true
echo "=== session: run.sh exit $rc after $(($(date +%s) - start)) s; files in $OUT"
exit "$rc"
