"""What Triton's own clients rely on, checked against the real `weft serve` with stubs generated from the protocol's
grpc_service.proto and with plain HTTP (docs/triton_compatibility.md): the statistics extension on both protocols,
with the consistent counts perf_analyzer requires, the classification extension, compressed bodies both ways,
triton_final_response on streams, the logging extension, and Triton's nv_* metric families."""

import gzip
import json
import os
import re
import struct
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.request
import zlib

import numpy as np

from weft_testing import (BINARY, EXAMPLES, RPC_TIMEOUT, WeftServer, ensure_example_models, grpc, infer_request,
                          load_reference, pb)

STAGES = ("queue", "compute_input", "compute_infer", "compute_output")


def setUpModule():
    global server
    ensure_example_models()
    server = WeftServer().start()


def tearDownModule():
    code = server.stop()
    assert code == 0, "weft serve exited with %d:\n%s" % (code, "".join(server.log))


def infer_many(model, count, threads=4):
    """`count` requests of the model's reference inputs from `threads` clients at once, so that some are batched."""
    ref = load_reference(model)

    def client(n):
        for _ in range(n):
            server.stub.ModelInfer(infer_request(model, ref["inputs"]), timeout=RPC_TIMEOUT)

    workers = [threading.Thread(target=client, args=(count // threads,)) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return (count // threads) * threads


class StatisticsTest(unittest.TestCase):
    def grpc_stats(self, name="", version=""):
        reply = server.stub.ModelStatistics(pb.ModelStatisticsRequest(name=name, version=version),
                                            timeout=RPC_TIMEOUT)
        return {(m.name, m.version): m for m in reply.model_stats}

    def test_every_stage_counts_each_successful_request_once(self):
        before = self.grpc_stats("add_sub")[("add_sub", "1")].inference_stats.success.count
        sent = infer_many("add_sub", 40)
        s = self.grpc_stats("add_sub")[("add_sub", "1")]
        stats = s.inference_stats
        self.assertEqual(stats.success.count, before + sent)
        # perf_analyzer aborts unless the compute counts agree ("Server side statistics compute counts must be the
        # same"); Triton counts the queue per successful request as well.
        for stage in STAGES:
            self.assertEqual(getattr(stats, stage).count, stats.success.count, stage)
        self.assertGreater(stats.compute_infer.ns, 0)
        self.assertGreater(stats.compute_output.ns, 0)
        # Each request's time from arrival to answer holds its queue and compute times.
        self.assertGreaterEqual(stats.success.ns, sum(getattr(stats, stage).ns for stage in STAGES))
        self.assertGreaterEqual(s.inference_count, s.execution_count)
        # Per batch size: executions, which add up to the execution count, and items to the inference count.
        self.assertEqual(sum(b.compute_infer.count for b in s.batch_stats), s.execution_count)
        self.assertEqual(sum(b.batch_size * b.compute_infer.count for b in s.batch_stats), s.inference_count)
        self.assertEqual([b.batch_size for b in s.batch_stats], sorted(b.batch_size for b in s.batch_stats))
        for b in s.batch_stats:
            self.assertEqual(b.compute_input.count, b.compute_infer.count)
            self.assertEqual(b.compute_output.count, b.compute_infer.count)
            self.assertGreater(b.compute_infer.ns, 0)
        self.assertLess(abs(s.last_inference / 1000 - time.time()), 60)

    def test_http_stats_match_grpc_and_name_the_same_versions(self):
        infer_many("add_sub", 8)
        grpc_side = self.grpc_stats("add_sub")[("add_sub", "1")]
        for path in ("/v2/models/add_sub/stats", "/v2/models/add_sub/versions/1/stats"):
            status, body = server.http("GET", path)
            self.assertEqual(status, 200, body)
            self.assertEqual(len(body["model_stats"]), 1)
            m = body["model_stats"][0]
            self.assertEqual((m["name"], m["version"]), ("add_sub", "1"))
            self.assertEqual(m["inference_count"], grpc_side.inference_count)
            self.assertEqual(m["execution_count"], grpc_side.execution_count)
            for stage in ("success", "fail") + STAGES:
                self.assertEqual(m["inference_stats"][stage]["count"],
                                 getattr(grpc_side.inference_stats, stage).count, stage)
                self.assertIsInstance(m["inference_stats"][stage]["ns"], int)
            for member in ("cache_hit", "cache_miss"):
                self.assertEqual(m["inference_stats"][member], {"count": 0, "ns": 0})
        status, body = server.http("GET", "/v2/models/stats")
        self.assertEqual(status, 200, body)
        self.assertEqual({(m["name"], m["version"]) for m in body["model_stats"]}, set(self.grpc_stats()))

    def test_unknown_models_and_versions_are_not_found(self):
        for path in ("/v2/models/nope/stats", "/v2/models/add_sub/versions/9/stats"):
            status, body = server.http("GET", path)
            self.assertEqual(status, 404, path)
            self.assertIn("error", body)
        status, _ = server.http("POST", "/v2/models/add_sub/stats", {})
        self.assertEqual(status, 405)
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.ModelStatistics(pb.ModelStatisticsRequest(name="add_sub", version="9"), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_both_protocols_list_the_statistics_extension(self):
        status, body = server.http("GET", "/v2")
        self.assertEqual(status, 200)
        self.assertIn("statistics", body["extensions"])
        self.assertIn("statistics",
                      server.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=RPC_TIMEOUT).extensions)


def split_bytes(raw):
    """The elements of a BYTES tensor in the binary form: a 4-byte little-endian length before each."""
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4:at + 4 + n].decode())
        at += 4 + n
    return out


class ClassificationTest(unittest.TestCase):
    """Triton's classification extension, as its image_client example uses it: the top k of OUTPUT0 of mlp, whose
    config names examples/models/mlp/labels.txt."""

    def setUp(self):
        self.ref = load_reference("mlp")
        with open(os.path.join(EXAMPLES, "models", "mlp", "labels.txt")) as f:
            self.labels = f.read().splitlines()

    def check_top(self, strings, shape, k):
        scores = self.ref["outputs"]["OUTPUT0"]
        self.assertEqual(shape, [scores.shape[0], k])
        for row, entry in enumerate(np.array(strings).reshape(shape)):
            expected = np.argsort(-scores[row], kind="stable")[:k]
            for place, text in enumerate(entry):
                value, index, label = text.split(":", 2)
                self.assertEqual(int(index), expected[place], text)
                self.assertEqual(label, self.labels[int(index)])
                self.assertAlmostEqual(float(value), scores[row][int(index)], places=4)

    def test_http_answers_the_top_classes_with_labels(self):
        x = self.ref["inputs"]["INPUT0"]
        body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}],
                "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 3}}]}
        status, reply = server.http("POST", "/v2/models/mlp/infer", body)
        self.assertEqual(status, 200, reply)
        out = reply["outputs"][0]
        self.assertEqual((out["name"], out["datatype"]), ("OUTPUT0", "BYTES"))
        self.check_top(out["data"], out["shape"], 3)

    def test_grpc_answers_the_top_classes_with_labels(self):
        request = infer_request("mlp", self.ref["inputs"])
        request.outputs.add(name="OUTPUT0").parameters["classification"].int64_param = 2
        response = server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)
        out = response.outputs[0]
        self.assertEqual(out.datatype, "BYTES")
        self.check_top(split_bytes(response.raw_output_contents[0]), list(out.shape), 2)

    def test_an_output_that_cannot_be_classified_is_the_clients_error(self):
        body = {"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": ["a"]}],
                "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 1}}]}
        status, reply = server.http("POST", "/v2/models/identity_bytes/infer", body)
        self.assertEqual(status, 400)
        self.assertIn("classification", reply["error"])
        self.assertIn("classification", server.http("GET", "/v2")[1]["extensions"])
        self.assertIn("classification",
                      server.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=RPC_TIMEOUT).extensions)


def raw_http(path, body, headers):
    """(status, headers, body bytes) of a POST with `body` as given, the answer not decoded."""
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", data=body, method="POST",
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=RPC_TIMEOUT) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class CompressionTest(unittest.TestCase):
    """Bodies compressed as tritonclient.http compresses them (gzip.compress, zlib.compress), and answers compressed
    for a client that accepts it."""

    def request_body(self):
        ref = load_reference("add_sub")
        return json.dumps({"inputs": [{"name": n, "datatype": "FP32", "shape": list(v.shape),
                                       "data": v.ravel().tolist()} for n, v in ref["inputs"].items()]}).encode()

    def test_gzip_and_deflate_both_ways(self):
        expected = load_reference("add_sub")["outputs"]["OUTPUT0"].ravel()
        for coding, compress, decompress in (("gzip", gzip.compress, gzip.decompress),
                                             ("deflate", zlib.compress, zlib.decompress)):
            status, headers, body = raw_http("/v2/models/add_sub/infer", compress(self.request_body()),
                                             {"Content-Type": "application/json", "Content-Encoding": coding,
                                              "Accept-Encoding": coding})
            self.assertEqual(status, 200, body)
            self.assertEqual(headers["Content-Encoding"], coding)
            reply = json.loads(decompress(body))
            outputs = {o["name"]: o for o in reply["outputs"]}
            np.testing.assert_allclose(outputs["OUTPUT0"]["data"], expected, rtol=1e-6)
        # No Accept-Encoding: the answer is plain.
        status, headers, body = raw_http("/v2/models/add_sub/infer", gzip.compress(self.request_body()),
                                         {"Content-Encoding": "gzip"})
        self.assertEqual(status, 200, body)
        self.assertIsNone(headers["Content-Encoding"])
        self.assertIn("outputs", json.loads(body))

    def test_broken_unknown_and_oversized_bodies_are_refused(self):
        small = WeftServer(extra_args=["--max-request-body-bytes", "65536"]).start()
        try:
            bomb = gzip.compress(b" " * (1 << 20))  # 1 MiB of JSON whitespace in about 1 KiB
            self.assertLess(len(bomb), 65536)
            request = urllib.request.Request(f"http://127.0.0.1:{small.http_port}/v2/models/add_sub/infer",
                                             data=bomb, method="POST", headers={"Content-Encoding": "gzip"})
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(request, timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code, 413)
            self.assertIn("65536", json.loads(e.exception.read())["error"])
        finally:
            self.assertEqual(small.stop(), 0)
        status, _, body = raw_http("/v2/models/add_sub/infer", gzip.compress(self.request_body())[:-8],
                                   {"Content-Encoding": "gzip"})
        self.assertEqual(status, 400, body)
        self.assertIn("gzip", json.loads(body)["error"])
        status, _, body = raw_http("/v2/models/add_sub/infer", self.request_body(), {"Content-Encoding": "br"})
        self.assertEqual(status, 415, body)


class StreamFinalResponseTest(unittest.TestCase):
    def test_every_answer_is_marked_final_when_the_client_asks(self):
        ref = load_reference("add_sub")
        flagged = infer_request("add_sub", ref["inputs"], request_id="flagged")
        flagged.parameters["triton_enable_empty_final_response"].bool_param = True
        plain = infer_request("add_sub", ref["inputs"], request_id="plain")
        broken = infer_request("add_sub", {n: v[:, :8] for n, v in ref["inputs"].items()}, request_id="broken")
        broken.parameters["triton_enable_empty_final_response"].bool_param = True
        responses = list(server.stub.ModelStreamInfer(iter([flagged, plain, broken]), timeout=RPC_TIMEOUT))
        by_id = {r.infer_response.id: r for r in responses}
        self.assertEqual(set(by_id), {"flagged", "plain", "broken"})
        self.assertEqual(by_id["flagged"].error_message, "")
        self.assertTrue(by_id["flagged"].infer_response.parameters["triton_final_response"].bool_param)
        self.assertNotIn("triton_final_response", by_id["plain"].infer_response.parameters)
        self.assertNotEqual(by_id["broken"].error_message, "")
        self.assertTrue(by_id["broken"].infer_response.parameters["triton_final_response"].bool_param)


class LoggingTest(unittest.TestCase):
    """The logging extension, on a server of its own: the settings are the process's."""

    def setUp(self):
        self.server = WeftServer().start()

    def tearDown(self):
        self.assertEqual(self.server.stop(), 0)

    def grpc_settings(self, **settings):
        request = pb.LogSettingsRequest()
        for name, value in settings.items():
            if isinstance(value, bool):
                request.settings[name].bool_param = value
            elif isinstance(value, int):
                request.settings[name].uint32_param = value
            else:
                request.settings[name].string_param = value
        reply = self.server.stub.LogSettings(request, timeout=RPC_TIMEOUT)
        return {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in reply.settings.items()}

    def test_both_protocols_read_and_change_the_same_settings(self):
        status, body = self.server.http("GET", "/v2/logging")
        self.assertEqual(status, 200)
        self.assertEqual(body, {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
                                "log_verbose_level": 0, "log_format": "default"})
        self.assertEqual(self.grpc_settings(), body)
        status, body = self.server.http("POST", "/v2/logging", {"log_verbose_level": 2, "log_info": False})
        self.assertEqual(status, 200, body)
        self.assertEqual((body["log_verbose_level"], body["log_info"]), (2, False))
        self.assertEqual(self.grpc_settings(log_format="ISO8601")["log_format"], "ISO8601")
        self.assertEqual(self.server.http("GET", "/v2/logging")[1]["log_format"], "ISO8601")

    def test_changes_apply_at_once_and_bad_ones_change_nothing(self):
        status, _ = self.server.http("POST", "/v2/logging", {"log_format": "ISO8601"})
        self.assertEqual(status, 200)
        # The server logs each change: the line is written in the format just set (no fraction of a second).
        iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ W .*log settings changed")
        deadline = time.monotonic() + 10
        while not any(iso.search(line) for line in self.server.log):
            self.assertLess(time.monotonic(), deadline, "".join(self.server.log))
            time.sleep(0.05)
        # With warnings off, the next change is not logged.
        self.assertEqual(self.server.http("POST", "/v2/logging", {"log_warning": False})[0], 200)
        lines = len(self.server.log)
        self.assertEqual(self.server.http("POST", "/v2/logging", {"log_verbose_level": 1})[0], 200)
        time.sleep(0.2)
        self.assertFalse(any("log settings changed" in line for line in self.server.log[lines:]))

        before = self.server.http("GET", "/v2/logging")[1]
        for bad in ({"log_file": "/tmp/weft.log"}, {"log_info": "yes"}, {"log_verbose_level": 1, "colour": True}):
            status, body = self.server.http("POST", "/v2/logging", bad)
            self.assertEqual(status, 400, bad)
            self.assertIn("error", body)
        with self.assertRaises(grpc.RpcError) as e:
            self.grpc_settings(log_format="json")
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(self.server.http("GET", "/v2/logging")[1], before)
        self.assertEqual(self.server.http("DELETE", "/v2/logging")[0], 405)


class CudaSharedMemoryTest(unittest.TestCase):
    """Off unless --allow-shared-memory, like system shared memory (test_shared_memory.py has it on)."""

    def test_both_protocols_say_it_is_not_enabled(self):
        for method, path, body in (("GET", "/v2/cudasharedmemory/status", None),
                                   ("POST", "/v2/cudasharedmemory/region/r/register",
                                    {"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 16})):
            status, reply = server.http(method, path, body)
            self.assertEqual(status, 501, path)
            self.assertIn("--allow-shared-memory", reply["error"])
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest(), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)


class TritonMetricsTest(unittest.TestCase):
    def test_nv_families_follow_the_statistics(self):
        infer_many("mlp", 12)
        labels = {"model": "mlp", "version": "1"}
        s = server.stub.ModelStatistics(pb.ModelStatisticsRequest(name="mlp"), timeout=RPC_TIMEOUT)
        stats = s.model_stats[0]
        self.assertEqual(server.metric("nv_inference_request_success", **labels), stats.inference_stats.success.count)
        self.assertEqual(server.metric("nv_inference_count", **labels), stats.inference_count)
        self.assertEqual(server.metric("nv_inference_exec_count", **labels), stats.execution_count)
        for stage in STAGES:
            us = server.metric(f"nv_inference_{stage}_duration_us", **labels)
            self.assertAlmostEqual(us * 1000, getattr(stats.inference_stats, stage).ns, delta=1000, msg=stage)
        self.assertGreater(server.metric("nv_inference_request_duration_us", **labels), 0)
        self.assertIn('nv_inference_pending_request_count{model="mlp",version="1"} 0', server.metrics())

    def test_failures_are_counted_under_tritons_reasons(self):
        before = server.metric("nv_inference_request_failure", model="add_sub", version="1", reason="OTHER")
        ref = load_reference("add_sub")
        inputs = {name: value[:, :8] for name, value in ref["inputs"].items()}  # 8 values where the model takes 16
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.ModelInfer(infer_request("add_sub", inputs), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        after = server.metric("nv_inference_request_failure", model="add_sub", version="1", reason="OTHER")
        self.assertEqual(after, before + 1)
        stats = server.stub.ModelStatistics(pb.ModelStatisticsRequest(name="add_sub"),
                                            timeout=RPC_TIMEOUT).model_stats[0].inference_stats
        self.assertGreaterEqual(stats.fail.count, 1)
        self.assertGreater(stats.fail.ns, 0)
        text = server.metrics()
        for reason in ("REJECTED", "CANCELED", "BACKEND"):
            self.assertIn(f'nv_inference_request_failure{{model="add_sub",version="1",reason="{reason}"}}', text)

    def test_latency_summaries_when_asked_for(self):
        summarised = WeftServer(extra_args=["--metrics-config", "summary_latencies=true",
                                            "--metrics-config", "summary_quantiles=0.5:0.05,0.99:0.001"]).start()
        try:
            ref = load_reference("add_sub")
            for _ in range(20):
                summarised.stub.ModelInfer(infer_request("add_sub", ref["inputs"]), timeout=RPC_TIMEOUT)
            labels = {"model": "add_sub", "version": "1"}
            text = summarised.metrics()
            self.assertIn("# TYPE nv_inference_request_summary_us summary", text)
            for stage in ("request",) + STAGES:
                name = f"nv_inference_{stage}_summary_us"
                self.assertEqual(summarised.metric(name + "_count", **labels), 20, stage)
                median = summarised.metric(name, quantile="0.5", **labels)
                p99 = summarised.metric(name, quantile="0.99", **labels)
                self.assertLessEqual(median, p99, stage)
            self.assertGreater(summarised.metric("nv_inference_request_summary_us", quantile="0.5", **labels), 0)
        finally:
            self.assertEqual(summarised.stop(), 0)
        self.assertNotIn("_summary_us", server.metrics())  # off by default, as in Triton
        bad = subprocess.run([BINARY, "serve", "--model-repository", os.path.join(EXAMPLES, "models"),
                              "--metrics-config", "summary_latencies=maybe"], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("summary_latencies", bad.stderr)

    def test_a_flag_turns_them_off(self):
        quiet = WeftServer(extra_args=["--triton-metrics=false"]).start()
        try:
            text = quiet.metrics()
            self.assertNotIn("nv_inference", text)
            self.assertIn("weft_inference_request_success_total", text)
        finally:
            self.assertEqual(quiet.stop(), 0)


if __name__ == "__main__":
    unittest.main()
