"""An OTLP/HTTP trace receiver for end-to-end tests: what an OpenTelemetry Collector's otlp receiver does with
`POST /v1/traces` (Content-Type application/x-protobuf), in process, on 127.0.0.1 and a free port.

The Python classes come from weft's own transcription of the OTLP protos (proto/opentelemetry/...), generated at
import time with grpc_tools.protoc as weft_testing.py does for the gRPC service. Needs /usr/bin/python3 with
Debian's python3-protobuf and python3-grpc-tools.

    receiver = OtlpReceiver()
    ... start weft with --trace-config opentelemetry ... otel_url=receiver.url ...
    assert receiver.wait_for(lambda spans: len(spans) >= 2, timeout=10)
    span = receiver.spans()[0]  # {"trace_id": "4bf9...", "name": ..., "attributes": {...}, ...}
    receiver.close()

Run this file to test the receiver itself: /usr/bin/python3 tests/grpc/otlp_receiver.py
"""

import atexit
import http.server
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

SOURCE_DIR = os.environ.get("WEFT_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
OTLP_PROTOS = (
    "opentelemetry/proto/common/v1/common.proto",
    "opentelemetry/proto/resource/v1/resource.proto",
    "opentelemetry/proto/trace/v1/trace.proto",
    "opentelemetry/proto/collector/trace/v1/trace_service.proto",
)
TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"


def _generate_classes():
    from grpc_tools import protoc  # Debian's python3-grpc-tools

    out = tempfile.mkdtemp(prefix="weft_otlp_")
    atexit.register(shutil.rmtree, out, True)
    proto_dir = os.path.join(SOURCE_DIR, "proto")
    args = ["protoc", "-I", proto_dir, "--python_out=" + out] + [os.path.join(proto_dir, p) for p in OTLP_PROTOS]
    if protoc.main(args) != 0:
        raise RuntimeError("grpc_tools.protoc failed on weft's OTLP proto files")
    # Regular packages (with __init__.py), so that these win over an installed `opentelemetry` distribution, whose
    # regular package would otherwise shadow a namespace package found first.
    for directory, _, _ in os.walk(os.path.join(out, "opentelemetry")):
        open(os.path.join(directory, "__init__.py"), "a").close()
    sys.path.insert(0, out)


_generate_classes()
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402


def _value(any_value):
    """An AnyValue as the Python value it holds (None when unset)."""
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(any_value.kvlist_value.values)
    return getattr(any_value, kind)


def _attributes(key_values):
    return {kv.key: _value(kv.value) for kv in key_values}


def span_dicts(request):
    """The spans of an ExportTraceServiceRequest as plain dicts, in the order they came."""
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append({
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),  # "" for a root span
                    "trace_state": span.trace_state,
                    "name": span.name,
                    "kind": span.kind,  # 1 internal, 2 server, 3 client (OTLP's SpanKind)
                    "start_unix_ns": span.start_time_unix_nano,
                    "end_unix_ns": span.end_time_unix_nano,
                    "attributes": _attributes(span.attributes),
                    "links": [(link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                              for link in span.links],
                    "status_code": span.status.code,  # 0 unset, 1 ok, 2 error
                    "status_message": span.status.message,
                    "resource": resource,
                    "scope": scope_spans.scope.name,
                })
    return spans


class OtlpReceiver:
    """A threaded HTTP server on 127.0.0.1, port 0, that takes OTLP/HTTP protobuf trace exports and keeps their
    spans. It answers 200 with an empty ExportTraceServiceResponse, or what set_status scripted. Thread-safe."""

    def __init__(self, host="127.0.0.1"):
        self._cond = threading.Condition()
        self._spans = []
        self._requests = 0
        self._script = []  # (code, retry_after) for the next requests
        self._connections = set()
        self._server = http.server.ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = "http://%s:%d%s" % (host, self._server.server_address[1], TRACES_PATH)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def requests(self):
        """How many protobuf POSTs to /v1/traces arrived, answered with an error or not."""
        with self._cond:
            return self._requests

    def spans(self):
        """A copy of the spans received so far (see span_dicts for their keys)."""
        with self._cond:
            return list(self._spans)

    def wait_for(self, predicate, timeout=10.0):
        """Waits until predicate(spans) is true; returns whether it became true within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(list(self._spans)):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def set_status(self, code, retry_after=None, times=1):
        """Answers the next `times` requests with HTTP `code` (and a Retry-After of that many seconds), keeping none
        of their spans; later ones get 200 again."""
        with self._cond:
            self._script.extend([(code, retry_after)] * times)

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        with self._cond:
            connections = list(self._connections)
        for connection in connections:  # kept-alive connections would hold their threads until the client leaves
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(10)

    # --- the handler's side ---

    def _take_answer(self):
        with self._cond:
            self._requests += 1
            self._cond.notify_all()
            return self._script.pop(0) if self._script else None

    def _store(self, spans):
        with self._cond:
            self._spans.extend(spans)
            self._cond.notify_all()

    def _handler_class(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a collector does
            timeout = 60  # an idle kept-alive connection ends after this many seconds

            def setup(self):
                super().setup()
                with receiver._cond:
                    receiver._connections.add(self.connection)

            def finish(self):
                with receiver._cond:
                    receiver._connections.discard(self.connection)
                super().finish()

            def log_message(self, *args):
                pass

            def _answer(self, code, body=b"", content_type=PROTOBUF, retry_after=None):
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if self.path.split("?", 1)[0] != TRACES_PATH:
                    return self._answer(404, b"not found", "text/plain")
                content_type = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
                if content_type != PROTOBUF:
                    return self._answer(415, b"only application/x-protobuf", "text/plain")
                scripted = receiver._take_answer()
                if scripted is not None:
                    code, retry_after = scripted
                    return self._answer(code, retry_after=retry_after)
                request = trace_service_pb2.ExportTraceServiceRequest()
                try:
                    request.ParseFromString(body)
                except Exception as e:  # a DecodeError; protobuf's module path differs between its versions
                    return self._answer(400, str(e).encode(), "text/plain")
                receiver._store(span_dicts(request))
                self._answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

        return Handler


def _self_test():
    import urllib.error
    import urllib.request

    request = trace_service_pb2.ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    kv = resource_spans.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "weft"
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "weft"
    span = scope_spans.spans.add()
    span.trace_id = bytes(range(1, 17))
    span.span_id = bytes(range(17, 25))
    span.name = "ModelInfer"
    span.kind = 2
    span.start_time_unix_nano, span.end_time_unix_nano = 1000, 2000
    for key, field, value in (("s", "string_value", "x"), ("i", "int_value", -3), ("b", "bool_value", True),
                              ("d", "double_value", 0.5)):
        kv = span.attributes.add()
        kv.key = key
        setattr(kv.value, field, value)
    link = span.links.add()
    link.trace_id, link.span_id = bytes(16 * [0xAA]), bytes(8 * [0xBB])
    link.attributes.add(key="n", value={"int_value": 7})
    span.status.code, span.status.message = 2, "boom"
    payload = request.SerializeToString()

    def post(url, content_type=PROTOBUF):
        http_request = urllib.request.Request(url, data=payload, method="POST", headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(http_request, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    with OtlpReceiver() as receiver:
        receiver.set_status(503, retry_after=2)
        status, headers, _ = post(receiver.url)
        assert status == 503 and headers.get("Retry-After") == "2", (status, headers)
        assert receiver.spans() == [] and receiver.requests == 1

        status, headers, body = post(receiver.url)
        assert status == 200 and headers["Content-Type"] == PROTOBUF, (status, headers)
        response = trace_service_pb2.ExportTraceServiceResponse()
        response.ParseFromString(body)
        assert not response.HasField("partial_success")
        assert receiver.wait_for(lambda spans: len(spans) == 1, timeout=5)
        got = receiver.spans()[0]
        expected = {
            "trace_id": "0102030405060708090a0b0c0d0e0f10", "span_id": "1112131415161718", "parent_span_id": "",
            "trace_state": "", "name": "ModelInfer", "kind": 2, "start_unix_ns": 1000, "end_unix_ns": 2000,
            "attributes": {"s": "x", "i": -3, "b": True, "d": 0.5},
            "links": [("aa" * 16, "bb" * 8, {"n": 7})], "status_code": 2, "status_message": "boom",
            "resource": {"service.name": "weft"}, "scope": "weft",
        }
        assert got == expected, got

        assert post(receiver.url, "application/json")[0] == 415
        assert post(receiver.url.replace(TRACES_PATH, "/v1/metrics"))[0] == 404
        assert not receiver.wait_for(lambda spans: len(spans) > 1, timeout=0.1)
        assert receiver.requests == 2, receiver.requests
    print("otlp_receiver: self-test passed")


if __name__ == "__main__":
    _self_test()
