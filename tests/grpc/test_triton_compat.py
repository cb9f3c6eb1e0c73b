"""What Triton's own clients rely on, checked against the real `weft serve` with stubs generated from the protocol's
grpc_service.proto and with plain HTTP (docs/triton_compatibility.md): the statistics extension on both protocols,
with the consistent counts perf_analyzer requires, and Triton's nv_* metric families."""

import threading
import unittest

from weft_testing import (RPC_TIMEOUT, WeftServer, ensure_example_models, grpc, infer_request, load_reference, pb)

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
        text = server.metrics()
        for reason in ("REJECTED", "CANCELED", "BACKEND"):
            self.assertIn(f'nv_inference_request_failure{{model="add_sub",version="1",reason="{reason}"}}', text)

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
