"""Request tracing end to end: `weft serve` with --trace-config sends OpenTelemetry spans over OTLP/HTTP to a real
collector endpoint in this process (otlp_receiver.py decodes them with the opentelemetry-proto definitions), and
writes Triton's trace file; the settings change at run time over HTTP and gRPC."""

import json
import os
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

import numpy as np

from otlp_receiver import OtlpReceiver
from weft_testing import RPC_TIMEOUT, WeftServer, infer_request, pb, write_slow_repository

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
HTTP_SPANS = {"POST /v2/models/{model}/infer", "read", "decode", "model add_sub", "queue", "compute", "compute_input",
              "compute_infer", "compute_output", "encode", "write"}


def add_sub_body():
    x = list(range(16))
    return {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": x},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": x}]}


def post(server, path, body, headers=None):
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=RPC_TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def otel_args(receiver, *more):
    return ["--trace-config", "mode=opentelemetry", "--trace-config", f"opentelemetry,url={receiver.url}",
            "--trace-config", "opentelemetry,bsp_schedule_delay=50", "--trace-config", "level=TIMESTAMPS",
            "--trace-config", "rate=1", *more]


def by_trace(spans):
    out = {}
    for span in spans:
        out.setdefault(span["trace_id"], []).append(span)
    return out


class OpenTelemetryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.receiver = OtlpReceiver()
        cls.server = WeftServer(extra_args=otel_args(cls.receiver)).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.receiver.close()

    def setUp(self):
        # Every test starts from the same settings: everything traced.
        status, _ = self.server.http("POST", "/v2/trace/setting",
                                     {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "-1"})
        self.assertEqual(status, 200)

    def spans_of(self, trace_id, count):
        self.assertTrue(self.receiver.wait_for(
            lambda spans: len([s for s in spans if s["trace_id"] == trace_id]) >= count, timeout=20),
            [s["name"] for s in self.receiver.spans() if s["trace_id"] == trace_id])
        return {s["name"]: s for s in self.receiver.spans() if s["trace_id"] == trace_id}

    def assert_nested(self, spans, root_name):
        root = spans[root_name]
        ids = {s["span_id"]: s for s in spans.values()}
        for span in spans.values():
            self.assertLessEqual(span["start_unix_ns"], span["end_unix_ns"], span["name"])
            if span is root:
                continue
            parent = ids[span["parent_span_id"]]  # every parent is in the trace
            self.assertGreaterEqual(span["start_unix_ns"], parent["start_unix_ns"], span["name"])
            self.assertLessEqual(span["end_unix_ns"], parent["end_unix_ns"], span["name"])

    def test_an_http_request_keeps_the_callers_trace_and_its_spans_nest_in_stage_order(self):
        status, _ = post(self.server, "/v2/models/add_sub/infer", add_sub_body(),
                         {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", "tracestate": "vendor=abc"})
        self.assertEqual(status, 200)
        spans = self.spans_of(CALLER_TRACE, len(HTTP_SPANS))
        self.assertEqual(set(spans), HTTP_SPANS)
        server = spans["POST /v2/models/{model}/infer"]
        self.assertEqual(server["parent_span_id"], CALLER_SPAN)
        self.assertEqual(server["kind"], 2)  # SERVER
        self.assertEqual(server["trace_state"], "vendor=abc")
        self.assertEqual(server["attributes"]["weft.model"], "add_sub")
        self.assertEqual(server["attributes"]["weft.model_version"], 1)
        self.assertEqual(server["attributes"]["weft.outcome"], "ok")
        self.assertEqual(server["status_code"], 0)
        self.assert_nested(spans, "POST /v2/models/{model}/infer")
        self.assertEqual(spans["model add_sub"]["parent_span_id"], server["span_id"])
        self.assertEqual(spans["compute_infer"]["parent_span_id"], spans["compute"]["span_id"])
        self.assertEqual(spans["queue"]["parent_span_id"], spans["model add_sub"]["span_id"])
        order = ["read", "decode", "model add_sub", "encode", "write"]
        for before, after in zip(order, order[1:]):
            self.assertLessEqual(spans[before]["end_unix_ns"], spans[after]["start_unix_ns"], (before, after))
        self.assertLessEqual(spans["queue"]["end_unix_ns"], spans["compute"]["start_unix_ns"])
        # The batch it joined: one span of its own, linked both ways.
        links = spans["compute"]["links"]
        self.assertEqual(len(links), 1)
        batch_trace, batch_span = links[0][0], links[0][1]
        batch = self.spans_of(batch_trace, 1)["batch add_sub"]
        self.assertEqual(batch["span_id"], batch_span)
        self.assertIn((CALLER_TRACE, server["span_id"]), [(t, s) for t, s, _ in batch["links"]])
        self.assertGreaterEqual(batch["attributes"]["weft.batch_size"], 1)
        self.assertIn("weft.instance", batch["attributes"])
        self.assertIn("weft.stream", batch["attributes"])
        self.assertIn("weft.device", batch["attributes"])
        self.assertEqual(server["resource"].get("service.name"), "weft")

    def test_a_grpc_request_keeps_the_callers_trace(self):
        trace = "0af7651916cd43dd8448eb211c80319c"
        request = infer_request("add_sub", {"INPUT0": np.ones((1, 16), np.float32),
                                            "INPUT1": np.ones((1, 16), np.float32)})
        self.server.stub.ModelInfer(request, timeout=RPC_TIMEOUT,
                                    metadata=[("traceparent", f"00-{trace}-b7ad6b7169203331-01")])
        spans = self.spans_of(trace, len(HTTP_SPANS) - 1)
        root = spans["inference.GRPCInferenceService/ModelInfer"]
        self.assertEqual(root["parent_span_id"], "b7ad6b7169203331")
        self.assertEqual(root["attributes"]["rpc.system"], "grpc")
        self.assertNotIn("read", spans)
        self.assert_nested(spans, "inference.GRPCInferenceService/ModelInfer")

    def test_each_request_of_a_stream_is_traced_under_the_calls_context(self):
        trace = "b" * 32
        request = infer_request("add_sub", {"INPUT0": np.ones((1, 16), np.float32),
                                            "INPUT1": np.ones((1, 16), np.float32)})
        answers = list(self.server.stub.ModelStreamInfer(iter([request, request]), timeout=RPC_TIMEOUT,
                                                         metadata=[("traceparent", f"00-{trace}-{CALLER_SPAN}-01")]))
        self.assertEqual([a.error_message for a in answers], ["", ""])
        name = "inference.GRPCInferenceService/ModelStreamInfer"
        self.assertTrue(self.receiver.wait_for(
            lambda spans: len([s for s in spans if s["trace_id"] == trace and s["name"] == name]) >= 2, timeout=20))
        spans = [s for s in self.receiver.spans() if s["trace_id"] == trace]
        roots = [s for s in spans if s["name"] == name]
        self.assertEqual(len(roots), 2)
        for root in roots:
            self.assertEqual(root["parent_span_id"], CALLER_SPAN)
            self.assertEqual(root["attributes"]["rpc.method"], "ModelStreamInfer")
            children = {s["name"] for s in spans if s["parent_span_id"] == root["span_id"]}
            self.assertEqual(children, {"decode", "model add_sub", "encode", "write"})

    def test_a_request_without_context_starts_a_new_trace(self):
        before = set(by_trace(self.receiver.spans()))
        status, _ = post(self.server, "/v2/models/add_sub/infer", add_sub_body())
        self.assertEqual(status, 200)
        self.assertTrue(self.receiver.wait_for(
            lambda spans: any(len(v) >= len(HTTP_SPANS) and k not in before for k, v in by_trace(spans).items()),
            timeout=20))
        new = [v for k, v in by_trace(self.receiver.spans()).items() if k not in before and len(v) >= len(HTTP_SPANS)]
        root = [s for s in new[0] if s["name"] == "POST /v2/models/{model}/infer"][0]
        self.assertEqual(root["parent_span_id"], "")

    def test_requests_that_share_a_batch_link_the_same_batch_span(self):
        # Whether requests meet in a batch is timing (the sleep model waits 1 ms for more, then runs 2 ms): they are
        # sent together after a barrier, and the round is sent again, with new traces, if none met, as on a machine
        # busy enough to start the threads more than a batch apart. What is asserted holds for every shared batch.
        for attempt in range(5):
            ids = [f"{i:032x}" for i in range(0x1000 + 16 * attempt, 0x1008 + 16 * attempt)]
            barrier = threading.Barrier(len(ids))

            def send(trace_id):
                body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}
                barrier.wait()
                post(self.server, "/v2/models/sleep/infer", body, {"traceparent": f"00-{trace_id}-{CALLER_SPAN}-01"})

            threads = [threading.Thread(target=send, args=(t,)) for t in ids]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            batches = {}
            for trace_id in ids:
                compute = self.spans_of(trace_id, 11)["compute"]
                batches.setdefault(tuple(compute["links"][0][:2]), []).append(trace_id)
            shared = [(k, v) for k, v in batches.items() if len(v) >= 2]
            if shared:
                break
        self.assertTrue(shared, batches)
        (batch_trace, batch_span), members = shared[0]
        batch = self.spans_of(batch_trace, 1)["batch sleep"]
        self.assertEqual(batch["span_id"], batch_span)
        self.assertGreaterEqual(batch["attributes"]["weft.batch_requests"], len(members))
        self.assertTrue(set(members) <= {t for t, _, _ in batch["links"]})

    def test_errors_are_marked(self):
        trace = "5" * 32
        body = add_sub_body()
        body["inputs"][1]["name"] = "NOT_AN_INPUT"
        status, _ = post(self.server, "/v2/models/add_sub/infer", body, {"traceparent": f"00-{trace}-{CALLER_SPAN}-01"})
        self.assertEqual(status, 400)
        self.assertTrue(self.receiver.wait_for(
            lambda spans: any(s["trace_id"] == trace and s["kind"] == 2 for s in spans), timeout=20))
        server = [s for s in self.receiver.spans() if s["trace_id"] == trace and s["kind"] == 2][0]
        self.assertEqual(server["status_code"], 2)  # ERROR
        self.assertIn("NOT_AN_INPUT", server["status_message"])
        self.assertEqual(server["attributes"]["weft.outcome"], "INVALID_ARGUMENT")

    def test_the_callers_sampled_flag_decides_and_the_rate_and_count_hold(self):
        status, now = self.server.http("POST", "/v2/trace/setting", {"trace_rate": "1000"})
        self.assertEqual((status, now["trace_rate"]), (200, "1000"))
        sampled, unsampled = "6" * 32, "7" * 32
        post(self.server, "/v2/models/add_sub/infer", add_sub_body(), {"traceparent": f"00-{sampled}-{CALLER_SPAN}-01"})
        post(self.server, "/v2/models/add_sub/infer", add_sub_body(),
             {"traceparent": f"00-{unsampled}-{CALLER_SPAN}-00"})
        self.spans_of(sampled, len(HTTP_SPANS))
        # Rate 4, count 3: of 20 requests without context, the 4th, 8th and 12th are traced.
        self.assertEqual(self.server.http("POST", "/v2/trace/setting",
                                          {"trace_rate": "4", "trace_count": "3"})[0], 200)
        before = set(by_trace(self.receiver.spans()))
        for _ in range(20):
            self.assertEqual(post(self.server, "/v2/models/add_sub/infer", add_sub_body())[0], 200)
        self.assertTrue(self.receiver.wait_for(
            lambda spans: len([k for k in by_trace(spans) if k not in before]) >= 6, timeout=20))
        new = {k: v for k, v in by_trace(self.receiver.spans()).items() if k not in before}
        roots = [k for k, v in new.items() if any(s["name"] == "POST /v2/models/{model}/infer" for s in v)]
        self.assertEqual(len(roots), 3, roots)  # and 3 batch traces beside them
        self.assertEqual(self.server.http("GET", "/v2/trace/setting")[1]["trace_count"], "0")
        self.assertNotIn(unsampled, by_trace(self.receiver.spans()))

    def test_settings_change_at_run_time_for_the_server_and_per_model(self):
        status, view = self.server.http("GET", "/v2/trace/setting")
        self.assertEqual(status, 200)
        self.assertEqual(view["trace_level"], ["TIMESTAMPS"])
        self.assertEqual(view["trace_mode"], "opentelemetry")
        # add_sub off, identity on.
        status, view = self.server.http("POST", "/v2/models/add_sub/trace/setting", {"trace_level": ["OFF"]})
        self.assertEqual((status, view["trace_level"]), (200, ["OFF"]))
        self.assertEqual(self.server.http("GET", "/v2/trace/setting")[1]["trace_level"], ["TIMESTAMPS"])
        off, on = "8" * 32, "9" * 32
        post(self.server, "/v2/models/add_sub/infer", add_sub_body(), {"traceparent": f"00-{off}-{CALLER_SPAN}-01"})
        identity = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}
        self.assertEqual(post(self.server, "/v2/models/identity/infer", identity,
                              {"traceparent": f"00-{on}-{CALLER_SPAN}-01"})[0], 200)
        self.spans_of(on, 3)
        self.assertNotIn(off, by_trace(self.receiver.spans()))
        # Cleared: the model follows the server again. Over gRPC this time.
        reply = self.server.stub.TraceSetting(pb.TraceSettingRequest(
            model_name="add_sub", settings={"trace_level": pb.TraceSettingRequest.SettingValue()}), timeout=RPC_TIMEOUT)
        self.assertEqual(list(reply.settings["trace_level"].value), ["TIMESTAMPS"])
        again = "a" * 32
        post(self.server, "/v2/models/add_sub/infer", add_sub_body(), {"traceparent": f"00-{again}-{CALLER_SPAN}-01"})
        self.spans_of(again, len(HTTP_SPANS))
        # Bad settings: 400 and nothing changes.
        status, error = self.server.http("POST", "/v2/trace/setting", {"trace_rate": "-3", "trace_level": ["OFF"]})
        self.assertEqual(status, 400, error)
        self.assertEqual(self.server.http("GET", "/v2/trace/setting")[1]["trace_level"], ["TIMESTAMPS"])
        self.assertEqual(self.server.http("GET", "/v2/models/nope/trace/setting")[0], 404)


class UnreachableCollectorTest(unittest.TestCase):
    def test_an_unreachable_collector_costs_only_dropped_spans(self):
        closed = OtlpReceiver()
        url = closed.url
        closed.close()  # nothing listens there now
        server = WeftServer(extra_args=["--trace-config", "mode=opentelemetry", "--trace-config",
                                        f"opentelemetry,url={url}", "--trace-config",
                                        "opentelemetry,bsp_schedule_delay=20", "--trace-config",
                                        "opentelemetry,bsp_max_queue_size=64", "--trace-config",
                                        "opentelemetry,bsp_max_export_batch_size=16",
                                        "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1"]).start()
        try:
            for _ in range(40):
                self.assertEqual(post(server, "/v2/models/add_sub/infer", add_sub_body())[0], 200)
            self.assertTrue(wait(lambda: server.metric("weft_trace_spans_dropped_total") > 0, 30))
            self.assertEqual(server.metric("weft_trace_spans_exported_total"), 0)
            self.assertEqual(server.metric("weft_traces_total"), 40)
        finally:
            self.assertEqual(server.stop(), 0)


def wait(predicate, timeout):
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class TritonFileTest(unittest.TestCase):
    def test_the_trace_file_holds_tritons_timestamps_in_order(self):
        directory = tempfile.mkdtemp(prefix="weft_trace_")
        path = os.path.join(directory, "trace.json")
        server = WeftServer(extra_args=["--trace-config", f"triton,file={path}", "--trace-config", "level=TIMESTAMPS",
                                        "--trace-config", "rate=1"]).start()
        try:
            for i in range(3):
                self.assertEqual(post(server, "/v2/models/add_sub/infer", {**add_sub_body(), "id": f"r{i}"})[0], 200)
            server.stub.ModelInfer(infer_request("add_sub", {"INPUT0": np.ones((1, 16), np.float32),
                                                             "INPUT1": np.ones((1, 16), np.float32)}),
                                   timeout=RPC_TIMEOUT)
        finally:
            self.assertEqual(server.stop(), 0)
        with open(path) as f:
            records = json.load(f)
        self.assertEqual(len(records), 8)
        models = {r["id"]: r for r in records if "model_name" in r}
        stamps = {r["id"]: r["timestamps"] for r in records if "timestamps" in r}
        self.assertEqual(set(models), set(stamps))
        self.assertEqual(sorted(m["request_id"] for m in models.values()), ["", "r0", "r1", "r2"])
        http_order = ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
                      "COMPUTE_INPUT_END", "INFER_START", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END",
                      "HTTP_SEND_START", "HTTP_SEND_END"]
        grpc_order = ["GRPC_WAITREAD_END"] + http_order[2:-2] + ["GRPC_SEND_START", "GRPC_SEND_END"]
        for id_, timestamps in stamps.items():
            names = [t["name"] for t in timestamps]
            self.assertIn(names, (http_order, grpc_order))
            ns = [t["ns"] for t in timestamps]
            self.assertEqual(ns, sorted(ns), names)
            self.assertEqual(models[id_]["model_name"], "add_sub")


if __name__ == "__main__":
    unittest.main()
