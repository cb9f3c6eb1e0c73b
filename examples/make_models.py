#!/usr/bin/python3
"""Generates the example model files and their reference inputs/outputs.

Run with the system Python, which has torch:  /usr/bin/python3 examples/make_models.py

Writes examples/models/<model>/1/model.{pt,onnx} and examples/reference/<model>/{input,output}.<NAME>.bin
(raw little-endian) plus meta.json. The config.pbtxt files are hand-written and committed; this script never
touches them. Output is deterministic: a file whose bytes did not change is left alone (its mtime too), so a
second run changes nothing and a watching server does not reload.
"""

import io
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"
REFERENCE = HERE / "reference"
VERSION = "1"
ONNX_OPSET = 11  # OpenCV 4.6 DNN imports opsets up to about 13; 11 is the most widely supported.


def write_if_changed(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so that a server watching the repository never reads half a file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)  # mkstemp creates 0600
    os.replace(tmp, path)


def check_config(model: str) -> None:
    if not (MODELS / model / "config.pbtxt").is_file():
        sys.exit(f"missing {MODELS / model / 'config.pbtxt'}: the configs are committed, not generated")


DATATYPES = {
    torch.float32: "FP32",
    torch.float64: "FP64",
    torch.int32: "INT32",
    torch.int64: "INT64",
}


def write_reference(model: str, inputs: dict, outputs: dict) -> None:
    """inputs/outputs: name -> torch.Tensor, in config order."""
    out_dir = REFERENCE / model
    meta = {"inputs": {}, "outputs": {}}
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for name, t in tensors.items():
            array = t.detach().contiguous().numpy()
            array = array.astype(array.dtype.newbyteorder("<"), copy=False)
            write_if_changed(out_dir / f"{kind}.{name}.bin", array.tobytes())
            meta[kind + "s"][name] = {"datatype": DATATYPES[t.dtype], "shape": list(t.shape)}
    write_if_changed(out_dir / "meta.json", (json.dumps(meta, indent=2) + "\n").encode())


def torchscript_bytes(module: torch.jit.ScriptModule) -> bytes:
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return buffer.getvalue()


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.layers(x)


def make_mlp() -> None:
    check_config("mlp")
    torch.manual_seed(0)
    model = Mlp().eval()
    x = torch.rand(2, 64) * 2 - 1
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,))
        y = traced(x)
    write_if_changed(MODELS / "mlp" / VERSION / "model.pt", torchscript_bytes(traced))
    write_reference("mlp", {"INPUT0": x}, {"OUTPUT0": y})


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16) / 4)

    def forward(self, a, b):
        return (a + b) @ self.weight, a * b


def make_pair() -> None:
    check_config("pair")
    torch.manual_seed(1)
    model = Pair().eval()
    a = torch.rand(3, 16) * 2 - 1
    b = torch.rand(3, 16) * 2 - 1
    with torch.no_grad():
        traced = torch.jit.trace(model, (a, b))
        total, prod = traced(a, b)
    write_if_changed(MODELS / "pair" / VERSION / "model.pt", torchscript_bytes(traced))
    write_reference("pair", {"INPUT0": a, "INPUT1": b}, {"SUM": total, "PROD": prod})


class Detector(nn.Module):
    """224x224 image -> a 6-channel 27x27 feature map; only Conv, Relu and MaxPool (OpenCV DNN imports them)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=5, stride=2, padding=2),  # 112
            nn.ReLU(),
            nn.MaxPool2d(2),  # 56
            nn.Conv2d(16, 32, kernel_size=3, padding=1),  # 56
            nn.ReLU(),
            nn.MaxPool2d(2),  # 28
            nn.Conv2d(32, 6, kernel_size=2),  # 27
        )

    def forward(self, images):
        return self.body(images)


def make_detector() -> None:
    check_config("detector")
    torch.manual_seed(2)
    model = Detector().eval()
    images = torch.rand(1, 3, 224, 224)
    with torch.no_grad():
        features = model(images)
        buffer = io.BytesIO()
        torch.onnx.export(
            model,
            (images,),
            buffer,
            input_names=["images"],
            output_names=["features"],
            dynamic_axes={"images": {0: "batch"}, "features": {0: "batch"}},
            opset_version=ONNX_OPSET,
            do_constant_folding=True,
        )
    write_if_changed(MODELS / "detector" / VERSION / "model.onnx", buffer.getvalue())
    write_reference("detector", {"images": images}, {"features": features})


def make_add_sub() -> None:
    # A builtin model: no file, only a reference to check a server against.
    check_config("add_sub")
    torch.manual_seed(3)
    a = torch.rand(2, 16) * 2 - 1
    b = torch.rand(2, 16) * 2 - 1
    write_reference("add_sub", {"INPUT0": a, "INPUT1": b}, {"OUTPUT0": a + b, "OUTPUT1": a - b})


def make_builtin_versions() -> None:
    # Built-in models need no file, but Triton's layout still wants a version directory for each served version.
    for model in ("identity", "identity_bytes", "add_sub", "sleep"):
        check_config(model)
        (MODELS / model / VERSION).mkdir(parents=True, exist_ok=True)


def main() -> None:
    # One thread makes the float results independent of the machine's core count.
    torch.set_num_threads(1)
    make_mlp()
    make_pair()
    make_detector()
    make_add_sub()
    make_builtin_versions()
    print(f"wrote models under {MODELS} and references under {REFERENCE}")


if __name__ == "__main__":
    main()
