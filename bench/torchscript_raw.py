#!/usr/bin/python3
"""Raw in-process throughput of a TorchScript file under Debian's torch (the libtorch weft links), by batch size
and intra-op threads, in rounds, so that torch's JIT warm-up shows as the difference between the first round and
the later ones. No server: the ceiling a server's answer rate is compared with (docs/benchmarks.md, issue 15).

  /usr/bin/python3 bench/torchscript_raw.py MODEL.pt --shape 3,224,224 [--batches 1,2,4,8] [--threads 1,2]
                                            [--rounds 3] [--seconds 2] [--executor profiling|legacy]
"""
import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--shape", required=True, help="one item's dims, without the batch dim: 3,224,224")
    p.add_argument("--batches", default="1,2,4,8")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2)
    p.add_argument("--executor", choices=("profiling", "legacy"), default="profiling")
    a = p.parse_args()
    if a.executor == "legacy":
        torch._C._jit_set_profiling_executor(False)
        torch._C._jit_set_profiling_mode(False)
    shape = [int(d) for d in a.shape.split(",")]
    model = torch.jit.load(a.model, map_location="cpu")
    model.eval()
    inputs = {b: torch.randn([b] + shape) for b in (int(x) for x in a.batches.split(","))}
    print(f"{'round':>5} {'threads':>7} {'batch':>5} {'items/s':>9} {'ms/call':>8}")
    with torch.inference_mode():
        for rnd in range(a.rounds):
            for threads in (int(t) for t in a.threads.split(",")):
                torch.set_num_threads(threads)
                for batch, x in inputs.items():
                    for _ in range(3):
                        model(x)
                    calls = 0
                    start = time.perf_counter()
                    while time.perf_counter() - start < a.seconds:
                        model(x)
                        calls += 1
                    took = time.perf_counter() - start
                    print(f"{rnd:>5} {threads:>7} {batch:>5} {calls * batch / took:>9.1f} {took / calls * 1000:>8.2f}",
                          flush=True)


if __name__ == "__main__":
    main()
