#!/usr/bin/env bash
# What tracing costs in throughput (issue 14): one `weft serve` in OpenTelemetry mode, exporting to a collector on
# this machine that reads each export and answers 200 (`weft_overhead_bench --collector-port`, a Beast server, at
# nice 19: in production the collector runs elsewhere), and wrk at CONNS connections on the example mlp over JSON. Each round runs the arms back to back,
# switched at run time through /v2/trace/setting, so that every arm sees the same machine (the order turns):
#   off     level OFF (what every untraced server runs)
#   rate1   every request traced, its spans exported
#   rate100 one request in 100 traced
# Prints one row per round and arm, then for each arm the median over the rounds of its req/s over that round's `off`.
# Report: bench/results/tracing_<time>.md.
#
#   bash bench/tracing_bench.sh                   # ROUNDS=15 x 3 arms x (DURATION + 1) s, about 3 minutes
#   ROUNDS=9 DURATION=10 CONNS=64 bash bench/tracing_bench.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=${WEFT:-$ROOT/build/release/src/app/weft}
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-15}
CONNS=${CONNS:-64}
PORT=${PORT:-18900}
OUT=$ROOT/bench/results
mkdir -p "$OUT"
REPORT=$OUT/tracing_$(date -u +%Y%m%dT%H%M%SZ).md
WORK=$(mktemp -d /tmp/weft_tracing_bench.XXXXXX)
trap 'kill $WEFT_PID $SINK_PID 2>/dev/null; rm -rf "$WORK"' EXIT

nice -n 19 "$ROOT/build/release/bench/weft_overhead_bench" --collector-port $((PORT + 3)) > "$WORK/sink.log" 2>&1 &
SINK_PID=$!
"$WEFT" serve --model-repository "$ROOT/examples/models" --http-address 127.0.0.1 --http-port "$PORT" \
  --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) --log-level warning \
  --trace-config mode=opentelemetry --trace-config "opentelemetry,url=http://127.0.0.1:$((PORT + 3))/v1/traces" \
  --trace-config opentelemetry,bsp_schedule_delay=500 > "$WORK/weft.log" 2>&1 &
WEFT_PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.05; done
/usr/bin/python3 "$ROOT/bench/make_bodies.py" "$WORK/bodies" >/dev/null || exit 1

set_arm() {
  case $1 in
    off) body='{"trace_level":["OFF"]}' ;;
    rate1) body='{"trace_level":["TIMESTAMPS"],"trace_rate":"1","trace_count":"-1"}' ;;
    rate100) body='{"trace_level":["TIMESTAMPS"],"trace_rate":"100","trace_count":"-1"}' ;;
  esac
  curl -sf -X POST "127.0.0.1:$PORT/v2/trace/setting" -d "$body" >/dev/null || { echo "cannot set $1" >&2; exit 1; }
}

# The CPU time a process has used, in ms (utime + stime, in clock ticks of 10 ms).
cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }

metric() { curl -sf "127.0.0.1:$((PORT + 2))/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

echo "| round | arm | req/s | p50 ms | p99 ms | errors | server CPU µs per request |" > "$REPORT"
echo "|---:|---|---:|---:|---:|---:|---:|" >> "$REPORT"
ARMS=(off rate1 rate100)
for round in $(seq "$ROUNDS"); do
  # The order turns each round, so that no arm always runs first after the machine changed speed.
  for k in 0 1 2; do
    arm=${ARMS[$(((k + round) % 3))]}
    set_arm $arm
    sleep 1
    before=$(cpu_ms $WEFT_PID)
    result=$(WEFT_BODY=$WORK/bodies/mlp_json.body WEFT_PATH=/v2/models/mlp/infer timeout $((DURATION + 30)) \
      wrk -t2 -c"$CONNS" -d"${DURATION}s" --timeout 10s -s "$ROOT/bench/wrk/kserve.lua" "http://127.0.0.1:$PORT" |
      grep WRKRESULT)
    after=$(cpu_ms $WEFT_PID)
    echo "$result" | awk -v r="$round" -v a="$arm" -v cpu=$((after - before)) -F'\t' \
      '{printf "| %s | %s | %.0f | %.3f | %.3f | %d | %.1f |\n", r, a, $4, $5, $6, $9 + $10, cpu * 1000 / $2}' >> "$REPORT"
  done
done
set_arm off
sleep 1
{
  echo
  echo "spans exported $(metric weft_trace_spans_exported_total), dropped $(metric weft_trace_spans_dropped_total)," \
    "traces $(metric weft_traces_total)"
  echo
  # The machine changes speed between rounds: each round's arms are compared with that round's `off`, and the
  # median of those ratios is the figure.
  echo "| arm | median req/s | median of the rounds' ratios to off | lowest | highest | server CPU µs per request | off's CPU per request over this arm's (median of rounds) |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  /usr/bin/python3 - "$REPORT" <<'PY'
import statistics, sys
rows = [line.split("|") for line in open(sys.argv[1]) if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
rps = {}
for row in rows:
    rps.setdefault(row[2].strip(), {})[row[1].strip()] = float(row[3])
cpu = {}
for row in rows:
    cpu.setdefault(row[2].strip(), {})[row[1].strip()] = float(row[7])
for arm in ("off", "rate1", "rate100"):
    ratios = sorted(rps[arm][r] / rps["off"][r] for r in rps["off"])
    cpu_ratios = sorted(cpu["off"][r] / cpu[arm][r] for r in cpu["off"])
    print(f"| {arm} | {statistics.median(rps[arm].values()):.0f} | {statistics.median(ratios):.3f} | {ratios[0]:.3f} "
          f"| {ratios[-1]:.3f} | {statistics.median(cpu[arm].values()):.1f} | {statistics.median(cpu_ratios):.3f} |")
PY
} >> "$REPORT"
cat "$REPORT"
echo "report: $REPORT"
