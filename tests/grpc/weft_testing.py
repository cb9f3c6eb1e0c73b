"""Helpers for the gRPC and shared memory tests: a real `weft serve` process on free ports, and stubs generated
from weft's own .proto files at test time, so that these tests see the server exactly as an outside client does.

Environment: WEFT_BINARY (the weft executable), WEFT_SOURCE_DIR (the repository root).
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

SOURCE_DIR = os.environ.get("WEFT_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BINARY = os.environ.get("WEFT_BINARY", os.path.join(SOURCE_DIR, "build", "src", "app", "weft"))
EXAMPLES = os.path.join(SOURCE_DIR, "examples")
REFERENCE_MODELS = ("add_sub", "mlp", "pair", "detector")
RPC_TIMEOUT = 30  # seconds; every call has one, so that a broken server fails a test instead of hanging it
# The first line of a report of AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer or ThreadSanitizer.
SANITIZER_REPORT = re.compile(r"ERROR: (Address|Leak)Sanitizer|runtime error: |WARNING: ThreadSanitizer")


def _generate_stubs():
    from grpc_tools import protoc  # Debian's python3-grpc-tools

    out = tempfile.mkdtemp(prefix="weft_stubs_")
    proto_dir = os.path.join(SOURCE_DIR, "proto")
    args = ["protoc", "-I", proto_dir, "--python_out=" + out, "--grpc_python_out=" + out]
    args += [os.path.join(proto_dir, f) for f in ("model_config.proto", "grpc_service.proto", "health.proto")]
    if protoc.main(args) != 0:
        raise RuntimeError("grpc_tools.protoc failed on weft's proto files")
    sys.path.insert(0, out)


_generate_stubs()
import grpc  # noqa: E402
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402


def ensure_example_models():
    """The example model files and reference data are generated (and gitignored); make them when absent."""
    needed = [os.path.join(EXAMPLES, "reference", m, "meta.json") for m in REFERENCE_MODELS]
    needed += [os.path.join(EXAMPLES, "models", "mlp", "1", "model.pt")]
    if all(os.path.exists(p) for p in needed):
        return
    subprocess.run(["/usr/bin/python3", os.path.join(EXAMPLES, "make_models.py")], check=True, cwd=SOURCE_DIR,
                   stdout=subprocess.DEVNULL, timeout=600)


def load_reference(model):
    """{"inputs": {name: ndarray}, "outputs": {name: ndarray}} from examples/reference/<model>."""
    root = os.path.join(EXAMPLES, "reference", model)
    with open(os.path.join(root, "meta.json")) as f:
        meta = json.load(f)
    out = {}
    for kind in ("inputs", "outputs"):
        out[kind] = {}
        for name, m in meta[kind].items():
            assert m["datatype"] == "FP32", m
            with open(os.path.join(root, f"{kind[:-1]}.{name}.bin"), "rb") as f:
                out[kind][name] = np.frombuffer(f.read(), dtype=np.float32).reshape(m["shape"])
    return out


class WeftServer:
    """`weft serve` on ports chosen by the kernel (the startup line names them); stopped with SIGTERM."""

    def __init__(self, repository=None, extra_args=(), preexec_fn=None, channel_credentials=None,
                 channel_metadata=()):
        """`preexec_fn` runs in the child before it executes weft (e.g. to lower RLIMIT_NOFILE).
        `channel_credentials` (grpc.ssl_channel_credentials) makes `channel` a TLS channel to 127.0.0.1 checked for
        the name "localhost"; `channel_metadata` is sent with the readiness check of the channel (a credential)."""
        self.repository = repository or os.path.join(EXAMPLES, "models")
        self.extra_args = list(extra_args)
        self.preexec_fn = preexec_fn
        self.channel_credentials = channel_credentials
        self.channel_metadata = list(channel_metadata)
        self.log = []
        self.process = None

    def start(self):
        args = [BINARY, "serve", "--model-repository", self.repository, "--http-address", "127.0.0.1",
                "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"] + self.extra_args
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        preexec_fn=self.preexec_fn)
        started = threading.Event()
        pattern = re.compile(r"serving HTTP on [^:]+:(\d+), gRPC on port (\d+), metrics on port (\d+)")

        def drain():
            for line in self.process.stderr:
                self.log.append(line)
                match = pattern.search(line)
                if match:
                    self.http_port, self.grpc_port, self.metrics_port = map(int, match.groups())
                    started.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        deadline = time.monotonic() + 60
        while not started.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError("weft serve did not start:\n" + "".join(self.log))
        options = [("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 256 << 20)]
        if self.channel_credentials is None:
            self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}", options=options)
        else:
            options.append(("grpc.ssl_target_name_override", "localhost"))
            self.channel = grpc.secure_channel(f"127.0.0.1:{self.grpc_port}", self.channel_credentials,
                                               options=options)
        grpc.channel_ready_future(self.channel).result(timeout=RPC_TIMEOUT)
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        return self

    def stop(self):
        """Stops the server and returns its exit code (0 after a clean drain)."""
        self.channel.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._drain.join(timeout=5)
        self._check_sanitizers()
        return code

    def _check_sanitizers(self):
        """A sanitizer's report in the server's log fails the test, also one written while the server shut down (a
        leak, a use after free in teardown), which no answer to a client would show."""
        report = [i for i, line in enumerate(self.log) if SANITIZER_REPORT.search(line)]
        if report:
            raise AssertionError("weft serve reported a sanitizer error:\n" + "".join(self.log[report[0]:][:80]))

    def send_signal(self, sig=signal.SIGTERM):
        self.process.send_signal(sig)

    def wait(self, timeout):
        """The exit code once the process has exited (killed after `timeout` seconds: the test fails then)."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("weft serve did not exit within %s s:\n%s" % (timeout, "".join(self.log[-50:])))
        self._drain.join(timeout=5)
        self.channel.close()
        self._check_sanitizers()
        return code

    def http(self, method, path, body=None):
        """(status, parsed JSON body) of an HTTP call on the inference port."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=RPC_TIMEOUT) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=RPC_TIMEOUT) as r:
            return r.read().decode()

    def metric(self, name, **labels):
        """The value of one series in /metrics, or 0 when it is absent."""
        for line in self.metrics().splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
            if not labels and line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


def infer_request(model, inputs, raw=True, outputs=(), request_id=""):
    """A ModelInferRequest for {name: FP32 ndarray}, as raw_input_contents or typed fp32_contents."""
    request = pb.ModelInferRequest(model_name=model, id=request_id)
    for name, array in inputs.items():
        tensor = request.inputs.add(name=name, datatype="FP32", shape=list(array.shape))
        if raw:
            request.raw_input_contents.append(np.ascontiguousarray(array, dtype=np.float32).tobytes())
        else:
            tensor.contents.fp32_contents.extend(array.astype(np.float32).ravel().tolist())
    for name in outputs:
        request.outputs.add(name=name)
    return request


def response_outputs(response):
    """{name: ndarray} of a ModelInferResponse (raw_output_contents, FP32)."""
    out = {}
    for i, tensor in enumerate(response.outputs):
        assert tensor.datatype == "FP32", tensor
        out[tensor.name] = np.frombuffer(response.raw_output_contents[i], dtype=np.float32).reshape(list(tensor.shape))
    return out


def write_slow_repository(delay_us):
    """A repository with one model, "slow": the builtin sleep model with `delay_us` per batch, whose requests may
    set their own deadline with the `timeout` parameter."""
    root = tempfile.mkdtemp(prefix="weft_slow_repo_")
    with open(os.path.join(EXAMPLES, "models", "sleep", "config.pbtxt")) as f:
        config = f.read()
    config = config.replace('name: "sleep"', 'name: "slow"')
    config = re.sub(r'(key: "batch_delay_us"\s*value: \{ string_value: ")\d+(" \})', rf"\g<1>{delay_us}\g<2>", config)
    assert f'"{delay_us}"' in config, config
    # Lets the `timeout` parameter set a request's deadline (Triton's rule: it may only lower the model's default).
    config = config.replace(
        "max_queue_delay_microseconds: 1000",
        "max_queue_delay_microseconds: 1000\n  default_queue_policy { allow_timeout_override: true }")
    assert "allow_timeout_override" in config, config
    os.makedirs(os.path.join(root, "slow", "1"))
    with open(os.path.join(root, "slow", "config.pbtxt"), "w") as f:
        f.write(config)
    return root
