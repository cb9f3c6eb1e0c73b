"""Security end to end (docs/security.md): `weft serve` with API keys, JWTs, TLS, mutual TLS and rate limits, driven over
real sockets by HTTP clients (http.client, curl) and gRPC clients built from Triton's proto."""

import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np

from security_testing import CertificateAuthority, JwtSigner, key_entry, key_file, read, replace_file
from weft_testing import RPC_TIMEOUT, WeftServer, grpc, health_pb2, infer_request, pb

OPS_SECRET = "ops-0123456789abcdef0123456789abcdef"
CAM_SECRET = "cam-0123456789abcdef0123456789abcdef"
NONE_SECRET = "none-0123456789abcdef0123456789abcdef"
ALL_SCOPES = ["infer", "metadata", "admin", "shm", "metrics"]

ADD_SUB_BODY = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": list(range(16))},
                           {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": list(range(16))}]}

# Every HTTP route of the inference port: (method, path, body, the scope it needs). "health" needs none.
HTTP_ROUTES = [
    ("GET", "/v2/health/live", None, "health"),
    ("GET", "/v2/health/ready", None, "health"),
    ("GET", "/v2", None, "metadata"),
    ("GET", "/v2/models/add_sub", None, "metadata"),
    ("GET", "/v2/models/add_sub/versions/1", None, "metadata"),
    ("GET", "/v2/models/add_sub/ready", None, "metadata"),
    ("GET", "/v2/models/add_sub/config", None, "metadata"),
    ("GET", "/v2/models/add_sub/stats", None, "metadata"),
    ("GET", "/v2/models/stats", None, "metadata"),
    ("GET", "/v2/no/such/route", None, "metadata"),
    ("POST", "/v2/models/add_sub/infer", ADD_SUB_BODY, "infer"),
    ("POST", "/v2/models/add_sub/versions/1/infer", ADD_SUB_BODY, "infer"),
    ("GET", "/v2/systemsharedmemory/status", None, "shm"),
    ("POST", "/v2/systemsharedmemory/region/r0/register", {"key": "/weft_no_such_object", "offset": 0,
                                                           "byte_size": 4}, "shm"),
    ("POST", "/v2/systemsharedmemory/unregister", None, "shm"),
    ("GET", "/v2/cudasharedmemory/status", None, "shm"),
    ("POST", "/v2/repository/index", {}, "admin"),
    ("POST", "/v2/repository/models/no_such_model/load", {}, "admin"),
    ("POST", "/v2/repository/models/no_such_model/unload", {}, "admin"),
    ("GET", "/v2/models/add_sub/rollout", None, "admin"),
    ("DELETE", "/v2/models/no_such_model/rollout", None, "admin"),
    ("GET", "/v2/logging", None, "admin"),
    ("POST", "/v2/logging", {}, "admin"),
    ("GET", "/v2/trace/setting", None, "admin"),
    ("POST", "/v2/trace/setting", {}, "admin"),
    ("GET", "/v2/models/add_sub/trace/setting", None, "admin"),
]


def grpc_calls(stub, health):
    """Every RPC: (name, the scope it needs, a function of the call's metadata)."""
    add_sub = infer_request("add_sub", {"INPUT0": np.ones((1, 16), np.float32), "INPUT1": np.ones((1, 16), np.float32)})

    def stream(metadata):
        return list(stub.ModelStreamInfer(iter([add_sub]), metadata=metadata, timeout=RPC_TIMEOUT))

    rpc = [
        ("ServerLive", "health", stub.ServerLive, pb.ServerLiveRequest()),
        ("ServerReady", "health", stub.ServerReady, pb.ServerReadyRequest()),
        ("ServerMetadata", "metadata", stub.ServerMetadata, pb.ServerMetadataRequest()),
        ("ModelMetadata", "metadata", stub.ModelMetadata, pb.ModelMetadataRequest(name="add_sub")),
        ("ModelReady", "metadata", stub.ModelReady, pb.ModelReadyRequest(name="add_sub")),
        ("ModelConfig", "metadata", stub.ModelConfig, pb.ModelConfigRequest(name="add_sub")),
        ("ModelStatistics", "metadata", stub.ModelStatistics, pb.ModelStatisticsRequest(name="add_sub")),
        ("ModelInfer", "infer", stub.ModelInfer, add_sub),
        ("RepositoryIndex", "admin", stub.RepositoryIndex, pb.RepositoryIndexRequest()),
        ("RepositoryModelLoad", "admin", stub.RepositoryModelLoad,
         pb.RepositoryModelLoadRequest(model_name="no_such_model")),
        ("RepositoryModelUnload", "admin", stub.RepositoryModelUnload,
         pb.RepositoryModelUnloadRequest(model_name="no_such_model")),
        ("SystemSharedMemoryStatus", "shm", stub.SystemSharedMemoryStatus, pb.SystemSharedMemoryStatusRequest()),
        ("SystemSharedMemoryRegister", "shm", stub.SystemSharedMemoryRegister,
         pb.SystemSharedMemoryRegisterRequest(name="r0", key="/weft_no_such_object", byte_size=4)),
        ("SystemSharedMemoryUnregister", "shm", stub.SystemSharedMemoryUnregister,
         pb.SystemSharedMemoryUnregisterRequest()),
        ("CudaSharedMemoryStatus", "shm", stub.CudaSharedMemoryStatus, pb.CudaSharedMemoryStatusRequest()),
        ("TraceSetting", "admin", stub.TraceSetting, pb.TraceSettingRequest()),
        ("LogSettings", "admin", stub.LogSettings, pb.LogSettingsRequest()),
    ]
    calls = [(name, scope, lambda md, f=f, q=q: f(q, metadata=md, timeout=RPC_TIMEOUT)) for name, scope, f, q in rpc]
    calls.append(("ModelStreamInfer", "infer", stream))
    calls.append(("Health/Check", "health",
                  lambda md: health.Check(health_pb2.HealthCheckRequest(), metadata=md, timeout=RPC_TIMEOUT)))
    return calls


def grpc_code(call, metadata):
    try:
        result = call(metadata)
    except grpc.RpcError as e:
        return e.code()
    if isinstance(result, list):  # a stream: its requests' errors come back as messages
        errors = [r.error_message for r in result if r.error_message]
        if any("forbidden" in e for e in errors):
            return grpc.StatusCode.PERMISSION_DENIED
        if any("rate limit" in e for e in errors):
            return grpc.StatusCode.RESOURCE_EXHAUSTED
    return grpc.StatusCode.OK


def bearer(token):
    return {"Authorization": "Bearer " + token}


def http_call(port, method, path, body=None, headers=None, context=None, connection=None):
    """(status, headers as a dict with lowercase names, body bytes); HTTPS when `context` is given."""
    own = connection is None
    if own:
        connection = (http.client.HTTPSConnection("localhost", port, context=context, timeout=RPC_TIMEOUT)
                      if context else http.client.HTTPConnection("127.0.0.1", port, timeout=RPC_TIMEOUT))
    data = None if body is None else json.dumps(body).encode()
    all_headers = {"Content-Type": "application/json"} if data is not None else {}
    all_headers.update(headers or {})
    try:
        connection.request(method, path, body=data, headers=all_headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        if own:
            connection.close()


class Credentials:
    """The server's key file and JWKS, and the tokens the tests send."""

    def __init__(self, directory):
        self.signer = JwtSigner()
        self.keys_path = key_file(os.path.join(directory, "keys.json"), [
            key_entry("ops", OPS_SECRET, ALL_SCOPES),
            key_entry("cam", CAM_SECRET, ["infer:add_sub"]),
            key_entry("nothing", NONE_SECRET, []),
        ])
        self.jwks_path = os.path.join(directory, "jwks.json")
        replace_file(self.jwks_path, json.dumps(self.signer.jwks()))

    def server_args(self):
        return ["--auth-keys", self.keys_path, "--auth-jwks", self.jwks_path, "--auth-jwt-issuer", "weft-tests",
                "--auth-jwt-audience", "weft", "--allow-shared-memory", "--model-control-mode", "explicit",
                "--load-model", "*"]

    def invalid(self):
        """Credentials that must be refused with 401 / UNAUTHENTICATED, by what is wrong with them."""
        s = self.signer
        now = int(time.time())
        return {
            "no credential": None,
            "unknown key": "Bearer wrong-0123456789abcdef0123456789",
            "another scheme": "Basic b3BzOm9wcw==",
            "empty bearer": "Bearer ",
            "expired JWT": "Bearer " + s.token(scope="infer metadata admin", exp=now - 3600),
            "JWT not yet valid": "Bearer " + s.token(scope="infer", nbf=now + 3600),
            "bad signature": "Bearer " + s.token(scope="infer metadata admin", signing_key=s.other_rsa),
            "alg none": "Bearer " + s.token(alg="none", scope="infer metadata admin"),
            "wrong audience": "Bearer " + s.token(scope="infer metadata admin", aud="someone-else"),
            "wrong issuer": "Bearer " + s.token(scope="infer metadata admin", iss="evil"),
            "JWT without exp": "Bearer " + s.token(scope="infer metadata admin", exp=None),
            "HS256 with the RSA key as secret": "Bearer " + s.token(alg="HS256", kid="rsa-1", scope="admin",
                                                                    signing_key=s.rsa_public_pem()),
        }

    def good(self):
        """Credentials that hold every scope."""
        s = self.signer
        every = " ".join(ALL_SCOPES)
        return {"API key": "Bearer " + OPS_SECRET, "RS256": "Bearer " + s.token(scope=every),
                "ES256": "Bearer " + s.token(alg="ES256", scope=every),
                "HS256": "Bearer " + s.token(alg="HS256", scope=every),
                "JWT with aud list": "Bearer " + s.token(scope=every, aud=["other", "weft"])}


class AuthenticationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.credentials = Credentials(cls.tmp)
        cls.server = WeftServer(extra_args=cls.credentials.server_args()).start()
        cls.server.metric = metric_reader(cls.server, OPS_SECRET)
        cls.calls = grpc_calls(cls.server.stub, cls.server.health)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def http(self, method, path, body=None, authorization=None, port=None):
        headers = {"Authorization": authorization} if authorization else {}
        return http_call(port or self.server.http_port, method, path, body, headers)

    def test_every_http_route_refuses_a_missing_or_bad_credential(self):
        for name, authorization in self.credentials.invalid().items():
            for method, path, body, scope in HTTP_ROUTES:
                with self.subTest(credential=name, route=f"{method} {path}"):
                    status, headers, text = self.http(method, path, body, authorization)
                    if scope == "health":
                        self.assertEqual(status, 200, text)
                        continue
                    self.assertEqual(status, 401, text)
                    self.assertTrue(headers.get("www-authenticate", "").startswith("Bearer"), headers)
                    self.assertNotIn(b"add_sub", text)
            with self.subTest(credential=name, route="GET /metrics"):
                status, headers, _ = self.http("GET", "/metrics", None, authorization, self.server.metrics_port)
                self.assertEqual(status, 401)

    def test_a_refusal_says_nothing_about_the_model(self):
        known = self.http("POST", "/v2/models/add_sub/infer", ADD_SUB_BODY)
        unknown = self.http("POST", "/v2/models/no_such_model/infer", ADD_SUB_BODY)
        self.assertEqual((known[0], known[2]), (unknown[0], unknown[2]))
        known = self.http("GET", "/v2/models/add_sub", None, "Bearer " + CAM_SECRET)
        unknown = self.http("GET", "/v2/models/no_such_model", None, "Bearer " + CAM_SECRET)
        self.assertEqual((known[0], known[2]), (unknown[0], unknown[2]))
        self.assertEqual(known[0], 403)

    def test_every_http_route_refuses_a_credential_without_its_scope(self):
        s = self.credentials.signer
        for method, path, body, scope in HTTP_ROUTES:
            if scope == "health":
                continue
            others = " ".join(x for x in ALL_SCOPES if x != scope and not (scope == "shm" and x == "admin"))
            for name, authorization in {"key without scopes": "Bearer " + NONE_SECRET,
                                        "JWT with the other scopes": "Bearer " + s.token(scope=others)}.items():
                with self.subTest(credential=name, route=f"{method} {path}"):
                    status, headers, text = self.http(method, path, body, authorization)
                    self.assertEqual(status, 403, text)
                    self.assertIn("insufficient_scope", headers.get("www-authenticate", ""))
        status, _, _ = self.http("GET", "/metrics", None, "Bearer " + s.token(scope="infer metadata admin"),
                                 self.server.metrics_port)
        self.assertEqual(status, 403)

    def test_every_http_route_serves_a_good_credential(self):
        for name, authorization in self.credentials.good().items():
            for method, path, body, scope in HTTP_ROUTES:
                with self.subTest(credential=name, route=f"{method} {path}"):
                    status, _, text = self.http(method, path, body, authorization)
                    self.assertNotIn(status, (401, 403, 429), text)
            with self.subTest(credential=name, route="GET /metrics"):
                status, _, text = self.http("GET", "/metrics", None, authorization, self.server.metrics_port)
                self.assertEqual(status, 200)
                self.assertIn(b"weft_auth_denied_total", text)
        status, _, text = self.http("POST", "/v2/models/add_sub/infer", ADD_SUB_BODY, "Bearer " + OPS_SECRET)
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text)["outputs"][0]["data"][:3], [0, 2, 4])

    def test_a_model_scope_allows_that_model_only(self):
        status, _, text = self.http("POST", "/v2/models/add_sub/infer", ADD_SUB_BODY, "Bearer " + CAM_SECRET)
        self.assertEqual(status, 200, text)
        body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
        status, _, text = self.http("POST", "/v2/models/identity/infer", body, "Bearer " + CAM_SECRET)
        self.assertEqual(status, 403, text)
        token = self.credentials.signer.token(alg="ES256", scope="infer:add_sub other-service:read")
        status, _, text = self.http("POST", "/v2/models/add_sub/infer", ADD_SUB_BODY, "Bearer " + token)
        self.assertEqual(status, 200, text)
        status, _, _ = self.http("POST", "/v2/repository/index", {}, "Bearer " + token)
        self.assertEqual(status, 403)

    def test_every_rpc_refuses_a_missing_or_bad_credential(self):
        for name, authorization in self.credentials.invalid().items():
            metadata = [("authorization", authorization)] if authorization else []
            for rpc, scope, call in self.calls:
                with self.subTest(credential=name, rpc=rpc):
                    code = grpc_code(call, metadata)
                    self.assertEqual(code, grpc.StatusCode.OK if scope == "health"
                                     else grpc.StatusCode.UNAUTHENTICATED)

    def test_every_rpc_refuses_a_credential_without_its_scope(self):
        s = self.credentials.signer
        for rpc, scope, call in self.calls:
            if scope == "health":
                continue
            others = " ".join(x for x in ALL_SCOPES if x != scope and not (scope == "shm" and x == "admin"))
            for name, authorization in {"key without scopes": "Bearer " + NONE_SECRET,
                                        "JWT with the other scopes": "Bearer " + s.token(scope=others)}.items():
                with self.subTest(credential=name, rpc=rpc):
                    self.assertEqual(grpc_code(call, [("authorization", authorization)]),
                                     grpc.StatusCode.PERMISSION_DENIED)

    def test_every_rpc_serves_a_good_credential(self):
        for name, authorization in self.credentials.good().items():
            for rpc, scope, call in self.calls:
                with self.subTest(credential=name, rpc=rpc):
                    code = grpc_code(call, [("authorization", authorization)])
                    self.assertNotIn(code, (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED,
                                            grpc.StatusCode.RESOURCE_EXHAUSTED))
        reply = self.server.stub.ModelInfer(
            infer_request("add_sub", {"INPUT0": np.ones((1, 16), np.float32), "INPUT1": np.ones((1, 16), np.float32)}),
            metadata=[("authorization", "Bearer " + CAM_SECRET)], timeout=RPC_TIMEOUT)
        self.assertEqual(reply.model_name, "add_sub")

    def test_weft_bench_sends_a_credential(self):
        from weft_testing import BINARY
        for protocol, port in (("http", self.server.http_port), ("grpc", self.server.grpc_port)):
            with self.subTest(protocol=protocol):
                args = [BINARY, "bench", "--url", f"127.0.0.1:{port}" if protocol == "grpc" else
                        f"http://127.0.0.1:{port}", "--protocol", protocol, "--model", "add_sub", "--requests", "20",
                        "--json", "-q"]
                refused = subprocess.run(args, capture_output=True, text=True, timeout=60)
                self.assertNotEqual(refused.returncode, 0, refused.stdout)
                served = subprocess.run(args + ["--header", "Authorization: Bearer " + OPS_SECRET],
                                        capture_output=True, text=True, timeout=60)
                self.assertEqual(served.returncode, 0, served.stderr)
                report = json.loads(served.stdout)
                self.assertEqual((report["sent"], report["successes"]), (20, 20), report)

    def test_refusals_are_counted_and_audited(self):
        before = self.server.metric("weft_auth_denied_total", reason="missing")
        self.http("GET", "/v2")
        self.assertGreater(self.server.metric("weft_auth_denied_total", reason="missing"), before)
        time.sleep(1.5)  # the audit log's own rate limit (20 lines a second) refills after the other tests' refusals
        self.http("POST", "/v2/logging", {}, "Bearer " + OPS_SECRET)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("audit: admin: identity=key:ops route=POST /v2/logging" in x
                                                      for x in self.server.log):
            time.sleep(0.05)
        self.assertTrue(any("audit: admin: identity=key:ops route=POST /v2/logging outcome=200" in x
                            for x in self.server.log), "".join(self.server.log[-20:]))
        self.assertTrue(any("audit: authentication failed" in x for x in self.server.log))


def metric_reader(server, token):
    """WeftServer.metric reads /metrics without a credential; with authentication on, it needs one."""
    def metric(name, **labels):
        _, _, text = http_call(server.metrics_port, "GET", "/metrics", headers=bearer(token))
        for line in text.decode().splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0
    return metric


class TlsTest(unittest.TestCase):
    """TLS on every port, mutual TLS, and the certificate subject as an identity."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.ca = CertificateAuthority(cls.tmp)
        cls.other_ca = CertificateAuthority(cls.tmp, "other-ca")
        cls.server_cert, cls.server_key = cls.ca.issue("server", "/CN=localhost")
        cls.client_cert, cls.client_key = cls.ca.issue("client", "/O=acme/CN=camera-7", server=False)
        cls.stranger_cert, cls.stranger_key = cls.other_ca.issue("stranger", "/O=acme/CN=camera-7", server=False)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def context(self, client_cert=None, client_key=None):
        context = ssl.create_default_context(cafile=self.ca.cert)
        if client_cert:
            context.load_cert_chain(client_cert, client_key)
        return context

    def grpc_credentials(self, client_cert=None, client_key=None):
        if client_cert:
            return grpc.ssl_channel_credentials(read(self.ca.cert), read(client_key), read(client_cert))
        return grpc.ssl_channel_credentials(read(self.ca.cert))

    def curl(self, port, path, *args):
        result = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20",
                                 "--cacert", self.ca.cert, "--resolve", f"localhost:{port}:127.0.0.1", *args,
                                 f"https://localhost:{port}{path}"], capture_output=True, text=True)
        return result.returncode, result.stdout

    def test_tls_on_http_grpc_and_metrics(self):
        server = WeftServer(extra_args=["--tls-cert", self.server_cert, "--tls-key", self.server_key],
                            channel_credentials=self.grpc_credentials()).start()
        try:
            self.assertEqual(self.curl(server.http_port, "/v2/health/ready"), (0, "200"))
            self.assertEqual(self.curl(server.metrics_port, "/metrics"), (0, "200"))
            # Keep-alive: two requests on one TLS connection.
            connection = http.client.HTTPSConnection("localhost", server.http_port, context=self.context(),
                                                     timeout=RPC_TIMEOUT)
            for _ in range(2):
                status, _, text = http_call(server.http_port, "POST", "/v2/models/add_sub/infer", ADD_SUB_BODY,
                                            connection=connection)
                self.assertEqual(status, 200, text)
            connection.close()
            self.assertTrue(server.stub.ServerLive(pb.ServerLiveRequest(), timeout=RPC_TIMEOUT).live)
            # Plain HTTP and plaintext gRPC to the TLS ports fail, and the server goes on serving.
            with self.assertRaises((http.client.HTTPException, ConnectionError, OSError)):
                http_call(server.http_port, "GET", "/v2/health/ready")
            plain = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
            with self.assertRaises(grpc.RpcError):
                pb_grpc_stub(plain).ServerLive(pb.ServerLiveRequest(), timeout=5)
            plain.close()
            self.assertEqual(self.curl(server.http_port, "/v2/health/ready"), (0, "200"))
            # A client that does not trust the server's CA refuses it.
            code, _ = self.curl(server.http_port, "/v2/health/ready", "--cacert", self.other_ca.cert)
            self.assertNotEqual(code, 0)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_mutual_tls_accepts_the_ca_s_clients_only(self):
        server = WeftServer(extra_args=["--tls-cert", self.server_cert, "--tls-key", self.server_key,
                                        "--tls-client-ca", self.ca.cert],
                            channel_credentials=self.grpc_credentials(self.client_cert, self.client_key)).start()
        try:
            self.assertEqual(self.curl(server.http_port, "/v2/health/ready", "--cert", self.client_cert, "--key",
                                       self.client_key), (0, "200"))
            code, _ = self.curl(server.http_port, "/v2/health/ready")
            self.assertNotEqual(code, 0, "no client certificate")
            code, _ = self.curl(server.http_port, "/v2/health/ready", "--cert", self.stranger_cert, "--key",
                                self.stranger_key)
            self.assertNotEqual(code, 0, "a certificate of another CA")
            self.assertTrue(server.stub.ServerLive(pb.ServerLiveRequest(), timeout=RPC_TIMEOUT).live)
            for name, credentials in {"none": self.grpc_credentials(),
                                      "other CA": self.grpc_credentials(self.stranger_cert, self.stranger_key)}.items():
                with self.subTest(client_certificate=name):
                    channel = grpc.secure_channel(f"127.0.0.1:{server.grpc_port}", credentials,
                                                  options=[("grpc.ssl_target_name_override", "localhost")])
                    with self.assertRaises(grpc.RpcError) as e:
                        pb_grpc_stub(channel).ServerLive(pb.ServerLiveRequest(), timeout=10)
                    self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
                    channel.close()
        finally:
            self.assertEqual(server.stop(), 0)

    def test_a_client_certificate_names_a_key(self):
        keys = key_file(os.path.join(self.tmp, "subject_keys.json"), [
            {"id": "camera-7", "subject": "CN=camera-7,O=acme", "scopes": ["infer:add_sub"]},
            key_entry("ops", OPS_SECRET, ALL_SCOPES)])
        server = WeftServer(extra_args=["--tls-cert", self.server_cert, "--tls-key", self.server_key,
                                        "--tls-client-ca", self.ca.cert, "--tls-client-auth", "optional",
                                        "--auth-keys", keys],
                            channel_credentials=self.grpc_credentials(self.client_cert, self.client_key)).start()
        try:
            with_cert = self.context(self.client_cert, self.client_key)
            status, _, text = http_call(server.http_port, "POST", "/v2/models/add_sub/infer", ADD_SUB_BODY,
                                        context=with_cert)
            self.assertEqual(status, 200, text)
            status, _, _ = http_call(server.http_port, "POST", "/v2/repository/index", {}, context=with_cert)
            self.assertEqual(status, 403)
            # Optional client certificates: without one, a bearer credential is still needed.
            status, _, _ = http_call(server.http_port, "POST", "/v2/models/add_sub/infer", ADD_SUB_BODY,
                                     context=self.context())
            self.assertEqual(status, 401)
            status, _, _ = http_call(server.http_port, "POST", "/v2/models/add_sub/infer", ADD_SUB_BODY,
                                     headers=bearer(OPS_SECRET), context=self.context())
            self.assertEqual(status, 200)
            reply = server.stub.ModelInfer(
                infer_request("add_sub", {"INPUT0": np.ones((1, 16), np.float32),
                                          "INPUT1": np.ones((1, 16), np.float32)}), timeout=RPC_TIMEOUT)
            self.assertEqual(reply.model_name, "add_sub")
            with self.assertRaises(grpc.RpcError) as e:
                server.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        finally:
            self.assertEqual(server.stop(), 0)


def pb_grpc_stub(channel):
    from weft_testing import pb_grpc
    return pb_grpc.GRPCInferenceServiceStub(channel)


class ReloadUnderLoadTest(unittest.TestCase):
    """The key file and the certificate change while clients keep sending: no request fails."""

    def test_keys_and_certificates_reload_without_failed_requests(self):
        tmp = tempfile.mkdtemp()
        try:
            ca = CertificateAuthority(tmp)
            cert, key = ca.issue("server", "/CN=localhost")
            keys_path = key_file(os.path.join(tmp, "keys.json"), [key_entry("ops", OPS_SECRET, ALL_SCOPES)])
            server = WeftServer(extra_args=["--tls-cert", cert, "--tls-key", key, "--auth-keys", keys_path],
                                channel_credentials=grpc.ssl_channel_credentials(read(ca.cert))).start()
            context = ssl.create_default_context(cafile=ca.cert)
            results = {"ok": 0, "failed": []}
            lock = threading.Lock()
            stop = threading.Event()

            def http_load():
                connection = http.client.HTTPSConnection("localhost", server.http_port, context=context,
                                                         timeout=RPC_TIMEOUT)
                while not stop.is_set():
                    try:
                        status, _, text = http_call(server.http_port, "POST", "/v2/models/add_sub/infer",
                                                    ADD_SUB_BODY, bearer(OPS_SECRET), connection=connection)
                        outcome = status == 200 or ("http", status, text[:200])
                    except (OSError, http.client.HTTPException) as e:
                        outcome = ("http", repr(e))
                        connection.close()
                        connection = http.client.HTTPSConnection("localhost", server.http_port, context=context,
                                                                 timeout=RPC_TIMEOUT)
                    with lock:
                        if outcome is True:
                            results["ok"] += 1
                        else:
                            results["failed"].append(outcome)
                connection.close()

            def grpc_load():
                request = infer_request("add_sub", {"INPUT0": np.ones((1, 16), np.float32),
                                                    "INPUT1": np.ones((1, 16), np.float32)})
                while not stop.is_set():
                    try:
                        server.stub.ModelInfer(request, metadata=[("authorization", "Bearer " + OPS_SECRET)],
                                               timeout=RPC_TIMEOUT)
                        outcome = True
                    except grpc.RpcError as e:
                        outcome = ("grpc", e.code(), e.details())
                    with lock:
                        if outcome is True:
                            results["ok"] += 1
                        else:
                            results["failed"].append(outcome)

            threads = [threading.Thread(target=f) for f in (http_load, http_load, grpc_load)]
            for t in threads:
                t.start()
            try:
                time.sleep(0.5)
                # A new key: usable within the reload interval; the old one keeps working.
                key_file(keys_path, [key_entry("ops", OPS_SECRET, ALL_SCOPES),
                                     key_entry("new", CAM_SECRET, ["metadata"])])
                self.assertTrue(wait_until(lambda: http_call(server.http_port, "GET", "/v2",
                                                             headers=bearer(CAM_SECRET), context=context)[0] == 200))
                # A new certificate: new connections get it, the open ones go on.
                old_serial = serial_of(server.http_port, context)
                new_cert, new_key = ca.issue("server2", "/CN=localhost")
                replace_file(key, read(new_key))
                replace_file(cert, read(new_cert))
                self.assertTrue(wait_until(lambda: serial_of(server.http_port, context) != old_serial))
                grpc_channel = grpc.secure_channel(f"127.0.0.1:{server.grpc_port}",
                                                   grpc.ssl_channel_credentials(read(ca.cert)),
                                                   options=[("grpc.ssl_target_name_override", "localhost")])
                self.assertTrue(pb_grpc_stub(grpc_channel).ServerLive(pb.ServerLiveRequest(), timeout=10).live)
                grpc_channel.close()
                time.sleep(0.5)
            finally:
                stop.set()
                for t in threads:
                    t.join()
            self.assertEqual(results["failed"], [])
            self.assertGreater(results["ok"], 50)
            # A key taken out of the file stops working.
            key_file(keys_path, [key_entry("new", CAM_SECRET, ["metadata"])])
            self.assertTrue(wait_until(lambda: http_call(server.http_port, "GET", "/v2", headers=bearer(OPS_SECRET),
                                                         context=context)[0] == 401))
            # A broken key file is refused and the one before stays in force.
            replace_file(keys_path, "{not json")
            time.sleep(2.5)
            self.assertEqual(http_call(server.http_port, "GET", "/v2", headers=bearer(CAM_SECRET),
                                       context=context)[0], 200)
            self.assertTrue(any("kept the previous file" in x for x in server.log))
            self.assertEqual(server.stop(), 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def wait_until(condition, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.1)
    return False


def serial_of(port, context):
    """The serial number of the certificate a new TLS connection to `port` gets."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.getpeercert()["serialNumber"]


class RateLimitTest(unittest.TestCase):
    """Token buckets hold to the configured rate, per caller."""

    def hammer(self, call, seconds, threads=4):
        """(accepted, refused, elapsed seconds) of calls from `threads` threads for `seconds`."""
        counts = {"ok": 0, "limited": 0, "other": []}
        lock = threading.Lock()
        start = time.monotonic()
        end = start + seconds

        def run():
            while time.monotonic() < end:
                outcome = call()
                with lock:
                    if outcome == "ok":
                        counts["ok"] += 1
                    elif outcome == "limited":
                        counts["limited"] += 1
                    else:
                        counts["other"].append(outcome)

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        self.assertEqual(counts["other"], [])
        return counts["ok"], counts["limited"], time.monotonic() - start

    def assert_rate(self, accepted, elapsed, rate, burst):
        expected = burst + rate * elapsed
        self.assertGreaterEqual(accepted, expected * 0.9, (accepted, expected))
        self.assertLessEqual(accepted, expected * 1.1, (accepted, expected))

    def test_the_default_limit_holds_for_anonymous_callers(self):
        server = WeftServer(extra_args=["--rate-limit", "50:5"]).start()
        try:
            def http_request():
                status, headers, _ = http_call(server.http_port, "GET", "/v2")
                if status == 429:
                    return "limited" if int(headers.get("retry-after", "0")) >= 1 else ("no Retry-After", headers)
                return "ok" if status == 200 else status

            accepted, refused, elapsed = self.hammer(http_request, 4)
            self.assertGreater(refused, 0)
            self.assert_rate(accepted, elapsed, 50, 5)
            # Health checks are never limited.
            for _ in range(20):
                self.assertEqual(http_call(server.http_port, "GET", "/v2/health/ready")[0], 200)
            time.sleep(0.3)

            def grpc_request():
                try:
                    server.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=RPC_TIMEOUT)
                    return "ok"
                except grpc.RpcError as e:
                    return "limited" if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else e.code()

            accepted, refused, elapsed = self.hammer(grpc_request, 4)
            self.assertGreater(refused, 0)
            self.assert_rate(accepted, elapsed, 50, 5)
            self.assertGreater(server.metric("weft_rate_limited_total", identity="anonymous"), 0)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_a_key_s_own_limit_holds_and_others_are_not_affected(self):
        tmp = tempfile.mkdtemp()
        try:
            keys = key_file(os.path.join(tmp, "keys.json"), [
                key_entry("limited", CAM_SECRET, ["metadata"], rate=30, burst=3),
                key_entry("ops", OPS_SECRET, ALL_SCOPES)])
            server = WeftServer(extra_args=["--auth-keys", keys, "--rate-limit", "1000:1000"]).start()
            try:
                def limited():
                    status, headers, _ = http_call(server.http_port, "GET", "/v2", headers=bearer(CAM_SECRET))
                    return {200: "ok", 429: "limited"}.get(status, status)

                accepted, refused, elapsed = self.hammer(limited, 4)
                self.assertGreater(refused, 0)
                self.assert_rate(accepted, elapsed, 30, 3)
                # Another key has its own bucket (the default, far larger): not refused meanwhile.
                for _ in range(50):
                    self.assertEqual(http_call(server.http_port, "GET", "/v2", headers=bearer(OPS_SECRET))[0], 200)
                status, _, text = http_call(server.metrics_port, "GET", "/metrics", headers=bearer(OPS_SECRET))
                self.assertIn(b'weft_rate_limited_total{identity="key:limited"}', text)
            finally:
                self.assertEqual(server.stop(), 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class SharedMemoryConfinementTest(unittest.TestCase):
    def test_regions_outside_the_prefix_are_refused(self):
        from multiprocessing import shared_memory
        inside = shared_memory.SharedMemory(name="weft_cam_region_" + str(os.getpid()), create=True, size=64)
        outside = shared_memory.SharedMemory(name="other_region_" + str(os.getpid()), create=True, size=64)
        server = WeftServer(extra_args=["--allow-shared-memory", "--shared-memory-prefix", "weft_cam_",
                                        "--shared-memory-owner-uid", str(os.getuid())]).start()
        try:
            status, _, text = http_call(server.http_port, "POST", "/v2/systemsharedmemory/region/in/register",
                                        {"key": "/" + inside.name, "offset": 0, "byte_size": 64})
            self.assertEqual(status, 200, text)
            status, _, text = http_call(server.http_port, "POST", "/v2/systemsharedmemory/region/out/register",
                                        {"key": "/" + outside.name, "offset": 0, "byte_size": 64})
            self.assertEqual(status, 403, text)
            with self.assertRaises(grpc.RpcError) as e:
                server.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                    name="out", key="/" + outside.name, byte_size=64), timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        finally:
            server.stop()
            inside.close()
            inside.unlink()
            outside.close()
            outside.unlink()


if __name__ == "__main__":
    unittest.main()
