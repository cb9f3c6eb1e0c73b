# Sourced by the benchmarks that serve the peers' own model files (../shared/peers/make_models.py) the way a Triton
# user lays them out: max_batch_size 8, nothing about instances or threads.
#
#   peer_model REPO NAME MODELS_DIR FILE PLATFORM INPUT "DIMS" OUTPUT "DIMS" [CONFIG_LINE...]
# writes REPO/NAME/config.pbtxt and REPO/NAME/1/model.<ext>; each CONFIG_LINE is appended to the config.
peer_model() {
  local repo=$1 name=$2 models=$3 file=$4 platform=$5 input=$6 input_dims=$7 output=$8 output_dims=$9
  shift 9
  mkdir -p "$repo/$name/1" && cp "$models/$file" "$repo/$name/1/model.${file##*.}" || return 1
  {
    echo "platform: \"$platform\""
    echo "max_batch_size: 8"
    echo "input [ { name: \"$input\" data_type: TYPE_FP32 dims: [ $input_dims ] } ]"
    echo "output [ { name: \"$output\" data_type: TYPE_FP32 dims: [ $output_dims ] } ]"
    local line
    for line in "$@"; do echo "$line"; done
  } > "$repo/$name/config.pbtxt"
}

# peer_repository REPO MODELS_DIR: the four files as the side-by-side benchmarks serve them, with dynamic batching:
# mlp_pt and convnet_pt (TorchScript, what FastAPI runs), mlp_onnx and convnet_onnx (what the node peer runs).
peer_repository() {
  local repo=$1 models=$2 batching='dynamic_batching { }'
  peer_model "$repo" mlp_pt "$models" mlp.pt pytorch_libtorch INPUT0 64 OUTPUT0 10 "$batching" &&
    peer_model "$repo" mlp_onnx "$models" mlp.onnx onnxruntime_onnx INPUT0 64 OUTPUT0 10 "$batching" &&
    peer_model "$repo" convnet_pt "$models" convnet.pt pytorch_libtorch images "3, 224, 224" out "6, 27, 27" \
      "$batching" &&
    peer_model "$repo" convnet_onnx "$models" convnet.onnx onnxruntime_onnx images "3, 224, 224" out "6, 27, 27" \
      "$batching"
}
