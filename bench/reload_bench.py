"""The live repository's benchmark (bench/reload_bench.sh runs it): what a swap costs the clients of the model being
swapped and of the others, and whether anything accumulates over many swaps.

  A. Swap latency: from a new version directory appearing (renamed into place, complete) to the first answer from
     it, over N swaps, in watch mode (at the default settle time and a short one) and in poll mode.
  B. The swapped model's latency under a closed loop of 4 clients: 20 swaps against none, alternating runs.
  C. Another model's latency (the example mlp, one client) in windows that hold the load of a large (1 GiB)
     TorchScript model, against windows that hold none, alternating.
  D. 200 swaps under load: failed requests; resident memory and a model's latency after swap 1 and after swap 200.
  E. (only with --only E) D's controls: the same load for as long without a swap; 1000 swaps of a builtin model
     (no framework); RSS of libtorch alone loading the same file 1000 times.

Models are TorchScript files written with /usr/bin/python3's torch: "adder" answers input + k, so every answer
names the version it came from. Load comes from `weft bench` (closed loop, HTTP JSON); latency percentiles are its.
Prints one JSON object (--json) or the report.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch

from weft_server import ROOT, WeftServer, bench_summary
from weft_server import weft_bench as run_weft_bench

ADDER_CONFIG = """name: "adder"
platform: "pytorch_libtorch"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]
dynamic_batching { max_queue_delay_microseconds: 0 }
"""

AFFINE_CONFIG = """name: "adder"
backend: "weft_builtin"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]
parameters { key: "builtin" value: { string_value: "affine" } }
dynamic_batching { max_queue_delay_microseconds: 0 }
"""

BIG_CONFIG = """name: "big"
platform: "pytorch_libtorch"
max_batch_size: 1
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ %d ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ %d ] }]
"""


class Adder(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.register_buffer("k", torch.tensor(float(k)))

    def forward(self, x):
        return x + self.k


class ModelFiles:
    """Prepared model files, copied into the repository as whole directories. "adder" is TorchScript, or with
    `affine` the builtin affine model (scale 1, offset k, from model.txt), which needs no framework."""

    def __init__(self, affine=False):
        self.dir = tempfile.mkdtemp(prefix="weft_reload_models_")
        self.affine = affine
        self.file_name = "model.txt" if affine else "model.pt"
        self.config = AFFINE_CONFIG if affine else ADDER_CONFIG

    def adder(self, k):
        path = os.path.join(self.dir, f"adder_{k}_{self.file_name}")
        if not os.path.exists(path):
            if self.affine:
                with open(path, "w") as f:
                    f.write(f"1 {k}")
            else:
                torch.jit.script(Adder(k)).save(path)
        return path

    def big(self, width):
        path = os.path.join(self.dir, f"big_{width}.pt")
        if not os.path.exists(path):
            torch.jit.trace(torch.nn.Linear(width, width), torch.zeros(1, width)).save(path)
        return path


def publish(root, model, version, model_file, file_name="model.pt"):
    """Writes <model>/.staging-<version>/<file_name> and renames it to <model>/<version>: it appears whole."""
    staging = os.path.join(root, model, f".staging-{version}")
    os.makedirs(staging, exist_ok=True)
    shutil.copyfile(model_file, os.path.join(staging, file_name))
    os.rename(staging, os.path.join(root, model, str(version)))


class Prober:
    """One keep-alive connection asking "adder" which k answers."""

    BODY = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]})

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def k(self):
        try:
            self.conn.request("POST", "/v2/models/adder/infer", body=self.BODY,
                              headers={"Content-Type": "application/json"})
            r = self.conn.getresponse()
        except (ConnectionError, http.client.HTTPException):
            # The server closes a keep-alive connection idle for long: open another.
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            return None
        payload = r.read()
        if r.status != 200:
            return None
        return json.loads(payload)["outputs"][0]["data"][0] - 1

    def wait_for(self, k, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.k() == k:
                return
            time.sleep(0.002)
        raise RuntimeError(f"k {k} did not answer within {timeout} s")


def weft_bench(port, model, seconds, concurrency):
    """`weft bench` --json; latency in ms."""
    return run_weft_bench(port, model, ["--concurrency", str(concurrency), "--duration", str(seconds)])


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def adder_repository(files, k=1):
    root = tempfile.mkdtemp(prefix="weft_reload_repo_")
    os.makedirs(os.path.join(root, "adder"))
    with open(os.path.join(root, "adder", "config.pbtxt"), "w") as f:
        f.write(files.config)
    publish(root, "adder", 1, files.adder(k), files.file_name)
    return root


class Swapper:
    """Publishes version after version of "adder" (each with a new k) and waits until each answers; removes the
    directory two versions back, as a deploy that keeps one previous version would."""

    def __init__(self, root, files, prober):
        self.root, self.files, self.prober = root, files, prober
        self.version = 1

    def swap(self):
        self.version += 1
        k = self.version
        model_file = self.files.adder(k)
        start = time.monotonic()
        publish(self.root, "adder", self.version, model_file, self.files.file_name)
        self.prober.wait_for(k)
        elapsed = time.monotonic() - start
        old = os.path.join(self.root, "adder", str(self.version - 2))
        if os.path.isdir(old):
            shutil.rmtree(old)
        return elapsed


def swap_latency(files, mode, settle, swaps, poll_secs=1):
    root = adder_repository(files)
    args = ["--model-control-mode", mode, "--repository-settle-secs", str(settle)]
    if mode == "poll":
        args += ["--repository-poll-secs", str(poll_secs)]
    with WeftServer(root, args) as server:
        prober = Prober(server.port)
        swapper = Swapper(root, files, prober)
        for k in range(2, swaps + 2):
            files.adder(k)  # written before the clock starts
        latencies = []
        for _ in range(swaps):
            if mode == "poll":
                # A change lands at a random moment of the poll cycle, not right after the last poll.
                time.sleep(random.uniform(0, poll_secs))
            latencies.append(swapper.swap() * 1000)
    shutil.rmtree(root)
    return {"mode": mode, "settle_s": settle, "poll_s": poll_secs if mode == "poll" else None, "swaps": swaps,
            "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1),
            "min_ms": round(min(latencies), 1), "max_ms": round(max(latencies), 1)}


def during_swaps(files, seconds, swaps, rounds):
    """The swapped model's latency with 4 clients: alternating runs without and with `swaps` swaps."""
    root = adder_repository(files)
    for k in range(2, swaps * rounds + 2):
        files.adder(k)
    runs = {"without": [], "with": []}
    with WeftServer(root, ["--model-control-mode", "watch", "--repository-settle-secs", "0.1"]) as server:
        swapper = Swapper(root, files, Prober(server.port))
        weft_bench(server.port, "adder", 2, 4)  # warm the server and the client
        for _ in range(rounds):
            runs["without"].append(bench_summary(weft_bench(server.port, "adder", seconds, 4)))
            result = {}
            t = threading.Thread(target=lambda: result.update(weft_bench(server.port, "adder", seconds, 4)))
            t.start()
            time.sleep(0.5)
            gap = (seconds - 1.5) / swaps
            for _ in range(swaps):
                began = time.monotonic()
                swapper.swap()
                time.sleep(max(0, gap - (time.monotonic() - began)))
            t.join()
            runs["with"].append(bench_summary(result))
    shutil.rmtree(root)
    return runs


def during_big_loads(files, rounds, width):
    """mlp's latency (one client, `weft bench`) in 3 s windows that hold the load of "big" (a width x width Linear:
    4 * width^2 bytes, 1 GiB by default), against 3 s windows that hold none, alternating. Each load starts 0.25 s
    into its window; the model is unloaded (and its teardown waited for) between rounds, outside the windows."""
    root = tempfile.mkdtemp(prefix="weft_reload_big_")
    shutil.copytree(os.path.join(ROOT, "examples", "models", "mlp"), os.path.join(root, "mlp"))
    os.makedirs(os.path.join(root, "big", "1"))
    shutil.copyfile(files.big(width), os.path.join(root, "big", "1", "model.pt"))
    with open(os.path.join(root, "big", "config.pbtxt"), "w") as f:
        f.write(BIG_CONFIG % (width, width))
    size_mib = os.path.getsize(os.path.join(root, "big", "1", "model.pt")) / 2**20
    runs = {"without": [], "with": []}
    loads = []
    with WeftServer(root, ["--model-control-mode", "explicit", "--load-model", "mlp"]) as server:
        weft_bench(server.port, "mlp", 2, 1)
        for n in range(1, rounds + 1):
            runs["without"].append(bench_summary(weft_bench(server.port, "mlp", 3, 1)))

            def load():
                time.sleep(0.25)
                began = time.monotonic()
                status, body = server.post("/v2/repository/models/big/load")
                if status != 200:
                    raise RuntimeError(body)
                loads.append(time.monotonic() - began)

            t = threading.Thread(target=load)
            t.start()
            runs["with"].append(bench_summary(weft_bench(server.port, "mlp", 3, 1)))
            t.join()
            server.post("/v2/repository/models/big/unload")
            while server.metric("weft_model_unloads_total", model="big") < n:
                time.sleep(0.1)
            time.sleep(1)
    shutil.rmtree(root)
    p99 = {k: statistics.median(r["p99_ms"] for r in v) for k, v in runs.items()}
    return {"big_model_mib": round(size_mib), "load_s_median": round(statistics.median(loads), 2),
            "p99_ms_median": p99, "p99_ratio": round(p99["with"] / p99["without"], 2), **runs}


def probe(server, seconds):
    """RSS, and the median of three one-client runs of "adder" (p50 and p99), after 2 s of quiet."""
    time.sleep(2)
    runs = [bench_summary(weft_bench(server.port, "adder", seconds, 1)) for _ in range(3)]
    return {"rss_mib": round(server.rss_mib(), 1), "p50_ms": round(statistics.median(r["p50_ms"] for r in runs), 3),
            "p99_ms": round(statistics.median(r["p99_ms"] for r in runs), 3),
            "runs_p99_ms": [round(r["p99_ms"], 3) for r in runs], "failed": sum(r["failed"] for r in runs)}


def without_swaps(files, seconds, probe_seconds):
    """D's control: the same probes around `seconds` of the same load, with no swap."""
    root = adder_repository(files)
    with WeftServer(root, ["--model-control-mode", "watch", "--repository-settle-secs", "0.1"]) as server:
        weft_bench(server.port, "adder", 2, 4)
        before = probe(server, probe_seconds)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            weft_bench(server.port, "adder", 5, 4)
        after = probe(server, probe_seconds)
    shutil.rmtree(root)
    return {"load_s": seconds, "before": before, "after": after}


def libtorch_alone(loads):
    """RSS of a Python process that loads the same TorchScript file `loads` times (and runs each 5 times)."""
    files = ModelFiles()
    path = files.adder(1)
    code = f"""
import torch
x = torch.ones(1, 4)
def rss(): return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024
for i in range(1, {loads} + 1):
    m = torch.jit.load({path!r})
    for _ in range(5): m(x)
    del m
    if i in (1, 50, 200, {loads}): print(i, round(rss(), 1))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    shutil.rmtree(files.dir)
    return [[int(a), float(b)] for a, b in (line.split() for line in out.splitlines())]


def many_swaps(files, swaps, probe_seconds):
    root = adder_repository(files)
    for k in range(2, swaps + 2):
        files.adder(k)
    with WeftServer(root, ["--model-control-mode", "watch", "--repository-settle-secs", "0.1"]) as server:
        swapper = Swapper(root, files, Prober(server.port))
        weft_bench(server.port, "adder", 2, 4)
        swapper.swap()

        after_1 = probe(server, probe_seconds)
        # The swaps run on their own thread while the clients run back-to-back 5 s runs of `weft bench`.
        rss_along = []

        def swap_all():
            for i in range(2, swaps + 1):
                swapper.swap()
                if i % 50 == 0:
                    rss_along.append((i, round(server.rss_mib(), 1)))

        swapping = threading.Thread(target=swap_all)
        failures = requests = 0
        started = time.monotonic()
        swapping.start()
        while swapping.is_alive():
            s = bench_summary(weft_bench(server.port, "adder", 5, 4))
            failures += s["failed"]
            requests += s["requests"]
        swapping.join()
        swapping_s = time.monotonic() - started
        after_n = probe(server, probe_seconds)
        series = server.metric("weft_model_swaps_total", model="adder")
    shutil.rmtree(root)
    return {"swaps": swaps, "swapping_s": round(swapping_s, 1), "rss_mib_along": rss_along, "requests_during": requests,
            "failed_during": failures, "swaps_counted": series, "after_1": after_1, f"after_{swaps}": after_n}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--swaps", type=int, default=50, help="swaps per mode in A")
    parser.add_argument("--many", type=int, default=200, help="swaps in D")
    parser.add_argument("--seconds", type=float, default=10, help="length of each run in B")
    parser.add_argument("--rounds", type=int, default=3, help="alternating run pairs in B")
    parser.add_argument("--big-width", type=int, default=16384, help="C: the large model is a width^2 Linear")
    parser.add_argument("--big-rounds", type=int, default=7, help="C: windows with a load, and as many without")
    parser.add_argument("--only", default="ABCD", help="which parts to run (E, D's controls, only when named)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    files = ModelFiles()
    report = {}
    if "A" in args.only:
        report["swap_latency"] = [swap_latency(files, "watch", 1.0, args.swaps),
                                  swap_latency(files, "watch", 0.1, args.swaps),
                                  swap_latency(files, "poll", 0.1, args.swaps, poll_secs=1)]
    if "B" in args.only:
        report["during_swaps"] = during_swaps(files, args.seconds, 20, args.rounds)
    if "C" in args.only:
        report["during_big_loads"] = during_big_loads(files, args.big_rounds, args.big_width)
    if "D" in args.only:
        report["many_swaps"] = many_swaps(files, args.many, 5)
    if "E" in args.only:
        affine = ModelFiles(affine=True)
        report["controls"] = {"without_swaps": without_swaps(files, 25, 5),
                              "affine_swaps": many_swaps(affine, 1000, 5),
                              "libtorch_alone": libtorch_alone(1000)}
        shutil.rmtree(affine.dir)
    shutil.rmtree(files.dir)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    sys.exit(main())
