#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "trace/span.h"

namespace weft {

// OTLP/HTTP trace exports (`POST /v1/traces`, Content-Type application/x-protobuf): the protobuf wire format of
// opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest, written directly (docs/tracing.md says why:
// with every request traced, protobuf's message objects cost more than the rest of the request's tracing).
// Pure; thread-safe.

// Appends `span` to `out` as one `spans` field of a ScopeSpans (field 2: a length-delimited Span). Spans appended
// one after the other can be wrapped later by EncodeOtlpTraceRequest without being read again. A root span's
// all-zero parent id is left out, as OTLP asks; an unset status is left out.
void AppendOtlpSpan(const SpanData& span, std::string* out);

// The export body: one ResourceSpans carrying `resource` as string attributes and one ScopeSpans (scope "weft", the
// server's version) holding `encoded_spans` (made by AppendOtlpSpan) in order.
std::string EncodeOtlpTraceRequest(const std::vector<std::pair<std::string, std::string>>& resource,
                                   std::string_view encoded_spans);
std::string EncodeOtlpTraceRequest(const std::vector<std::pair<std::string, std::string>>& resource,
                                   std::span<const SpanData> spans);

// What a collector's ExportTraceServiceResponse says about a partial success: spans it rejected, and why.
struct OtlpPartialSuccess {
  int64_t rejected_spans = 0;
  std::string error_message;
};
// Reads a 200 answer's protobuf body (may be empty: nothing rejected). Unknown fields are skipped, as protobuf
// does; a body that is not well-formed protobuf is InvalidArgument. Pure; fuzzed by trace_context_fuzz.
Result<OtlpPartialSuccess> ParseOtlpExportResponse(std::string_view body);

}  // namespace weft
