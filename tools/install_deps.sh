#!/usr/bin/env bash
# Installs everything weft needs to build, test and serve on Debian 12. Idempotent; run as root.
# clang-16 is for the fuzz targets only (tools/fuzz.sh): libclang-rt-16-dev holds its libFuzzer and sanitizer
# runtimes (only recommended by clang-16, so named here), llvm-16 the llvm-symbolizer of its stack traces.
# libopenblas0-serial takes over Debian's libblas.so.3, which libtorch calls for its matrix products: the reference
# BLAS there by default made the peers' MLP 3 to 8 times slower (docs/benchmarks.md, issue 15). It does so for every
# program on the machine, the peer servers' torch and numpy included.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PACKAGES=(
  build-essential cmake ninja-build pkg-config clang-format
  libboost1.81-dev libsimdjson-dev libcli11-dev
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libtorch-dev libopencv-dnn-dev libssl-dev zlib1g-dev libjemalloc-dev libopenblas0-serial
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-16 libfuzzer-16-dev libclang-rt-16-dev llvm-16
  python3-torch python3-numpy python3-grpcio python3-grpc-tools python3-cryptography
  curl wrk openssl
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "all ${#PACKAGES[@]} packages already installed"
fi
