#!/usr/bin/env bash
# Two builds side by side on small requests (docs/benchmarks.md, issue 15's seventh findings): what each costs a
# core per request, over HTTP with JSON and over gRPC. Two `weft serve` processes (WEFT, this checkout's release
# build, and BASELINE) serve examples/models on SERVER_CPUS; the client runs on CLIENT_CPUS, so that its own work
# is not on the servers' core. Each round runs every workload on both builds, the order turning; a workload is
#   json     wrk at CONNS keep-alive connections on the example mlp, the peers' JSON body (bench/make_bodies.py)
#   json1    the same at one connection
#   grpc     `weft bench` (this build) over gRPC at 16 connections on the builtin identity (one element)
#   grpc_mlp the same on the example mlp
# Each load's req/s and the server's CPU per request (/proc/<pid>/stat) are kept; the summary gives, per workload,
# the median of WEFT over BASELINE, the rounds where WEFT was faster, and the median CPU per request of each.
# Only 127.0.0.1 is contacted. Report: bench/results/build_ab_<time>.md.
#
#   BASELINE=/tmp/weft_before bash bench/build_ab.sh                  # 8 rounds x 4 workloads x 2 x 5 s, ~6 min
#   BASELINE=/tmp/weft_before ROUNDS=10 WORKLOADS="json grpc" bash bench/build_ab.sh
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WEFT=${WEFT:-$ROOT/build/release/src/app/weft}
BASELINE=${BASELINE:?BASELINE=<path to the weft binary to compare with>}
ROUNDS=${ROUNDS:-8}
DURATION=${DURATION:-4}
CONNS=${CONNS:-64}
WORKLOADS=${WORKLOADS:-json json1 grpc grpc_mlp}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
PORT=${PORT:-19400}
for tool in wrk taskset curl; do
  command -v "$tool" >/dev/null || { echo "build_ab: $tool is needed" >&2; exit 1; }
done
for binary in "$WEFT" "$BASELINE"; do
  [ -x "$binary" ] || { echo "build_ab: $binary is not an executable" >&2; exit 1; }
done

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
/usr/bin/python3 "$ROOT/bench/make_bodies.py" "$WORK/bodies" >/dev/null || exit 1

ARMS=(new base)
declare -A BIN=([new]=$WEFT [base]=$BASELINE) HTTP GRPC PID
k=0
for arm in "${ARMS[@]}"; do
  port=$((PORT + 10 * k))
  HTTP[$arm]="http://127.0.0.1:$port"
  GRPC[$arm]="127.0.0.1:$((port + 1))"
  taskset -c "$SERVER_CPUS" "${BIN[$arm]}" serve --model-repository "$ROOT/examples/models" --http-address 127.0.0.1 \
    --http-port "$port" --grpc-port $((port + 1)) --metrics-port $((port + 2)) --log-level error \
    > "$WORK/$arm.log" 2>&1 &
  PID[$arm]=$!
  PIDS+=($!)
  k=$((k + 1))
done
for arm in "${ARMS[@]}"; do
  for _ in $(seq 600); do
    curl -sf "${HTTP[$arm]}/v2/health/ready" >/dev/null && break
    sleep 0.05
  done
  curl -sf "${HTTP[$arm]}/v2/health/ready" >/dev/null || { echo "build_ab: the $arm server did not start" >&2; exit 1; }
done

# Prints "requests req/s" for one load of `workload` on `arm`.
load() {
  local workload=$1 arm=$2 seconds=$3
  case $workload in
    json | json1)
      local conns=$CONNS threads=2
      [ "$workload" = json1 ] && conns=1 threads=1
      WEFT_BODY=$WORK/bodies/mlp_json.body WEFT_PATH=/v2/models/mlp/infer WEFT_AUTHORIZATION="" \
        timeout $((seconds + 30)) taskset -c "$CLIENT_CPUS" wrk -t"$threads" -c"$conns" -d"${seconds}s" --timeout 10s \
        -s "$ROOT/bench/wrk/kserve.lua" "${HTTP[$arm]}" | awk -F'\t' '/WRKRESULT/ {print $2, $4}'
      ;;
    grpc | grpc_mlp)
      local model=(--model identity --shape INPUT0:1)
      [ "$workload" = grpc_mlp ] && model=(--model mlp)
      timeout $((seconds + 30)) taskset -c "$CLIENT_CPUS" "$WEFT" bench --protocol grpc --url "${GRPC[$arm]}" \
        "${model[@]}" --concurrency 16 --duration "$seconds" --json -q |
        /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["answered"], d["throughput"]["requests_per_s"])'
      ;;
  esac
}

cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }
for workload in $WORKLOADS; do
  for arm in "${ARMS[@]}"; do load "$workload" "$arm" 1 >/dev/null; done  # warm both servers and the connections
done

echo "# Two builds on small requests ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "WEFT=$WEFT, BASELINE=$BASELINE; servers on CPUs $SERVER_CPUS, client on $CLIENT_CPUS; $ROUNDS rounds of $DURATION s."
echo
echo "| round | workload | build | req/s | server CPU µs per request |"
echo "|---:|---|---|---:|---:|"
for round in $(seq "$ROUNDS"); do
  for workload in $WORKLOADS; do
    for k in 0 1; do
      arm=${ARMS[$(((k + round) % 2))]}
      sleep 0.5
      before=$(cpu_ms "${PID[$arm]}")
      result=$(load "$workload" "$arm" "$DURATION")
      after=$(cpu_ms "${PID[$arm]}")
      echo "$result" | awk -v r="$round" -v w="$workload" -v a="$arm" -v cpu=$((after - before)) \
        'NF == 2 && $1 > 0 {printf "| %s | %s | %s | %.0f | %.1f |\n", r, w, a, $2, cpu * 1000 / $1}'
    done
  done
done | tee "$WORK/rounds.md"
echo
/usr/bin/python3 - "$WORK/rounds.md" <<'PY' | tee "$WORK/summary.md"
import statistics, sys
rows = [[c.strip() for c in l.split("|")[1:-1]] for l in open(sys.argv[1]) if l.startswith("| ") and l.split("|")[1].strip().isdigit()]
rps, cpu = {}, {}
for r, workload, arm, value, per_request in rows:
    rps.setdefault(workload, {}).setdefault(arm, {})[r] = float(value)
    cpu.setdefault(workload, {}).setdefault(arm, {})[r] = float(per_request)
print("| workload | WEFT over BASELINE, median (lowest–highest) | WEFT faster | CPU µs per request, WEFT / BASELINE |")
print("|---|---:|---:|---:|")
for workload, arms in rps.items():
    rounds = sorted(set(arms.get("new", {})) & set(arms.get("base", {})))
    if not rounds:
        continue
    ratios = sorted(arms["new"][r] / arms["base"][r] for r in rounds)
    faster = sum(arms["new"][r] > arms["base"][r] for r in rounds)
    print(f"| {workload} | {statistics.median(ratios):.3f} ({ratios[0]:.3f}–{ratios[-1]:.3f}) | {faster} of {len(rounds)} "
          f"| {statistics.median(cpu[workload]['new'].values()):.1f} / {statistics.median(cpu[workload]['base'].values()):.1f} |")
PY
mkdir -p "$ROOT/bench/results"
REPORT="$ROOT/bench/results/build_ab_$(date -u +%Y%m%dT%H%M%SZ).md"
{ echo "# build_ab"; echo; cat "$WORK/summary.md"; echo; cat "$WORK/rounds.md"; } > "$REPORT"
echo
echo "report: $REPORT"
