#!/usr/bin/env bash
# CPU device sharing (docs/benchmarks.md, "Device sharing on the CPU device"): an urgent `sleep` model (2 ms,
# PRIORITY_MAX, open loop at RATE req/s, Poisson) shares the 4 workers of the CPU device with a saturating
# best-effort `sleep` model (20 ms, PRIORITY_MIN, 4 instances, closed loop at 16 clients). Reports the urgent
# model's p99 in each arm against its p99 alone:
#   alone       the urgent model only
#   off         stream priorities off, no bound on best-effort batches in flight
#   priorities  stream priorities on, no bound
#   bound       priorities off, best-effort batches in flight bounded (1 per instance, 3 on the device)
#   on          priorities and bound (weft serve's defaults on a 4-worker CPU device)
# "alone" runs first and last; the ratio's denominator is the mean of the two p99s (the build machine is shared,
# and a single baseline can catch a busy moment).
#
#   bash bench/device_sharing_bench.sh      # about 2 minutes; DURATION=15 RATE=100 by default
# Needs a release build (tools/build.sh release, or BUILD=build-rel) .
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=${WEFT:-$ROOT/${BUILD:-build/release}/src/app/weft}
DURATION=${DURATION:-15}
RATE=${RATE:-100}
PORT=${PORT:-18950}
WORK=$(mktemp -d /tmp/weft_device_bench.XXXXXX)
OUT=$ROOT/bench/results
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
REPORT=$OUT/device_sharing_$STAMP.md
WEFT_PID=
trap '[ -n "$WEFT_PID" ] && kill $WEFT_PID 2>/dev/null; rm -rf "$WORK"' EXIT

start_server() {  # flags...
  "$WEFT" serve --model-repository "$ROOT/bench/repos/device_sharing" --http-address 127.0.0.1 --http-port $PORT \
    --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) --device cpu --cpu-workers 4 --streams-per-class 4 \
    --load-balance false "$@" > "$WORK/weft.log" 2>&1 &
  WEFT_PID=$!
  for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && return; sleep 0.05; done
  cat "$WORK/weft.log"; exit 1
}
stop_server() { kill $WEFT_PID; wait $WEFT_PID 2>/dev/null || true; WEFT_PID=; }
bench() {  # name args...
  local name=$1; shift
  timeout 300 "$WEFT" bench --url "http://127.0.0.1:$PORT" --json -q --binary "$@" > "$WORK/$name.json"
}
run_arm() {  # name serve-flags...
  local name=$1; shift
  echo "running $name" >&2
  start_server "$@"
  if [ "${name#alone}" = "$name" ]; then
    bench "${name}_background" --model background --concurrency 16 --duration $((DURATION + 4)) &
    local background=$!
    sleep 1
  fi
  bench "$name" --model urgent --request-rate "$RATE" --arrivals poisson --duration "$DURATION" --warmup 2
  curl -sf "127.0.0.1:$((PORT + 2))/metrics" > "$WORK/${name}_metrics.txt" || true
  if [ "${name#alone}" = "$name" ]; then wait $background; fi
  stop_server
}

run_arm alone
run_arm off --stream-priorities false --best-effort-inflight 0 --best-effort-budget 0
run_arm priorities --stream-priorities true --best-effort-inflight 0 --best-effort-budget 0
run_arm bound --stream-priorities false --best-effort-inflight 1 --best-effort-budget 3
run_arm on
run_arm alone_again

/usr/bin/python3 - "$WORK" "$RATE" "$DURATION" "$OUT/device_sharing_$STAMP.json" > "$REPORT" <<'PY'
import json, sys
work, rate, duration, json_out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
r = lambda n: json.load(open(f"{work}/{n}.json"))
alone_p99 = (r("alone")["latency_ms"]["p99"] + r("alone_again")["latency_ms"]["p99"]) / 2
rows = {}
print(f"urgent: sleep 2 ms, PRIORITY_MAX, {rate} req/s Poisson for {duration} s; background: sleep 20 ms, PRIORITY_MIN,")
print("4 instances, 16 clients closed loop. CPU device, 4 workers, 4 streams per class.\n")
print("| arm | stream priorities | best-effort bound | urgent p50 ms | urgent p99 ms | p99 / alone | urgent errors | background req/s |")
print("|---|---|---|---:|---:|---:|---:|---:|")
arms = [("alone", "-", "-"), ("alone_again", "-", "-"), ("off", "off", "none"), ("priorities", "on", "none"), ("bound", "off", "1 per instance, 3 on the device"),
        ("on", "on", "1 per instance, 3 on the device")]
for name, prio, bound in arms:
    u = r(name)
    lat = u["latency_ms"]
    errors = u["sent"] - u["successes"]
    alone_arm = name.startswith("alone")
    bg = "-" if alone_arm else f"{r(name + '_background')['throughput']['requests_per_s']:.0f}"
    rows[name] = {"urgent": u, "background": None if alone_arm else r(name + "_background")}
    print(f"| {name} | {prio} | {bound} | {lat['p50']:.2f} | {lat['p99']:.2f} | {lat['p99'] / alone_p99:.2f}x | {errors} | {bg} |")
print(f"\np99 / alone: against {alone_p99:.2f} ms, the mean of the two runs alone.")
json.dump(rows, open(json_out, "w"), indent=1)
PY
cat "$REPORT"
echo "report: $REPORT" >&2
