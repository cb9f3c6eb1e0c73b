#!/usr/bin/env bash
# Start-up and memory of weft measured as the peers' driver measures them (../shared/research/peers.md, "Start-up
# and memory"), on the peers' own model files: spawn to the first 200 on /v2/health/ready, polled every 50 ms as the
# peers' driver polls; the resident memory at ready (VmRSS and PSS); then the peak of both, sampled every 0.5 s by the
# peers' rss_sampler.py, over c=64 loads of 10 s each: the MLP over JSON, the convnet as a binary tensor, and the
# convnet over JSON (its 2.9 MB bodies are what set the peers' peaks). ROUNDS (default 3) fresh servers in turn.
#   bash bench/startup_vs_peers.sh      # needs a release build and /usr/bin/python3 with torch
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_SRC=${PEERS_SRC:-$ROOT/../shared/peers}
PORT=${PORT:-18990}
ROUNDS=${ROUNDS:-3}
WEFT=$ROOT/build/release/src/app/weft
WORK=$(mktemp -d)
trap 'kill ${pid:-} ${sampler:-} 2>/dev/null; rm -rf "$WORK"' EXIT

cp -r "$PEERS_SRC" "$WORK/peers"
chmod -R u+w "$WORK/peers"
(cd "$WORK/peers" && /usr/bin/python3 make_models.py >/dev/null)
REPO=$WORK/repo
source "$ROOT/bench/peer_models.sh"
peer_repository "$REPO" "$WORK/peers/models" || exit 1

rss_pss() {  # "<VmRSS MiB> <Pss MiB>" of one process
  echo "$(awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status") $(awk '/^Pss:/ {printf "%.1f", $2 / 1024}' \
    "/proc/$1/smaps_rollup")"
}

echo "| round | start-to-ready ms | RSS / PSS at ready MiB | peak RSS / PSS under load MiB |"
echo "|---:|---:|---:|---:|"
for round in $(seq 1 "$ROUNDS"); do
  start=$(date +%s%N)
  "$WEFT" serve --model-repository "$REPO" --http-address 127.0.0.1 --http-port "$PORT" \
    --metrics-port $((PORT + 2)) --grpc-port $((PORT + 1)) 2>/dev/null &
  pid=$!
  until curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null; do sleep 0.05; done
  ready_ms=$((($(date +%s%N) - start) / 1000000))
  at_ready=$(rss_pss "$pid")
  /usr/bin/python3 "$WORK/peers/rss_sampler.py" "$pid" "$WORK/peak" 0.5 &
  sampler=$!
  url=http://127.0.0.1:$PORT
  "$WEFT" bench --url "$url" --model mlp_pt --concurrency 64 --duration 10 -q --json >/dev/null
  "$WEFT" bench --url "$url" --model convnet_pt --binary --concurrency 64 --duration 10 -q --json >/dev/null
  "$WEFT" bench --url "$url" --model convnet_pt --concurrency 64 --duration 10 -q --json >/dev/null
  sleep 1
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  read -r peak_rss peak_pss _ < "$WORK/peak"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  printf '| %d | %d | %s / %s | %s / %s |\n' "$round" "$ready_ms" $at_ready \
    "$(awk -v k="$peak_rss" 'BEGIN {printf "%.1f", k / 1024}')" "$(awk -v k="$peak_pss" 'BEGIN {printf "%.1f", k / 1024}')"
done
