"""What the benchmark drivers in bench/ share: a `weft serve` process on ports the kernel picks, its HTTP and metrics
endpoints, and `weft bench` runs against it. Needs only the standard library (the benchmarks that make TorchScript
models import torch themselves).

  with WeftServer(repository, ["--model-control-mode", "watch"]) as server:
      result = weft_bench(server.port, "mlp", ["--concurrency", "8", "--duration", "10"])
"""

import http.client
import json
import os
import re
import signal
import subprocess
import threading

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WEFT = os.environ.get("WEFT_BINARY", os.path.join(ROOT, "build", "release", "src", "app", "weft"))


class WeftServer:
    """`weft serve` on free ports, stopped with SIGTERM on exit; `port` (HTTP) and `metrics_port` once started."""

    def __init__(self, repository, args=(), start_timeout=120):
        self.args = [WEFT, "serve", "--model-repository", repository, "--http-address", "127.0.0.1",
                     "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"] + list(args)
        self.start_timeout = start_timeout
        self.log = []

    def __enter__(self):
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started = threading.Event()
        pattern = re.compile(r"serving HTTP on [^:]+:(\d+), gRPC on port (\d+), metrics on port (\d+)")

        def drain():
            for line in self.process.stderr:
                self.log.append(line)
                m = pattern.search(line)
                if m:
                    self.port, self.grpc_port, self.metrics_port = map(int, m.groups())
                    started.set()

        threading.Thread(target=drain, daemon=True).start()
        if not started.wait(self.start_timeout):
            self.process.kill()
            raise RuntimeError("weft serve did not start:\n" + "".join(self.log[-30:]))
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def rss_mib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def request(self, method, path, body=None, timeout=600):
        """(status, body bytes) of an HTTP call on the inference port; `body` is sent as JSON."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def post(self, path, body=None):
        return self.request("POST", path, body or {})

    def metric(self, name, **labels):
        """The value of the first series of `name` whose labels include `labels`, or 0."""
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


def weft_bench(port, model, args):
    """`weft bench --json` against the server's HTTP port with `args` (load shape, duration); the parsed JSON."""
    out = subprocess.run([WEFT, "bench", "--url", f"http://127.0.0.1:{port}", "--model", model, "--json", "-q"] +
                         list(args), check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def bench_summary(result):
    """Requests, failures, latency (ms) and throughput of a `weft bench` result."""
    failed = sum(o["count"] for code, o in result["outcomes"].items() if code != "200")
    return {"requests": result["sent"], "failed": failed, "p50_ms": result["latency_ms"]["p50"],
            "p99_ms": result["latency_ms"]["p99"], "max_ms": result["latency_ms"]["max"],
            "requests_per_s": result["throughput"]["requests_per_s"]}
