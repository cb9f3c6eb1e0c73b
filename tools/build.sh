#!/usr/bin/env bash
# Builds one preset: release (default), asan (Debug + AddressSanitizer + UndefinedBehaviorSanitizer) or tsan.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
case "$preset" in
  release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
  # WEFT_DEBUG_INFO: the debug info of the sanitized build (default -g; tools/test_all.sh uses -g1, line tables only,
  # which keeps the sanitizers' stack traces and compiles a quarter faster).
  # Benchmarks are measured in release builds only, and the CUDA code runs only on a GPU (the release build compiles
  # it, the GPU machine runs it): sanitized builds of either are compile time with no test behind them.
  asan) args=(-DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS_DEBUG="${WEFT_DEBUG_INFO:--g}"
              -DWEFT_BUILD_BENCH=OFF -DWEFT_WITH_CUDA=OFF) ;;
  tsan) args=(-DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=thread -DWEFT_BUILD_BENCH=OFF) ;;
  *) echo "unknown preset $preset (release, asan, tsan)" >&2; exit 2 ;;
esac
cmake -S . -B "build/$preset" -G Ninja "${args[@]}" >/dev/null
ninja -C "build/$preset" -j"$(nproc)"
