#!/usr/bin/env bash
# The live repository's benchmark: swap latency in watch and poll mode, the swapped model's and another model's
# latency during swaps and large loads, and 200 swaps under load (failures, memory, latency). See
# bench/reload_bench.py for what each part does and docs/benchmarks.md ("Live repository") for the results.
#   bash bench/reload_bench.sh [--only ABCD] [--swaps 50] [--many 200] [--seconds 10] [--rounds 3]
# Needs a release build (tools/build.sh release), the example models (tools/make_examples.sh) and /usr/bin/python3
# with torch (python3-torch), which writes the test models.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec /usr/bin/python3 "$ROOT/bench/reload_bench.py" "$@"
