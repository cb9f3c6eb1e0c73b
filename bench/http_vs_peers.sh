#!/usr/bin/env bash
# weft beside the peer servers of ../shared/peers (Flask, FastAPI, fastify + onnxruntime-node), on this machine,
# in one run. Same wrk, same models, same connection counts. Results: bench/results/http_vs_peers_<time>.md.
#
#   bash bench/http_vs_peers.sh            # about 8 minutes
#   PEERS="node" CONNS="1 64" DURATION=10 bash bench/http_vs_peers.sh
#
# Needs a release build (tools/build.sh release), the example models (tools/make_examples.sh), wrk, and the
# peers' packages (see ../shared/peers/README.md). Only 127.0.0.1 is contacted; every step is bounded in time.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_SRC=${PEERS_SRC:-$ROOT/../shared/peers}
PEERS=${PEERS:-"fastapi node"}
CONNS=${CONNS:-"1 64"}
DURATION=${DURATION:-10}
PORT=${PORT:-18700}
WEFT=$ROOT/build/release/src/app/weft
WORK=$(mktemp -d /tmp/weft_vs_peers.XXXXXX)
OUT=$ROOT/bench/results
mkdir -p "$OUT"
REPORT=$OUT/http_vs_peers_$(date -u +%Y%m%dT%H%M%SZ).md
trap 'kill $WEFT_PID 2>/dev/null; rm -rf "$WORK"' EXIT

cp -r "$PEERS_SRC" "$WORK/peers"
chmod -R u+w "$WORK/peers"
rm -f "$WORK/peers/results/"*
(cd "$WORK/peers" && /usr/bin/python3 make_models.py >/dev/null) || exit 1
[ -d "$WORK/peers/node_peer/node_modules" ] || (cd "$WORK/peers/node_peer" && timeout 300 npm ci --silent >/dev/null 2>&1)

# The peers' own models, served by weft under the same names and paths, plus weft's example models.
REPO=$WORK/repo
cp -r "$ROOT/examples/models" "$REPO"
mkdir -p "$REPO/convnet/1" && cp "$WORK/peers/models/convnet.onnx" "$REPO/convnet/1/model.onnx"
cat > "$REPO/convnet/config.pbtxt" <<'CFG'
name: "convnet"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "images" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "out" data_type: TYPE_FP32 dims: [ 6, 27, 27 ] } ]
dynamic_batching { }
CFG
PEERS_MODELS=$WORK/peers/models /usr/bin/python3 "$ROOT/bench/make_bodies.py" "$WORK/bodies" >/dev/null || exit 1

run_wrk() {  # url body_file header_length path conns
  local threads=2; [ "$5" = 1 ] && threads=1
  WEFT_BODY=$2 WEFT_HEADER_LENGTH=$3 WEFT_PATH=$4 timeout $((DURATION + 30)) \
    wrk -t$threads -c"$5" -d"${DURATION}s" --timeout 10s -s "$ROOT/bench/wrk/kserve.lua" "$1" | grep WRKRESULT
}

echo "| server | workload | conns | req/s | p50 ms | p99 ms | errors |" > "$REPORT"
echo "|---|---|---:|---:|---:|---:|---:|" >> "$REPORT"
row() { awk -v s="$1" -v w="$2" -v c="$3" -F'\t' '{printf "| %s | %s | %s | %.0f | %.3f | %.3f | %d |\n", s, w, c, $4, $5, $6, $9 + $10}'; }

"$WEFT" serve --model-repository "$REPO" --http-address 127.0.0.1 --http-port "$PORT" --metrics-port $((PORT + 2)) \
  > "$WORK/weft.log" 2>&1 &
WEFT_PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.05; done
PEER_MLP=$WORK/peers/models/mlp_request.json
for c in $CONNS; do
  run_wrk "http://127.0.0.1:$PORT" "$PEER_MLP" "" /v2/models/mlp/infer "$c" | row weft "json_mlp (peers' body)" "$c" >> "$REPORT"
  run_wrk "http://127.0.0.1:$PORT" "$WORK/bodies/peer_convnet_bin.body" "$(cat "$WORK/bodies/peer_convnet_bin.hlen")" \
    /v2/models/convnet/infer "$c" | row weft "bin_convnet (binary extension)" "$c" >> "$REPORT"
  run_wrk "http://127.0.0.1:$PORT" "$WORK/bodies/detector_bin.body" "$(cat "$WORK/bodies/detector_bin.hlen")" \
    /v2/models/detector/infer "$c" | row weft "detector (binary extension)" "$c" >> "$REPORT"
done
kill $WEFT_PID; wait $WEFT_PID 2>/dev/null

# The peers, with their own driver and wrk scripts, right after weft on the same machine.
(cd "$WORK/peers" && PEERS="$PEERS" CONNS="$CONNS" DURATION=$DURATION WARMUP=3 timeout 1200 bash run_all.sh >/dev/null 2>&1)
awk -F'\t' 'NR > 1 && $3 != "json_convnet" {printf "| %s | %s | %s | %.0f | %.3f | %.3f | %d |\n", $2, $3, $4, $8, $9, $10, $13+$14+$15+$16+$17}' \
  "$WORK/peers/results/peers.tsv" >> "$REPORT"
cat "$REPORT"
echo "report: $REPORT"
