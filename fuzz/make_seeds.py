#!/usr/bin/env python3
"""Writes the seed corpora (fuzz/corpus/<target>/) and the dictionaries (fuzz/dict/). Both are committed: rerun
this after changing it, or after proto/model_config.proto changes (the pbtxt dictionary lists its names).

Each seed is a real request or config in the framing its target defines (see the comment at the top of each
fuzz/<target>_fuzz.cc). The gRPC seeds are written as text-format messages here and encoded with
`protoc --encode`, so that they stay readable in this file.

Usage: python3 fuzz/make_seeds.py   (from any directory; needs protoc)
"""

import base64
import gzip
import hashlib
import hmac
import json
import pathlib
import re
import shutil
import struct
import subprocess
import zlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
DICT = ROOT / "fuzz" / "dict"


def write(target, name, data):
    path = CORPUS / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def j(value):
    return json.dumps(value, separators=(",", ":"))


def floats(*values):
    return struct.pack("<%df" % len(values), *values)


def bytes_elements(*elements):
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


# Every datatype: (KServe name, a JSON value, its binary encoding).
EVERY_TYPE = [
    ("BOOL", [True, False], b"\x01\x00"),
    ("UINT8", [0, 255], b"\x00\xff"),
    ("UINT16", [0, 65535], struct.pack("<2H", 0, 65535)),
    ("UINT32", [1, 4294967295], struct.pack("<2I", 1, 4294967295)),
    ("UINT64", [0, 18446744073709551615], struct.pack("<2Q", 0, 18446744073709551615)),
    ("INT8", [-128, 127], struct.pack("<2b", -128, 127)),
    ("INT16", [-32768, 32767], struct.pack("<2h", -32768, 32767)),
    ("INT32", [-2147483648, 2147483647], struct.pack("<2i", -2147483648, 2147483647)),
    ("INT64", [-2**63, 2**63 - 1], struct.pack("<2q", -2**63, 2**63 - 1)),
    ("FP16", [1.5, -2], struct.pack("<2e", 1.5, -2)),
    ("FP32", [0.1, 3], floats(0.1, 3)),
    ("FP64", [0.1, -1e300], struct.pack("<2d", 0.1, -1e300)),
    ("BF16", [1, -2.5], b"\x80\x3f\x20\xc0"),
    ("BYTES", ["ab", ""], bytes_elements(b"ab", b"")),
]


# --- http_infer_request: "<model>\n<header: empty, binary, or its value>\n<body>" ------------------------------

def http(name, model, body, binary=None, header=None):
    """A JSON body; with `binary`, the binary extension in the "binary" framing (JSON, '\\n', binary section)."""
    if isinstance(body, (dict, list)):
        body = j(body)
    body = body.encode() if isinstance(body, str) else body
    if binary is not None:
        header = "binary"
        body += b"\n" + binary
    write("http_infer_request", name, (model + "\n" + (header or "") + "\n").encode() + body)


def json_input(name, datatype, shape, data):
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def binary_input(name, datatype, shape, size, **parameters):
    return {"name": name, "datatype": datatype, "shape": shape,
            "parameters": dict(binary_data_size=size, **parameters)}


def shm_tensor(name, datatype=None, shape=None, offset=0, byte_size=16, region="region"):
    t = {"name": name}
    if datatype:
        t.update(datatype=datatype, shape=shape)
    t["parameters"] = {"shared_memory_region": region, "shared_memory_offset": offset,
                       "shared_memory_byte_size": byte_size}
    return t


def http_seeds():
    http("json_fp32", "identity", {"inputs": [json_input("INPUT0", "FP32", [3], [1, 2.5, -3])]})
    http("json_params_outputs", "identity",
         {"id": "req-7", "parameters": {"priority": 2, "timeout": 1500, "binary_data_output": True, "flag": True,
                                        "count": -3, "ratio": 0.5, "name": "n", "huge": 18446744073709551615},
          "inputs": [json_input("INPUT0", "FP32", [1], [1])],
          "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": False}}]})
    http("binary_fp32", "identity",
         {"inputs": [binary_input("INPUT0", "FP32", [4], 16)],
          "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]},
         binary=floats(1.5, -2, 3.25, 4))
    write("http_infer_request", "raw_fp32", b"identity\n0\n" + floats(1, 2, 3, 4))
    http("json_bytes", "identity_bytes", {"inputs": [json_input("INPUT0", "BYTES", [2], ["ab", ""])]})
    elements = bytes_elements(b"xyz", b"", b"weft\x00")
    http("binary_bytes", "identity_bytes",
         {"parameters": {"binary_data_output": True},
          "inputs": [binary_input("INPUT0", "BYTES", [3], len(elements))]},
         binary=elements)
    write("http_infer_request", "raw_bytes", b"identity_bytes\n0\nhello, weft")
    sixteen = list(range(16))
    http("json_nested_batch", "add_sub",
         {"id": "good", "inputs": [json_input("INPUT0", "FP32", [2, 16], [sixteen, sixteen]),
                                   json_input("INPUT1", "FP32", [2, 16], [[1] * 16, [0.5] * 16])],
          "outputs": [{"name": "OUTPUT1"}, {"name": "OUTPUT0", "parameters": {"binary_data": True}}]})
    http("binary_batch", "add_sub",
         {"inputs": [binary_input("INPUT0", "FP32", [1, 16], 64), binary_input("INPUT1", "FP32", [1, 16], 64)],
          "parameters": {"binary_data_output": True}},
         binary=floats(*range(16)) + floats(*([1] * 16)))
    http("binary_image", "image", {"inputs": [binary_input("INPUT0", "UINT8", [1, 3, 2, 2], 12)]},
         binary=bytes(range(12)))
    write("http_infer_request", "raw_image_two_variable_dims", b"image\n0\n" + bytes(12))
    http("reshaped", "reshaped",
         {"inputs": [json_input("INPUT0", "INT64", [2, 1], [[7], [-7]]),
                     binary_input("INPUT1", "FP16", [2, 2, 3], 24)]},
         binary=struct.pack("<12e", *range(12)))
    http("json_scalar", "scalar", {"inputs": [json_input("INPUT0", "BOOL", [1], [True])]})
    write("http_infer_request", "raw_scalar", b"scalar\n0\n\x01")
    http("json_every_type", "every_type",
         {"inputs": [json_input("INPUT%d" % i, t, [1, 2], v) for i, (t, v, _) in enumerate(EVERY_TYPE)]})
    http("binary_every_type", "every_type",
         {"inputs": [binary_input("INPUT%d" % i, t, [1, 2], len(b)) for i, (t, _, b) in enumerate(EVERY_TYPE)],
          "parameters": {"binary_data_output": True}},
         binary=b"".join(b for _, _, b in EVERY_TYPE))
    http("classification", "every_type",
         {"inputs": [json_input("INPUT%d" % i, t, [2, 2], [v, v]) for i, (t, v, _) in enumerate(EVERY_TYPE)],
          "outputs": [{"name": "OUTPUT%d" % i, "parameters": {"classification": i % 4}}
                      for i in range(len(EVERY_TYPE))]})
    http("classification_batch", "add_sub",
         {"inputs": [json_input("INPUT0", "FP32", [2, 16], [sixteen, sixteen[::-1]]),
                     json_input("INPUT1", "FP32", [2, 16], [[1] * 16, [0.5] * 16])],
          "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 3, "binary_data": True}}]})
    # One element of each: after BOOL and UINT8 (a byte each) most inputs start misaligned for their type.
    firsts = [b[:len(b) // 2] if t != "BYTES" else bytes_elements(b"ab") for t, _, b in EVERY_TYPE]
    http("binary_misaligned", "every_type",
         {"inputs": [binary_input("INPUT%d" % i, t, [1, 1], len(b)) for i, ((t, _, _), b) in
                     enumerate(zip(EVERY_TYPE, firsts))]},
         binary=b"".join(firsts))
    http("shm_fp32", "identity",
         {"inputs": [shm_tensor("INPUT0", "FP32", [4], offset=8, byte_size=16)],
          "outputs": [shm_tensor("OUTPUT0", offset=1024, byte_size=64)]})
    http("shm_bytes", "identity_bytes",
         {"inputs": [shm_tensor("INPUT0", "BYTES", [2], offset=0, byte_size=16)],
          "outputs": [shm_tensor("OUTPUT0", offset=2048, byte_size=16)]})
    http("shm_unknown_region", "identity", {"inputs": [shm_tensor("INPUT0", "FP32", [4], region="nope")]})
    http("json_unknown_model", "no_such_model",
         {"inputs": [json_input("x", "INT32", [2, 3], [[1, 2, 3], [4, 5, 6]])]})
    http("classification", "identity",
         {"inputs": [json_input("INPUT0", "FP32", [1], [1])],
          "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 3}}]})
    http("deep_nesting", "identity", '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":'
         + "[" * 200 + "1" + "]" * 200 + "}]}")
    http("empty_inputs_binary_header", "identity", {"inputs": []}, binary=b"")
    # The header as a client sends it, rather than computed: right, and past the end of the body.
    literal = j({"inputs": [binary_input("INPUT0", "FP32", [2], 8)]}).encode()
    write("http_infer_request", "binary_literal_header",
          b"identity\n" + str(len(literal)).encode() + b"\n" + literal + floats(1, 2))
    write("http_infer_request", "header_past_end", b"identity\n1000\n" + literal)
    # Dims near 2^62 and 2^61, where a product with the element size (4, 8) wraps around 2^64.
    http("huge_dim_binary", "identity", {"inputs": [binary_input("INPUT0", "FP32", [4611686018427387903], 4)]},
         binary=floats(1))
    http("huge_dim_json", "every_type",
         {"inputs": [json_input("INPUT11", "FP64", [1, 2305843009213693951], [1.0])]})
    http("huge_dim_shm", "identity", {"inputs": [shm_tensor("INPUT0", "FP32", [4611686018427387903], byte_size=4)]})


# --- grpc_infer_request: a serialized inference.ModelInferRequest ------------------------------------------------

def grpc(name, text):
    encoded = subprocess.run(
        ["protoc", "--encode=inference.ModelInferRequest", "-I", str(ROOT / "proto"), "grpc_service.proto"],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout
    write("grpc_infer_request", name, encoded)


def pb_bytes(data):
    return '"' + "".join("\\x%02x" % b for b in data) + '"'


def grpc_seeds():
    grpc("typed_fp32", '''
      model_name: "identity" model_version: "1" id: "r1"
      inputs { name: "INPUT0" datatype: "FP32" shape: 3 contents { fp32_contents: [1, 2.5, -3] } }
      outputs { name: "OUTPUT0" }''')
    grpc("raw_fp32", '''
      model_name: "identity"
      inputs { name: "INPUT0" datatype: "FP32" shape: 4 }
      raw_input_contents: %s''' % pb_bytes(floats(1.5, -2, 3.25, 4)))
    grpc("parameters", '''
      model_name: "identity" id: "p"
      parameters { key: "priority" value { int64_param: 2 } }
      parameters { key: "timeout" value { uint64_param: 1500 } }
      parameters { key: "flag" value { bool_param: true } }
      parameters { key: "ratio" value { double_param: 0.5 } }
      parameters { key: "name" value { string_param: "n" } }
      parameters { key: "huge" value { uint64_param: 18446744073709551615 } }
      parameters { key: "binary_data_output" value { bool_param: true } }
      inputs { name: "INPUT0" datatype: "FP32" shape: 1 contents { fp32_contents: 1 } }''')
    grpc("typed_bytes", '''
      model_name: "identity_bytes"
      inputs { name: "INPUT0" datatype: "BYTES" shape: 2 contents { bytes_contents: ["ab", ""] } }''')
    grpc("raw_bytes", '''
      model_name: "identity_bytes"
      inputs { name: "INPUT0" datatype: "BYTES" shape: 3 }
      raw_input_contents: %s''' % pb_bytes(bytes_elements(b"xyz", b"", b"weft")))
    grpc("typed_batch", '''
      model_name: "add_sub"
      inputs { name: "INPUT0" datatype: "FP32" shape: [1, 16]
               contents { fp32_contents: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] } }
      inputs { name: "INPUT1" datatype: "FP32" shape: [1, 16]
               contents { fp32_contents: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1] } }
      outputs { name: "OUTPUT1" } outputs { name: "OUTPUT0" }''')
    grpc("raw_reshaped", '''
      model_name: "reshaped"
      inputs { name: "INPUT0" datatype: "INT64" shape: [2, 1] }
      inputs { name: "INPUT1" datatype: "FP16" shape: [2, 2, 3] }
      raw_input_contents: %s raw_input_contents: %s''' % (pb_bytes(struct.pack("<2q", 7, -7)),
                                                          pb_bytes(struct.pack("<12e", *range(12)))))
    grpc("raw_scalar", '''
      model_name: "scalar" inputs { name: "INPUT0" datatype: "BOOL" shape: 1 } raw_input_contents: "\\x01"''')
    typed_field = {"BOOL": "bool_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
                   "UINT32": "uint_contents", "UINT64": "uint64_contents", "INT8": "int_contents",
                   "INT16": "int_contents", "INT32": "int_contents", "INT64": "int64_contents",
                   "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents"}
    typed = []
    for i, (t, values, _) in enumerate(EVERY_TYPE):
        if t not in typed_field:
            continue
        rendered = ", ".join(j(v) if not isinstance(v, bool) else str(v).lower() for v in values)
        typed.append('inputs { name: "INPUT%d" datatype: "%s" shape: [1, 2] contents { %s: [%s] } }'
                     % (i, t, typed_field[t], rendered))
    grpc("typed_every_type", 'model_name: "every_type" ' + "\n".join(typed))
    grpc("raw_every_type", 'model_name: "every_type" ' + "\n".join(
        'inputs { name: "INPUT%d" datatype: "%s" shape: [1, 2] }' % (i, t) for i, (t, _, _) in enumerate(EVERY_TYPE))
        + "\n" + "\n".join("raw_input_contents: " + pb_bytes(b) for _, _, b in EVERY_TYPE))
    grpc("shm_fp32", '''
      model_name: "identity"
      inputs { name: "INPUT0" datatype: "FP32" shape: 4
               parameters { key: "shared_memory_region" value { string_param: "region" } }
               parameters { key: "shared_memory_offset" value { int64_param: 8 } }
               parameters { key: "shared_memory_byte_size" value { int64_param: 16 } } }
      outputs { name: "OUTPUT0"
                parameters { key: "shared_memory_region" value { string_param: "region" } }
                parameters { key: "shared_memory_offset" value { uint64_param: 1024 } }
                parameters { key: "shared_memory_byte_size" value { uint64_param: 64 } } }''')
    grpc("shm_bytes", '''
      model_name: "identity_bytes"
      inputs { name: "INPUT0" datatype: "BYTES" shape: 2
               parameters { key: "shared_memory_region" value { string_param: "region" } }
               parameters { key: "shared_memory_byte_size" value { int64_param: 16 } } }''')
    grpc("version_and_classification", '''
      model_name: "identity" model_version: "7"
      inputs { name: "INPUT0" datatype: "FP32" shape: 1 contents { fp32_contents: 1 } }
      outputs { name: "OUTPUT0" parameters { key: "classification" value { int64_param: 3 } } }''')
    grpc("huge_dim_raw", '''
      model_name: "identity" inputs { name: "INPUT0" datatype: "FP32" shape: 4611686018427387903 }
      raw_input_contents: "\\x00\\x00\\x80\\x3f"''')
    grpc("huge_dim_typed", '''
      model_name: "identity" inputs { name: "INPUT0" datatype: "FP32" shape: 4611686018427387903
                                      contents { fp32_contents: 1 } }''')
    grpc("huge_dim_shm", '''
      model_name: "identity"
      inputs { name: "INPUT0" datatype: "FP32" shape: 4611686018427387903
               parameters { key: "shared_memory_region" value { string_param: "region" } }
               parameters { key: "shared_memory_byte_size" value { int64_param: 4 } } }''')
    grpc("empty_shape_no_data", '''
      model_name: "identity" inputs { name: "INPUT0" datatype: "FP32" shape: 0 }''')


# --- shared_memory_registration: "<register body>\n<infer body>\n<object contents>" ------------------------------

def shm(name, registration, request, contents=b""):
    write("shared_memory_registration", name,
          (j(registration) + "\n" + j(request) + "\n").encode() + contents)


def shm_seeds():
    key = "/weft_fuzz_shm"
    values = floats(*range(32))
    shm("fp32_input_and_output", {"key": key, "offset": 0, "byte_size": 256},
        {"inputs": [shm_tensor("x", "FP32", [4], offset=16, byte_size=16, region="r")],
         "outputs": [shm_tensor("y", offset=128, byte_size=64, region="r")]}, values)
    cuda_handle = base64.b64encode(bytes(range(64))).decode()
    shm("cuda_fp32_input_and_output", {"raw_handle": {"b64": cuda_handle}, "device_id": 0, "byte_size": 256},
        {"inputs": [shm_tensor("x", "FP32", [4], offset=16, byte_size=16, region="r")],
         "outputs": [shm_tensor("y", offset=128, byte_size=64, region="r")]}, values)
    shm("cuda_bytes_input", {"raw_handle": {"b64": cuda_handle}, "device_id": 0, "byte_size": 64},
        {"inputs": [shm_tensor("s", "BYTES", [1], offset=0, byte_size=8, region="r")]}, bytes_elements(b"weft"))
    shm("offset_window", {"key": key[1:], "offset": 100, "byte_size": 28},
        {"inputs": [shm_tensor("x", "UINT8", [2, 2], offset=3, byte_size=4, region="r")]}, bytes(range(128)))
    elements = bytes_elements(b"ab", b"", b"weft\x00\xff")
    shm("bytes_input", {"key": key, "byte_size": 64},
        {"inputs": [shm_tensor("s", "BYTES", [3], offset=0, byte_size=len(elements), region="r")]}, elements)
    shm("bytes_input_overrun", {"key": key, "byte_size": 64},
        {"inputs": [shm_tensor("s", "BYTES", [1], byte_size=8, region="r")]}, bytes_elements(b"toolong")[:8])
    shm("every_type", {"key": key, "byte_size": 4096},
        {"inputs": [shm_tensor("t%d" % i, t, [2], offset=64 * i, byte_size=len(b), region="r")
                    for i, (t, _, b) in enumerate(EVERY_TYPE)]},
        b"".join(b.ljust(64, b"\0") for _, _, b in EVERY_TYPE))
    shm("huge_dim", {"key": key, "byte_size": 64},
        {"inputs": [shm_tensor("x", "FP64", [2305843009213693951], byte_size=8, region="r")]}, values)
    shm("window_past_end", {"key": key, "offset": 4000, "byte_size": 200}, {"inputs": []})
    shm("unknown_key", {"key": "/weft_fuzz_no_such_object", "byte_size": 8}, {"inputs": []})
    shm("bad_keys", {"key": "../dev/shm/x", "byte_size": 8}, {"inputs": []})
    shm("unknown_region", {"key": key, "byte_size": 8},
        {"inputs": [shm_tensor("x", "FP32", [1], byte_size=4, region="other")]})


# --- config_pbtxt: the text of a config.pbtxt ---------------------------------------------------------------------

CONFIGS = {
    "full": '''# Every field weft reads, in Triton's syntax (both list styles, comments, nested messages).
name: "m"
platform: "pytorch_libtorch"
backend: "pytorch"
max_batch_size: 8
version_policy: { specific: { versions: [1, 3] } }
input [
  { name: "INPUT0" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, -1, -1 ] },
  { name: "SCALAR" data_type: TYPE_INT64 dims: [ 1 ] reshape: { shape: [ ] } }
]
input { name: "TEXT" data_type: TYPE_STRING dims: [ 2 ] }
output [ { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ 10 ] label_filename: "labels.txt" } ]
instance_group [ { name: "g" count: 2 kind: KIND_GPU gpus: [ 0, 1 ] }, { count: 1 kind: KIND_CPU } ]
default_model_filename: "model.pt"
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 5000 allow_timeout_override: true
                         max_queue_size: 16 }
  priority_queue_policy { key: 1 value { timeout_action: DELAY max_queue_size: 4 } }
}
optimization { priority: PRIORITY_MAX }
parameters { key: "builtin" value: { string_value: "identity" } }
''',
    "every_type": "name: \"every_type\" max_batch_size: 2\ninput [\n" + ",\n".join(
        '  { name: "I%d" data_type: TYPE_%s dims: [ -1 ] }' % (i, "STRING" if t == "BYTES" else t)
        for i, (t, _, _) in enumerate(EVERY_TYPE))
    + "\n]\noutput [ { name: \"O\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n",
    "version_policies": '''name: "v" input { name: "x" data_type: TYPE_UINT8 dims: [ 4 ] }
output { name: "y" data_type: TYPE_UINT8 dims: [ 4 ] }
version_policy: { latest: { num_versions: 2 } }
instance_group { kind: KIND_MODEL }
''',
    "all_versions_reshape_variable": '''name: "r" max_batch_size: 4
input { name: "x" data_type: TYPE_BF16 dims: [ 2, -1 ] reshape: { shape: [ -1 ] } }
output { name: "y" data_type: TYPE_BF16 dims: [ -1 ] reshape: { shape: [ 1, -1 ] } }
version_policy: { all: { } }
optimization { priority: PRIORITY_MIN }
''',
    "unknown_fields_from_newer_triton": '''name: "new" backend: "onnxruntime"
input { name: "x" data_type: TYPE_FP64 dims: [ 1 ] optional: true }
output { name: "y" data_type: TYPE_FP64 dims: [ 1 ] }
model_warmup { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_FP64 dims: [ 1 ] zero_data: true } } }
response_cache { enable: true }
some_future_field: 3
''',
    "unsupported_sequence_batching": '''name: "s" input { name: "x" data_type: TYPE_INT32 dims: [ 1 ] }
output { name: "y" data_type: TYPE_INT32 dims: [ 1 ] }
sequence_batching { max_sequence_idle_microseconds: 1000 }
''',
    "huge_dims": '''name: "h" max_batch_size: 1048576
input { name: "x" data_type: TYPE_FP32 dims: [ 4611686018427387904, -1 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ -1 ] }
''',
    # Dims whose products are just inside int64 (a one-digit change leaves it), with a reshape to compare against,
    # and a variable dim whose product with the element size is just short of a wrap around 2^64.
    "large_dims_reshape": '''name: "l"
input { name: "x" data_type: TYPE_UINT8 dims: [ 3037000499, 3037000499 ] reshape: { shape: [ 1 ] } }
output { name: "y" data_type: TYPE_UINT8 dims: [ 1 ] }
''',
    "large_dims_raw": '''name: "w"
input { name: "x" data_type: TYPE_FP32 dims: [ -1, 4611686018427387903 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ -1 ] }
''',
    "syntax_error": 'name: "e" input { name: "x" data_type: TYPE_NOPE dims: [ 1 ',
    # weft's resilience parameters, each at a value that parses; the fuzzer moves them out of range.
    "resilience": '''name: "det" max_batch_size: 8 backend: "weft_builtin"
input { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }
parameters { key: "builtin" value: { string_value: "fault" } }
parameters { key: "failure_rate" value: { string_value: "0.5" } }
parameters { key: "weft.breaker.enabled" value: { string_value: "true" } }
parameters { key: "weft.breaker.window_calls" value: { string_value: "100" } }
parameters { key: "weft.breaker.window_ms" value: { string_value: "10000" } }
parameters { key: "weft.breaker.minimum_calls" value: { string_value: "10" } }
parameters { key: "weft.breaker.failure_rate" value: { string_value: "0.25" } }
parameters { key: "weft.breaker.consecutive_failures" value: { string_value: "3" } }
parameters { key: "weft.breaker.open_ms" value: { string_value: "1000" } }
parameters { key: "weft.breaker.max_open_ms" value: { string_value: "8000" } }
parameters { key: "weft.breaker.half_open_probes" value: { string_value: "2" } }
parameters { key: "weft.fallback_models" value: { string_value: "det_small, det_cpu" } }
parameters { key: "weft.degrade_to" value: { string_value: "det_small" } }
''',
    # A rollout policy with every key at a value that parses.
    "rollout_policy": '''name: "det" max_batch_size: 8 backend: "weft_builtin"
input { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }
parameters { key: "builtin" value: { string_value: "identity" } }
parameters { key: "weft.rollout.stages" value: { string_value: "shadow:1.0, canary:0.05, canary:0.5" } }
parameters { key: "weft.rollout.min_requests" value: { string_value: "200" } }
parameters { key: "weft.rollout.min_duration_ms" value: { string_value: "10000" } }
parameters { key: "weft.rollout.max_error_rate_increase" value: { string_value: "0.01" } }
parameters { key: "weft.rollout.max_p99_ratio" value: { string_value: "1.5" } }
parameters { key: "weft.rollout.max_divergence_rate" value: { string_value: "0.01" } }
parameters { key: "weft.rollout.abs_tolerance" value: { string_value: "1e-5" } }
parameters { key: "weft.rollout.rel_tolerance" value: { string_value: "1e-3" } }
parameters { key: "weft.rollout.min_top1_agreement" value: { string_value: "0.99" } }
parameters { key: "weft.rollout.sticky_key" value: { string_value: "camera_id" } }
parameters { key: "weft.rollout.shadow_max_in_flight" value: { string_value: "4" } }
parameters { key: "weft.rollout.on_rollback" value: { string_value: "unload" } }
''',
}


def config_seeds():
    for model in sorted((ROOT / "examples" / "models").glob("*/config.pbtxt")):
        write("config_pbtxt", "example_" + model.parent.name, model.read_bytes())
    for name, text in CONFIGS.items():
        write("config_pbtxt", name, text)


# --- content_coding: "<Content-Encoding>\n<Accept-Encoding>\n<body>" ----------------------------------------------

def content_coding_seeds():
    body = j({"inputs": [json_input("INPUT0", "FP32", [3], [1, 2.5, -3])]}).encode() + floats(*range(8))
    gzipped = gzip.compress(body, mtime=0)
    for name, encoding, accept, data in (
            ("gzip", "gzip", "gzip", gzipped),
            ("deflate", "deflate", "deflate, gzip;q=0.5", zlib.compress(body)),
            ("identity", "identity", "*;q=0, identity", body),
            ("gzip_truncated", "gzip", "br", gzipped[:-5]),
            ("gzip_trailing", "GZIP", "x-gzip;q=0.1", gzipped + b"more"),
            ("bomb", "deflate", "gzip;q=abc", zlib.compress(bytes(1 << 20), 9))):
        write("content_coding", name, (encoding + "\n" + accept + "\n").encode() + data)


# --- http_request_head: "<piece size byte>" then the bytes a connection receives ------------------------------------

def http_request_head_seeds():
    jwt = "eyJhbGciOiJIUzI1NiIsImtpZCI6Im9jdC0xIn0.eyJzdWIiOiJmdXp6IiwiZXhwIjo0MTAyNDQ0ODAwfQ.q0VTVNqkhwxxbg84gG1jy2UXJY1mWXRKVqdM-N6p2_c"
    infer = ("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
             "Content-Length: 2\r\n\r\n{}")
    for name, piece, text in (
            ("infer", 16, infer),
            ("infer_bytewise", 1, infer),
            ("jwt", 7, infer.replace("Host:", "Authorization: Bearer " + jwt + "\r\nHost:")),
            ("pipelined", 5, infer + infer),
            ("get_http10_keep_alive", 3, "GET /v2/health/ready HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
            ("connection_list", 9, "GET /metrics HTTP/1.1\r\nConnection: Upgrade, close\r\nUpgrade: h2c\r\n\r\n"),
            ("expect_continue", 11, "POST /v2/models/m/infer HTTP/1.1\r\nExpect: 100-continue\r\n"
                                    "Content-Length: 100\r\n\r\n"),
            ("chunked", 4, "POST /v2/models/m/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"),
            ("both_lengths", 16, "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ("two_lengths", 16, "POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 4\r\n\r\n"),
            ("obs_fold", 2, "GET / HTTP/1.1\r\nX-A: 1\r\n  2\r\n\r\n"),
            ("bare_lf", 8, "GET / HTTP/1.1\nHost: a\n\n"),
            ("space_before_colon", 16, "GET / HTTP/1.1\r\nHost : a\r\n\r\n"),
            ("obs_text", 6, "GET /caf\xc3\xa9 HTTP/1.1\r\nX-Name: caf\xc3\xa9\t \r\n\r\n"),
            ("huge_length", 16, "POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n")):
        write("http_request_head", name, bytes([piece - 1]) + text.encode("latin-1"))


# --- trace_context: "<traceparent>\n<tracestate>\n<settings body, or --trace-config values one per line>" ---------

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# Every setting by its API name (trace/trace_settings.h), at a value that applies.
TRACE_API_SETTINGS = {
    "trace_mode": "opentelemetry", "trace_level": ["TIMESTAMPS"], "trace_rate": "10", "trace_count": "-1",
    "trace_file": "", "log_frequency": "0", "parent_based": "true",
    "opentelemetry_url": "http://localhost:4318/v1/traces",
    "opentelemetry_resource": ["service.name=weft", "host.name=a=b"],
    "opentelemetry_bsp_max_queue_size": "2048", "opentelemetry_bsp_max_export_batch_size": "512",
    "opentelemetry_bsp_schedule_delay": "5000"}
# Every --trace-config form, at a value that parses.
TRACE_FLAGS = ["mode=opentelemetry", "level=TIMESTAMPS", "rate=1000", "count=-1", "parent_based=false",
               "triton,file=/tmp/trace.json", "triton,log-frequency=10", "log_frequency=5",
               "opentelemetry,url=http://collector:4318/v1/traces", "opentelemetry,resource=service.name=det",
               "opentelemetry,resource=k=v", "opentelemetry,bsp_max_queue_size=1000000",
               "opentelemetry,bsp_max_export_batch_size=1000", "opentelemetry,bsp_schedule_delay=600000"]


def trace(name, traceparent, tracestate, rest):
    if isinstance(rest, (dict, list)):
        rest = j(rest)
    write("trace_context", name, traceparent + "\n" + tracestate + "\n" + rest)


def trace_context_seeds():
    members = ",".join("k%d=v" % i for i in range(32))
    trace("spec_example", TRACEPARENT, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
          {"trace_rate": "10", "trace_level": ["TIMESTAMPS"]})
    trace("every_api_setting", " \t" + TRACEPARENT[:-2] + "00\t", "a=1, ,\tb=2,,", TRACE_API_SETTINGS)
    trace("model_update", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds",
          "tenant@system=x,0t@s=1", {"trace_rate": None, "trace_count": 5, "trace_level": ["OFF"]})
    trace("refusals", TRACEPARENT.upper(), "A=1,a=1,a=2",
          {"trace_rate": 1.5, "trace_level": ["OFF", "TIMESTAMPS"], "trace_file": "/etc/passwd"})
    trace("batch_over_queue", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", members,
          {"opentelemetry_bsp_max_queue_size": "10", "parent_based": False, "trace_count": -2})
    trace("server_wide_for_a_model", "ff" + TRACEPARENT[2:], members + ",k32=v",
          {"trace_mode": "triton", "trace_level": None})
    trace("tracestate_512", TRACEPARENT[:-2] + "03", "a=" + "x" * 254 + ",b=" + "y" * 253,
          {"trace_rate": "4294967296", "opentelemetry_url": "https://h"})
    trace("long_keys", "01" + TRACEPARENT[2:] + "-x", "t" * 241 + "@" + "s" * 14 + "=1," + "k" * 256 + "=v",
          {"opentelemetry_resource": ["a=1", "a=2", "b"], "trace_level": []})
    trace("trace_config", TRACEPARENT, "", "\n".join(TRACE_FLAGS))
    trace("trace_config_refusals", TRACEPARENT, "",
          "\n".join(["level=TENSORS", "rate=4294967297", "triton,url=http://h", "jaeger,rate=1",
                     "count=9223372036854775808", "opentelemetry,url=https://h", "bsp_max_queue_size=10"]))


# --- credentials: "<parser digit>" then an Authorization value, a key file, a JWKS, a token, or "<header>\n<payload>" -

# The target's fixed key set (fuzz/credentials_fuzz.cc): the public halves of an RSA and a P-256 key made for it, and an
# oct key whose secret the target signs with.
CREDENTIALS_SECRET = b"weft-fuzz-hs256-secret-32-bytes!"


def b64url(data):
    return base64.urlsafe_b64encode(data if isinstance(data, bytes) else data.encode()).rstrip(b"=").decode()


CREDENTIALS_JWKS = {"keys": [
    {"kty": "RSA", "kid": "rsa-1", "e": "AQAB",
     "n": "swqHIpA1VN4U41iGI-NSbr5LG7tq4qOcSrnaZqnFmgWpZDbVkED65sG4KCWjpwtW-5__CH0s5VG4jejClIDh1RE_DYmY0Oywq3oi"
          "mdzc1uMVW6JR2U3TLcqBDmnJz53mHYJfzgxoyKQEimPwSTo_jDtz0jSgwYKFNhfJ-Qmay0e6UE_wvhLQCvkPLCAh05lTurqzI-IV"
          "rTesvFM6tPtI3y2NGsFAAp8ezv41NnO5sMLL6ocSmuCFRl3PqpoG-tIg4xurFbAMC5DRth32ug1ZfPWfSj8F1M9NKaJbOkwbnuyZ"
          "P-ms_iGX78deMO7D7jXm0otSyrQ2EwIIKq1VW9SSIw"},
    {"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": "OeaoouHQ_maZTjjQBKIwv7pL5PFIo1GhmUsA5VK2Zvk",
     "y": "l-1Y2m7JYjCxf_3Ck6ZTYXTARFE_I25HTjchmheO3To"},
    {"kty": "oct", "kid": "oct-1", "k": b64url(CREDENTIALS_SECRET)}]}
# The claims the target's policy accepts (issuer, audience), valid until 2100.
GOOD_CLAIMS = {"iss": "https://issuer.example", "aud": "weft", "sub": "camera-7", "exp": 4102444800, "nbf": 1600000000,
               "scope": "infer:detector metadata openid"}


def hs256_token(header, payload, secret=CREDENTIALS_SECRET):
    signed = b64url(j(header)) + "." + b64url(j(payload))
    return signed + "." + b64url(hmac.new(secret, signed.encode(), hashlib.sha256).digest())


def credentials(name, parser, text):
    write("credentials", name, str(parser) + text)


def credentials_seeds():
    good = hs256_token({"alg": "HS256", "typ": "JWT", "kid": "oct-1"}, GOOD_CLAIMS)
    credentials("bearer_jwt", 0, "Bearer " + good)
    credentials("bearer_api_key", 0, "bearer q1_Lw3-ZsPz4x8bVf5Y2nT0oR7cJm6kAeHdUgSiXyW9")
    credentials("bearer_token68_padding", 0, "  BEARER  abc.def~ghi+jkl/mno==  ")
    credentials("basic", 0, "Basic dXNlcjpwYXNzd29yZA==")
    credentials("key_file", 1, j({"keys": [
        {"id": "cam-ingest", "sha256": hashlib.sha256(b"secret").hexdigest(), "scopes": ["infer:detector"],
         "rate": 100, "burst": 200},
        {"id": "camera-7", "subject": "CN=camera-7,O=acme", "scopes": ["infer", "metadata"]},
        {"id": "ops", "sha256": hashlib.sha256(b"ops").hexdigest().upper(), "subject": "CN=ops", "scopes": ["admin"],
         "rate": 0.5}]}))
    credentials("key_file_refused", 1, j({"keys": [
        {"id": "a", "subject": "CN=a", "scopes": ["inference"], "burst": 5},
        {"id": "a", "sha256": "00", "scopes": [], "secret": "x"}]}))
    credentials("jwks", 2, j(CREDENTIALS_JWKS))
    credentials("jwks_skipped_and_refused", 2, j({"keys": [
        dict(CREDENTIALS_JWKS["keys"][0], use="enc", alg="RSA-OAEP"),
        dict(CREDENTIALS_JWKS["keys"][1], crv="P-384"),
        {"kty": "oct", "k": b64url(b"short")}]}))
    credentials("jwt_hs256", 3, good)
    credentials("jwt_no_kid", 3, hs256_token({"alg": "HS256"}, GOOD_CLAIMS))
    credentials("jwt_alg_none", 3, b64url(j({"alg": "none"})) + "." + b64url(j(GOOD_CLAIMS)) + ".")
    credentials("jwt_rs256_unverified", 3, b64url(j({"alg": "RS256", "kid": "rsa-1"})) + "." + b64url(j(GOOD_CLAIMS)) +
                "." + b64url(bytes(256)))
    credentials("jwt_es256_unverified", 3, b64url(j({"alg": "ES256", "kid": "ec-1"})) + "." + b64url(j(GOOD_CLAIMS)) +
                "." + b64url(bytes(64)))
    credentials("signed_good", 4, j({"alg": "HS256", "kid": "oct-1"}) + "\n" + j(GOOD_CLAIMS))
    credentials("signed_aud_array", 4, j({"alg": "HS256"}) + "\n" + j(dict(GOOD_CLAIMS, aud=["other", "weft"])))
    credentials("signed_expired", 4, j({"alg": "HS256"}) + "\n" + j(dict(GOOD_CLAIMS, exp=1699999900)))
    credentials("signed_refused_claims", 4, j({"alg": "HS256", "crit": ["b64"]}) + "\n" +
                j({"exp": "soon", "nbf": 1e300, "iss": 5, "aud": [1], "sub": None, "scope": ["admin"]}))
    credentials("signed_wrong_alg", 4, j({"alg": "RS256", "kid": "oct-1"}) + "\n" + j(GOOD_CLAIMS))


# --- dictionaries: words libFuzzer splices into inputs ------------------------------------------------------------

DATATYPES = [t for t, _, _ in EVERY_TYPE]
MODELS = ["identity", "identity_bytes", "add_sub", "image", "reshaped", "scalar", "every_type"]
REQUEST_WORDS = (["inputs", "outputs", "name", "datatype", "shape", "data", "parameters", "id", "binary_data_size",
                  "binary_data", "binary_data_output", "shared_memory_region", "shared_memory_offset",
                  "shared_memory_byte_size", "classification", "priority", "timeout", "region", "INPUT0", "INPUT1",
                  "OUTPUT0", "OUTPUT1"] + DATATYPES + MODELS)
# The rollout route's keys and values (frontend/http/rollout_codec.h), for repository_request_fuzz.
ROLLOUT_WORDS = ["candidate", "stages", "kind", "share", "min_requests", "min_duration_ms", "criteria",
                 "max_error_rate_increase", "max_p99_ratio", "max_divergence_rate", "abs_tolerance", "rel_tolerance",
                 "min_top1_agreement", "sticky_key", "shadow_max_in_flight", "on_rollback", "shadow", "canary",
                 "keep", "unload"]
NUMBERS = ["0", "1", "-1", "255", "256", "65536", "2147483648", "4294967295", "4294967296", "2305843009213693952",
           "2305843009213693953", "4611686018427387904", "4611686018427387905", "4611686018427387906",
           "9223372036854775807", "9223372036854775808", "18446744073709551615",
           "1e308", "-1e39", "3.4028235e38", "65504", "0.1"]


# --- loadgen_replies: "<--url>\n<--shape>\n<--header>\n<--parameter>\n<batch, string length>\n<config reply>\n<metadata>"

def loadgen(name, url, shape, header, parameter, sizes, config, metadata):
    write("loadgen_replies", name, "\n".join([url, shape, header, parameter, sizes, config, metadata]))


def loadgen_seeds():
    def tensor(name, datatype, shape):
        return {"name": name, "datatype": datatype, "shape": shape}

    mlp = j({"name": "mlp", "versions": ["1"], "platform": "pytorch_libtorch",
             "inputs": [tensor("INPUT0", "FP32", [-1, 64])], "outputs": [tensor("OUTPUT0", "FP32", [-1, 10])]})
    loadgen("mlp", "http://localhost:8000", "", "Authorization: Bearer secret", "priority=2", "\x01\x10",
            j({"name": "mlp", "max_batch_size": 8}), mlp)
    loadgen("mlp_batch_4", "localhost:8000/prefix/", "", "X-Request-Id:  abc ", "sequence_id=7", "\x03\x10",
            j({"name": "mlp", "max_batch_size": 8}), mlp)
    image = j({"name": "detector", "inputs": [tensor("image", "UINT8", [-1, 3, -1, -1])],
               "outputs": [tensor("boxes", "FP32", [-1, 100, 4])]})
    loadgen("image_shape_flag", "http://[::1]:8000", "image:3,32,16", "", "", "\x01\x00",
            j({"max_batch_size": 4}), image)
    strings = j({"name": "strings", "inputs": [tensor("text", "BYTES", [2]), tensor("flag", "BOOL", [1]),
                                               tensor("h", "FP16", [4]), tensor("b", "BF16", [4]),
                                               tensor("i", "INT64", [3]), tensor("d", "FP64", [2])]})
    loadgen("strings_no_batching", "grpc://127.0.0.1:8001", "", "", "tag=a b", "\x00\x05", "{}", strings)
    loadgen("names_to_escape", "http://h:1/", "", "", "", "\x00\x02", "not json",
            j({"inputs": [tensor('quote" back\\ tab\t nl\n \u00e9 \u2603', "INT8", [2])]}))
    loadgen("two_gigabytes_together", "h", "", "", "", "\x00\x00", j({"max_batch_size": 0}),
            j({"inputs": [tensor("small", "UINT8", [1024]), tensor("large", "UINT8", [(2 << 30) - 512])]}))
    loadgen("over_two_gigabytes", "h", "", "", "", "\x00\x00", "{}",
            j({"inputs": [tensor("f", "FP32", [1 << 20, 1 << 10])]}))
    loadgen("no_inputs", "", "", "", "", "", "", j({"name": "m", "inputs": []}))


def varint(n):
    """n in protobuf's base-128 wire encoding, as the packed `shape` field holds it."""
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def dict_entry(word):
    escaped = "".join("\\" + c if c in '"\\' else c if 32 <= ord(c) < 127 else "\\x%02x" % ord(c) for c in word)
    return '"' + escaped + '"'


def write_dict(name, comment, words):
    DICT.mkdir(parents=True, exist_ok=True)
    unique = list(dict.fromkeys(words))
    (DICT / name).write_text("# " + comment + " Written by fuzz/make_seeds.py.\n" +
                             "".join(dict_entry(w) + "\n" for w in unique))


def dictionaries():
    write_dict("json.dict", "http_infer_request_fuzz, shared_memory_registration_fuzz, repository_request_fuzz: JSON.",
               ['"%s"' % w for w in REQUEST_WORDS + ["key", "offset", "byte_size", "raw_handle", "b64", "device_id"]
                                 + ROLLOUT_WORDS]
               + ['"/weft_fuzz_shm"', '"weft_fuzz_shm"', '"r"', "\n", "binary\n"] + [m + "\n" for m in MODELS]
               + NUMBERS + ["true", "false", "null", "[]", "{}", "[[", "]]", '":', '":{', '":[', '","', "\\u0000",
                            "\x04\x00\x00\x00"]
               # The rollout route (its line in repository_request_fuzz's framing) and its limits, either side.
               # The logging route's names and values (base/log.h).
               + ["logging\n", '"log_file"', '"log_info"', '"log_warning"', '"log_error"', '"log_verbose_level"',
                  '"log_format"', '"ISO8601"', '"default"']
               + ["rollout\n", "16", "17", "4096", "4097", "10000000", "10000001", "604800000", "604800001", "1e9",
                  "1000000001", "1e-300", "5e-324"])
    write_dict("loadgen.dict", "loadgen_replies_fuzz: model metadata and configuration replies, weft bench's flags.",
               ['"name"', '"datatype"', '"shape"', '"inputs"', '"outputs"', '"max_batch_size"', '"versions"']
               + ['"%s"' % t for t in ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
                                       "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES")]
               + ["http://", "https://", "grpc://", "[::1]", ":8000", ":65535", ":65536", ":0", "/", "\n", ":", ",",
                  "=", "-1", "0", "1", "2147483648", "2147483647", "9223372036854775807", "[", "]", "{}", "[-1,"]
               + ["Authorization: Bearer ", "\r", "\x00"])
    write_dict("content_coding.dict", "content_coding_fuzz: coding names and Accept-Encoding syntax.",
               ["gzip", "x-gzip", "deflate", "identity", "*", "q=", ";q=0", ";q=1", ";q=0.5", ", ", "\n",
                "\x1f\x8b\x08\x00", "\x78\x9c", "\x78\x01", "\x78\xda"])
    write_dict("http_head.dict", "http_request_head_fuzz: request line and field syntax, the fields the server reads.",
               ["GET ", "POST ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", " HTTP/1.1\r\n", " HTTP/1.0\r\n", "HTTP/1.1",
                "HTTP/2.0", "\r\n", "\r\n\r\n", "\n", "\r", ": ", ":", " ", "\t", ",", "\x00", "\x7f", "\x80",
                "Host: ", "Content-Length: ", "Transfer-Encoding: ", "chunked", "Connection: ", "close", "keep-alive",
                "Expect: ", "100-continue", "Authorization: Bearer ", "/v2/models/m/infer", "0", "18446744073709551615",
                "18446744073709551616", "-1", "+1"])
    write_dict("trace.dict", "trace_context_fuzz: trace context syntax, trace setting names and values.",
               ["00-", "-01", "-00", "cc-", "ff-", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
                "00000000000000000000000000000000", "0000000000000000", "\n", "\t", " ", ",", "=", "@", "*", "/"]
               + ['"%s"' % k for k in TRACE_API_SETTINGS]
               + ["mode", "level", "rate", "count", "parent_based", "file", "log-frequency", "log_frequency", "url",
                  "resource", "bsp_max_queue_size", "bsp_max_export_batch_size", "bsp_schedule_delay", "triton,",
                  "opentelemetry,", "triton", "opentelemetry"]
               + ["OFF", "TIMESTAMPS", "TENSORS", "true", "false", "null", "http://", "https://", "service.name="]
               + ["-1", "-2", "0", "1", "512", "2048", "1000000", "1000001", "600000", "600001", "4294967296",
                  "4294967297", "9223372036854775807", "9223372036854775808", "18446744073709551615",
                  "18446744073709551616", "1.5"]
               + ['":', '": "', '": [', '"]', '", "', "{}", "[]"])
    write_dict("credentials.dict", "credentials_fuzz: Authorization schemes, key file and JWK members, JOSE names.",
               ["Bearer ", "bearer ", "Basic ", "=", "==", ".", "\n", "0", "1", "2", "3", "4"]
               + ['"%s"' % w for w in ("keys", "id", "sha256", "subject", "scopes", "rate", "burst", "infer",
                                       "infer:detector", "metadata", "shm", "admin", "metrics", "kty", "kid", "use",
                                       "sig", "enc", "alg", "n", "e", "crv", "x", "y", "k", "RSA", "EC", "oct",
                                       "P-256", "RS256", "ES256", "HS256", "none", "rsa-1", "ec-1", "oct-1", "typ",
                                       "JWT", "crit", "exp", "nbf", "iss", "aud", "sub", "scope",
                                       "https://issuer.example", "weft")]
               + ["eyJ", "AQAB", "1700000000", "1699999940", "1700000060", "4102444800", "-1", "1e300", "0.5",
                  '":', '": "', '": [', '"]', '", "', "{}", "[]", "null", "true"])
    write_dict("grpc.dict", "grpc_infer_request_fuzz: strings of inference.ModelInferRequest.",
               REQUEST_WORDS + ["1", "7", "-1", "0"]
               + [varint(n).decode("latin-1") for n in (2**61, 2**61 + 1, 2**62, 2**62 + 1, 2**62 + 2, 2**63 - 1)]
               + [struct.pack("<q", 4611686018427387906).decode("latin-1"), "\x04\x00\x00\x00"])
    proto = (ROOT / "proto" / "model_config.proto").read_text()
    fields = re.findall(r"^\s+(?:repeated |optional )?(?:map<[^>]+>|[\w.]+) (\w+) = \d+", proto, re.M)
    enums = re.findall(r"^\s+([A-Z][A-Z0-9_]+) = \d+", proto, re.M)
    write_dict("pbtxt.dict", "config_pbtxt_fuzz: the names of proto/model_config.proto and text-format syntax.",
               sorted(set(fields)) + ["key", "value"] + sorted(set(enums))
               + [":", "{", "}", "[", "]", "<", ">", ",", ";", "#", '"', "[ ]", ": { }", "-1"] + NUMBERS
               + ["1048576", "1025", "true", "false", "pytorch_libtorch", "onnxruntime_onnx", "weft_builtin",
                  "builtin"]
               # weft's resilience parameters (model/resilience_config.cc) and the fault model's.
               + ["weft.breaker." + k for k in ("enabled", "window_calls", "window_ms", "minimum_calls",
                                                 "failure_rate", "consecutive_failures", "open_ms", "max_open_ms",
                                                 "half_open_probes")]
               + ["weft.fallback_models", "weft.degrade_to", "weft.execution_timeout_ms", "fault", "failure_rate",
                  "oom_above_batch"]
               # The rollout policy's (rollout/rollout_spec.cc).
               + ["weft.rollout." + k for k in ("stages", "min_requests", "min_duration_ms",
                                                 "max_error_rate_increase", "max_p99_ratio", "max_divergence_rate",
                                                 "abs_tolerance", "rel_tolerance", "min_top1_agreement", "sticky_key",
                                                 "shadow_max_in_flight", "on_rollback")]
               + ["shadow:1.0", "canary:0.05", "keep", "unload"]
               # The JSON form (ParseModelConfigJson): the lowerCamelCase names protobuf's JSON parser also takes,
               # and JSON syntax.
               + sorted({re.sub(r"_(\w)", lambda m: m.group(1).upper(), f) for f in fields if "_" in f})
               + ['{"', '":', '": {', '": [', '": "', "}, {", "[{", "}]", '", "', "null", '"NaN"', '"-Infinity"',
                  "\\u0000", "'"])


def main():
    for target in ("http_infer_request", "grpc_infer_request", "shared_memory_registration", "config_pbtxt"):
        # The seeds written by hand (JSON configs, warm-up samples) stay; the rest is written again below.
        for seed in (CORPUS / target).glob("*"):
            if not seed.name.startswith(("json_", "warmup_")):
                seed.unlink()
    http_seeds()
    grpc_seeds()
    shm_seeds()
    config_seeds()
    content_coding_seeds()
    http_request_head_seeds()
    trace_context_seeds()
    credentials_seeds()
    loadgen_seeds()
    dictionaries()
    for target in sorted(CORPUS.iterdir()):
        files = list(target.iterdir())
        print("%s: %d seeds, %d bytes" % (target.name, len(files), sum(f.stat().st_size for f in files)))


if __name__ == "__main__":
    main()
