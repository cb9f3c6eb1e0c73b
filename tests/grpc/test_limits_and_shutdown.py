"""The server's edges, on the real `weft serve` where signals and descriptor limits matter: SIGTERM with requests
on the wire, the exit timeout, a second signal, readiness during the drain delay, the connection limit and running
out of descriptors. Each test starts its own server and stops it with a signal."""

import http.client
import json
import os
import queue
import resource
import shutil
import signal
import socket
import tempfile
import threading
import time
import unittest

from weft_testing import (EXAMPLES, RPC_TIMEOUT, WeftServer, grpc, health_pb2, health_pb2_grpc, infer_request, pb,
                          pb_grpc, write_slow_repository)

import numpy as np

# Generous bounds on how long things may take: the build machine is small and busy, and no test measures speed.
SLACK = 15


def repository(slow_delay_us=None):
    """identity and sleep (2 ms per batch) from the examples; with `slow_delay_us`, also "slow": the sleep builtin
    taking that long per batch."""
    root = write_slow_repository(slow_delay_us) if slow_delay_us else tempfile.mkdtemp(prefix="weft_edges_repo_")
    for model in ("identity", "sleep"):
        shutil.copytree(os.path.join(EXAMPLES, "models", model), os.path.join(root, model))
    return root


def infer_body(model):
    shape = [1, 1] if model in ("sleep", "slow") else [4]
    data = [1.0] * int(np.prod(shape))
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": data}]})


def connection(server):
    return http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=RPC_TIMEOUT)


def send_infer(conn, model):
    conn.request("POST", f"/v2/models/{model}/infer", body=infer_body(model),
                 headers={"Content-Type": "application/json"})


def get(server, path):
    """(status, body) of a GET on a fresh connection."""
    conn = connection(server)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def stat_fields(pid):
    """/proc/<pid>/stat after the command name: fields[0] is the state (field 3 of proc(5))."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid):
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minor_faults(pid):
    return int(stat_fields(pid)[7])


def resident_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def eventually(condition, timeout=SLACK):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


class InBackground(threading.Thread):
    """Runs `fn` on a thread; `result()` is what it returned or raised."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn = fn
        self.value = self.error = None
        self.start()

    def run(self):
        try:
            self.value = self.fn()
        except Exception as e:  # noqa: BLE001: handed to the test
            self.error = e

    def result(self, timeout=RPC_TIMEOUT + SLACK):
        self.join(timeout)
        assert not self.is_alive(), "still waiting after %s s" % timeout
        return self.value, self.error


def http_infer(server, model):
    """(status, parsed body, Connection header) of one inference on a fresh connection."""
    conn = connection(server)
    try:
        send_infer(conn, model)
        response = conn.getresponse()
        return response.status, json.loads(response.read()), response.getheader("Connection")
    finally:
        conn.close()


class ShutdownTest(unittest.TestCase):
    server = None

    def tearDown(self):
        if self.server and self.server.process.poll() is None:
            self.server.process.kill()
            self.server.process.wait()

    def start(self, repo, *args, **kwargs):
        self.server = WeftServer(repository=repo, extra_args=list(args), **kwargs).start()
        return self.server

    def test_sigterm_answers_the_requests_on_the_wire_of_32_keep_alive_clients(self):
        # Issue item 5: 16 of 32 such clients lost their answer per restart. One I/O thread, kept busy by a large
        # JSON request, so that the 32 requests are still unread on the wire when the signal comes.
        server = self.start(repository(), "--http-threads", "1")
        clients = [connection(server) for _ in range(32)]
        for c in clients:
            c.request("GET", "/v2/health/live")
            warm = c.getresponse()
            warm.read()
            self.assertEqual(warm.status, 200)
        large = connection(server)
        n = 4 << 20
        large.request("POST", "/v2/models/identity/infer", headers={"Content-Type": "application/json"},
                      body='{"inputs":[{"name":"INPUT0","shape":[%d],"datatype":"FP32","data":[%s1]}]}'
                      % (n, "1," * (n - 1)))
        for i, c in enumerate(clients):
            send_infer(c, "sleep" if i % 2 else "identity")
        server.send_signal(signal.SIGTERM)
        lost = []
        for i, c in enumerate([large] + clients):
            try:
                response = c.getresponse()
                body = json.loads(response.read())
                if response.status != 200 or "outputs" not in body:
                    lost.append((i, response.status, body))
                # Then the server closes the connection: an answer written during the shutdown says so (http.client
                # then drops the socket), one written before it closes after the shutdown's grace.
                elif response.getheader("Connection") != "close":
                    c.sock.settimeout(SLACK)
                    self.assertEqual(c.sock.recv(1), b"")
            except (OSError, http.client.HTTPException) as e:
                lost.append((i, repr(e)))
            c.close()
        self.assertEqual(lost, [], "%d of 33 requests lost their answer" % len(lost))
        self.assertEqual(server.wait(SLACK), 0, "".join(server.log))

    def test_a_request_longer_than_the_old_five_second_drain_is_answered(self):
        server = self.start(repository(slow_delay_us=6_000_000), "--exit-timeout-secs", "60")
        call = InBackground(lambda: http_infer(server, "slow"))
        time.sleep(0.5)  # in flight
        server.send_signal(signal.SIGTERM)
        (status, body, connection_header), error = call.result()
        self.assertIsNone(error)
        self.assertEqual(status, 200, body)
        self.assertEqual(connection_header, "close")
        self.assertEqual(server.wait(SLACK), 0, "".join(server.log))

    def test_a_request_longer_than_the_exit_timeout_gets_an_error_and_the_process_exits(self):
        # A model that does not return within the test: the engine's destructor would wait for it.
        server = self.start(repository(slow_delay_us=600_000_000), "--exit-timeout-secs", "2")
        http_call = InBackground(lambda: http_infer(server, "slow"))
        time.sleep(0.3)
        request = infer_request("slow", {"INPUT0": np.ones((1, 1), dtype=np.float32)})
        grpc_call = InBackground(lambda: server.stub.ModelInfer(request, timeout=RPC_TIMEOUT + SLACK))
        time.sleep(0.5)
        signalled = time.monotonic()
        server.send_signal(signal.SIGTERM)
        (status, body, connection_header), error = http_call.result()
        self.assertIsNone(error)
        self.assertEqual(status, 503, body)
        self.assertIn("error", body)
        self.assertEqual(connection_header, "close")
        _, grpc_error = grpc_call.result()
        self.assertIsInstance(grpc_error, grpc.RpcError)
        self.assertIn(grpc_error.code(), (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED))
        code = server.wait(SLACK)
        self.assertLess(time.monotonic() - signalled, 2 + SLACK)  # not the 600 s the execution would take
        self.assertEqual(code, 1, "".join(server.log))
        self.assertTrue(any("exit timeout" in line for line in server.log), "".join(server.log))

    def test_a_second_signal_exits_at_once(self):
        server = self.start(repository(slow_delay_us=600_000_000), "--exit-timeout-secs", "600")
        InBackground(lambda: http_infer(server, "slow"))
        time.sleep(0.5)
        server.send_signal(signal.SIGTERM)
        self.assertTrue(eventually(lambda: any("readiness is false" in line for line in server.log)))
        server.send_signal(signal.SIGTERM)
        self.assertEqual(server.wait(SLACK), 128 + signal.SIGTERM)
        self.assertTrue(any("again: exiting at once" in line for line in server.log), "".join(server.log))

    def test_readiness_is_false_during_the_drain_delay_while_everything_else_serves(self):
        server = self.start(repository(), "--drain-delay-secs", "6")
        watch = server.health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=RPC_TIMEOUT)
        self.assertEqual(next(watch).status, health_pb2.HealthCheckResponse.SERVING)
        self.assertEqual(get(server, "/v2/health/ready")[0], 200)
        server.send_signal(signal.SIGTERM)
        self.assertTrue(eventually(lambda: get(server, "/v2/health/ready")[0] == 503))
        status, body = get(server, "/v2/health/ready")
        self.assertIn(b"shutting down", body)
        self.assertEqual(get(server, "/v2/health/live")[0], 200)
        status, body, connection_header = http_infer(server, "identity")  # a new connection, still accepted
        self.assertEqual(status, 200, body)
        self.assertFalse(server.stub.ServerReady(pb.ServerReadyRequest(), timeout=RPC_TIMEOUT).ready)
        self.assertTrue(server.stub.ServerLive(pb.ServerLiveRequest(), timeout=RPC_TIMEOUT).live)
        check = server.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=RPC_TIMEOUT)
        self.assertEqual(check.status, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.assertEqual(next(watch).status, health_pb2.HealthCheckResponse.NOT_SERVING)
        request = infer_request("identity", {"INPUT0": np.ones(4, dtype=np.float32)})
        self.assertEqual(len(server.stub.ModelInfer(request, timeout=RPC_TIMEOUT).outputs), 1)
        self.assertEqual(server.wait(6 + SLACK), 0, "".join(server.log))


    def test_a_stream_held_open_is_ended_once_answered_and_does_not_hold_the_exit(self):
        server = self.start(repository())  # the default exit timeout: 30 s
        requests = queue.Queue()
        stream = server.stub.ModelStreamInfer(iter(requests.get, None), timeout=RPC_TIMEOUT + SLACK)
        requests.put(infer_request("sleep", {"INPUT0": np.ones((1, 1), dtype=np.float32)}, request_id="first"))
        self.assertEqual(next(stream).infer_response.id, "first")
        requests.put(infer_request("sleep", {"INPUT0": np.ones((1, 1), dtype=np.float32)}, request_id="second"))
        server.send_signal(signal.SIGTERM)
        answers, ended = [], None
        try:
            for response in stream:
                answers.append(response)
        except grpc.RpcError as e:
            ended = e
        # The second request was on the wire: answered, unless the stream had already ended when it came.
        self.assertTrue(all(a.infer_response.id == "second" and not a.error_message for a in answers), answers)
        self.assertIsNotNone(ended)
        self.assertEqual(ended.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(server.wait(SLACK), 0, "".join(server.log))
        requests.put(None)


    def test_a_stream_whose_client_keeps_sending_ends_at_shutdown(self):
        # A stream being ended reads no more: what it has read is answered, then it ends, however fast its client
        # sends (one that kept reading could stay busy until the exit deadline, 30 s).
        server = self.start(repository())
        stop = threading.Event()

        def requests():
            n = 0
            while not stop.is_set():
                n += 1
                yield infer_request("sleep", {"INPUT0": np.ones((1, 1), dtype=np.float32)}, request_id=str(n))

        stream = server.stub.ModelStreamInfer(requests(), timeout=60)
        self.assertEqual(next(stream).infer_response.id, "1")
        server.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        ended = None
        try:
            for _ in stream:
                pass
        except grpc.RpcError as e:
            ended = e
        finally:
            stop.set()
        self.assertIsNotNone(ended)
        self.assertEqual(ended.code(), grpc.StatusCode.UNAVAILABLE, ended.details())
        self.assertEqual(server.wait(SLACK), 0, "".join(server.log))
        self.assertLess(time.monotonic() - signalled, SLACK, "the stream held the exit until its deadline")

    def test_a_watch_on_an_unknown_service_does_not_hold_the_exit(self):
        server = self.start(repository())
        watch = server.health.Watch(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=60)
        self.assertEqual(next(watch).status, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
        server.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        with self.assertRaises(grpc.RpcError) as ended:
            next(watch)
        self.assertEqual(ended.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(server.wait(SLACK), 0, "".join(server.log))
        self.assertLess(time.monotonic() - signalled, SLACK, "the watch held the exit until its deadline")


class LimitsTest(unittest.TestCase):
    server = None

    def tearDown(self):
        if self.server and self.server.process.poll() is None:
            self.server.process.kill()
            self.server.process.wait()

    def test_connections_past_the_limit_are_closed_at_once(self):
        self.server = server = WeftServer(repository=repository(), extra_args=["--max-connections", "4"]).start()
        clients = [connection(server) for _ in range(4)]
        for c in clients:
            c.request("GET", "/v2/health/live")
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        over = socket.create_connection(("127.0.0.1", server.http_port), timeout=SLACK)
        try:
            over.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(over.recv(100), b"", "closed without an answer")
        except ConnectionResetError:
            pass
        finally:
            over.close()
        clients.pop().close()
        self.assertTrue(eventually(lambda: get(server, "/v2/health/live")[0] == 200))
        for c in clients:
            c.close()
        server.send_signal(signal.SIGTERM)
        self.assertEqual(server.wait(SLACK), 0)

    @unittest.skipIf("undefined" in os.environ.get("WEFT_SANITIZE", ""),
                     "UBSan's vptr check probes memory through a pipe; out of descriptors, it reports every virtual "
                     "call as a type error (a false positive). The release build runs this test.")
    def test_running_out_of_descriptors_neither_spins_nor_floods_the_log_and_recovers(self):
        # Issue item 3: at the descriptor limit a failing accept was retried at once: 363,000 log lines a second.
        # Both limits low, so that raising the soft one to the hard one changes nothing, and a connection limit
        # above them, so that accept itself runs out of descriptors.
        limit = 128

        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        self.server = server = WeftServer(repository=repository(), extra_args=["--max-connections", "100000"],
                                          preexec_fn=low_limit).start()
        self.assertTrue(any(f"(RLIMIT_NOFILE): {limit}" in line for line in server.log), "".join(server.log))
        idle = [socket.create_connection(("127.0.0.1", server.http_port), timeout=SLACK) for _ in range(2 * limit)]
        self.assertTrue(eventually(lambda: len(os.listdir(f"/proc/{server.process.pid}/fd")) >= limit - 2))
        lines_before, cpu_before, t0 = len(server.log), cpu_seconds(server.process.pid), time.monotonic()

        # A new client is told at once (closed), instead of timing out in the listen backlog. At the moment it
        # comes, a descriptor may still be free (the two acceptors' spares and the connections they shed come and
        # go), and then it is served, rightly: such a client is kept open, so that the table fills, and the next
        # one tried. (CI once saw the first one served.)
        served = []

        def closed_at_once(port, request):
            for _ in range(8):
                late = socket.create_connection(("127.0.0.1", port), timeout=SLACK)
                try:
                    if request:
                        late.sendall(request)
                    greeting = late.recv(100)
                except (ConnectionResetError, BrokenPipeError):
                    greeting = b""
                except BaseException:
                    late.close()
                    raise
                if greeting == b"":
                    late.close()
                    return True
                served.append(late)  # answered (HTTP) or greeted with SETTINGS (gRPC): it had a descriptor
            return False

        self.assertTrue(closed_at_once(server.http_port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"),
                        "".join(server.log[-20:]))
        # gRPC's port too: its own listener (gRPC 1.51) stopped accepting for good after this; weft's retries.
        self.assertTrue(closed_at_once(server.grpc_port, None), "".join(server.log[-20:]))
        time.sleep(max(0.0, 3 - (time.monotonic() - t0)))
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(server.process.pid) - cpu_before
        lines = len(server.log) - lines_before
        self.assertLess(lines, 100, "".join(server.log[-20:]))
        self.assertLess(cpu / elapsed, 0.5, "the server spins: %.2f s of CPU in %.2f s" % (cpu, elapsed))

        for s in idle + served:
            s.close()
        self.assertTrue(eventually(lambda: get(server, "/v2/health/live")[0] == 200))
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as fresh:
            check = health_pb2_grpc.HealthStub(fresh).Check(health_pb2.HealthCheckRequest(), timeout=RPC_TIMEOUT)
            self.assertEqual(check.status, health_pb2.HealthCheckResponse.SERVING)
        self.assertLess(len(server.log), 100, "".join(server.log[-20:]))
        server.send_signal(signal.SIGTERM)
        self.assertEqual(server.wait(SLACK), 0)


class MemoryTest(unittest.TestCase):
    """The pages of large tensors are kept while such tensors keep coming, and go back once they stop (jemalloc with
    weft's IdleMemoryPurge; not in sanitized builds, whose allocator is the sanitizer's)."""

    MIB = 1 << 20

    def test_large_tensors_reuse_their_pages_and_give_them_back_once_they_stop(self):
        server = WeftServer(repository(), extra_args=["--log-level", "info"])
        server.start()
        try:
            if not any("freed pages given back when idle" in line for line in server.log):
                self.skipTest("weft does not run on jemalloc here: " + "".join(
                    line for line in server.log if "memory from" in line))
            pid = server.process.pid
            options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
            data = np.arange(4 << 20, dtype=np.float32)  # 16 MiB
            request = infer_request("identity", {"INPUT0": data})
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}", options=options) as channel:
                stub = pb_grpc.GRPCInferenceServiceStub(channel)

                def one():
                    response = stub.ModelInfer(request, timeout=RPC_TIMEOUT + SLACK)
                    self.assertEqual(len(response.raw_output_contents[0]), data.nbytes)

                before = resident_bytes(pid)
                for _ in range(4):
                    one()
                faults_before = minor_faults(pid)
                for _ in range(12):
                    one()
                faults = (minor_faults(pid) - faults_before) / 12
                held = resident_bytes(pid)
            # A 16 MiB message is 4,096 pages. When jemalloc purged between requests, each took fresh ones: 3,900-7,000
            # faults a request (6,000 with this client); 570-1,200 since.
            self.assertLess(faults, 2048, "page faults per 16 MiB request")
            self.assertGreater(held - before, 32 * self.MIB, "the large tensors' pages are not kept")
            # Given back 10 s after the last large allocation (looked at once a second).
            self.assertTrue(eventually(lambda: resident_bytes(pid) < before + (held - before) // 4, timeout=10 + SLACK),
                            "resident %d MiB before, %d with the tensors, %d now" % (
                                before // self.MIB, held // self.MIB, resident_bytes(pid) // self.MIB))
        finally:
            server.stop()

if __name__ == "__main__":
    unittest.main()
