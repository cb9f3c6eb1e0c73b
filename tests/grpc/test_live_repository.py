"""The live model repository on the real `weft serve`: swaps under load over HTTP and gRPC, broken and half-written
versions, the repository API of Triton's model repository extension (stubs generated from weft's copy of Triton's
grpc_service.proto), readiness while models load. Versions are told apart by their answers: each TorchScript model
adds its own constant to its input."""

import hashlib
import http.client
import json
import os
import re
import shutil
import tempfile
import threading
import time
import unittest

import numpy as np
import torch  # /usr/bin/python3's python3-torch: writes the test's TorchScript models

from weft_testing import EXAMPLES, RPC_TIMEOUT, WeftServer, grpc, infer_request, pb, response_outputs

# Generous bounds on how long things may take: the build machine is small and busy (and sanitized builds are slow);
# no test measures speed.
SLACK = 60


class Adder(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.register_buffer("k", torch.tensor(float(k)))

    def forward(self, x):
        return x + self.k


def save_adder(path, k):
    """A TorchScript model whose OUTPUT0 is INPUT0 + k: its answers name the file they came from."""
    torch.jit.script(Adder(k)).save(path)


def adder_config(queue_delay_us=0, extra=""):
    return f"""name: "adder"
platform: "pytorch_libtorch"
max_batch_size: 8
input [{{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
dynamic_batching {{ max_queue_delay_microseconds: {queue_delay_us} }}
{extra}"""


def write_file(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


class Repository:
    """A temporary repository with the model "adder"; version v answers input + ks[v]."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="weft_live_repo_")
        self.models = tempfile.mkdtemp(prefix="weft_live_models_")  # prepared model files, copied in
        self.ks = {}
        write_file(self.path("config.pbtxt"), adder_config())

    def path(self, *parts):
        return os.path.join(self.root, "adder", *map(str, parts))

    def prepared(self, k):
        path = os.path.join(self.models, f"adder_{k}.pt")
        if not os.path.exists(path):
            save_adder(path, k)
        return path

    def write_version(self, version, k):
        """Copies the model file in place, as `cp` does: not atomic; the settle time covers it."""
        os.makedirs(self.path(version), exist_ok=True)
        shutil.copyfile(self.prepared(k), self.path(version, "model.pt"))
        self.ks[version] = k

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.models, ignore_errors=True)


def http_infer(conn, model="adder"):
    """The first output element minus 1 (the adder's k) of one HTTP/JSON inference on a keep-alive connection."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]})
    conn.request("POST", f"/v2/models/{model}/infer", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = response.read()
    if response.status != 200:
        raise AssertionError(f"HTTP {response.status}: {payload[:300]!r}")
    return json.loads(payload)["outputs"][0]["data"][0] - 1


def grpc_infer(server, model="adder"):
    response = server.stub.ModelInfer(infer_request(model, {"INPUT0": np.ones((1, 4), np.float32)}),
                                      timeout=RPC_TIMEOUT)
    return float(response_outputs(response)["OUTPUT0"][0][0]) - 1


def probe(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=RPC_TIMEOUT)
    try:
        return http_infer(conn)
    except AssertionError:
        return None
    finally:
        conn.close()


def wait_for(condition, what, timeout=SLACK):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def index_entry(server, version, model="adder"):
    """The HTTP index's entry for (model, version), or {} (version None: the model-level entry)."""
    status, entries = server.http("POST", "/v2/repository/index", {})
    assert status == 200, (status, entries)
    for e in entries:
        if e["name"] == model and e.get("version") == (None if version is None else str(version)):
            return e
    return {}


class ClosedLoopClients:
    """`count` clients sending one request after another over `protocol` until stopped; every answer must be a
    success whose k is in `allowed`, the set of ks of every version written so far."""

    def __init__(self, server, protocol, count, allowed):
        self.server, self.protocol, self.allowed = server, protocol, allowed
        self.lock = threading.Lock()
        self.answered, self.failures, self.seen = 0, [], set()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(count)]

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=RPC_TIMEOUT)
        while not self.stopping.is_set():
            try:
                k = http_infer(conn) if self.protocol == "http" else grpc_infer(self.server)
                error = None if k in self.allowed else f"k {k} from no version written"
            except Exception as e:  # a reset connection, an RPC error: all failures here
                k, error = None, f"{type(e).__name__}: {e}"
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=RPC_TIMEOUT)
            with self.lock:
                self.answered += 1
                if error:
                    self.failures.append(error)
                else:
                    self.seen.add(k)
        conn.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=SLACK)


class ReloadUnderLoadTest(unittest.TestCase):
    """Twenty changes to the repository in watch mode while 8 clients keep sending: new version directories, the
    model file replaced in place, config edits, the newest version deleted. Every request gets a 200 whose answer
    comes from a version that was written; none fails, none is reset."""

    def reload_under_load(self, protocol):
        repo = Repository()
        self.addCleanup(repo.cleanup)
        repo.write_version(1, 1)
        server = WeftServer(repo.root, ["--model-control-mode", "watch", "--repository-settle-secs", "0.3"]).start()
        self.addCleanup(server.stop)
        allowed = {1.0}
        next_k = 2
        newest = 1
        with ClosedLoopClients(server, protocol, 8, allowed) as clients:
            wait_for(lambda: clients.answered > 20, "the first answers")
            for change in range(20):
                kind = change % 4
                loads = server.metric("weft_model_loads_total", model="adder")
                answered = clients.answered
                if kind == 0:  # a new version directory
                    allowed.add(float(next_k))
                    newest += 1
                    repo.write_version(newest, next_k)
                    next_k += 1
                elif kind == 1:  # the model file of the serving version replaced in place
                    allowed.add(float(next_k))
                    repo.write_version(newest, next_k)
                    next_k += 1
                elif kind == 2:  # a config edit: the same answers from a reloaded copy
                    write_file(repo.path("config.pbtxt"), adder_config(queue_delay_us=100 + change))
                else:  # the serving version's directory deleted: the one before serves again
                    shutil.rmtree(repo.path(newest))
                    del repo.ks[newest]
                    newest -= 1
                expected = float(repo.ks[newest])
                wait_for(lambda: probe(server) == expected and
                         server.metric("weft_model_loads_total", model="adder") > loads and
                         clients.answered > answered + 16, f"change {change} ({kind}) to serve k {expected}")
        self.assertEqual(clients.failures, [], f"{len(clients.failures)} of {clients.answered} failed")
        self.assertGreater(clients.answered, 500)
        self.assertGreaterEqual(len(clients.seen), 8, clients.seen)
        self.assertEqual(server.metric("weft_model_swaps_total", model="adder"), 21)  # the first, then one per change
        log = "".join(server.log)
        self.assertIn("model 'adder': serving versions [2] (before: [1])", log)
        self.assertIn("unloaded", log)

    def test_over_http(self):
        self.reload_under_load("http")

    def test_over_grpc(self):
        self.reload_under_load("grpc")


class BrokenVersionsTest(unittest.TestCase):
    """A version that cannot load leaves the old one serving, and the index (HTTP and gRPC) says why."""

    def setUp(self):
        self.repo = Repository()
        self.addCleanup(self.repo.cleanup)
        self.repo.write_version(1, 7)
        self.server = WeftServer(self.repo.root,
                                 ["--model-control-mode", "watch", "--repository-settle-secs", "0.2"]).start()
        self.addCleanup(self.server.stop)

    def grpc_entry(self, version):
        index = self.server.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=RPC_TIMEOUT)
        for m in index.models:
            if m.name == "adder" and m.version == str(version):
                return m
        return None

    def test_random_bytes_a_checksum_mismatch_and_a_config_error(self):
        write_file(self.repo.path(2, "model.pt"), os.urandom(4096))
        wait_for(lambda: index_entry(self.server, 2).get("state") == "UNAVAILABLE", "version 2 to fail")
        self.assertIn("adder/2/model.pt", index_entry(self.server, 2)["reason"])
        self.assertEqual(index_entry(self.server, 1)["state"], "READY")
        self.assertEqual(self.grpc_entry(2).state, "UNAVAILABLE")
        self.assertIn("model.pt", self.grpc_entry(2).reason)
        self.assertEqual(probe(self.server), 7)
        self.assertEqual(self.server.http("GET", "/v2/health/ready")[0], 200)

        self.repo.write_version(3, 9)
        write_file(self.repo.path(3, "SHA256SUMS"), hashlib.sha256(b"other bytes").hexdigest() + "  model.pt\n")
        wait_for(lambda: index_entry(self.server, 3).get("state") == "UNAVAILABLE", "version 3 to fail")
        self.assertIn("SHA256SUMS: model.pt: checksum mismatch", index_entry(self.server, 3)["reason"])
        self.assertEqual(probe(self.server), 7)

        # The right manifest: version 3 loads and serves.
        with open(self.repo.path(3, "model.pt"), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        write_file(self.repo.path(3, "SHA256SUMS"), digest + "  model.pt\n")
        wait_for(lambda: probe(self.server) == 9, "version 3 to serve once its manifest matches")

        write_file(self.repo.path("config.pbtxt"), "name: \"adder\" max_batch_size: [")
        wait_for(lambda: "config.pbtxt" in index_entry(self.server, 3).get("reason", ""), "the config error")
        self.assertEqual(index_entry(self.server, 3)["state"], "READY")
        self.assertEqual(probe(self.server), 9)
        self.assertGreaterEqual(self.server.metric("weft_model_config_failures_total", model="adder"), 1)
        self.assertEqual(self.server.metric("weft_model_load_failures_total", model="adder", stage="checksums"), 1)


class HalfWrittenVersionTest(unittest.TestCase):
    def test_a_version_written_slowly_is_loaded_only_once_complete(self):
        repo = Repository()
        self.addCleanup(repo.cleanup)
        repo.write_version(1, 1)
        server = WeftServer(repo.root, ["--model-control-mode", "watch", "--repository-settle-secs", "1"]).start()
        self.addCleanup(server.stop)
        with open(repo.prepared(5), "rb") as f:
            model = f.read()
        os.makedirs(repo.path(2))
        # The model file arrives in 6 pieces, 0.3 s apart: never quiet for the settle time until it is whole.
        chunk = len(model) // 6 + 1
        with open(repo.path(2, "model.pt"), "wb") as f:
            for i in range(0, len(model), chunk):
                f.write(model[i:i + chunk])
                f.flush()
                time.sleep(0.3)
                self.assertEqual(probe(server), 1)
        # Written: from here on the settle time runs.
        wait_for(lambda: probe(server) == 5, "version 2 to serve once complete")
        self.assertEqual(server.metric("weft_model_load_failures_total", model="adder", stage="instances"), 0)
        self.assertEqual(server.metric("weft_model_loads_total", model="adder"), 2)


class ExplicitModeTest(unittest.TestCase):
    """Triton's explicit model control: load, reload with a config override, unload with requests queued, errors."""

    def setUp(self):
        self.repo = Repository()
        self.addCleanup(self.repo.cleanup)
        self.repo.write_version(1, 1)
        self.repo.write_version(2, 2)
        # "slow": the sleep builtin, 300 ms per batch of one, so that requests queue.
        with open(os.path.join(EXAMPLES, "models", "sleep", "config.pbtxt")) as f:
            config = f.read().replace('name: "sleep"', 'name: "slow"')
        config = re.sub(r"max_batch_size: \d+", "max_batch_size: 1", config)
        config = re.sub(r'(key: "batch_delay_us"\s*value: \{ string_value: ")\d+', r"\g<1>300000", config)
        write_file(os.path.join(self.repo.root, "slow", "config.pbtxt"), config)
        os.makedirs(os.path.join(self.repo.root, "slow", "1"))
        self.server = WeftServer(self.repo.root, ["--model-control-mode", "explicit", "--load-model", "slow"]).start()
        self.addCleanup(self.server.stop)

    def test_load_override_and_unload_over_http(self):
        s = self.server
        self.assertEqual(index_entry(s, None), {"name": "adder", "state": "UNAVAILABLE", "reason": "not loaded"})
        self.assertEqual(s.http("POST", "/v2/models/adder/infer", {"inputs": []})[0], 404)
        status, body = s.http("POST", "/v2/repository/models/adder/load", {})
        self.assertEqual((status, body), (200, {}))
        self.assertEqual(probe(s), 2)  # latest { num_versions: 1 }
        override = {"name": "adder", "platform": "pytorch_libtorch", "max_batch_size": 8,
                    "version_policy": {"all": {}},
                    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
                    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}
        status, body = s.http("POST", "/v2/repository/models/adder/load",
                              {"parameters": {"config": json.dumps(override)}})
        self.assertEqual(status, 200, body)
        self.assertEqual({e["version"] for e in s.http("POST", "/v2/repository/index", {"ready": True})[1]
                          if e["name"] == "adder"}, {"1", "2"})
        self.assertEqual(s.http("GET", "/v2/models/adder/versions/1/ready")[0], 200)
        status, body = s.http("POST", "/v2/repository/models/adder/load",
                              {"parameters": {"config": json.dumps({"name": "adder", "max_batch_size": "eight"})}})
        self.assertEqual(status, 400)
        self.assertIn("parameters.config", body["error"])
        self.assertEqual(s.http("GET", "/v2/models/adder/versions/1/ready")[0], 200)  # what served still serves

        self.assertEqual(s.http("POST", "/v2/repository/models/ghost/load", {})[0], 404)
        self.assertEqual(s.http("POST", "/v2/repository/models/ghost/unload", {})[0], 404)
        self.assertEqual(s.http("POST", "/v2/repository/models/adder/load",
                                {"parameters": {"file:1/model.pt": "AAAA"}})[0], 501)

        status, body = s.http("POST", "/v2/repository/models/adder/unload",
                              {"parameters": {"unload_dependents": False}})
        self.assertEqual((status, body), (200, {}))
        wait_for(lambda: s.http("GET", "/v2/models/adder/ready")[0] == 404, "adder to be unloaded")
        self.assertEqual(index_entry(s, None)["reason"], "not loaded")
        status, metadata = s.http("GET", "/v2")
        self.assertIn("model_repository", metadata["extensions"])
        self.assertIn("model_repository(unload_dependents)", metadata["extensions"])

    def test_unload_lets_queued_requests_finish_over_grpc(self):
        s = self.server
        request = infer_request("slow", {"INPUT0": np.ones((1, 1), np.float32)})
        futures = [s.stub.ModelInfer.future(request, timeout=SLACK) for _ in range(4)]
        # All four must have arrived before the unload, or a late one is refused as "unloading" (which is right): one
        # runs (300 ms), the others queue or have been answered.
        wait_for(lambda: s.metric("weft_queue_depth", model="slow") +
                 s.metric("weft_inference_request_success_total", model="slow") >= 3, "requests to queue")
        s.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="slow"), timeout=RPC_TIMEOUT)
        for f in futures:
            self.assertEqual(f.result().model_name, "slow")  # each queued request answered, not failed
        wait_for(lambda: index_entry(s, None, "slow").get("reason") == "not loaded", "slow to be unloaded")

    def test_load_with_a_config_override_over_grpc(self):
        s = self.server
        override = json.dumps({"name": "adder", "platform": "pytorch_libtorch", "max_batch_size": 8,
                               "version_policy": {"specific": {"versions": [1]}},
                               "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
                               "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]})
        s.stub.RepositoryModelLoad(
            pb.RepositoryModelLoadRequest(model_name="adder",
                                          parameters={"config": pb.ModelRepositoryParameter(string_param=override)}),
            timeout=SLACK)
        self.assertEqual(grpc_infer(s), 1)
        index = s.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=RPC_TIMEOUT)
        self.assertEqual({(m.name, m.version, m.state) for m in index.models},
                         {("adder", "1", "READY"), ("slow", "1", "READY")})
        for call, request, code in [
            (s.stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name="ghost"), grpc.StatusCode.NOT_FOUND),
            (s.stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(model_name="ghost"),
             grpc.StatusCode.NOT_FOUND),
            (s.stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(
                model_name="adder", parameters={"config": pb.ModelRepositoryParameter(bool_param=True)}),
             grpc.StatusCode.INVALID_ARGUMENT),
        ]:
            with self.assertRaises(grpc.RpcError) as e:
                call(request, timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code(), code, request)


class ModeNoneTest(unittest.TestCase):
    def test_load_and_unload_answer_an_error_and_readiness_is_strict(self):
        repo = Repository()
        self.addCleanup(repo.cleanup)
        repo.write_version(1, 1)
        write_file(os.path.join(repo.root, "broken", "config.pbtxt"), 'name: "broken" platform: "nope"')
        os.makedirs(os.path.join(repo.root, "broken", "1"))
        server = WeftServer(repo.root).start()
        self.addCleanup(server.stop)
        status, body = server.http("POST", "/v2/repository/models/adder/load", {})
        self.assertEqual(status, 503)
        self.assertIn("--model-control-mode explicit", body["error"])
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="adder"), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(server.http("GET", "/v2/health/ready")[0], 503)  # strict: "broken" cannot serve
        self.assertEqual(index_entry(server, None, "broken")["state"], "UNAVAILABLE")

        relaxed = WeftServer(repo.root, ["--strict-readiness", "false"]).start()
        self.addCleanup(relaxed.stop)
        self.assertEqual(relaxed.http("GET", "/v2/health/ready")[0], 200)


class ReadinessWhileLoadingTest(unittest.TestCase):
    def test_ready_stays_true_while_a_new_model_warms_up(self):
        repo = Repository()
        self.addCleanup(repo.cleanup)
        repo.write_version(1, 1)
        server = WeftServer(repo.root, ["--model-control-mode", "watch", "--repository-settle-secs", "0.1"]).start()
        self.addCleanup(server.stop)
        # A model whose warm-up takes about 2 s: 100 runs of a 20 ms batch.
        with open(os.path.join(EXAMPLES, "models", "sleep", "config.pbtxt")) as f:
            config = f.read().replace('name: "sleep"', 'name: "warm"')
        config = re.sub(r'(key: "batch_delay_us"\s*value: \{ string_value: ")\d+', r"\g<1>20000", config)
        config += """
model_warmup [{ name: "w" batch_size: 1 count: 100
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } }]
"""
        os.makedirs(os.path.join(repo.root, "warm", "1"))
        write_file(os.path.join(repo.root, "warm", "config.pbtxt"), config)
        wait_for(lambda: index_entry(server, 1, "warm").get("state") == "LOADING", "warm to load")
        # The model may turn ready between any two reads, so each poll reads the model's readiness first and
        # stops at the first 200; everything read before it must show a server that stays ready.
        polls = 0
        deadline = time.monotonic() + 60
        while True:
            model_ready = server.http("GET", "/v2/models/warm/ready")[0]
            if model_ready == 200:
                break
            self.assertEqual(model_ready, 503)
            self.assertEqual(server.http("GET", "/v2/health/ready")[0], 200)
            self.assertLess(time.monotonic(), deadline, "warm never became ready")
            polls += 1
            time.sleep(0.05)
        self.assertGreater(polls, 5)
        self.assertEqual(index_entry(server, 1, "warm").get("state"), "READY")
        self.assertGreater(server.metric("weft_model_warmup_duration_seconds_sum", model="warm"), 1.5)


if __name__ == "__main__":
    unittest.main()
