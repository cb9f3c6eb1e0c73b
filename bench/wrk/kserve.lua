-- POST a fixed Open Inference Protocol request to $WEFT_PATH, body from $WEFT_BODY (made by make_bodies.py).
-- $WEFT_HEADER_LENGTH, when set, is the JSON header's length for the binary tensor data extension.
-- $WEFT_AUTHORIZATION, when set, is sent as the Authorization header (docs/security.md).
-- Prints "WRKRESULT requests duration_us rps p50_ms p99_ms mean_ms max_ms non2xx errors" at the end.
local f = assert(io.open(os.getenv("WEFT_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.path = os.getenv("WEFT_PATH")
local header_length = os.getenv("WEFT_HEADER_LENGTH")
if header_length and header_length ~= "" then
  wrk.headers["Content-Type"] = "application/octet-stream"
  wrk.headers["Inference-Header-Content-Length"] = header_length
else
  wrk.headers["Content-Type"] = "application/json"
end
local authorization = os.getenv("WEFT_AUTHORIZATION")
if authorization and authorization ~= "" then
  wrk.headers["Authorization"] = authorization
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRKRESULT\t%d\t%d\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\n", summary.requests,
    summary.duration, summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.mean / 1000, latency.max / 1000, e.status,
    e.connect + e.read + e.write + e.timeout))
end
