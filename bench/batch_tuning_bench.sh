#!/usr/bin/env bash
# What batch tuning (weft.batch_tuning, src/scheduler/README.md) gives on the peers' convnet (../shared/peers:
# images FP32 [3,224,224]), the model issue 15 found slower under weft than under FastAPI because weft filled
# batches of 8 that cost 2.4 times as much per image as batches of 1. One `weft serve` holds the same file under
# two configs that differ only in weft.batch_tuning, each written as a Triton user writes it (max_batch_size 8,
# dynamic_batching { }):
#   tuned     the default: the cap follows the measured cost per item
#   untuned   weft.batch_tuning "off": batches fill to 8, as in Triton
# for each FORMATS entry (torchscript: convnet.pt on libtorch; onnx: convnet.onnx on OpenCV DNN). `weft bench
# --binary` at CONNS connections loads one config at a time, the two in turns (the order turns each round), after a
# warm-up of each (torch 1.13's JIT takes several seconds per batch size to reach its speed). Prints one row per
# round and config, and the tuned cap seen on /metrics after each tuned turn. Report: bench/results/batch_tuning_<time>.md.
#
#   bash bench/batch_tuning_bench.sh                   # ROUNDS=4 x 2 configs x DURATION s per format, about 6 minutes
#   FORMATS=torchscript ROUNDS=3 DURATION=10 bash bench/batch_tuning_bench.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=${WEFT:-$ROOT/build/release/src/app/weft}
PEERS_SRC=${PEERS_SRC:-$ROOT/../shared/peers}
FORMATS=${FORMATS:-"torchscript onnx"}
ROUNDS=${ROUNDS:-4}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-20}
CONNS=${CONNS:-64}
PORT=${PORT:-19300}
OUT=$ROOT/bench/results
mkdir -p "$OUT"
REPORT=$OUT/batch_tuning_$(date -u +%Y%m%dT%H%M%SZ).md
WORK=$(mktemp -d /tmp/weft_batch_tuning.XXXXXX)
PID=
trap 'kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT

cp -r "$PEERS_SRC" "$WORK/peers" && chmod -R u+w "$WORK/peers"
(cd "$WORK/peers" && /usr/bin/python3 make_models.py >/dev/null) || exit 1

REPO=$WORK/repo
for format in $FORMATS; do
  case $format in
    torchscript) file=convnet.pt platform=pytorch_libtorch ;;
    onnx) file=convnet.onnx platform=onnxruntime_onnx ;;
    *) echo "unknown format $format" >&2; exit 2 ;;
  esac
  for arm in tuned untuned; do
    name=convnet_${format}_$arm
    mkdir -p "$REPO/$name/1" && cp "$WORK/peers/models/$file" "$REPO/$name/1/model.${file##*.}"
    tuning=""
    [ $arm = untuned ] && tuning='parameters { key: "weft.batch_tuning" value: { string_value: "off" } }'
    cat > "$REPO/$name/config.pbtxt" <<CFG
name: "$name"
platform: "$platform"
max_batch_size: 8
input [ { name: "images" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "out" data_type: TYPE_FP32 dims: [ 6, 27, 27 ] } ]
dynamic_batching { }
$tuning
CFG
  done
done

"$WEFT" serve --model-repository "$REPO" --http-address 127.0.0.1 --http-port "$PORT" --grpc-port $((PORT + 1)) \
  --metrics-port $((PORT + 2)) > "$WORK/weft.log" 2>&1 &
PID=$!
for _ in $(seq 1200); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.05; done
curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null || { cat "$WORK/weft.log"; exit 1; }

load() {  # model seconds warmup -> "req/s p50 p99"
  timeout $(($2 + $3 + 60)) "$WEFT" bench --url "http://127.0.0.1:$PORT" --model "$1" --binary --concurrency "$CONNS" \
    --duration "$2" --warmup "$3" --json 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); l=r["latency_ms"]
print("%.0f %.1f %.1f" % (r["throughput"]["requests_per_s"], l["p50"], l["p99"]))'
}
cap() {  # model -> the tuned cap on /metrics
  curl -sf "127.0.0.1:$((PORT + 2))/metrics" | awk -v m="model=\"$1\"" '/^weft_batch_tuned_cap/ && index($0, m) {print $2}'
}

{
  echo "# batch tuning on the peers' convnet, $(date -u +%Y-%m-%dT%H:%MZ), $CONNS connections, ${DURATION} s per turn"
  echo
  echo "| format | round | config | req/s | p50 ms | p99 ms | tuned cap after |"
  echo "|---|---:|---|---:|---:|---:|---:|"
} > "$REPORT"
for format in $FORMATS; do
  for arm in tuned untuned; do load "convnet_${format}_$arm" 1 "$WARMUP" > /dev/null; done
  for round in $(seq "$ROUNDS"); do
    arms="tuned untuned"
    [ $((round % 2)) = 0 ] && arms="untuned tuned"
    for arm in $arms; do
      read -r rps p50 p99 <<< "$(load "convnet_${format}_$arm" "$DURATION" 0)"
      echo "| $format | $round | $arm | $rps | $p50 | $p99 | $(cap "convnet_${format}_tuned") |" >> "$REPORT"
    done
  done
done
echo >> "$REPORT"
echo "Cap moves logged by the server:" >> "$REPORT"
grep -h "batches now hold" "$WORK/weft.log" | sed 's/^/    /' >> "$REPORT"
cat "$REPORT"
echo "report: $REPORT"
