#!/usr/bin/env bash
# What authentication and TLS cost in throughput (docs/security.md): four `weft serve` processes on one machine,
# and wrk at CONNS keep-alive connections on the example mlp over JSON, each round running the arms back to back
# (the order turns), so that every arm sees the same machine:
#   off     no authentication, plain HTTP
#   apikey  --auth-keys: every request carries an API key (SHA-256 and a lookup per request)
#   jwt     --auth-jwks: every request carries the same RS256 JWT (verified once, then found in the cache)
#   tls     --tls-cert/--tls-key, no authentication: HTTPS with keep-alive
# Only the arm under load is busy; the others sit idle. Prints one row per round and arm, then for each arm the
# median over the rounds of its req/s over that round's `off`, wrk's errors split into non-2xx answers and socket
# errors, and what each server logged at level error. Report: bench/results/security_<time>.md.
#
# With SERVER_CPUS and CLIENT_CPUS (taskset lists), the servers and wrk run on cores of their own, as when clients
# are other machines: the ratios are then the server's alone, without wrk's own TLS work on the server's cores.
#
#   bash bench/security_bench.sh                  # ROUNDS=9 x 4 arms x (DURATION + 1) s, about 3 minutes
#   ROUNDS=5 DURATION=10 CONNS=64 bash bench/security_bench.sh
#   SERVER_CPUS=0 CLIENT_CPUS=1 bash bench/security_bench.sh
#   ROUNDS=40 RESTART_EVERY=5 SERVER_CPUS=0 CLIENT_CPUS=1 bash bench/security_bench.sh   # issue 16, ~15 minutes
#
# The rounds of one run spread by several percent (0.90-1.01 for one arm is usual), and a server process can be a
# percent or two faster or slower than an identical one for its whole life. With RESTART_EVERY=N all four servers
# are started afresh every N rounds, so that the medians are over several processes of each arm, not one.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=${WEFT:-$ROOT/build/release/src/app/weft}
DURATION=${DURATION:-4}
ROUNDS=${ROUNDS:-9}
CONNS=${CONNS:-64}
PORT=${PORT:-19100}
RESTART_EVERY=${RESTART_EVERY:-0}
SERVER_CPUS=${SERVER_CPUS:-}
CLIENT_CPUS=${CLIENT_CPUS:-}
if { [ -n "$SERVER_CPUS" ] && [ -z "$CLIENT_CPUS" ]; } || { [ -z "$SERVER_CPUS" ] && [ -n "$CLIENT_CPUS" ]; }; then
  echo "set both SERVER_CPUS and CLIENT_CPUS, or neither" >&2
  exit 2
fi
SERVER_PIN=() CLIENT_PIN=()
[ -n "$SERVER_CPUS" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS") && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
OUT=$ROOT/bench/results
mkdir -p "$OUT"
REPORT=$OUT/security_$(date -u +%Y%m%dT%H%M%SZ).md
WORK=$(mktemp -d /tmp/weft_security_bench.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT

# Credentials: a key file, a JWKS with its token, and a CA with a server certificate (tests/grpc/security_testing.py).
/usr/bin/python3 - "$WORK" "$ROOT" <<'PY' || exit 1
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[2], "tests", "grpc"))
from security_testing import CertificateAuthority, JwtSigner, key_entry, key_file
work = sys.argv[1]
key_file(os.path.join(work, "keys.json"), [key_entry("bench", "bench-0123456789abcdef0123456789abcdef", ["infer"])])
signer = JwtSigner()
with open(os.path.join(work, "jwks.json"), "w") as f:
    json.dump(signer.jwks(), f)
with open(os.path.join(work, "token"), "w") as f:
    f.write(signer.token(scope="infer", exp=2**31 - 1))
ca = CertificateAuthority(work)
ca.issue("server", "/CN=localhost")
PY

ARMS=(off apikey jwt tls)
declare -A ARGS=(
  [off]=""
  [apikey]="--auth-keys $WORK/keys.json"
  [jwt]="--auth-jwks $WORK/jwks.json --auth-jwt-issuer weft-tests --auth-jwt-audience weft"
  [tls]="--tls-cert $WORK/server.crt --tls-key $WORK/server.key"
)
declare -A AUTH=(
  [off]=""
  [apikey]="Bearer bench-0123456789abcdef0123456789abcdef"
  [jwt]="Bearer $(cat "$WORK/token")"
  [tls]=""
)
declare -A URL PID
# load ARM SECONDS: wrk on ARM's server; prints its WRKRESULT line.
load() {
  WEFT_BODY=$WORK/bodies/mlp_json.body WEFT_PATH=/v2/models/mlp/infer WEFT_AUTHORIZATION="${AUTH[$1]}" \
    timeout $(($2 + 30)) "${CLIENT_PIN[@]}" wrk -t2 -c"$CONNS" -d"$2s" --timeout 10s -s "$ROOT/bench/wrk/kserve.lua" \
    "${URL[$1]}" | grep WRKRESULT
}
start_servers() {
  local k=0 arm port
  for arm in "${ARMS[@]}"; do
    port=$((PORT + 10 * k))
    # shellcheck disable=SC2086
    "${SERVER_PIN[@]}" "$WEFT" serve --model-repository "$ROOT/examples/models" --http-address 127.0.0.1 \
      --http-port "$port" --grpc-port $((port + 1)) --metrics-port $((port + 2)) --log-level error ${ARGS[$arm]} \
      >> "$WORK/$arm.log" 2>&1 &
    PID[$arm]=$!
    PIDS+=($!)
    if [ "$arm" = tls ]; then URL[$arm]="https://127.0.0.1:$port"; else URL[$arm]="http://127.0.0.1:$port"; fi
    k=$((k + 1))
  done
  for arm in "${ARMS[@]}"; do
    for _ in $(seq 600); do curl -sfk "${URL[$arm]}/v2/health/ready" >/dev/null && break; sleep 0.05; done
  done
  # Warm-up, not measured: a fresh process's first second is slower (its caches, its allocator, the JWT's check).
  for arm in "${ARMS[@]}"; do load "$arm" 1 >/dev/null; done
}
stop_servers() {
  local arm
  for arm in "${ARMS[@]}"; do kill "${PID[$arm]}" 2>/dev/null; done
  for arm in "${ARMS[@]}"; do wait "${PID[$arm]}" 2>/dev/null; done
}
/usr/bin/python3 "$ROOT/bench/make_bodies.py" "$WORK/bodies" >/dev/null || exit 1
start_servers

cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }

echo "| round | arm | req/s | p50 ms | p99 ms | errors: non-2xx / socket | server CPU µs per request |" > "$REPORT"
echo "|---:|---|---:|---:|---:|---:|---:|" >> "$REPORT"
for round in $(seq "$ROUNDS"); do
  if [ "$RESTART_EVERY" -gt 0 ] && [ "$round" -gt 1 ] && [ $(((round - 1) % RESTART_EVERY)) -eq 0 ]; then
    stop_servers
    start_servers
  fi
  for k in 0 1 2 3; do
    arm=${ARMS[$(((k + round) % 4))]}
    sleep 1
    before=$(cpu_ms "${PID[$arm]}")
    result=$(load "$arm" "$DURATION")
    after=$(cpu_ms "${PID[$arm]}")
    echo "$result" | awk -v r="$round" -v a="$arm" -v cpu=$((after - before)) -F'\t' \
      '{printf "| %s | %s | %.0f | %.3f | %.3f | %d / %d | %.1f |\n", r, a, $4, $5, $6, $9, $10, cpu * 1000 / $2}' >> "$REPORT"
  done
done
{
  echo
  echo "| arm | median req/s | median of the rounds' ratios to off | lowest | highest | server CPU µs per request |"
  echo "|---|---:|---:|---:|---:|---:|"
  /usr/bin/python3 - "$REPORT" <<'PY'
import statistics, sys
rows = [line.split("|") for line in open(sys.argv[1]) if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
rps, cpu = {}, {}
for row in rows:
    rps.setdefault(row[2].strip(), {})[row[1].strip()] = float(row[3])
    cpu.setdefault(row[2].strip(), {})[row[1].strip()] = float(row[7])
for arm in ("off", "apikey", "jwt", "tls"):
    ratios = sorted(rps[arm][r] / rps["off"][r] for r in rps["off"])
    print(f"| {arm} | {statistics.median(rps[arm].values()):.0f} | {statistics.median(ratios):.3f} | {ratios[0]:.3f} "
          f"| {ratios[-1]:.3f} | {statistics.median(cpu[arm].values()):.1f} |")
PY
  # What the servers logged at level error (a failed round is then explained in the report, not lost with WORK).
  for arm in "${ARMS[@]}"; do
    if [ -s "$WORK/$arm.log" ]; then
      echo
      echo "Server log of \`$arm\` (first 20 lines):"
      echo
      head -20 "$WORK/$arm.log" | sed 's/^/    /'
    fi
  done
} >> "$REPORT"
cat "$REPORT"
echo "report: $REPORT"
