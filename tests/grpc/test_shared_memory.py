"""The system shared memory extension over gRPC and HTTP, against the real `weft serve`. Regions are POSIX shared
memory objects made here with multiprocessing.shared_memory, as a client process would make them."""

import base64
import json
import os
import subprocess
import threading
import time
import unittest
from multiprocessing import shared_memory

import numpy as np

from weft_testing import (BINARY, RPC_TIMEOUT, WeftServer, ensure_example_models, grpc, infer_request, load_reference,
                          pb, response_outputs)

TOLERANCE = 1e-4


def setUpModule():
    global server
    ensure_example_models()
    server = WeftServer(extra_args=["--allow-shared-memory"]).start()


def tearDownModule():
    code = server.stop()
    assert code == 0, "weft serve exited with %d:\n%s" % (code, "".join(server.log))


class Shm:
    """A POSIX shared memory object; its key is what the server opens with shm_open."""

    def __init__(self, size):
        self.shm = shared_memory.SharedMemory(create=True, size=size)
        self.key = "/" + self.shm.name.lstrip("/")
        self.size = size

    def write(self, offset, array):
        data = np.ascontiguousarray(array).tobytes()
        self.shm.buf[offset:offset + len(data)] = data

    def read(self, offset, dtype, shape):
        count = int(np.prod(shape))
        return np.frombuffer(bytes(self.shm.buf[offset:offset + count * np.dtype(dtype).itemsize]),
                             dtype=dtype).reshape(shape)

    def truncate(self, size):
        fd = os.open("/dev/shm/" + self.key.lstrip("/"), os.O_RDWR)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def close(self):
        self.shm.close()
        self.shm.unlink()


def grpc_register(name, key, byte_size, offset=0):
    server.stub.SystemSharedMemoryRegister(
        pb.SystemSharedMemoryRegisterRequest(name=name, key=key, offset=offset, byte_size=byte_size),
        timeout=RPC_TIMEOUT)


def grpc_unregister(name=""):
    server.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name=name), timeout=RPC_TIMEOUT)


def set_shm(parameters, region, byte_size, offset=0):
    parameters["shared_memory_region"].string_param = region
    parameters["shared_memory_byte_size"].int64_param = byte_size
    if offset:
        parameters["shared_memory_offset"].int64_param = offset


class GrpcSharedMemoryTest(unittest.TestCase):
    def setUp(self):
        self.regions = []

    def tearDown(self):
        grpc_unregister()
        for r in self.regions:
            r.close()

    def make(self, size):
        r = Shm(size)
        self.regions.append(r)
        return r

    def test_inputs_and_outputs_in_shared_memory_match_the_reference(self):
        ref = load_reference("add_sub")
        nbytes = ref["inputs"]["INPUT0"].nbytes  # 128
        inputs, outputs = self.make(4096 + 2 * nbytes), self.make(2 * nbytes)
        # The input region starts 4096 bytes into its object; tensors sit at offsets inside the region.
        inputs.write(4096, ref["inputs"]["INPUT0"])
        inputs.write(4096 + nbytes, ref["inputs"]["INPUT1"])
        grpc_register("in", inputs.key, 2 * nbytes, offset=4096)
        grpc_register("out", outputs.key, 2 * nbytes)

        status = server.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=RPC_TIMEOUT)
        self.assertEqual(set(status.regions), {"in", "out"})
        self.assertEqual((status.regions["in"].key, status.regions["in"].offset, status.regions["in"].byte_size),
                         (inputs.key, 4096, 2 * nbytes))

        request = pb.ModelInferRequest(model_name="add_sub", id="shm")
        for i, name in enumerate(("INPUT0", "INPUT1")):
            tensor = request.inputs.add(name=name, datatype="FP32", shape=[2, 16])
            set_shm(tensor.parameters, "in", nbytes, offset=i * nbytes)
        for i, name in enumerate(("OUTPUT0", "OUTPUT1")):
            set_shm(request.outputs.add(name=name).parameters, "out", nbytes, offset=i * nbytes)
        response = server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)

        self.assertEqual([t.name for t in response.outputs], ["OUTPUT0", "OUTPUT1"])
        self.assertEqual(list(response.raw_output_contents), [b"", b""])  # the data went to shared memory
        for i, name in enumerate(("OUTPUT0", "OUTPUT1")):
            self.assertEqual(list(response.outputs[i].shape), [2, 16])
            self.assertEqual(response.outputs[i].parameters["shared_memory_region"].string_param, "out")
            np.testing.assert_allclose(outputs.read(i * nbytes, np.float32, (2, 16)), ref["outputs"][name],
                                       rtol=0, atol=TOLERANCE, err_msg=name)

    def test_shared_memory_mixes_with_raw_contents_and_response_outputs(self):
        ref = load_reference("add_sub")
        region = self.make(1024)
        region.write(0, ref["inputs"]["INPUT0"])
        grpc_register("r", region.key, 1024)
        request = infer_request("add_sub", ref["inputs"], raw=True, outputs=["OUTPUT0", "OUTPUT1"])
        request.raw_input_contents[0] = b""  # INPUT0 comes from the region
        set_shm(request.inputs[0].parameters, "r", ref["inputs"]["INPUT0"].nbytes)
        set_shm(request.outputs[1].parameters, "r", 128, offset=512)
        response = server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)
        self.assertEqual(response.raw_output_contents[1], b"")
        out0 = np.frombuffer(response.raw_output_contents[0], np.float32).reshape(2, 16)
        np.testing.assert_allclose(out0, ref["outputs"]["OUTPUT0"], atol=TOLERANCE)
        np.testing.assert_allclose(region.read(512, np.float32, (2, 16)), ref["outputs"]["OUTPUT1"], atol=TOLERANCE)

    def test_sixteen_megabytes_through_shared_memory(self):
        values = np.random.default_rng(3).standard_normal(4 << 20).astype(np.float32)
        region = self.make(2 * values.nbytes)
        region.write(0, values)
        grpc_register("big", region.key, 2 * values.nbytes)
        request = pb.ModelInferRequest(model_name="identity")
        tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[values.size])
        set_shm(tensor.parameters, "big", values.nbytes)
        set_shm(request.outputs.add(name="OUTPUT0").parameters, "big", values.nbytes, offset=values.nbytes)
        response = server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)
        self.assertEqual(response.ByteSize() < 1024, True)  # no tensor bytes on the wire
        np.testing.assert_array_equal(region.read(values.nbytes, np.float32, values.shape), values)

    def test_out_of_bounds_references_are_rejected(self):
        region = self.make(256)
        cases = [
            (dict(name="a", key=region.key, byte_size=257), grpc.StatusCode.INVALID_ARGUMENT),   # past the object
            (dict(name="a", key=region.key, offset=200, byte_size=100), grpc.StatusCode.INVALID_ARGUMENT),
            (dict(name="a", key=region.key, byte_size=0), grpc.StatusCode.INVALID_ARGUMENT),
            (dict(name="a", key="/dev/shm/" + region.key.lstrip("/"), byte_size=16), grpc.StatusCode.INVALID_ARGUMENT),
            (dict(name="a", key="../../etc/passwd", byte_size=16), grpc.StatusCode.INVALID_ARGUMENT),
            (dict(name="a", key="/weft_no_such_object", byte_size=16), grpc.StatusCode.NOT_FOUND),
        ]
        for fields, code in cases:
            with self.assertRaises(grpc.RpcError) as e:
                server.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(**fields),
                                                       timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code(), code, fields)
        grpc_register("r", region.key, 128, offset=64)
        with self.assertRaises(grpc.RpcError) as e:
            grpc_register("r", region.key, 16)  # the name is taken
        self.assertEqual(e.exception.code(), grpc.StatusCode.ALREADY_EXISTS)  # as Triton answers

        def infer(offset, byte_size, region_name="r", count=4):
            request = pb.ModelInferRequest(model_name="identity")
            tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[count])
            set_shm(tensor.parameters, region_name, byte_size, offset=offset)
            return server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)

        infer(112, 16)  # the last 16 bytes of the region: fine
        for offset, byte_size, name, code in ((120, 16, "r", grpc.StatusCode.INVALID_ARGUMENT),
                                              (2 ** 63 - 1, 16, "r", grpc.StatusCode.INVALID_ARGUMENT),
                                              (0, 12, "r", grpc.StatusCode.INVALID_ARGUMENT),  # shape needs 16
                                              (0, 16, "unknown", grpc.StatusCode.NOT_FOUND)):
            with self.assertRaises(grpc.RpcError) as e:
                infer(offset, byte_size, name)
            self.assertEqual(e.exception.code(), code, (offset, byte_size, name))

        output_too_small = infer_request("identity", {"INPUT0": np.ones(8, np.float32)}, outputs=["OUTPUT0"])
        set_shm(output_too_small.outputs[0].parameters, "r", 16)
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.ModelInfer(output_too_small, timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("holds 16", e.exception.details())

    def test_an_object_shrunk_after_registration_is_caught(self):
        region = self.make(8192)
        grpc_register("r", region.key, 8192)
        region.truncate(1024)
        request = pb.ModelInferRequest(model_name="identity")
        set_shm(request.inputs.add(name="INPUT0", datatype="FP32", shape=[4]).parameters, "r", 16, offset=4096)
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("1024", e.exception.details())

    def test_a_shape_whose_byte_size_wraps_is_rejected(self):
        # Hardening issue, item 1, through shared memory: [2^62 + 2] FP32 over an 8-byte window.
        region = self.make(4096)
        grpc_register("r", region.key, 4096)
        request = pb.ModelInferRequest(model_name="identity")
        set_shm(request.inputs.add(name="INPUT0", datatype="FP32", shape=[4611686018427387906]).parameters, "r", 8)
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_shrinking_a_region_while_requests_run_fails_them_not_the_server(self):
        # Hardening issue, item 2: a client that ftruncates its registered object while requests read their
        # inputs in place and write their outputs took the server down with SIGBUS within about a second.
        size = 4 << 20
        region = self.make(size)
        region.write(0, np.arange(size // 4, dtype=np.float32))
        grpc_register("r", region.key, size)
        count = size // 8  # input in the first half, output in the second

        def request():
            r = pb.ModelInferRequest(model_name="identity")
            set_shm(r.inputs.add(name="INPUT0", datatype="FP32", shape=[count]).parameters, "r", size // 2)
            set_shm(r.outputs.add(name="OUTPUT0").parameters, "r", size // 2, offset=size // 2)
            return r

        outcomes = {}
        errors = []
        stop = threading.Event()

        def client():
            while not stop.is_set():
                try:
                    server.stub.ModelInfer(request(), timeout=RPC_TIMEOUT)
                    outcomes["OK"] = outcomes.get("OK", 0) + 1
                except grpc.RpcError as e:
                    outcomes[e.code().name] = outcomes.get(e.code().name, 0) + 1
                    if e.code() not in (grpc.StatusCode.INVALID_ARGUMENT,):
                        errors.append((e.code(), e.details()))

        clients = [threading.Thread(target=client) for _ in range(4)]
        for c in clients:
            c.start()
        time.sleep(0.3)
        for step in range(20):  # shrink and grow it back, again and again, under load
            region.truncate(0 if step % 2 == 0 else size)
            time.sleep(0.05)
        stop.set()
        for c in clients:
            c.join()
        self.assertIsNone(server.process.poll(), "".join(server.log[-20:]))
        self.assertEqual(errors, [])
        self.assertGreater(outcomes.get("INVALID_ARGUMENT", 0), 0, outcomes)
        # The server still serves, and a region registered again works.
        grpc_unregister("r")
        region.truncate(size)
        region.write(0, np.arange(4, dtype=np.float32))
        grpc_register("r", region.key, size)
        plain = pb.ModelInferRequest(model_name="identity")
        set_shm(plain.inputs.add(name="INPUT0", datatype="FP32", shape=[4]).parameters, "r", 16)
        reply = server.stub.ModelInfer(plain, timeout=RPC_TIMEOUT)
        np.testing.assert_array_equal(response_outputs(reply)["OUTPUT0"], np.arange(4, dtype=np.float32))

    def test_registrations_are_limited(self):
        region = self.make(4096)
        limited = WeftServer(extra_args=["--allow-shared-memory", "--max-shared-memory-regions", "3"]).start()
        try:
            for i in range(3):
                limited.stub.SystemSharedMemoryRegister(
                    pb.SystemSharedMemoryRegisterRequest(name=f"r{i}", key=region.key, byte_size=64),
                    timeout=RPC_TIMEOUT)
            with self.assertRaises(grpc.RpcError) as e:
                limited.stub.SystemSharedMemoryRegister(
                    pb.SystemSharedMemoryRegisterRequest(name="r3", key=region.key, byte_size=64), timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
            status, body = limited.http("POST", "/v2/systemsharedmemory/region/r4/register",
                                        {"key": region.key, "offset": 0, "byte_size": 64})
            self.assertEqual(status, 429, body)
        finally:
            self.assertEqual(limited.stop(), 0)

    def test_data_and_a_region_on_one_input_are_rejected(self):
        region = self.make(256)
        grpc_register("r", region.key, 256)
        request = infer_request("identity", {"INPUT0": np.ones(4, np.float32)}, raw=False)
        set_shm(request.inputs[0].parameters, "r", 16)
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.ModelInfer(request, timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_status_and_unregister(self):
        region = self.make(256)
        grpc_register("a", region.key, 64)
        grpc_register("b", region.key, 64, offset=64)
        one = server.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(name="b"), timeout=RPC_TIMEOUT)
        self.assertEqual(list(one.regions), ["b"])
        grpc_unregister("a")
        grpc_unregister("a")  # idempotent
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(name="a"), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        grpc_unregister()
        every = server.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=RPC_TIMEOUT)
        self.assertEqual(len(every.regions), 0)


class HttpSharedMemoryTest(unittest.TestCase):
    def setUp(self):
        self.region = Shm(4096)

    def tearDown(self):
        server.http("POST", "/v2/systemsharedmemory/unregister")
        self.region.close()

    def test_register_infer_status_unregister(self):
        ref = load_reference("add_sub")
        nbytes = ref["inputs"]["INPUT0"].nbytes
        self.region.write(0, ref["inputs"]["INPUT0"])
        self.region.write(nbytes, ref["inputs"]["INPUT1"])
        status, body = server.http("POST", "/v2/systemsharedmemory/region/io/register",
                                   {"key": self.region.key, "offset": 0, "byte_size": 4096})
        self.assertEqual(status, 200, body)
        status, body = server.http("GET", "/v2/systemsharedmemory/status")
        self.assertEqual((status, body), (200, [{"name": "io", "key": self.region.key, "offset": 0,
                                                 "byte_size": 4096}]))

        def shm(offset, size):
            return {"shared_memory_region": "io", "shared_memory_offset": offset, "shared_memory_byte_size": size}

        request = {
            "inputs": [{"name": n, "datatype": "FP32", "shape": [2, 16], "parameters": shm(i * nbytes, nbytes)}
                       for i, n in enumerate(("INPUT0", "INPUT1"))],
            "outputs": [{"name": "OUTPUT0", "parameters": shm(1024, nbytes)}, {"name": "OUTPUT1"}],
        }
        status, body = server.http("POST", "/v2/models/add_sub/infer", request)
        self.assertEqual(status, 200, body)
        out0, out1 = body["outputs"]
        self.assertNotIn("data", out0)
        # As Triton answers: no parameters (its C++ client would then look for binary_data_size).
        self.assertNotIn("parameters", out0)
        self.assertEqual((out0["datatype"], out0["shape"]), ("FP32", [2, 16]))
        np.testing.assert_allclose(self.region.read(1024, np.float32, (2, 16)), ref["outputs"]["OUTPUT0"],
                                   atol=TOLERANCE)
        np.testing.assert_allclose(np.array(out1["data"], np.float32).reshape(2, 16), ref["outputs"]["OUTPUT1"],
                                   atol=TOLERANCE)

        # A region registered over HTTP serves gRPC requests too.
        grpc_request = pb.ModelInferRequest(model_name="identity")
        set_shm(grpc_request.inputs.add(name="INPUT0", datatype="FP32", shape=[16]).parameters, "io", 64)
        response = server.stub.ModelInfer(grpc_request, timeout=RPC_TIMEOUT)
        np.testing.assert_array_equal(response_outputs(response)["OUTPUT0"], ref["inputs"]["INPUT0"][0])

        self.assertEqual(server.http("POST", "/v2/systemsharedmemory/region/io/unregister")[0], 200)
        self.assertEqual(server.http("GET", "/v2/systemsharedmemory/region/io/status")[0], 404)

    def test_names_that_are_not_utf8_are_refused_and_answers_stay_json(self):
        # Hardening issue, item 6: a region named with bytes that are not UTF-8 made the status answer invalid JSON.
        status, body = server.http("POST", "/v2/systemsharedmemory/region/%FF%FEx/register",
                                   {"key": self.region.key, "offset": 0, "byte_size": 64})
        self.assertEqual(status, 400, body)
        self.assertIn("UTF-8", body["error"])
        status, body = server.http("GET", "/v2/systemsharedmemory/region/%FF%FEx/status")  # strict json.loads
        self.assertEqual(status, 404, body)

    def test_bad_registrations_and_references(self):
        register = "/v2/systemsharedmemory/region/x/register"
        for body, code in (({"key": self.region.key, "byte_size": 8192}, 400),
                           ({"key": "/dev/shm/passwd", "byte_size": 16}, 400),
                           ({"key": "a/../b", "byte_size": 16}, 400),
                           ({"key": self.region.key}, 400),
                           ({"key": "/weft_no_such_object", "byte_size": 16}, 404)):
            self.assertEqual(server.http("POST", register, body)[0], code, body)
        self.assertEqual(server.http("POST", register, {"key": self.region.key, "byte_size": 64})[0], 200)
        request = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [16], "parameters": {
            "shared_memory_region": "x", "shared_memory_offset": 16, "shared_memory_byte_size": 64}}]}
        status, body = server.http("POST", "/v2/models/identity/infer", request)
        self.assertEqual(status, 400, body)
        self.assertIn("exceeds", body["error"])
        request["inputs"][0]["parameters"]["shared_memory_region"] = "y"
        self.assertEqual(server.http("POST", "/v2/models/identity/infer", request)[0], 404)
        self.assertEqual(server.http("POST", "/v2/systemsharedmemory/register")[0], 404)  # no region: no route


class BenchTest(unittest.TestCase):
    """`weft bench` over each protocol, with and without shared memory, as a user runs it."""

    def setUp(self):
        self.pids = []

    def bench(self, *args):
        process = subprocess.Popen([BINARY, "bench", "--model", "identity", "--shape", "INPUT0:1024", "--requests",
                                    "200", "--concurrency", "4", "--json", "-q"] + list(args),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pids.append(process.pid)
        stdout, stderr = process.communicate(timeout=120)
        self.assertEqual(process.returncode, 0, stderr)
        return json.loads(stdout)

    def test_every_protocol_and_shared_memory(self):
        http = ["--protocol", "http", "--url", f"127.0.0.1:{server.http_port}"]
        grpc_ = ["--protocol", "grpc", "--url", f"127.0.0.1:{server.grpc_port}"]
        for args, protocol, tensors in ((http + ["--binary"], "http", "binary"), (grpc_, "grpc", "raw"),
                                        (http + ["--shared-memory", "system"], "http", "system_shared_memory"),
                                        (grpc_ + ["--shared-memory", "system"], "grpc", "system_shared_memory")):
            with self.subTest(args=args):
                report = self.bench(*args)
                self.assertEqual((report["protocol"], report["tensor_format"]), (protocol, tensors))
                self.assertEqual(report["successes"], 200, report["outcomes"])
                self.assertTrue(report["consistent"])
        # Every run unregistered its regions and unlinked its objects.
        status = server.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=RPC_TIMEOUT)
        self.assertEqual(len(status.regions), 0)
        # Only this test's own runs: other tests (loadgen_e2e_test) may run `weft bench` at the same time.
        ours = tuple(f"weft_bench_{pid}_" for pid in self.pids)
        self.assertEqual([n for n in os.listdir("/dev/shm") if n.startswith(ours)], [])


class CudaSharedMemoryTest(unittest.TestCase):
    """The CUDA shared memory routes and RPCs where there is no GPU: the status calls answer no regions, a
    registration says why it cannot be done, and malformed ones are still told what is wrong. With a GPU, the real
    handles are tested by cuda_ipc_test and bench/gpu/session.sh."""

    HANDLE = base64.b64encode(bytes(range(64))).decode()

    def setUp(self):
        metadata = server.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=RPC_TIMEOUT)
        if "cuda_shared_memory" in metadata.extensions:
            self.skipTest("this machine has a GPU")

    def test_http_without_a_gpu(self):
        self.assertEqual(server.http("GET", "/v2/cudasharedmemory/status"), (200, []))
        status, reply = server.http("POST", "/v2/cudasharedmemory/region/gpu/register",
                                    {"raw_handle": {"b64": self.HANDLE}, "device_id": 0, "byte_size": 64})
        self.assertEqual(status, 501, reply)
        self.assertIn("needs a GPU", reply["error"])
        for body, words in (({"raw_handle": {"b64": "YWJj"}, "device_id": 0, "byte_size": 64}, "64 bytes"),
                            ({"raw_handle": {"b64": "not base64!"}, "device_id": 0, "byte_size": 64}, "base64"),
                            ({"raw_handle": self.HANDLE, "device_id": 0, "byte_size": 64}, "raw_handle"),
                            ({"raw_handle": {"b64": self.HANDLE}, "byte_size": 64}, "device_id"),
                            ({"raw_handle": {"b64": self.HANDLE}, "device_id": -1, "byte_size": 64}, "device_id"),
                            ({"raw_handle": {"b64": self.HANDLE}, "device_id": 0, "byte_size": 0}, "byte_size")):
            with self.subTest(body=body):
                status, reply = server.http("POST", "/v2/cudasharedmemory/region/gpu/register", body)
                self.assertEqual(status, 400, reply)
                self.assertIn(words, reply["error"])
        self.assertEqual(server.http("GET", "/v2/cudasharedmemory/region/gpu/status")[0], 404)
        self.assertEqual(server.http("GET", "/v2/cudasharedmemory/region/gpu/register")[0], 405)
        self.assertEqual(server.http("POST", "/v2/cudasharedmemory/region/gpu/unregister"), (200, {}))
        self.assertEqual(server.http("POST", "/v2/cudasharedmemory/unregister"), (200, {}))

    def test_grpc_without_a_gpu(self):
        status = server.stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest(), timeout=RPC_TIMEOUT)
        self.assertEqual(len(status.regions), 0)
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.CudaSharedMemoryRegister(pb.CudaSharedMemoryRegisterRequest(
                name="gpu", raw_handle=bytes(range(64)), device_id=0, byte_size=64), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("needs a GPU", e.exception.details())
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.CudaSharedMemoryRegister(pb.CudaSharedMemoryRegisterRequest(
                name="gpu", raw_handle=b"short", device_id=0, byte_size=64), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as e:
            server.stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest(name="gpu"), timeout=RPC_TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        server.stub.CudaSharedMemoryUnregister(pb.CudaSharedMemoryUnregisterRequest(name="gpu"), timeout=RPC_TIMEOUT)

    def test_system_regions_are_not_cuda_regions(self):
        region = Shm(256)
        try:
            self.assertEqual(server.http("POST", "/v2/systemsharedmemory/region/host/register",
                                         {"key": region.key, "byte_size": 64})[0], 200)
            self.assertEqual(server.http("GET", "/v2/cudasharedmemory/status"), (200, []))
            self.assertEqual(server.http("GET", "/v2/cudasharedmemory/region/host/status")[0], 404)
            # Unregistering CUDA regions leaves system ones alone.
            self.assertEqual(server.http("POST", "/v2/cudasharedmemory/unregister")[0], 200)
            self.assertEqual(len(server.http("GET", "/v2/systemsharedmemory/region/host/status")[1]), 1)
        finally:
            server.http("POST", "/v2/systemsharedmemory/region/host/unregister")
            region.close()


class BenchCudaTest(unittest.TestCase):
    """`weft bench --shared-memory cuda`: the whole run with a GPU, a clear refusal without one."""

    def run_bench(self, protocol, port):
        return subprocess.run([BINARY, "bench", "--model", "identity", "--shape", "INPUT0:1024", "--requests", "200",
                               "--concurrency", "4", "--json", "-q", "--protocol", protocol,
                               "--url", f"127.0.0.1:{port}", "--shared-memory", "cuda"],
                              capture_output=True, text=True, timeout=120)

    def test_both_protocols(self):
        metadata = server.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=RPC_TIMEOUT)
        gpu = "cuda_shared_memory" in metadata.extensions
        for protocol, port in (("http", server.http_port), ("grpc", server.grpc_port)):
            with self.subTest(protocol=protocol):
                result = self.run_bench(protocol, port)
                if not gpu:
                    self.assertEqual(result.returncode, 2, result.stdout)
                    self.assertIn("CUDA shared memory needs a GPU", result.stderr)
                    continue
                self.assertEqual(result.returncode, 0, result.stderr)
                report = json.loads(result.stdout)
                self.assertEqual(report["tensor_format"], "cuda_shared_memory")
                self.assertEqual(report["successes"], 200, report["outcomes"])
        self.assertEqual(server.http("GET", "/v2/cudasharedmemory/status"), (200, []))


class SharedMemoryOffTest(unittest.TestCase):
    """Without --allow-shared-memory the extension is absent over both protocols."""

    @classmethod
    def setUpClass(cls):
        cls.off = WeftServer().start()

    @classmethod
    def tearDownClass(cls):
        assert cls.off.stop() == 0

    def test_everything_shared_memory_is_unimplemented(self):
        region = Shm(256)
        try:
            with self.assertRaises(grpc.RpcError) as e:
                self.off.stub.SystemSharedMemoryRegister(
                    pb.SystemSharedMemoryRegisterRequest(name="r", key=region.key, byte_size=64), timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
            request = pb.ModelInferRequest(model_name="identity")
            set_shm(request.inputs.add(name="INPUT0", datatype="FP32", shape=[4]).parameters, "r", 16)
            with self.assertRaises(grpc.RpcError) as e:
                self.off.stub.ModelInfer(request, timeout=RPC_TIMEOUT)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
            status, _ = self.off.http("POST", "/v2/systemsharedmemory/region/r/register",
                                      {"key": region.key, "byte_size": 64})
            self.assertEqual(status, 501)
            status, _ = self.off.http("GET", "/v2/cudasharedmemory/status")
            self.assertEqual(status, 501)
            metadata = self.off.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=RPC_TIMEOUT)
            self.assertNotIn("system_shared_memory", metadata.extensions)
            self.assertNotIn("cuda_shared_memory", metadata.extensions)
        finally:
            region.close()


if __name__ == "__main__":
    unittest.main()
