#!/usr/bin/env bash
# Scheduler benchmarks, each a ratio measured in one run (docs/benchmarks.md):
#   1. batching gain at concurrency 64: throughput with dynamic batching / without (sleep and mlp models);
#   2. overload: open loop at twice the measured capacity for 30 s: p99 of accepted requests against the queue
#      bound, p99 of rejections, resident memory at start and end, sent = sum of outcomes;
#   3. priority under load: p99 of priority 1 against priority 2 at saturation.
#
#   bash bench/scheduler_bench.sh          # about 2.5 minutes; DURATION=10 OVERLOAD_DURATION=30 by default
# Needs a release build (tools/build.sh release) and the example models (tools/make_examples.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEFT=$ROOT/build/release/src/app/weft
DURATION=${DURATION:-10}
OVERLOAD_DURATION=${OVERLOAD_DURATION:-30}
PORT=${PORT:-18900}
WORK=$(mktemp -d /tmp/weft_sched_bench.XXXXXX)
OUT=$ROOT/bench/results
mkdir -p "$OUT"
REPORT=$OUT/scheduler_$(date -u +%Y%m%dT%H%M%SZ).md
trap 'kill $WEFT_PID 2>/dev/null; rm -rf "$WORK"' EXIT

cp -r "$ROOT/bench/repos/scheduling" "$WORK/repo"
for m in mlp_batched mlp_unbatched; do mkdir -p "$WORK/repo/$m/1" && cp "$ROOT/examples/models/mlp/1/model.pt" "$WORK/repo/$m/1/"; done

"$WEFT" serve --model-repository "$WORK/repo" --http-address 127.0.0.1 --http-port $PORT --metrics-port $((PORT + 2)) \
  > "$WORK/weft.log" 2>&1 &
WEFT_PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null && break; sleep 0.05; done
curl -sf "127.0.0.1:$PORT/v2/health/ready" >/dev/null || { cat "$WORK/weft.log"; exit 1; }

bench() {  # name args... -> $WORK/name.json
  local name=$1; shift
  timeout 300 "$WEFT" bench --url "http://127.0.0.1:$PORT" --json -q --threads 2 "$@" > "$WORK/$name.json"
}
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$WEFT_PID/status"; }

echo "running batching gain" >&2
for m in sleep_batched sleep_unbatched mlp_batched mlp_unbatched; do
  bench "$m" --model "$m" --concurrency 64 --duration "$DURATION" --warmup 2
done

echo "running overload" >&2
bench capacity --model sleep_bounded --concurrency 64 --duration "$DURATION" --warmup 2
capacity=$(/usr/bin/python3 -c "import json; print(json.load(open('$WORK/capacity.json'))['throughput']['requests_per_s'])")
rate=$(/usr/bin/python3 -c "print(round(2 * $capacity))")
rss_start=$(rss_kib)
bench overload --model sleep_bounded --request-rate "$rate" --arrivals poisson --duration "$OVERLOAD_DURATION"
rss_end=$(rss_kib)

echo "running priority under load" >&2
bench prio2 --model sleep_priority --priority 2 --concurrency 60 --duration "$DURATION" --warmup 2 &
low=$!
bench prio1 --model sleep_priority --priority 1 --concurrency 4 --duration "$DURATION" --warmup 2
wait $low
bench prio_off_a --model sleep_priority --priority 2 --concurrency 60 --duration "$DURATION" --warmup 2 &
low=$!
bench prio_off_b --model sleep_priority --priority 2 --concurrency 4 --duration "$DURATION" --warmup 2
wait $low

/usr/bin/python3 - "$WORK" "$capacity" "$rate" "$rss_start" "$rss_end" > "$REPORT" <<'PY'
import json, sys
work, capacity, rate, rss_start, rss_end = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
r = lambda n: json.load(open(f"{work}/{n}.json"))
rps = lambda n: r(n)["throughput"]["requests_per_s"]
print("### Batching gain (closed loop, concurrency 64)\n")
print("| model | with dynamic batching req/s | without req/s | gain |\n|---|---:|---:|---:|")
for m in ("sleep", "mlp"):
    b, u = rps(f"{m}_batched"), rps(f"{m}_unbatched")
    print(f"| {m} | {b:,.0f} | {u:,.0f} | {b / u:.1f}x |")
o = r("overload")
out = o["outcomes"]
total = sum(v["count"] for v in out.values())
acc = o["latency_ms"]
rej = out.get("429", {}).get("latency_ms", {})
print("\n### Overload (sleep_bounded: 10 ms per batch of up to 16, max_queue_size 256)\n")
print(f"capacity (closed loop, c=64): {capacity:,.0f} req/s; offered: {rate} req/s (Poisson) for {o['duration_s']:.1f} s\n")
print("| sent | 200 | 429 | other | sent = sum of outcomes | accepted p50 ms | accepted p99 ms | queue bound ms | 429 p50 ms | 429 p99 ms | RSS start MiB | RSS end MiB | growth |")
print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
other = total - out.get("200", {}).get("count", 0) - out.get("429", {}).get("count", 0)
bound = (256 / 16 + 2) * 10.32  # the batch running at arrival, 16 queued batches ahead, its own
print(f"| {o['sent']} | {out.get('200', {}).get('count', 0)} | {out.get('429', {}).get('count', 0)} | {other} | "
      f"{'yes' if o['sent'] == total else 'NO'} | {acc.get('p50', 0):.2f} | {acc.get('p99', 0):.2f} | {bound:.0f} | "
      f"{rej.get('p50', 0):.3f} | {rej.get('p99', 0):.3f} | {rss_start / 1024:.1f} | {rss_end / 1024:.1f} | "
      f"{(rss_end - rss_start) / rss_start * 100:+.1f}% |")
print(f"\nstarted late (client-side): {o.get('started_late', 0)}; peak connections: {o.get('peak_connections', 0)}")
print("\n### Priority under load (sleep_priority: 2 ms per batch of up to 16, 2 levels, saturated by 64 clients)\n")
print("| run | priority 1 (4 clients) p99 ms | priority 2 (60 clients) p99 ms | ratio p1/p2 |\n|---|---:|---:|---:|")
p1, p2 = r("prio1")["latency_ms"]["p99"], r("prio2")["latency_ms"]["p99"]
print(f"| priorities on | {p1:.2f} | {p2:.2f} | {p1 / p2:.2f} |")
q1, q2 = r("prio_off_b")["latency_ms"]["p99"], r("prio_off_a")["latency_ms"]["p99"]
print(f"| both at priority 2 (baseline) | {q1:.2f} | {q2:.2f} | {q1 / q2:.2f} |")
PY
cat "$REPORT"
echo "report: $REPORT"
