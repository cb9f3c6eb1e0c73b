#!/usr/bin/env bash
# What OpenBLAS's choice of kernels costs libtorch (docs/benchmarks.md, issue 15's eighth findings): the peers' MLP
# (../shared/peers/make_models.py) as TorchScript, in process and served, with the kernels OpenBLAS picks by itself
# on this CPU against the ones weft picks (src/backends/common/openblas_core.h).
#   own   OPENBLAS_CORETYPE set to what OpenBLAS chose at load (weft leaves a user's choice alone)
#   weft  no OPENBLAS_CORETYPE: weft's correction applies where OpenBLAS did not know the CPU
# First weft_runtime_bench (one instance of one thread, batches 1 and 8) for each, then two `weft serve` processes of
# this build and wrk at each of CONNS connections, the arms in turn, the order turning each round. The servers and
# wrk share the machine's cores, as in bench/http_vs_peers.sh. Only 127.0.0.1 is contacted.
#
#   bash bench/openblas_ab.sh                    # ROUNDS=5 x 2 connection counts x 2 arms x 4 s, about 2 minutes
#   ROUNDS=8 CONNS="1 8 64" bash bench/openblas_ab.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_SRC=${PEERS_SRC:-$ROOT/../shared/peers}
WEFT=$ROOT/build/release/src/app/weft
RUNTIME_BENCH=$ROOT/build/release/bench/weft_runtime_bench
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-4}
CONNS=${CONNS:-"1 64"}
PORT=${PORT:-19700}
WORK=$(mktemp -d /tmp/weft_openblas_ab.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT

cp -r "$PEERS_SRC" "$WORK/peers" && chmod -R u+w "$WORK/peers"
(cd "$WORK/peers" && /usr/bin/python3 make_models.py >/dev/null) || exit 1
source "$ROOT/bench/peer_models.sh"
peer_model "$WORK/repo" mlp_pt "$WORK/peers/models" mlp.pt pytorch_libtorch INPUT0 64 OUTPUT0 10 \
  'dynamic_batching { }' || exit 1

# What OpenBLAS chooses by itself here: its own report at load (OPENBLAS_VERBOSE=2 prints "Core: <name>").
OWN=$(OPENBLAS_VERBOSE=2 "$RUNTIME_BENCH" --model-dir "$WORK/repo/mlp_pt" --batches 1 --instances 1 --threads 1 \
  --seconds 0.1 --rounds 1 2>&1 | sed -n 's/^Core: //p' | head -1)
[ -n "$OWN" ] || { echo "openblas_ab: no run-time-dispatching OpenBLAS under libtorch here" >&2; exit 1; }
declare -A ENVS=([own]="OPENBLAS_CORETYPE=$OWN" [weft]="")  # unquoted below: empty adds nothing
echo "# OpenBLAS's kernels under libtorch ($(date -u +%Y-%m-%dT%H:%MZ)): OpenBLAS chose $OWN by itself"
echo
echo "In process (weft_runtime_bench, one instance of one thread, 2 rounds of 2 s), items/s:"
echo
for arm in own weft; do
  env ${ENVS[$arm]} "$RUNTIME_BENCH" --model-dir "$WORK/repo/mlp_pt" --batches 1,8 --instances 1 --threads 1 \
    --seconds 2 --rounds 2 2>/dev/null | awk -v a="$arm" '$1 ~ /^[0-9]+$/ {printf "- %s, batch %s: %.0f\n", a, $4, $5}'
done
echo

declare -A URL
k=0
for arm in own weft; do
  port=$((PORT + 10 * k))
  URL[$arm]="http://127.0.0.1:$port"
  env ${ENVS[$arm]} "$WEFT" serve --model-repository "$WORK/repo" --http-address 127.0.0.1 --http-port "$port" \
    --grpc-port $((port + 1)) --metrics-port $((port + 2)) > "$WORK/$arm.log" 2>&1 &
  PIDS+=($!)
  k=$((k + 1))
done
for arm in own weft; do
  for _ in $(seq 600); do curl -sf "${URL[$arm]}/v2/health/ready" >/dev/null && break; sleep 0.05; done
  curl -sf "${URL[$arm]}/v2/health/ready" >/dev/null || { echo "openblas_ab: the $arm server did not start" >&2; exit 1; }
done
load() {  # arm conns seconds
  local threads=2
  [ "$2" = 1 ] && threads=1
  WEFT_BODY=$WORK/peers/models/mlp_request.json WEFT_PATH=/v2/models/mlp_pt/infer timeout $(($3 + 30)) \
    wrk -t$threads -c"$2" -d"$3s" --timeout 10s -s "$ROOT/bench/wrk/kserve.lua" "${URL[$1]}" | grep WRKRESULT
}
for arm in own weft; do load "$arm" 8 2 >/dev/null; done
echo "| round | conns | arm | req/s | p50 ms | p99 ms | errors |"
echo "|---:|---:|---|---:|---:|---:|---:|"
for round in $(seq "$ROUNDS"); do
  for conns in $CONNS; do
    order="own weft"
    [ $((round % 2)) = 0 ] && order="weft own"
    for arm in $order; do
      load "$arm" "$conns" "$DURATION" | awk -F'\t' -v r="$round" -v c="$conns" -v a="$arm" \
        '{printf "| %s | %s | %s | %.0f | %.3f | %.3f | %d |\n", r, c, a, $4, $5, $6, $9 + $10}'
    done
  done
done | tee "$WORK/rounds.md"
echo
echo "Means over the rounds:"
awk -F'|' '$2 ~ /[0-9]/ {gsub(/ /, "", $3); gsub(/ /, "", $4); k = $3 " " $4; n[k]++; r[k] += $5; p50[k] += $6
  p99[k] += $7} END {for (k in n) {split(k, f, " "); printf "- %s connections, %s: %.0f req/s, p50 %.3f ms, p99 %.3f ms\n",
  f[1], f[2], r[k] / n[k], p50[k] / n[k], p99[k] / n[k]}}' "$WORK/rounds.md" | sort -k2,2n -k4,4
grep -h "OpenBLAS" "$WORK/weft.log" | head -1 | sed 's/^/weft: /'
