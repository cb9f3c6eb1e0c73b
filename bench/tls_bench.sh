#!/usr/bin/env bash
# What TLS costs on the HTTP port, and a comparison of two builds (docs/benchmarks.md, "Our own TLS stream"):
#   1. throughput: wrk at CONNS keep-alive connections on the example mlp over JSON, in interleaved rounds over
#      `off` (plain HTTP), `tls` (WEFT over HTTPS) and, with BASELINE set, `base` (that build over HTTPS), with the
#      server's CPU per request from /proc/<pid>/stat; medians of each round's ratio to `off`;
#   2. memory per idle keep-alive TLS connection: IDLE connections make one request each and stay open, and the
#      server's RSS growth is divided by their number;
#   3. a 16 MiB identity round trip over TLS on one connection (binary tensor extension), median of 10.
# Only 127.0.0.1 is contacted; every step is bounded in time.
#
#   bash bench/tls_bench.sh                                         # about 2 minutes
#   BASELINE=/tmp/weft_before ROUNDS=10 bash bench/tls_bench.sh     # against another build
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=${WEFT:-$ROOT/build/release/src/app/weft}
BASELINE=${BASELINE:-}
ROUNDS=${ROUNDS:-6}
DURATION=${DURATION:-4}
CONNS=${CONNS:-64}
IDLE=${IDLE:-1000}
PORT=${PORT:-19400}
WORK=$(mktemp -d /tmp/weft_tls_bench.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
ulimit -n $((IDLE + 1024)) 2>/dev/null || { echo "cannot raise the descriptor limit for $IDLE connections" >&2; exit 1; }

/usr/bin/python3 - "$WORK" "$ROOT" <<'PY' || exit 1
import os, sys
sys.path.insert(0, os.path.join(sys.argv[2], "tests", "grpc"))
from security_testing import CertificateAuthority
CertificateAuthority(sys.argv[1]).issue("server", "/CN=localhost")
PY
/usr/bin/python3 "$ROOT/bench/make_bodies.py" "$WORK/bodies" >/dev/null || exit 1

ARMS=(off tls)
[ -n "$BASELINE" ] && ARMS+=(base)
declare -A BIN=([off]=$WEFT [tls]=$WEFT [base]=$BASELINE) URL PID
TLS_ARGS="--tls-cert $WORK/server.crt --tls-key $WORK/server.key"
k=0
for arm in "${ARMS[@]}"; do
  port=$((PORT + 10 * k))
  args=""
  URL[$arm]="http://127.0.0.1:$port"
  if [ "$arm" != off ]; then
    args=$TLS_ARGS
    URL[$arm]="https://127.0.0.1:$port"
  fi
  # shellcheck disable=SC2086
  "${BIN[$arm]}" serve --model-repository "$ROOT/examples/models" --http-address 127.0.0.1 --http-port "$port" \
    --grpc-port $((port + 1)) --metrics-port $((port + 2)) --log-level error $args > "$WORK/$arm.log" 2>&1 &
  PID[$arm]=$!
  PIDS+=($!)
  k=$((k + 1))
done
for arm in "${ARMS[@]}"; do
  for _ in $(seq 600); do
    curl -sfk "${URL[$arm]}/v2/health/ready" >/dev/null && break
    sleep 0.05
  done
done

cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }
echo "## Throughput at $CONNS connections ($ROUNDS rounds of $DURATION s)"
echo
echo "| round | arm | req/s | server CPU µs per request |"
echo "|---:|---|---:|---:|"
for round in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((${#ARMS[@]} - 1))); do
    arm=${ARMS[$(((k + round) % ${#ARMS[@]}))]}
    sleep 1
    before=$(cpu_ms "${PID[$arm]}")
    result=$(WEFT_BODY=$WORK/bodies/mlp_json.body WEFT_PATH=/v2/models/mlp/infer WEFT_AUTHORIZATION="" \
      timeout $((DURATION + 30)) wrk -t2 -c"$CONNS" -d"${DURATION}s" --timeout 10s -s "$ROOT/bench/wrk/kserve.lua" \
      "${URL[$arm]}" | grep WRKRESULT)
    after=$(cpu_ms "${PID[$arm]}")
    echo "$result" | awk -v r="$round" -v a="$arm" -v cpu=$((after - before)) -F'\t' \
      '{printf "| %s | %s | %.0f | %.1f |\n", r, a, $4, cpu * 1000 / $2}'
  done
done | tee "$WORK/rounds.md"
echo
/usr/bin/python3 - "$WORK/rounds.md" <<'PY'
import statistics, sys
rows = [l.split("|") for l in open(sys.argv[1]) if l.startswith("| ") and l.split("|")[1].strip().isdigit()]
rps, cpu = {}, {}
for row in rows:
    rps.setdefault(row[2].strip(), {})[row[1].strip()] = float(row[3])
    cpu.setdefault(row[2].strip(), {})[row[1].strip()] = float(row[4])
print("| arm | median req/s | median ratio to off (lowest–highest) | server CPU µs per request |")
print("|---|---:|---:|---:|")
for arm in rps:
    ratios = sorted(rps[arm][r] / rps["off"][r] for r in rps["off"])
    print(f"| {arm} | {statistics.median(rps[arm].values()):.0f} | {statistics.median(ratios):.3f} "
          f"({ratios[0]:.2f}–{ratios[-1]:.2f}) | {statistics.median(cpu[arm].values()):.1f} |")
if "base" in rps:
    ratios = [rps["tls"][r] / rps["base"][r] for r in rps["off"]]
    cheaper = sum(cpu["tls"][r] < cpu["base"][r] for r in rps["off"])
    print(f"\ntls over base: median {statistics.median(ratios):.3f}; tls cheaper per request in {cheaper} of {len(ratios)} rounds")
PY

echo
echo "## Idle connections and a 16 MiB round trip over TLS"
echo
for arm in "${ARMS[@]}"; do
  [ "$arm" = off ] && continue
  port=${URL[$arm]##*:}
  timeout 300 /usr/bin/python3 - "$arm" "$port" "${PID[$arm]}" "$IDLE" "$WORK/bodies/mlp_json.body" <<'PY'
import json, os, socket, ssl, statistics, sys, time
arm, port, pid, idle, body_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE

def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])

body = open(body_file, "rb").read()
request = (b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
before = rss_kib()
connections = []
for _ in range(idle):
    c = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30))
    c.sendall(request)
    answer = c.recv(65536)
    if not answer.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"{arm}: answer {answer[:80]!r}")
    connections.append(c)
time.sleep(2)
grown = rss_kib() - before
for c in connections:
    c.close()

elements = 4 << 20
header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [elements],
                                 "parameters": {"binary_data_size": elements * 4}}],
                     "parameters": {"binary_data_output": True}}).encode()
data = os.urandom(elements * 4)
head = (f"POST /v2/models/identity/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
        f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(header) + len(data)}\r\n\r\n").encode()
c = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=60))
buf = bytearray(len(header) + len(data) + 65536)
view = memoryview(buf)
samples = []
for i in range(12):
    t0 = time.perf_counter()
    c.sendall(head + header + data)
    got, total = 0, None
    while total is None or got < total:
        n = c.recv_into(view[got:])
        if n == 0:
            raise SystemExit(f"{arm}: the server closed the connection")
        got += n
        if total is None and (end := bytes(buf[:got]).find(b"\r\n\r\n")) >= 0:
            lines = bytes(buf[:end]).decode().split("\r\n")
            if " 200 " not in lines[0] + " ":
                raise SystemExit(f"{arm}: answer {lines[0]}")
            total = end + 4 + next(int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:"))
    if bytes(view[total - len(data):total]) != data:
        raise SystemExit(f"{arm}: the answer's tensor differs from the request's")
    if i >= 2:
        samples.append(time.perf_counter() - t0)
print(f"- {arm}: {grown / idle:.1f} KiB per idle TLS connection ({idle} connections); "
      f"16 MiB round trip median {statistics.median(samples) * 1000:.1f} ms "
      f"({min(samples) * 1000:.1f}–{max(samples) * 1000:.1f})")
PY
done
