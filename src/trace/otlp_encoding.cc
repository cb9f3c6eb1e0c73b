#include "trace/otlp_encoding.h"

#include <algorithm>
#include <type_traits>
#include <variant>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

#ifndef WEFT_VERSION
#define WEFT_VERSION ""
#endif

namespace weft {

namespace {

namespace common = opentelemetry::proto::common::v1;
namespace otlp = opentelemetry::proto::trace::v1;

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), id.size());
}

void SetValue(const AttributeValue& value, common::AnyValue* out) {
  std::visit(
      [out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out->set_bool_value(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out->set_int_value(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out->set_double_value(v);
        } else {
          static_assert(std::is_same_v<T, std::string>);
          out->set_string_value(v);
        }
      },
      value);
}

void AddAttributes(const Attributes& attributes, google::protobuf::RepeatedPtrField<common::KeyValue>* out) {
  out->Reserve(static_cast<int>(attributes.size()));
  for (const auto& [key, value] : attributes) {
    common::KeyValue* kv = out->Add();
    kv->set_key(key);
    SetValue(value, kv->mutable_value());
  }
}

void EncodeSpan(const SpanData& span, otlp::Span* out) {
  out->set_trace_id(Bytes(span.trace_id));
  out->set_span_id(Bytes(span.span_id));
  if (!span.trace_state.empty()) out->set_trace_state(span.trace_state);
  if (std::any_of(span.parent_span_id.begin(), span.parent_span_id.end(), [](uint8_t b) { return b != 0; })) {
    out->set_parent_span_id(Bytes(span.parent_span_id));
  }
  out->set_name(span.name);
  // SpanData's kinds and status codes carry OTLP's numbers.
  out->set_kind(static_cast<otlp::Span::SpanKind>(span.kind));
  out->set_start_time_unix_nano(span.start_unix_ns);
  out->set_end_time_unix_nano(span.end_unix_ns);
  AddAttributes(span.attributes, out->mutable_attributes());
  for (const SpanData::Link& link : span.links) {
    otlp::Span::Link* l = out->add_links();
    l->set_trace_id(Bytes(link.trace_id));
    l->set_span_id(Bytes(link.span_id));
    AddAttributes(link.attributes, l->mutable_attributes());
  }
  if (span.status != SpanData::StatusCode::kUnset || !span.status_message.empty()) {
    otlp::Status* status = out->mutable_status();
    status->set_code(static_cast<otlp::Status::StatusCode>(span.status));
    status->set_message(span.status_message);
  }
}

}  // namespace

std::string EncodeOtlpTraceRequest(const std::vector<std::pair<std::string, std::string>>& resource,
                                   std::span<const SpanData> spans) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  otlp::ResourceSpans* resource_spans = request.add_resource_spans();
  auto* resource_attributes = resource_spans->mutable_resource()->mutable_attributes();
  for (const auto& [key, value] : resource) {
    common::KeyValue* kv = resource_attributes->Add();
    kv->set_key(key);
    kv->mutable_value()->set_string_value(value);
  }
  otlp::ScopeSpans* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name("weft");
  scope_spans->mutable_scope()->set_version(WEFT_VERSION);
  scope_spans->mutable_spans()->Reserve(static_cast<int>(spans.size()));
  for (const SpanData& span : spans) EncodeSpan(span, scope_spans->add_spans());
  return request.SerializeAsString();
}

}  // namespace weft
