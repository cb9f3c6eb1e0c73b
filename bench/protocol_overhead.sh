#!/usr/bin/env bash
# Triton's no-model overhead matrix on weft: the builtin identity model (no compute), tensors of 1 element (4 B)
# and of 16 MB, over HTTP (binary tensor data extension), gRPC (raw tensors) and system shared memory (registered
# and named over gRPC, and over HTTP), at concurrency 1 and 16, with `weft bench` as the client on this machine.
# Prints throughput and p50/p99 per cell, then what shared memory gains over sending 16 MB in the request.
# Report: bench/results/protocol_overhead_<time>.md.
#
#   bash bench/protocol_overhead.sh                          # 16 cells x (DURATION + WARMUP) s, about 2.5 minutes
#   WEFT=build-x/src/app/weft DURATION=10 CONCS="1 16" bash bench/protocol_overhead.sh
#
# Needs a release build (tools/build.sh release). Only 127.0.0.1 is contacted; every step is bounded in time.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=${WEFT:-$ROOT/build/release/src/app/weft}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
# The 16 MB cells warm up longer: sixteen 16 MB requests in flight touch 1.7 GiB the first time, and a 1 s warm-up
# measured that first touch (gRPC at 16 connections: 19-32 req/s over 5 s after 1 s, 64-67 after 5 s; 2026-12-04).
LARGE_WARMUP=${LARGE_WARMUP:-5}
CONCS=${CONCS:-"1 16"}
PORT=${PORT:-18800}
OUT=$ROOT/bench/results
mkdir -p "$OUT"
REPORT=$OUT/protocol_overhead_$(date -u +%Y%m%dT%H%M%SZ).md
WORK=$(mktemp -d /tmp/weft_protocol_overhead.XXXXXX)
trap 'kill $WEFT_PID 2>/dev/null; rm -rf "$WORK"' EXIT

"$WEFT" serve --model-repository "$ROOT/examples/models" --http-address 127.0.0.1 --http-port "$PORT" \
  --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) --allow-shared-memory --log-level warning \
  > "$WORK/weft.log" 2>&1 &
WEFT_PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.05; done

HTTP=(--protocol http --url "127.0.0.1:$PORT")
GRPC=(--protocol grpc --url "127.0.0.1:$((PORT + 1))")
# name | flags
TRANSPORTS=("http:${HTTP[*]} --binary" "grpc:${GRPC[*]}" "grpc+shm:${GRPC[*]} --shared-memory system"
            "http+shm:${HTTP[*]} --shared-memory system")

for elements in 1 4194304; do
  for entry in "${TRANSPORTS[@]}"; do
    name=${entry%%:*}
    read -r -a flags <<< "${entry#*:}"
    warmup=$WARMUP
    [ "$elements" -gt 1 ] && warmup=$LARGE_WARMUP
    for c in $CONCS; do
      timeout $((DURATION + warmup + 60)) "$WEFT" bench --model identity --shape "INPUT0:$elements" "${flags[@]}" \
        --concurrency "$c" --duration "$DURATION" --warmup "$warmup" --json -q \
        > "$WORK/$elements.$name.$c.json" 2> "$WORK/$elements.$name.$c.err" ||
        echo "weft bench failed: $name, $elements elements, concurrency $c: $(cat "$WORK/$elements.$name.$c.err")" >&2
    done
  done
done

/usr/bin/python3 - "$WORK" "$CONCS" > "$REPORT" <<'PY'
import json, os, sys
work, concs = sys.argv[1], sys.argv[2].split()
names = ["http", "grpc", "grpc+shm", "http+shm"]
sizes = {"1": "4 B (1 element)", "4194304": "16 MB"}
def load(elements, name, c):
    try:
        with open(os.path.join(work, f"{elements}.{name}.{c}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
print("| tensor | transport | concurrency | req/s | p50 ms | p99 ms | errors |")
print("|---|---|---:|---:|---:|---:|---:|")
for elements, label in sizes.items():
    for name in names:
        for c in concs:
            r = load(elements, name, c)
            if r is None:
                print(f"| {label} | {name} | {c} | failed | | | |")
                continue
            lat = r["latency_ms"]
            print(f"| {label} | {name} | {c} | {r['throughput']['requests_per_s']:.0f} | {lat['p50']:.3f} | "
                  f"{lat['p99']:.3f} | {r['sent'] - r['successes']} |")
print()
print("Shared memory against sending 16 MB in the request (same protocol, same concurrency):")
print()
print("| protocol | concurrency | throughput gain | p50 latency ratio (in-request / shm) |")
print("|---|---:|---:|---:|")
for proto in ("grpc", "http"):
    for c in concs:
        base, shm = load("4194304", proto, c), load("4194304", proto + "+shm", c)
        if not base or not shm or not base["successes"] or not shm["successes"]:
            print(f"| {proto} | {c} | n/a | n/a |")
            continue
        gain = shm["throughput"]["requests_per_s"] / base["throughput"]["requests_per_s"]
        p50 = base["latency_ms"]["p50"] / shm["latency_ms"]["p50"]
        print(f"| {proto} | {c} | {gain:.1f}x | {p50:.1f}x |")
PY
cat "$REPORT"
echo "report: $REPORT"
