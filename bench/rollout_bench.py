"""What a shadow stage costs the primary (bench/rollout_bench.sh runs it; docs/benchmarks.md, "Rollouts").

A TorchScript model "det" (matrix products of 8 MFLOP per request and round, one intra-op thread) with two
identical versions, both loaded (version 2 answers; version 1 is the candidate). First its capacity: closed-loop `weft bench` at
`--concurrency 8`. Then, at half of that rate (open loop, constant arrivals), rounds that alternate without a
rollout and with a rollout in a shadow stage that copies 100% of the requests to version 1 (a stage long enough
never to end; DELETE after each round): the primary's p50 and p99 as clients see them, and the copies sent and
dropped. Last, at capacity (closed loop) with the shadow stage: the share of copies dropped. Prints the report, or
one JSON object with --json.
"""

import argparse
import json
import os
import shutil
import statistics
import tempfile

import torch

from weft_server import WeftServer, bench_summary, weft_bench


class Det(torch.nn.Module):
    """2x + 1, after `work` rounds of a (16 x 512) by (512 x 512) matrix product per request: a cost that grows with
    the batch, as a real model's does."""

    def __init__(self, work: int):
        super().__init__()
        self.work = work
        self.w = torch.nn.Parameter(torch.full((512, 512), 1.0 / 512), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.repeat(16, 32)
        for _ in range(self.work):
            h = torch.tanh(h @ self.w)
        return x * 2.0 + 1.0 + 0.0 * h.sum()


CONFIG = """name: "det"
platform: "pytorch_libtorch"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }]
dynamic_batching { }
version_policy: { all: { } }
parameters { key: "intra_op_threads" value: { string_value: "1" } }
"""

SHADOW = {"candidate": 1, "stages": [{"kind": "shadow", "share": 1.0, "min_requests": 10000000,
                                      "min_duration_ms": 604800000}]}


def write_repository(work):
    root = tempfile.mkdtemp(prefix="weft_rollout_bench_")
    os.makedirs(os.path.join(root, "det"))
    with open(os.path.join(root, "det", "config.pbtxt"), "w") as f:
        f.write(CONFIG)
    for version in (1, 2):
        os.makedirs(os.path.join(root, "det", str(version)))
        torch.jit.script(Det(work)).save(os.path.join(root, "det", str(version), "model.pt"))
    return root


def slow_answers(server):
    """(answers of version 2 over 10 ms, all its answers) from the engine's request-duration histogram: the tail
    as the server sees it, without the load generator's own scheduling delays on the same cores."""
    labels = {"model": "det", "version": "2"}
    within = server.metric("weft_inference_request_duration_seconds_bucket", le="0.01", **labels)
    total = server.metric("weft_inference_request_duration_seconds_count", **labels)
    return total - within, total


def measured(server, args):
    """`weft bench` with `args`, with the server's share of answers over 10 ms during it."""
    slow0, total0 = slow_answers(server)
    result = bench_summary(weft_bench(server.port, "det", args))
    slow1, total1 = slow_answers(server)
    result["server_over_10ms"] = (slow1 - slow0) / (total1 - total0) if total1 > total0 else 0.0
    return result


def copies(server):
    return (server.metric("weft_rollout_shadow_copies_total", model="det", outcome="sent"),
            server.metric("weft_rollout_shadow_copies_total", model="det", outcome="dropped"))


def shadowed(server, run):
    """Runs `run` during a shadow stage of 100%; returns its result and the copies sent and dropped meanwhile."""
    status, body = server.post("/v2/models/det/rollout", SHADOW)
    if status != 200:
        raise RuntimeError(f"POST rollout: {status} {body[:300]!r}")
    sent0, dropped0 = copies(server)
    result = run()
    sent1, dropped1 = copies(server)
    status, body = server.request("DELETE", "/v2/models/det/rollout")
    if status != 200:
        raise RuntimeError(f"DELETE rollout: {status} {body[:300]!r}")
    return result, sent1 - sent0, dropped1 - dropped0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=int, default=1, help="rounds of 8 MFLOP per request (the model's cost)")
    parser.add_argument("--seconds", type=int, default=10, help="per measured run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds without and with shadowing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    root = write_repository(args.work)
    report = {"work": args.work, "seconds": args.seconds, "rounds": args.rounds}
    try:
        with WeftServer(root) as server:
            capacity = bench_summary(weft_bench(server.port, "det", ["--concurrency", "8", "--duration",
                                                                       str(args.seconds), "--warmup", "2"]))
            report["capacity"] = capacity
            rate = capacity["requests_per_s"] / 2
            report["half_rate_per_s"] = rate
            open_loop = ["--request-rate", f"{rate:.0f}", "--duration", str(args.seconds), "--warmup", "2",
                         "--max-connections", "64"]
            rounds = []
            for _ in range(args.rounds):
                without = measured(server, open_loop)
                with_shadow, sent, dropped = shadowed(server, lambda: measured(server, open_loop))
                rounds.append({"without": without, "with": with_shadow, "sent": sent, "dropped": dropped})
            report["half_capacity"] = rounds
            at_capacity, sent, dropped = shadowed(
                server, lambda: bench_summary(weft_bench(server.port, "det", ["--concurrency", "8", "--duration",
                                                                               str(args.seconds)])))
            report["at_capacity"] = {"with": at_capacity, "sent": sent, "dropped": dropped,
                                     "dropped_share": dropped / (sent + dropped) if sent + dropped else 0.0}
    finally:
        shutil.rmtree(root, ignore_errors=True)

    if args.json:
        print(json.dumps(report, indent=2))
        return
    c = report["capacity"]
    print(f"capacity (closed loop, 8 connections): {c['requests_per_s']:.0f} req/s, p50 {c['p50_ms']:.2f} ms, "
          f"p99 {c['p99_ms']:.2f} ms")
    print(f"half capacity: {report['half_rate_per_s']:.0f} req/s, constant arrivals, {args.seconds} s per run")
    print("round | without: p50 / p99 ms | shadow 100%: p50 / p99 ms | p99 ratio | server-side answers over 10 ms "
          "without / with | copies sent / dropped | failed")
    ratios50, ratios99 = [], []
    for i, r in enumerate(report["half_capacity"]):
        a, b = r["without"], r["with"]
        ratios50.append(b["p50_ms"] / a["p50_ms"])
        ratios99.append(b["p99_ms"] / a["p99_ms"])
        print(f"{i + 1} | {a['p50_ms']:.2f} / {a['p99_ms']:.2f} | {b['p50_ms']:.2f} / {b['p99_ms']:.2f} | "
              f"{ratios99[-1]:.2f} | {100 * a['server_over_10ms']:.2f}% / {100 * b['server_over_10ms']:.2f}% | "
              f"{r['sent']:.0f} / {r['dropped']:.0f} | {a['failed']} / {b['failed']}")
    print(f"median ratio with / without: p50 {statistics.median(ratios50):.2f}, p99 {statistics.median(ratios99):.2f}")
    k = report["at_capacity"]
    print(f"at capacity with shadow 100%: {k['with']['requests_per_s']:.0f} req/s (without: {c['requests_per_s']:.0f}),"
          f" copies sent {k['sent']:.0f}, dropped {k['dropped']:.0f} ({100 * k['dropped_share']:.1f}%)")


if __name__ == "__main__":
    main()
