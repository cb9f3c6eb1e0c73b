#!/usr/bin/env bash
# Builds here the GPU tests that need the server's own dependencies (Boost, gRPC, simdjson...: absent on the GPU
# machine, where nothing can be installed), and the weft binary, and puts them with the shared libraries they use
# into .gpu_carry/server_tests, for bench/gpu/session.sh to run there (the tests, then `weft serve` with `weft bench`
# over system and CUDA shared memory). Without torch and OpenCV (the tests use built-in
# models), with CUDA for sm_90. glibc, libstdc++ and the CUDA runtime are the GPU machine's own (newer there).
#
#   bash bench/gpu/bundle_server_tests.sh    # then: device run bash bench/gpu/session.sh, carry [".gpu_carry"]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build/gpu_bundle}
DEST=$ROOT/.gpu_carry/server_tests
TESTS=(http_cuda_shared_memory_test shared_memory_cuda_test cuda_ipc_test)

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_WITH_TORCH=OFF -DWEFT_WITH_OPENCV=OFF \
  -DWEFT_BUILD_BENCH=OFF -DWEFT_WITH_JEMALLOC=OFF -DWEFT_CUDA_ARCHITECTURES=90 > "$BUILD.cmake.log" 2>&1 ||
  { tail -30 "$BUILD.cmake.log" >&2; exit 1; }
ninja -C "$BUILD" "${TESTS[@]}" cuda_ipc_exporter weft

rm -rf "$DEST"
mkdir -p "$DEST/lib"
binaries=()
for t in "${TESTS[@]}" cuda_ipc_exporter weft; do
  path=$(find "$BUILD" -name "$t" -type f -perm -u+x | head -1)
  cp "$path" "$DEST/"
  binaries+=("$DEST/$t")
done
# Every library the binaries load, except the C library's own, the C++ runtime and CUDA's, which the GPU machine has.
ldd "${binaries[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcudart|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$DEST/lib/"; done
du -sh "$DEST" >&2
ls "$DEST" "$DEST/lib" >&2
