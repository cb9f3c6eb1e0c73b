#!/usr/bin/env bash
# What a shadow stage costs the primary: its p50 and p99 at half of capacity with 100% of the requests copied to a
# candidate against none, and the share of copies dropped at capacity. See bench/rollout_bench.py and
# docs/benchmarks.md ("Rollouts").
#   bash bench/rollout_bench.sh [--work 4] [--seconds 10] [--rounds 3] [--json]
# Needs a release build (tools/build.sh release) and /usr/bin/python3 with torch (to make the model).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec /usr/bin/python3 "$ROOT/bench/rollout_bench.py" "$@"
