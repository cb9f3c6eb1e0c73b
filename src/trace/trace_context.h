#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "trace/span.h"

namespace weft {

// A caller's W3C trace context (https://www.w3.org/TR/trace-context/): the trace a request joins, the caller's span
// (the parent of the server's), whether the caller sampled it, and its tracestate, which is passed on untouched.
struct TraceContext {
  TraceId trace_id{};
  SpanId parent_span_id{};
  bool sampled = false;     // trace-flags bit 0
  std::string trace_state;  // "" when absent or invalid
};

// The trace context of the `traceparent` and `tracestate` headers (or gRPC metadata), spaces and tabs around each
// value trimmed. nullopt when traceparent is missing or invalid, and the server then starts a new trace, as the spec
// says. A valid traceparent with an invalid tracestate keeps the traceparent and drops the tracestate (the spec's
// "vendors MUST NOT propagate" an invalid one). The tracestate limits kept: 32 members, 512 characters. Pure.
std::optional<TraceContext> ParseTraceContext(std::string_view traceparent, std::string_view tracestate);

// The traceparent a server sends on: "00-<32 hex>-<16 hex>-01" (sampled) or "-00". Lowercase hex.
std::string FormatTraceparent(const TraceId& trace, const SpanId& span, bool sampled);

// `bytes` as lowercase hex, two digits each.
std::string HexOf(std::span<const uint8_t> bytes);

// Random ids, never all zero. Each thread draws from its own generator, seeded once from std::random_device: no
// lock and no allocation per call. Not for secrets.
TraceId NewTraceId();
SpanId NewSpanId();

}  // namespace weft
