#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trace/span.h"

namespace weft {

// The body of an OTLP/HTTP trace export (`POST /v1/traces`, Content-Type application/x-protobuf): a serialized
// opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest with one ResourceSpans carrying `resource` as
// string attributes and one ScopeSpans (scope "weft", the server's version) holding `spans` in order. A root span's
// all-zero parent id is sent empty, as OTLP asks. Pure; thread-safe.
std::string EncodeOtlpTraceRequest(const std::vector<std::pair<std::string, std::string>>& resource,
                                   std::span<const SpanData> spans);

}  // namespace weft
