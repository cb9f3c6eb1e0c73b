#!/usr/bin/env bash
# The chaos benchmark of circuit breakers and fallback models: the builtin fault model failing 5%, 50% and 100% of
# its executions under steady open-loop load, with and without a breaker and a fallback; and how long a breaker
# takes to open and to close again. See bench/resilience_bench.py for each part and docs/benchmarks.md
# ("Resilience") for the results.
#   bash bench/resilience_bench.sh [--only AB] [--rate 500] [--seconds 10] [--json]
# Needs a release build (tools/build.sh release).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec python3 "$ROOT/bench/resilience_bench.py" "$@"
