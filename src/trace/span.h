#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace weft {

// W3C trace context ids (https://www.w3.org/TR/trace-context/): all-zero ids are invalid.
using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

using AttributeValue = std::variant<bool, int64_t, double, std::string>;
using Attributes = std::vector<std::pair<std::string, AttributeValue>>;

// One finished span, as the exporters and the file writer take it: OpenTelemetry's data model, times in ns since the
// Unix epoch.
struct SpanData {
  enum class Kind : uint8_t { kInternal = 1, kServer = 2, kClient = 3 };  // OTLP's SpanKind numbers
  enum class StatusCode : uint8_t { kUnset = 0, kOk = 1, kError = 2 };    // OTLP's Status.StatusCode numbers
  struct Link {
    TraceId trace_id{};
    SpanId span_id{};
    Attributes attributes;
  };

  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zero for a root span
  std::string trace_state;  // the caller's tracestate, kept as received
  std::string name;
  Kind kind = Kind::kInternal;
  uint64_t start_unix_ns = 0;
  uint64_t end_unix_ns = 0;
  Attributes attributes;
  std::vector<Link> links;
  StatusCode status = StatusCode::kUnset;
  std::string status_message;  // only with kError
};

}  // namespace weft
