"""The chaos benchmark of circuit breakers and fallback models (bench/resilience_bench.sh runs it).

  A. Steady open-loop load (`weft bench`, HTTP JSON) on "det", the builtin fault model failing 5%, 50% and 100% of
     its executions, in three setups: no breaker and no fallback (weft.breaker.enabled false), a breaker (the
     defaults), a breaker and a fallback (weft.fallback_models: det_small, a cheaper identity model). For each:
     the error rate the clients see, goodput (answers with outputs per second), p99 of those answers, how often
     the breaker opened and how many answers the fallback gave.
  B. A timeline: one client sends to "det" (breaker and fallback) while det is healthy, then failing every request
     (a per-request FAULT_RATE of 1), then healthy again. Measured: from the first failing request to the first
     answer turned away by the open breaker; from healing to the first answer from det again (the breaker half-
     opens when its open period ends and its probes succeed). Run with the default periods and short ones.

  C. Degradation: det (10 ms per batch of up to 4, about 400 requests/s) offered twice its capacity, every request
     with a 50 ms deadline, with and without weft.degrade_to det_small: requests answered in time.

Each setup runs on a fresh `weft serve` (fresh breakers). Prints the report, or one JSON object with --json.
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time

from weft_server import WEFT, WeftServer


def config(name, builtin, inputs, outputs, parameters, queue_delay_us=500):
    def tensors(kind, names):
        return "\n".join(f'{kind} [{{ name: "{n}" data_type: TYPE_FP32 dims: [ {d} ] }}]' for n, d in names)

    params = {"builtin": builtin, **parameters}
    lines = "\n".join(f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items())
    return f"""name: "{name}"
backend: "weft_builtin"
max_batch_size: 8
{tensors("input", inputs)}
{tensors("output", outputs)}
dynamic_batching {{ max_queue_delay_microseconds: {queue_delay_us} }}
{lines}
"""


def write_repository(det_parameters, with_fault_input):
    """det (fault, 4 ms per execution) and det_small (identity, no delay); with_fault_input: both take a FAULT_RATE
    input (det fails each request with that probability; det_small passes it through as OUTPUT1)."""
    root = tempfile.mkdtemp(prefix="weft_resilience_bench_")
    inputs = [("INPUT0", 4)] + ([("FAULT_RATE", 1)] if with_fault_input else [])
    models = {
        "det": config("det", "fault", inputs, [("OUTPUT0", 4)], {"delay_us": "4000", "seed": "1", **det_parameters}),
        "det_small": config("det_small", "identity", inputs,
                            [("OUTPUT0", 4)] + ([("OUTPUT1", 1)] if with_fault_input else []), {}),
    }
    for name, text in models.items():
        os.makedirs(os.path.join(root, name, "1"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(text)
    return root


SETUPS = {
    "no breaker": {"weft.breaker.enabled": "false"},
    "breaker": {},
    "breaker + fallback": {"weft.fallback_models": "det_small"},
}


def steady(rate, seconds, failure_rates):
    rows = []
    for failure_rate in failure_rates:
        for setup, parameters in SETUPS.items():
            root = write_repository({"failure_rate": str(failure_rate), **parameters}, with_fault_input=False)
            try:
                with WeftServer(root) as server:
                    out = subprocess.run(
                        [WEFT, "bench", "--url", f"http://127.0.0.1:{server.port}", "--model", "det",
                         "--request-rate", str(rate), "--duration", str(seconds), "--warmup", "1",
                         "--max-connections", "256", "--json", "-q"],
                        check=True, capture_output=True, text=True).stdout
                    result = json.loads(out)
                    sent = result["sent"]
                    outcomes = {code: o["count"] for code, o in result["outcomes"].items() if o["count"]}
                    rows.append({
                        "failure_rate": failure_rate, "setup": setup, "sent": sent,
                        "error_rate": (sent - result["successes"]) / sent if sent else 0.0,
                        "goodput_per_s": result["throughput"]["requests_per_s"],
                        "p99_ms": result["latency_ms"]["p99"], "outcomes": outcomes,
                        "breaker_opened": server.metric("weft_breaker_transitions_total", model="det", to="open"),
                        "fallback_answers": sum(server.metric("weft_fallback_answers_total", model="det",
                                                              reason=r) for r in ("circuit_open", "server_error")),
                    })
            finally:
                shutil.rmtree(root, ignore_errors=True)
    return rows


class Client:
    """One keep-alive connection sending det one request at a time, with a FAULT_RATE of 0 or 1."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def infer(self, fault_rate):
        body = json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            {"name": "FAULT_RATE", "shape": [1, 1], "datatype": "FP32", "data": [fault_rate]}]})
        self.conn.request("POST", "/v2/models/det/infer", body=body, headers={"Content-Type": "application/json"})
        r = self.conn.getresponse()
        payload = json.loads(r.read())
        if r.status != 200:
            return r.status, None, None
        return r.status, payload["model_name"], payload.get("parameters", {}).get("weft_fallback_reason")


def timeline(open_ms, max_open_ms, failing_s):
    parameters = {"weft.fallback_models": "det_small"}
    if open_ms:
        parameters.update({"weft.breaker.open_ms": str(open_ms), "weft.breaker.max_open_ms": str(max_open_ms)})
    root = write_repository(parameters, with_fault_input=True)
    try:
        with WeftServer(root) as server:
            client = Client(server.port)
            counts = {"requests": 0, "errors": 0, "by_det": 0, "by_fallback": 0}

            def send(fault_rate):
                status, model, reason = client.infer(fault_rate)
                counts["requests"] += 1
                counts["errors"] += status != 200
                counts["by_det" if model == "det" else "by_fallback"] += status == 200
                return model, reason

            end = time.monotonic() + 2
            while time.monotonic() < end:
                send(0.0)
            failing_from = time.monotonic()
            opened_after = None
            while time.monotonic() < failing_from + failing_s:
                _, reason = send(1.0)
                if opened_after is None and reason == "circuit_open":
                    opened_after = time.monotonic() - failing_from
            healed_at = time.monotonic()
            closed_after = None
            while time.monotonic() < healed_at + 4 * (max_open_ms or 60000) / 1000:
                model, _ = send(0.0)
                if model == "det":
                    closed_after = time.monotonic() - healed_at
                    break
            for _ in range(10):  # the rest of the probes, so that the breaker closes
                send(0.0)
            return {"open_ms": open_ms or 5000, "max_open_ms": max_open_ms or 60000, "failing_s": failing_s,
                    "opened_after_ms": None if opened_after is None else opened_after * 1000,
                    "closed_after_healing_ms": None if closed_after is None else closed_after * 1000,
                    "transitions": {to: server.metric("weft_breaker_transitions_total", model="det", to=to)
                                    for to in ("open", "half_open", "closed")},
                    **counts}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def degradation(rate, seconds, deadline_ms):
    """det at about 400 requests/s of capacity (10 ms per batch of up to 4), offered `rate`, every request with a
    deadline; with and without weft.degrade_to. A client-side timeout at the deadline makes every success one
    that came in time."""
    rows = []
    for setup, parameters in (("no degrade_to", {}), ("degrade_to det_small", {"weft.degrade_to": "det_small"})):
        root = tempfile.mkdtemp(prefix="weft_degrade_bench_")
        try:
            det = config("det", "fault", [("INPUT0", 4)], [("OUTPUT0", 4)],
                         {"delay_us": "10000", **parameters}, queue_delay_us=1000)
            det = det.replace("max_batch_size: 8", "max_batch_size: 4").replace(
                "dynamic_batching { max_queue_delay_microseconds: 1000 }",
                "dynamic_batching { max_queue_delay_microseconds: 1000 "
                "default_queue_policy { allow_timeout_override: true } }")
            small = config("det_small", "identity", [("INPUT0", 4)], [("OUTPUT0", 4)], {})
            for name, text in (("det", det), ("det_small", small)):
                os.makedirs(os.path.join(root, name, "1"))
                with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
                    f.write(text)
            with WeftServer(root) as server:
                out = subprocess.run(
                    [WEFT, "bench", "--url", f"http://127.0.0.1:{server.port}", "--model", "det",
                     "--request-rate", str(rate), "--duration", str(seconds), "--warmup", "2",
                     "--timeout-us", str(deadline_ms * 1000), "--request-timeout", str(deadline_ms / 1000),
                     "--max-connections", "512", "--json", "-q"],
                    check=True, capture_output=True, text=True).stdout
                result = json.loads(out)
                sent = result["sent"]
                rows.append({
                    "setup": setup, "rate": rate, "deadline_ms": deadline_ms, "sent": sent,
                    "in_time_per_s": result["throughput"]["requests_per_s"],
                    "in_time_share": result["successes"] / sent if sent else 0.0,
                    "p99_ms": result["latency_ms"]["p99"],
                    "outcomes": {code: o["count"] for code, o in result["outcomes"].items() if o["count"]},
                    "by_det": server.metric("weft_inference_request_success_total", model="det"),
                    "degraded": server.metric("weft_degraded_answers_total", model="det"),
                })
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="ABC")
    parser.add_argument("--overload-rate", type=int, default=800, help="C: requests per second (det's capacity: ~400)")
    parser.add_argument("--rate", type=int, default=500, help="A: requests per second (det's capacity: ~2000)")
    parser.add_argument("--seconds", type=int, default=10, help="A: measured seconds per run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {}
    if "A" in args.only:
        report["steady"] = steady(args.rate, args.seconds, (0.05, 0.5, 1.0))
    if "B" in args.only:
        report["timeline"] = [timeline(None, None, 8), timeline(500, 4000, 8)]
    if "C" in args.only:
        report["degradation"] = degradation(args.overload_rate, args.seconds, 50)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    if "steady" in report:
        print(f"A. det failing a share of its executions, open loop at {args.rate}/s, {args.seconds} s per run")
        print(f"{'failing':>8} {'setup':<20} {'errors':>8} {'goodput/s':>10} {'p99 ms':>8} {'opened':>7} "
              f"{'fallback':>9}  outcomes")
        for r in report["steady"]:
            print(f"{r['failure_rate']:>8.0%} {r['setup']:<20} {r['error_rate']:>8.2%} {r['goodput_per_s']:>10.1f} "
                  f"{r['p99_ms']:>8.2f} {r['breaker_opened']:>7.0f} {r['fallback_answers']:>9.0f}  {r['outcomes']}")
    for r in report.get("degradation", []):
        print(f"C. {r['setup']:<22} offered {r['rate']}/s, deadline {r['deadline_ms']} ms: {r['in_time_per_s']:.1f}/s "
              f"in time ({r['in_time_share']:.1%} of {r['sent']}), p99 {r['p99_ms']:.2f} ms, det answered "
              f"{r['by_det']:.0f}, degraded {r['degraded']:.0f}; {r['outcomes']}")
    for t in report.get("timeline", []):
        print(f"B. open {t['open_ms']} ms (max {t['max_open_ms']} ms), failing for {t['failing_s']} s: opened after "
              f"{t['opened_after_ms']:.1f} ms; closed {t['closed_after_healing_ms']:.0f} ms after healing; "
              f"transitions {t['transitions']}; {t['requests']} requests, {t['errors']} errors, "
              f"{t['by_det']} by det, {t['by_fallback']} by det_small")


if __name__ == "__main__":
    main()
