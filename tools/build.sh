#!/usr/bin/env bash
# Builds one preset: release (default), asan (Debug + AddressSanitizer + UndefinedBehaviorSanitizer) or tsan.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
case "$preset" in
  release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) args=(-DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=address,undefined) ;;
  tsan) args=(-DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=thread) ;;
  *) echo "unknown preset $preset (release, asan, tsan)" >&2; exit 2 ;;
esac
cmake -S . -B "build/$preset" -G Ninja "${args[@]}" >/dev/null
ninja -C "build/$preset" -j"$(nproc)"
