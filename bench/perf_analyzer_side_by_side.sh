#!/usr/bin/env bash
# `weft bench` and NVIDIA's perf_analyzer on the same server, model and load, taken in turns so that both see the
# same machine: HTTP, binary tensors, a closed loop of N connections. Prints each round's throughput and p99 from
# both, and the ratio of the medians. With --paced-us U the model is "paced": the builtin sleep model taking U µs
# per request, one at a time, so that the server and not the client sets the pace. docs/benchmarks.md ("weft bench beside perf_analyzer") has the figures and
# docs/triton_compatibility.md how perf_analyzer was built from its public source (CI cannot fetch it).
#   bash bench/perf_analyzer_side_by_side.sh PERF_ANALYZER [--model add_sub | --paced-us 2000] [--concurrency 4]
#                                            [--seconds 5] [--rounds 3]
# Needs a release build (tools/build.sh release) and the example models (tools/make_examples.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PA=${1:?usage: $0 PERF_ANALYZER [--model M] [--concurrency N] [--seconds S] [--rounds R]}
shift
model=add_sub concurrency=4 seconds=5 rounds=3 paced_us=
while (($#)); do
  case $1 in
    --model) model=$2 ;;
    --concurrency) concurrency=$2 ;;
    --seconds) seconds=$2 ;;
    --rounds) rounds=$2 ;;
    --paced-us) paced_us=$2 model=paced ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
WEFT=$ROOT/build/release/src/app/weft
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
repository=$ROOT/examples/models
if [[ -n "$paced_us" ]]; then
  repository=$work/repo
  mkdir -p "$repository/paced/1"
  sed -e 's/name: "sleep"/name: "paced"/' -e '/^dynamic_batching/,/^}/d' "$ROOT/examples/models/sleep/config.pbtxt" \
    >"$repository/paced/config.pbtxt"
  printf 'parameters { key: "batch_delay_us" value: { string_value: "%s" } }\n' "$paced_us" \
    >>"$repository/paced/config.pbtxt"
fi
"$WEFT" serve --model-repository "$repository" --http-port 0 --grpc-port 0 --metrics-port 0 \
  --http-address 127.0.0.1 2>"$work/serve.log" &
server=$!
for _ in $(seq 600); do
  port=$(sed -n 's/.*serving HTTP on [^:]*:\([0-9]*\),.*/\1/p' "$work/serve.log")
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$work/serve.log" >&2; exit 1; }

pa_tput=() weft_tput=()
printf '%-6s %-14s %12s %10s\n' round tool "infer/s" "p99 (us)"
for r in $(seq "$rounds"); do
  "$PA" -m "$model" -i http -u "127.0.0.1:$port" --concurrency-range "$concurrency" -p $((seconds * 1000)) \
    --max-trials 20 >"$work/pa.txt" 2>&1 || { cat "$work/pa.txt" >&2; exit 1; }
  t=$(sed -n 's/.*throughput: \([0-9.]*\) infer\/sec.*/\1/p' "$work/pa.txt" | tail -1)
  p99=$(sed -n 's/.*p99 latency: \([0-9]*\) usec.*/\1/p' "$work/pa.txt" | head -1)
  pa_tput+=("$t")
  printf '%-6s %-14s %12s %10s\n' "$r" perf_analyzer "$t" "$p99"
  "$WEFT" bench --url "http://127.0.0.1:$port" --model "$model" --concurrency "$concurrency" --binary \
    --warmup 1 --duration "$seconds" --json -q >"$work/weft.json"
  read -r t p99 < <(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));
print(round(d["throughput"]["inferences_per_s"], 2), round(d["latency_ms"]["p99"] * 1000))' "$work/weft.json")
  weft_tput+=("$t")
  printf '%-6s %-14s %12s %10s\n' "$r" "weft bench" "$t" "$p99"
done
/usr/bin/python3 - "${pa_tput[*]}" "${weft_tput[*]}" <<'PY'
import statistics, sys
pa = [float(x) for x in sys.argv[1].split()]
wb = [float(x) for x in sys.argv[2].split()]
print("median: perf_analyzer %.1f, weft bench %.1f infer/s; weft bench / perf_analyzer = %.3f"
      % (statistics.median(pa), statistics.median(wb), statistics.median(wb) / statistics.median(pa)))
PY
