#!/usr/bin/env bash
# Each runtime's raw in-process throughput on the peers' own models (../shared/peers/make_models.py), through weft's
# backends without a server: TorchScript on libtorch (optimized for inference, weft's default, and as loaded) and
# ONNX on OpenCV DNN; 1 and 2 threads, 1 and 2 instances, batches 1 and 8 (docs/benchmarks.md, issue 15).
# Results: bench/results/runtime_<time>.md.
#
#   bash bench/runtime_bench.sh                     # about 6 minutes
#   SECONDS_PER_POINT=2 ROUNDS=1 bash bench/runtime_bench.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_SRC=${PEERS_SRC:-$ROOT/../shared/peers}
SECONDS_PER_POINT=${SECONDS_PER_POINT:-3}
ROUNDS=${ROUNDS:-2}
BENCH=$ROOT/build/release/bench/weft_runtime_bench
WORK=$(mktemp -d /tmp/weft_runtime.XXXXXX)
OUT=$ROOT/bench/results
mkdir -p "$OUT"
REPORT=$OUT/runtime_$(date -u +%Y%m%dT%H%M%SZ).md
trap 'rm -rf "$WORK"' EXIT

cp -r "$PEERS_SRC" "$WORK/peers" && chmod -R u+w "$WORK/peers"
(cd "$WORK/peers" && /usr/bin/python3 make_models.py >/dev/null) || exit 1
source "$ROOT/bench/peer_models.sh"
M=$WORK/peers/models
AS_LOADED='parameters { key: "weft.optimize_for_inference" value: { string_value: "off" } }'
peer_model "$WORK" convnet_pt "$M" convnet.pt pytorch_libtorch images "3, 224, 224" out "6, 27, 27"
peer_model "$WORK" convnet_pt_as_loaded "$M" convnet.pt pytorch_libtorch images "3, 224, 224" out "6, 27, 27" "$AS_LOADED"
peer_model "$WORK" convnet_onnx "$M" convnet.onnx onnxruntime_onnx images "3, 224, 224" out "6, 27, 27"
peer_model "$WORK" mlp_pt "$M" mlp.pt pytorch_libtorch INPUT0 64 OUTPUT0 10
peer_model "$WORK" mlp_pt_as_loaded "$M" mlp.pt pytorch_libtorch INPUT0 64 OUTPUT0 10 "$AS_LOADED"
peer_model "$WORK" mlp_onnx "$M" mlp.onnx onnxruntime_onnx INPUT0 64 OUTPUT0 10

{
  echo "# weft_runtime_bench, $(date -u +%Y-%m-%dT%H:%MZ), ${SECONDS_PER_POINT} s per point, $ROUNDS rounds"
  echo "# libblas.so.3: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
} > "$REPORT"
for m in convnet_pt convnet_pt_as_loaded convnet_onnx mlp_pt mlp_pt_as_loaded mlp_onnx; do
  echo "## $m" >> "$REPORT"
  timeout 900 "$BENCH" --model-dir "$WORK/$m" --seconds "$SECONDS_PER_POINT" --rounds "$ROUNDS" >> "$REPORT" 2>&1
done
cat "$REPORT"
echo "report: $REPORT"
