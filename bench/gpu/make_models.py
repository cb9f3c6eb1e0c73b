"""Makes the three TorchScript models of the GPU benchmark, with random weights, in half precision on the GPU.

    python3 bench/gpu/make_models.py OUT_DIR

Writes OUT_DIR/{det,seg,cls}/1/model.pt and OUT_DIR/models.txt ("<name> <input dims> <output dims> <datatype>" per
line, dims without the batch dimension, e.g. "det 3x384x640 85x12x20 FP16"), which weft_gpu_bench reads to build its
configs. Without a GPU (a smoke test) the models are FP32 on the CPU; SMALL=1 in the environment shrinks the inputs
four times in each spatial dimension, for a dry run of bench/gpu/run.sh on a CPU.
  det  detection-like: a strided conv backbone to 1/32 and a 1x1 head of 85 channels (YOLO-style grid output)
  seg  segmentation-like: an encoder to 1/8, a decoder back to 1/4, 21 classes
  cls  classification-like: a ResNet-18-shaped network, 1000 classes
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv(cin, cout, stride=1, k=3):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Det(nn.Module):
    def __init__(self):
        super().__init__()
        widths = [3, 32, 64, 128, 256, 512]
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [conv(a, b, 2), conv(b, b)]
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Conv2d(512, 85, 1)

    def forward(self, x):
        return self.head(self.backbone(x))


class Seg(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(conv(3, 32, 2), conv(32, 64, 2), conv(64, 64), conv(64, 128, 2), conv(128, 128))
        self.dec = nn.Sequential(conv(128, 64), conv(64, 64))
        self.head = nn.Conv2d(64, 21, 1)

    def forward(self, x):
        y = self.enc(x)
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.head(self.dec(y))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = conv(cin, cout, stride)
        self.b = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.b(self.a(x)) + self.skip(x))


class Cls(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(conv(3, 64, 2, 7), nn.MaxPool2d(3, 2, 1))
        stages = []
        cin = 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            stages += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        y = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    lines = []
    shapes = {"det": (3, 384, 640), "seg": (3, 512, 512), "cls": (3, 224, 224)}
    if os.environ.get("SMALL") == "1":
        shapes = {name: (c, h // 4, w // 4) for name, (c, h, w) in shapes.items()}
    for name, model in [("det", Det()), ("seg", Seg()), ("cls", Cls())]:
        shape = shapes[name]
        model = model.eval().to(device=device, dtype=dtype)
        example = torch.rand((1,) + shape, device=device, dtype=dtype)
        with torch.no_grad():
            traced = torch.jit.trace(model, example)
            result = traced(example)
        os.makedirs(f"{out}/{name}/1", exist_ok=True)
        traced.save(f"{out}/{name}/1/model.pt")
        dims = lambda s: "x".join(str(d) for d in s)
        lines.append(f"{name} {dims(shape)} {dims(result.shape[1:])} {'FP16' if dtype == torch.float16 else 'FP32'}")
        print(f"{name}: input {dims(shape)}, output {dims(result.shape[1:])}, {dtype}", file=sys.stderr)
    with open(f"{out}/models.txt", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
