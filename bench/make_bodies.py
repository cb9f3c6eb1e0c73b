#!/usr/bin/python3
"""Writes the request bodies that bench/wrk/kserve.lua sends: JSON and binary-extension requests.

Usage: make_bodies.py OUT_DIR   (reads examples/reference/ and, when present, $PEERS_MODELS/*_input.npy)
For each body it writes <name>.body and, for binary ones, <name>.hlen with the JSON header's length.
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)


def json_body(name, tensor_name, array, out_name):
    body = {"inputs": [{"name": tensor_name, "shape": list(array.shape), "datatype": "FP32",
                        "data": [float(x) for x in array.astype(np.float32).ravel()]}]}
    (OUT / f"{name}.body").write_text(json.dumps(body, separators=(",", ":")))


def binary_body(name, tensor_name, array, out_name):
    raw = np.ascontiguousarray(array.astype("<f4")).tobytes()
    header = {"inputs": [{"name": tensor_name, "shape": list(array.shape), "datatype": "FP32",
                          "parameters": {"binary_data_size": len(raw)}}],
              "outputs": [{"name": out_name, "parameters": {"binary_data": True}}]}
    head = json.dumps(header, separators=(",", ":")).encode()
    (OUT / f"{name}.body").write_bytes(head + raw)
    (OUT / f"{name}.hlen").write_text(str(len(head)))


def reference(model, tensor):
    meta = json.loads((ROOT / "examples/reference" / model / "meta.json").read_text())
    shape = meta["inputs"][tensor]["shape"]
    data = np.fromfile(ROOT / "examples/reference" / model / f"input.{tensor}.bin", dtype="<f4")
    return data.reshape(shape)


mlp = reference("mlp", "INPUT0")[:1]
json_body("mlp_json", "INPUT0", mlp, "OUTPUT0")
binary_body("detector_bin", "images", reference("detector", "images")[:1], "features")

peers = os.environ.get("PEERS_MODELS")
if peers:
    json_body("peer_mlp_json", "INPUT0", np.load(Path(peers) / "mlp_input.npy"), "OUTPUT0")
    binary_body("peer_convnet_bin", "images", np.load(Path(peers) / "convnet_input.npy"), "out")
print(f"bodies written to {OUT}")
