#!/usr/bin/env bash
# The HTTP server's large-tensor path on its own: one keep-alive connection sends the builtin identity model a
# binary-extension request of 1 MiB and 16 MiB (FP32, Inference-Header-Content-Length) and reads the binary answer
# into a preallocated buffer with large reads, so that the client costs little next to the server (`weft bench`'s
# client reads a large response through Beast in small pieces and dominates its own figure). Checks every answer
# byte for byte. For reference it also echoes the same sizes between two Python processes over a plain loopback
# socket: what the socket alone costs for the same bytes in and out.
#
#   bash bench/http_large_body.sh                            # about 20 s
#   WEFT=build-x/src/app/weft ROUNDS=50 bash bench/http_large_body.sh
#
# Prints the median per size: client send done, first answer byte, whole answer, and MB/s of request + answer.
# Only 127.0.0.1 is contacted; every step is bounded in time.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=${WEFT:-$ROOT/build/release/src/app/weft}
ROUNDS=${ROUNDS:-30}
PORT=${PORT:-18850}
WORK=$(mktemp -d /tmp/weft_http_large_body.XXXXXX)
trap 'kill $WEFT_PID 2>/dev/null; rm -rf "$WORK"' EXIT

"$WEFT" serve --model-repository "$ROOT/examples/models" --http-address 127.0.0.1 --http-port "$PORT" \
  --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) --log-level warning > "$WORK/weft.log" 2>&1 &
WEFT_PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.05; done

timeout 300 /usr/bin/python3 - "$PORT" "$ROUNDS" <<'PY'
import json, multiprocessing, os, socket, statistics, sys, time

port, rounds = int(sys.argv[1]), int(sys.argv[2])

def recv_exactly(sock, view, n):
    got = 0
    while got < n:
        k = sock.recv_into(view[got:n])
        if k == 0:
            raise SystemExit("the server closed the connection")
        got += k

def weft_round_trips(elements):
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [elements],
                                     "parameters": {"binary_data_size": elements * 4}}],
                         "parameters": {"binary_data_output": True}}).encode()
    data = os.urandom(elements * 4)
    body = header + data
    head = (f"POST /v2/models/identity/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(header)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(len(body) + 65536)
    view = memoryview(buf)
    samples = []
    answered = 0
    for i in range(rounds + 2):
        t0 = time.perf_counter()
        sock.sendall(head)
        sock.sendall(body)
        t1 = time.perf_counter()
        got, first, total = 0, None, None
        while total is None or got < total:
            k = sock.recv_into(view[got:])
            if first is None:
                first = time.perf_counter()
            if k == 0:
                raise SystemExit("the server closed the connection")
            got += k
            if total is None:
                end = bytes(buf[:got]).find(b"\r\n\r\n")
                if end >= 0:
                    lines = bytes(buf[:end]).decode().split("\r\n")
                    if " 200 " not in lines[0] + " ":
                        raise SystemExit("answer: " + lines[0])
                    length = next(int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:"))
                    total = end + 4 + length
        t2 = time.perf_counter()
        if bytes(view[total - len(data):total]) != data:
            raise SystemExit("the answer's tensor differs from the request's")
        answered += 1
        if i >= 2:  # two warmup round trips
            samples.append((t1 - t0, first - t0, t2 - t0))
    sock.close()
    return samples, len(body) + total, answered

def echo_peer(port_queue, n):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port_queue.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    buf = bytearray(n)
    view = memoryview(buf)
    while True:
        got = 0
        while got < n:
            k = conn.recv_into(view[got:])
            if k == 0:
                return
            got += k
        conn.sendall(view)

def socket_echo(n):
    q = multiprocessing.Queue()
    peer = multiprocessing.Process(target=echo_peer, args=(q, n), daemon=True)
    peer.start()
    sock = socket.create_connection(("127.0.0.1", q.get(timeout=10)), timeout=60)
    data = os.urandom(n)
    buf = bytearray(n)
    view = memoryview(buf)
    samples = []
    for i in range(rounds + 2):
        t0 = time.perf_counter()
        sock.sendall(data)
        recv_exactly(sock, view, n)
        if i >= 2:
            samples.append(time.perf_counter() - t0)
    sock.close()
    peer.join(timeout=5)
    return statistics.median(samples)

print("| tensor | client send done ms | first answer byte ms | round trip ms | MB/s (in + out) | "
      "plain socket echo ms |")
print("|---|---:|---:|---:|---:|---:|")
for elements, label in ((262144, "1 MiB"), (4194304, "16 MiB")):
    samples, moved, answered = weft_round_trips(elements)
    send, first, whole = (statistics.median(s[k] for s in samples) for k in range(3))
    echo = socket_echo(elements * 4)
    print(f"| {label} | {send * 1e3:.2f} | {first * 1e3:.2f} | {whole * 1e3:.2f} | {moved / whole / 1e6:.0f} | "
          f"{echo * 1e3:.2f} |")
PY
