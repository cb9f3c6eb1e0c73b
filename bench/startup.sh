#!/usr/bin/env bash
# Time from `weft serve` to the first 200 on /v2/health/ready, and resident memory with the example repository:
# right after ready, and after 10 s of load on every example model kind (mlp JSON, detector binary).
#   bash bench/startup.sh      # needs a release build and tools/make_examples.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${PORT:-18990}
WEFT=$ROOT/build/release/src/app/weft
start=$(date +%s%N)
"$WEFT" serve --model-repository "$ROOT/examples/models" --http-address 127.0.0.1 --http-port $PORT \
  --metrics-port $((PORT + 2)) 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
until curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null; do sleep 0.005; done
ready_ms=$((($(date +%s%N) - start) / 1000000))
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' /proc/$pid/status; }
rss_ready=$(rss)
"$WEFT" bench --url "http://127.0.0.1:$PORT" --model mlp --concurrency 16 --duration 5 -q --json >/dev/null
"$WEFT" bench --url "http://127.0.0.1:$PORT" --model detector --binary --concurrency 8 --duration 5 -q --json >/dev/null
echo "start-to-ready ${ready_ms} ms; RSS at ready ${rss_ready} MiB; after load $(rss) MiB; peak $(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' /proc/$pid/status) MiB"
