#include "trace/otlp_encoding.h"

#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace weft {
namespace {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
namespace common = opentelemetry::proto::common::v1;
namespace otlp = opentelemetry::proto::trace::v1;

template <size_t N>
std::array<uint8_t, N> Counting(uint8_t first) {
  std::array<uint8_t, N> id;
  std::iota(id.begin(), id.end(), first);
  return id;
}

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

ExportTraceServiceRequest Decode(const std::string& bytes) {
  ExportTraceServiceRequest request;
  EXPECT_TRUE(request.ParseFromString(bytes));
  return request;
}

SpanData ServerSpan() {
  SpanData span;
  span.trace_id = Counting<16>(1);
  span.span_id = Counting<8>(0x21);
  span.parent_span_id = Counting<8>(0x31);
  span.trace_state = "vendor=abc,other=1";
  span.name = "ModelInfer";
  span.kind = SpanData::Kind::kServer;
  span.start_unix_ns = 1'700'000'000'123'456'789;
  span.end_unix_ns = 1'700'000'000'223'456'789;
  span.attributes = {
      {"model.name", std::string("resnet")}, {"model.version", int64_t{-3}}, {"cached", true}, {"ratio", 0.25}};
  SpanData::Link link;
  link.trace_id = Counting<16>(0x41);
  link.span_id = Counting<8>(0x51);
  link.attributes = {{"link.kind", std::string("batch")}, {"position", int64_t{7}}};
  span.links.push_back(link);
  span.status = SpanData::StatusCode::kError;
  span.status_message = "model not ready";
  return span;
}

TEST(OtlpEncodingTest, EveryFieldOfASpan) {
  std::vector<SpanData> spans = {ServerSpan()};
  ExportTraceServiceRequest request =
      Decode(EncodeOtlpTraceRequest({{"service.name", "weft"}, {"host.name", "box"}}, spans));

  ASSERT_EQ(request.resource_spans_size(), 1);
  const otlp::ResourceSpans& resource_spans = request.resource_spans(0);
  const auto& resource = resource_spans.resource().attributes();
  ASSERT_EQ(resource.size(), 2);
  EXPECT_EQ(resource[0].key(), "service.name");
  EXPECT_EQ(resource[0].value().string_value(), "weft");
  EXPECT_EQ(resource[1].key(), "host.name");
  EXPECT_EQ(resource[1].value().string_value(), "box");

  ASSERT_EQ(resource_spans.scope_spans_size(), 1);
  const otlp::ScopeSpans& scope_spans = resource_spans.scope_spans(0);
  EXPECT_EQ(scope_spans.scope().name(), "weft");
  EXPECT_FALSE(scope_spans.scope().version().empty());
  ASSERT_EQ(scope_spans.spans_size(), 1);

  const otlp::Span& span = scope_spans.spans(0);
  EXPECT_EQ(span.trace_id(), Bytes(Counting<16>(1)));
  EXPECT_EQ(span.span_id(), Bytes(Counting<8>(0x21)));
  EXPECT_EQ(span.parent_span_id(), Bytes(Counting<8>(0x31)));
  EXPECT_EQ(span.trace_state(), "vendor=abc,other=1");
  EXPECT_EQ(span.name(), "ModelInfer");
  EXPECT_EQ(span.kind(), otlp::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(span.start_time_unix_nano(), 1'700'000'000'123'456'789u);
  EXPECT_EQ(span.end_time_unix_nano(), 1'700'000'000'223'456'789u);

  ASSERT_EQ(span.attributes_size(), 4);
  EXPECT_EQ(span.attributes(0).key(), "model.name");
  EXPECT_EQ(span.attributes(0).value().value_case(), common::AnyValue::kStringValue);
  EXPECT_EQ(span.attributes(0).value().string_value(), "resnet");
  EXPECT_EQ(span.attributes(1).key(), "model.version");
  EXPECT_EQ(span.attributes(1).value().value_case(), common::AnyValue::kIntValue);
  EXPECT_EQ(span.attributes(1).value().int_value(), -3);
  EXPECT_EQ(span.attributes(2).key(), "cached");
  EXPECT_EQ(span.attributes(2).value().value_case(), common::AnyValue::kBoolValue);
  EXPECT_TRUE(span.attributes(2).value().bool_value());
  EXPECT_EQ(span.attributes(3).key(), "ratio");
  EXPECT_EQ(span.attributes(3).value().value_case(), common::AnyValue::kDoubleValue);
  EXPECT_EQ(span.attributes(3).value().double_value(), 0.25);

  ASSERT_EQ(span.links_size(), 1);
  const otlp::Span::Link& link = span.links(0);
  EXPECT_EQ(link.trace_id(), Bytes(Counting<16>(0x41)));
  EXPECT_EQ(link.span_id(), Bytes(Counting<8>(0x51)));
  ASSERT_EQ(link.attributes_size(), 2);
  EXPECT_EQ(link.attributes(0).key(), "link.kind");
  EXPECT_EQ(link.attributes(0).value().string_value(), "batch");
  EXPECT_EQ(link.attributes(1).key(), "position");
  EXPECT_EQ(link.attributes(1).value().int_value(), 7);

  ASSERT_TRUE(span.has_status());
  EXPECT_EQ(span.status().code(), otlp::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(span.status().message(), "model not ready");

  // Nothing weft does not know is made up.
  EXPECT_EQ(span.events_size(), 0);
  EXPECT_EQ(span.dropped_attributes_count(), 0u);
  EXPECT_EQ(span.flags(), 0u);
}

TEST(OtlpEncodingTest, RootSpanHasAnEmptyParentAndUnsetStatus) {
  SpanData span;
  span.trace_id = Counting<16>(1);
  span.span_id = Counting<8>(2);
  span.name = "root";
  span.kind = SpanData::Kind::kInternal;
  std::vector<SpanData> spans = {span};
  ExportTraceServiceRequest request = Decode(EncodeOtlpTraceRequest({}, spans));
  const otlp::Span& decoded = request.resource_spans(0).scope_spans(0).spans(0);
  EXPECT_TRUE(decoded.parent_span_id().empty());
  EXPECT_TRUE(decoded.trace_state().empty());
  EXPECT_EQ(decoded.kind(), otlp::Span::SPAN_KIND_INTERNAL);
  EXPECT_EQ(decoded.status().code(), otlp::Status::STATUS_CODE_UNSET);
  EXPECT_TRUE(decoded.status().message().empty());
  EXPECT_EQ(decoded.attributes_size(), 0);
  EXPECT_EQ(decoded.links_size(), 0);
  EXPECT_EQ(request.resource_spans(0).resource().attributes_size(), 0);
}

TEST(OtlpEncodingTest, KindsAndStatusCodesKeepOtlpNumbers) {
  std::vector<SpanData> spans(3);
  spans[0].kind = SpanData::Kind::kInternal;
  spans[1].kind = SpanData::Kind::kServer;
  spans[1].status = SpanData::StatusCode::kOk;
  spans[2].kind = SpanData::Kind::kClient;
  spans[2].status = SpanData::StatusCode::kError;
  ExportTraceServiceRequest request = Decode(EncodeOtlpTraceRequest({}, spans));
  const auto& decoded = request.resource_spans(0).scope_spans(0).spans();
  ASSERT_EQ(decoded.size(), 3);
  EXPECT_EQ(decoded[0].kind(), otlp::Span::SPAN_KIND_INTERNAL);
  EXPECT_EQ(decoded[1].kind(), otlp::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(decoded[1].status().code(), otlp::Status::STATUS_CODE_OK);
  EXPECT_EQ(decoded[2].kind(), otlp::Span::SPAN_KIND_CLIENT);
  EXPECT_EQ(decoded[2].status().code(), otlp::Status::STATUS_CODE_ERROR);
}

TEST(OtlpEncodingTest, ManySpansStayInOrderInOneScope) {
  std::vector<SpanData> spans(100);
  for (size_t i = 0; i < spans.size(); ++i) {
    spans[i].name = "span-" + std::to_string(i);
    spans[i].span_id = Counting<8>(static_cast<uint8_t>(i));
  }
  ExportTraceServiceRequest request = Decode(EncodeOtlpTraceRequest({{"service.name", "weft"}}, spans));
  ASSERT_EQ(request.resource_spans_size(), 1);
  ASSERT_EQ(request.resource_spans(0).scope_spans_size(), 1);
  const auto& decoded = request.resource_spans(0).scope_spans(0).spans();
  ASSERT_EQ(decoded.size(), 100);
  for (int i = 0; i < decoded.size(); ++i) {
    EXPECT_EQ(decoded[i].name(), "span-" + std::to_string(i));
    EXPECT_EQ(decoded[i].span_id(), Bytes(Counting<8>(static_cast<uint8_t>(i))));
  }
}

TEST(OtlpEncodingTest, NoSpansIsAValidRequest) {
  ExportTraceServiceRequest request =
      Decode(EncodeOtlpTraceRequest({{"service.name", "weft"}}, std::span<const SpanData>()));
  ASSERT_EQ(request.resource_spans_size(), 1);
  EXPECT_EQ(request.resource_spans(0).scope_spans(0).spans_size(), 0);
}

// The encoder writes protobuf's wire format by hand: lengths over one varint byte (128 and 16384 bytes), negative
// and large integers, doubles and every optional field must decode with protobuf's own parser to what was written.
TEST(OtlpEncodingTest, HandWrittenWireFormatDecodesWithProtobuf) {
  SpanData span = ServerSpan();
  span.name = std::string(200, 'n');
  span.trace_state = std::string(20000, 's');
  span.status = SpanData::StatusCode::kUnset;
  span.status_message = "only a message";
  span.attributes = {{"big", std::string(17000, 'v')},
                     {"min", std::numeric_limits<int64_t>::min()},
                     {"max", std::numeric_limits<int64_t>::max()},
                     {"neg", -1.5e300},
                     {"no", false},
                     {std::string(300, 'k'), std::string()}};
  std::string spans;
  AppendOtlpSpan(span, &spans);
  AppendOtlpSpan(ServerSpan(), &spans);
  ExportTraceServiceRequest request = Decode(EncodeOtlpTraceRequest({{"k", std::string(500, 'r')}}, spans));
  ASSERT_EQ(request.resource_spans_size(), 1);
  EXPECT_EQ(request.resource_spans(0).resource().attributes(0).value().string_value(), std::string(500, 'r'));
  const auto& scope = request.resource_spans(0).scope_spans(0);
  EXPECT_EQ(scope.scope().name(), "weft");
  ASSERT_EQ(scope.spans_size(), 2);
  const otlp::Span& first = scope.spans(0);
  EXPECT_EQ(first.name(), std::string(200, 'n'));
  EXPECT_EQ(first.trace_state(), std::string(20000, 's'));
  EXPECT_EQ(first.status().message(), "only a message");
  EXPECT_EQ(first.status().code(), otlp::Status::STATUS_CODE_UNSET);
  ASSERT_EQ(first.attributes_size(), 6);
  EXPECT_EQ(first.attributes(0).value().string_value(), std::string(17000, 'v'));
  EXPECT_EQ(first.attributes(1).value().int_value(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(first.attributes(2).value().int_value(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(first.attributes(3).value().double_value(), -1.5e300);
  EXPECT_TRUE(first.attributes(4).value().has_bool_value());
  EXPECT_FALSE(first.attributes(4).value().bool_value());
  EXPECT_EQ(first.attributes(5).key(), std::string(300, 'k'));
  EXPECT_TRUE(first.attributes(5).value().has_string_value());
  // The second, appended after it, is whole.
  EXPECT_EQ(scope.spans(1).name(), "ModelInfer");
  EXPECT_EQ(scope.spans(1).links(0).attributes(1).value().int_value(), 7);
  EXPECT_EQ(scope.spans(1).status().code(), otlp::Status::STATUS_CODE_ERROR);
}

TEST(OtlpEncodingTest, ReadsAPartialSuccessAndSkipsUnknownFields) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse response;
  response.mutable_partial_success()->set_rejected_spans(7);
  response.mutable_partial_success()->set_error_message("too old");
  std::string body = response.SerializeAsString();
  // Unknown fields of every wire type, before and after: a newer collector may send them.
  const std::string unknown = std::string("\x10\x96\x01", 3) + std::string("\x19", 1) + std::string(8, '\x01') +
                              std::string(
                                  "\x22\x02"
                                  "ab",
                                  4) +
                              std::string("\x2d", 1) + std::string(4, '\x02');
  Result<OtlpPartialSuccess> parsed = ParseOtlpExportResponse(unknown + body + unknown);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->rejected_spans, 7);
  EXPECT_EQ(parsed->error_message, "too old");
  EXPECT_EQ(ParseOtlpExportResponse("")->rejected_spans, 0);
  // Cut short, or a length past the end, or a varint of eleven bytes: errors, never a read past the body.
  EXPECT_FALSE(ParseOtlpExportResponse(body.substr(0, body.size() - 1)).ok());
  EXPECT_FALSE(ParseOtlpExportResponse(std::string("\x0a\xff\xff\xff\xff\x0f", 6)).ok());
  EXPECT_FALSE(ParseOtlpExportResponse(std::string(11, '\xff')).ok());
  EXPECT_FALSE(ParseOtlpExportResponse(std::string("\x0b", 1)).ok());  // a group
  EXPECT_FALSE(ParseOtlpExportResponse("{}").ok());
}

}  // namespace
}  // namespace weft
