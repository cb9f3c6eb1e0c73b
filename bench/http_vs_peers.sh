#!/usr/bin/env bash
# weft beside the peer servers of ../shared/peers (nginx's static ceiling, FastAPI + torch, fastify +
# onnxruntime-node), on this machine, in one run, like for like: weft serves the peers' own model files
# (../shared/peers/make_models.py), the MLP and the convnet each as the TorchScript file the Python peers run and as
# the ONNX file the node peer runs, from configs written as a Triton user writes them (max_batch_size 8,
# `dynamic_batching { }`, no instance or thread settings). Same wrk, same request bodies for JSON, the same image
# for binary (the binary tensor data extension for weft, the peers' raw octet-stream for them), same connection
# counts, and the same warm-up before each workload (3 s at 8 connections, not recorded).
# After weft, the runtimes' raw in-process rate on the same convnet files (weft_runtime_bench), for the issue's
# "share of the raw rate" goal. Results: bench/results/http_vs_peers_<time>.md.
#
#   bash bench/http_vs_peers.sh            # about 12 minutes
#   PEERS="node" CONNS="1 64" DURATION=10 bash bench/http_vs_peers.sh
#
# Needs a release build (tools/build.sh release), wrk, nginx, and the peers' packages (see
# ../shared/peers/README.md). Only 127.0.0.1 is contacted; every step is bounded in time.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_SRC=${PEERS_SRC:-$ROOT/../shared/peers}
PEERS=${PEERS:-"nginx fastapi node"}
CONNS=${CONNS:-"1 64"}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
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

# The peers' model files, as a Triton user would lay them out: <model>_pt (TorchScript) and <model>_onnx.
REPO=$WORK/repo
source "$ROOT/bench/peer_models.sh"
peer_repository "$REPO" "$WORK/peers/models" || exit 1
PEERS_MODELS=$WORK/peers/models /usr/bin/python3 "$ROOT/bench/make_bodies.py" "$WORK/bodies" >/dev/null || exit 1

# Prints wrk's result line; wrk's own CPU seconds (user + system, which include the kernel's loopback work done in
# its context) go to $WORK/wrk_cpu.
run_wrk() {  # url body_file header_length path conns
  local threads=2 TIMEFORMAT='%U %S'; [ "$5" = 1 ] && threads=1
  { time WEFT_BODY=$2 WEFT_HEADER_LENGTH=$3 WEFT_PATH=$4 timeout $((DURATION + 30)) \
    wrk -t$threads -c"$5" -d"${DURATION}s" --timeout 10s -s "$ROOT/bench/wrk/kserve.lua" "$1" >"$WORK/wrk.out"; } \
    2>"$WORK/wrk_time"
  awk 'END {print $1 + $2}' "$WORK/wrk_time" >"$WORK/wrk_cpu"
  grep WRKRESULT "$WORK/wrk.out"
}

echo "| server | workload | conns | req/s | p50 ms | p99 ms | errors |" > "$REPORT"
echo "|---|---|---:|---:|---:|---:|---:|" >> "$REPORT"
row() { awk -v s="$1" -v w="$2" -v c="$3" -F'\t' '{printf "| %s | %s | %s | %.0f | %.3f | %.3f | %d |\n", s, w, c, $4, $5, $6, $9 + $10}'; }

"$WEFT" serve --model-repository "$REPO" --http-address 127.0.0.1 --http-port "$PORT" --metrics-port $((PORT + 2)) \
  > "$WORK/weft.log" 2>&1 &
WEFT_PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.05; done
PEER_MLP=$WORK/peers/models/mlp_request.json
CONVNET_BODY=$WORK/bodies/peer_convnet_bin.body
CONVNET_HLEN=$(cat "$WORK/bodies/peer_convnet_bin.hlen")
# workload model body header_length
WORKLOADS=("json_mlp mlp_pt $PEER_MLP -" "json_mlp mlp_onnx $PEER_MLP -"
           "bin_convnet convnet_pt $CONVNET_BODY $CONVNET_HLEN" "bin_convnet convnet_onnx $CONVNET_BODY $CONVNET_HLEN")
for w in "${WORKLOADS[@]}"; do
  read -r workload name body hlen <<<"$w"
  [ "$hlen" = - ] && hlen=""
  (DURATION=$WARMUP run_wrk "http://127.0.0.1:$PORT" "$body" "$hlen" "/v2/models/$name/infer" 8 >/dev/null)
  for c in $CONNS; do
    result=$(run_wrk "http://127.0.0.1:$PORT" "$body" "$hlen" "/v2/models/$name/infer" "$c")
    echo "$result" | row weft "$workload ($name)" "$c" >> "$REPORT"
    # wrk's CPU seconds per request, for the convnet's ceiling below.
    [ "$workload" = bin_convnet ] && [ "$c" = 64 ] &&
      echo "$result" | awk -v m="$name" -v cpu="$(cat "$WORK/wrk_cpu")" -F'\t' '$2 > 0 {print m "\t" cpu / $2}' >> "$WORK/wrk_cost.tsv"
  done
done
WEFT_RSS=$(awk '/VmRSS/ {printf "%.0f", $2 / 1024}' /proc/$WEFT_PID/status)
CAPS=$(curl -s "127.0.0.1:$((PORT + 2))/metrics" | awk '/^weft_batch_tuned_cap/ {printf "%s%s", sep, $0; sep = "; "}')
kill $WEFT_PID; wait $WEFT_PID 2>/dev/null

# The runtimes' raw in-process rate on the same convnet files and cores, right after weft served them: two
# instances of one thread (the fastest layout in bench/runtime_bench.sh's table) at batches 1 and 8. The goal is
# weft's rate at 64 connections over the fastest of these (the client's share of the cores is part of the test).
RAW_TSV=$WORK/raw.tsv
for name in convnet_pt convnet_onnx; do
  timeout $((4 * DURATION + 120)) "$ROOT/build/release/bench/weft_runtime_bench" --model-dir "$REPO/$name" \
    --threads 1 --instances 2 --batches 1,8 --seconds "$DURATION" --rounds 1 2>/dev/null |
    awk -v m="$name" '$1 ~ /^[0-9]+$/ {print m "\t" $4 "\t" $5}' >> "$RAW_TSV"
done

# The peers, with their own driver and wrk scripts, right after weft on the same machine.
(cd "$WORK/peers" && PEERS="$PEERS" CONNS="$CONNS" DURATION=$DURATION WARMUP=3 timeout 1200 bash run_all.sh >/dev/null 2>&1)
awk -F'\t' 'NR > 1 && $3 != "json_convnet" {printf "| %s | %s | %s | %.0f | %.3f | %.3f | %d |\n", $2, $3, $4, $8, $9, $10, $13+$14+$15+$16+$17}' \
  "$WORK/peers/results/peers.tsv" >> "$REPORT"
{
  echo
  echo "- weft: resident memory after its workloads ${WEFT_RSS} MiB; $(grep -o 'memory from [^;]*' "$WORK/weft.log")"
  echo "- batch caps at the end: ${CAPS:-none}"
  awk -F'\t' '{printf "- raw in-process rate, %s, 2 instances of 1 thread, batch %s: %.0f items/s\n", $1, $2, $3}' "$RAW_TSV"
  awk -F'\t' 'FNR == NR {if ($3 > best) {best = $3; what = $1 ", batch " $2}; next}
    /^\| weft \| bin_convnet/ && $4 + 0 == 64 && $5 + 0 > served {served = $5 + 0; how = $3; gsub(/^ +| +$/, "", how)}
    END {if (best > 0 && served > 0) printf "- convnet at 64 connections: weft %s %.0f req/s = %.2fx the fastest raw rate (%s, %.0f items/s)\n", how, served, served / best, what, best}' \
    "$RAW_TSV" FS='|' "$REPORT"
  # What a server that cost nothing could reach: the cores' time per image is the raw rate's (ncores / best) plus
  # wrk's own time per request, which is the same for every server.
  awk -F'\t' -v cores="$(nproc)" 'FNR == NR {if ($3 > best) best = $3; next}
    $2 > 0 && best > 0 {printf "- wrk, serving %s at 64 connections, used %.0f µs of CPU per request: a server that cost nothing would reach at most %.2fx the fastest raw rate\n", $1, $2 * 1e6, 1 / (1 + $2 * best / cores)}' \
    "$RAW_TSV" "$WORK/wrk_cost.tsv" 2>/dev/null
  echo "- libblas.so.3 (libtorch's and numpy's BLAS, for weft and the Python peers alike): $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
} >> "$REPORT"
cat "$REPORT"
echo "report: $REPORT"
