"""Circuit breakers and fallback models on the real `weft serve`, over HTTP and gRPC: a primary that fails every
execution (the builtin `fault` model), its fallback answering every request instead, the response naming who
answered, and 503 / UNAVAILABLE with Retry-After once a model without a fallback has its breaker open."""

import json
import os
import shutil
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

import numpy as np

from weft_testing import RPC_TIMEOUT, WeftServer, grpc, infer_request, response_outputs


def model_config(name, builtin, parameters):
    params = {"builtin": builtin, **parameters}
    lines = "\n".join(f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items())
    return f"""name: "{name}"
backend: "weft_builtin"
max_batch_size: 8
input [{{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
{lines}
"""


BREAKER = {"weft.breaker.consecutive_failures": "3", "weft.breaker.open_ms": "60000",
           "weft.breaker.max_open_ms": "60000"}


def write_repository():
    root = tempfile.mkdtemp(prefix="weft_resilience_repo_")
    models = {
        # Fails every execution; its fallback answers instead.
        "det": model_config("det", "fault", {"failure_rate": "1", "weft.fallback_models": "det_small", **BREAKER}),
        "det_small": model_config("det_small", "identity", {}),
        # Fails every execution and has no fallback.
        "lonely": model_config("lonely", "fault", {"failure_rate": "1", **BREAKER}),
        # Runs out of memory on batches of more than 4; waits up to 200 ms to form batches of 8.
        "oomy": model_config("oomy", "fault", {"oom_above_batch": "4"}).replace(
            'backend: "weft_builtin"', 'backend: "weft_builtin"\ndynamic_batching { max_queue_delay_microseconds: 200000 }'),
    }
    for name, config in models.items():
        os.makedirs(os.path.join(root, name, "1"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return root


def http_infer(server, model, values):
    """(status, headers, body) of a JSON inference over HTTP."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": values}]}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v2/models/{model}/infer", data=body,
                                     method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=RPC_TIMEOUT) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


class ResilienceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = write_repository()
        cls.server = WeftServer(cls.root).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        shutil.rmtree(cls.root, ignore_errors=True)
        assert code == 0, "".join(cls.server.log[-30:])

    def test_a_fallback_answers_every_request_of_a_failing_primary(self):
        for i in range(20):
            values = [float(i), 1.0, 2.0, 3.0]
            status, _, body = http_infer(self.server, "det", values)
            self.assertEqual(status, 200, body)
            self.assertEqual(body["model_name"], "det_small")
            self.assertEqual(body["outputs"][0]["data"], values)
            self.assertEqual(body["parameters"]["weft_fallback_from"], "det/1")
            self.assertIn(body["parameters"]["weft_fallback_reason"], ("server_error", "circuit_open"))
            response = self.server.stub.ModelInfer(
                infer_request("det", {"INPUT0": np.array([values], dtype=np.float32)}), timeout=RPC_TIMEOUT)
            self.assertEqual(response.model_name, "det_small")
            np.testing.assert_array_equal(response_outputs(response)["OUTPUT0"], [values])
            self.assertEqual(response.parameters["weft_fallback_from"].string_param, "det/1")
        # The primary ran only until its breaker opened; the fallback answered the rest without it.
        self.assertEqual(self.server.metric("weft_breaker_state", model="det", version="1"), 1)
        self.assertEqual(self.server.metric("weft_inference_exec_count_total", model="det", version="1"), 3)
        self.assertEqual(self.server.metric("weft_fallback_answers_total", model="det", fallback="det_small",
                                            reason="circuit_open"), 37)

    def test_without_a_fallback_an_open_breaker_answers_503_with_retry_after(self):
        statuses = [http_infer(self.server, "lonely", [1.0, 2.0, 3.0, 4.0])[0] for _ in range(3)]
        self.assertEqual(statuses, [500, 500, 500])  # the model's own failures, until the breaker opens
        status, headers, body = http_infer(self.server, "lonely", [1.0, 2.0, 3.0, 4.0])
        self.assertEqual(status, 503, body)
        self.assertIn("circuit breaker is open", body["error"])
        self.assertGreaterEqual(int(headers["Retry-After"]), 1)
        self.assertLessEqual(int(headers["Retry-After"]), 60)
        with self.assertRaises(grpc.RpcError) as raised:
            self.server.stub.ModelInfer(
                infer_request("lonely", {"INPUT0": np.ones((1, 4), dtype=np.float32)}), timeout=RPC_TIMEOUT)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAVAILABLE)
        trailers = dict(raised.exception.trailing_metadata())
        self.assertGreaterEqual(int(trailers["retry-after"]), 1)
        self.assertGreater(int(trailers["grpc-retry-pushback-ms"]), 0)
        self.assertEqual(self.server.metric("weft_breaker_rejected_total", model="lonely", version="1"), 2)

    def test_a_batch_that_runs_out_of_memory_is_split_and_every_request_answered(self):
        results = [None] * 8

        def send(i):
            results[i] = http_infer(self.server, "oomy", [float(i), 0.0, 0.0, 0.0])

        threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, (status, _, body) in enumerate(results):
            self.assertEqual(status, 200, body)
            self.assertEqual(body["outputs"][0]["data"][0], float(i))
        # The batch of 8 (whatever formed above 4) ran out of memory and was retried as two halves of at most 4.
        self.assertGreaterEqual(self.server.metric("weft_oom_retries_total", model="oomy", version="1"), 1)
        self.assertEqual(self.server.metric("weft_breaker_state", model="oomy", version="1"), 0)


if __name__ == "__main__":
    unittest.main()
