#include "trace/otlp_encoding.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

#include "base/log.h"

#ifndef WEFT_VERSION
#define WEFT_VERSION ""
#endif

namespace weft {
namespace {

// Protobuf's wire types.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Writes into bytes already sized for what is written (every size is computed first), with no check per byte.
class Writer {
 public:
  explicit Writer(char* at) : at_(at) {}
  char* at() const { return at_; }

  void Varint(uint64_t v) {
    while (v >= 0x80) {
      *at_++ = static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    *at_++ = static_cast<char>(v);
  }
  void Tag(uint32_t field, WireType type) { Varint((field << 3) | type); }
  void Byte(uint8_t b) { *at_++ = static_cast<char>(b); }
  void Fixed64(uint32_t field, uint64_t v) {
    Tag(field, kFixed64);
    if constexpr (std::endian::native != std::endian::little) v = __builtin_bswap64(v);
    std::memcpy(at_, &v, 8);
    at_ += 8;
  }
  void Bytes(uint32_t field, std::string_view bytes) {
    Tag(field, kLength);
    Varint(bytes.size());
    std::memcpy(at_, bytes.data(), bytes.size());
    at_ += bytes.size();
  }
  void Raw(std::string_view bytes) {
    std::memcpy(at_, bytes.data(), bytes.size());
    at_ += bytes.size();
  }

 private:
  char* at_;
};

template <size_t N>
std::string_view View(const std::array<uint8_t, N>& id) {
  return {reinterpret_cast<const char*>(id.data()), N};
}

// The size of a length-delimited field of `length` bytes, with its tag (every field number here is under 16).
size_t FieldSize(size_t length) { return 1 + VarintSize(length) + length; }

// AnyValue's body for one attribute value.
size_t AnyValueSize(const AttributeValue& value) {
  return std::visit(
      [](const auto& v) -> size_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return 2;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return 1 + VarintSize(static_cast<uint64_t>(v));
        } else if constexpr (std::is_same_v<T, double>) {
          return 9;
        } else {
          return FieldSize(v.size());
        }
      },
      value);
}

void WriteAnyValue(const AttributeValue& value, Writer& out) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out.Tag(2, kVarint);
          out.Byte(v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out.Tag(3, kVarint);
          out.Varint(static_cast<uint64_t>(v));  // int64: two's complement, ten bytes when negative
        } else if constexpr (std::is_same_v<T, double>) {
          out.Fixed64(4, std::bit_cast<uint64_t>(v));
        } else {
          out.Bytes(1, v);
        }
      },
      value);
}

// A KeyValue as field `field` of its parent.
void WriteAttribute(uint32_t field, std::string_view key, const AttributeValue& value, Writer& out) {
  const size_t any = AnyValueSize(value);
  out.Tag(field, kLength);
  out.Varint(FieldSize(key.size()) + FieldSize(any));
  out.Bytes(1, key);
  out.Tag(2, kLength);
  out.Varint(any);
  WriteAnyValue(value, out);
}

size_t AttributeSize(std::string_view key, const AttributeValue& value) {
  return FieldSize(FieldSize(key.size()) + FieldSize(AnyValueSize(value)));
}

bool IsZero(const SpanId& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

size_t LinkSize(const SpanData::Link& link) {
  size_t n = FieldSize(16) + FieldSize(8);
  for (const auto& [key, value] : link.attributes) n += AttributeSize(key, value);
  return n;
}

size_t StatusSize(const SpanData& span) {
  size_t n = span.status_message.empty() ? 0 : FieldSize(span.status_message.size());
  if (span.status != SpanData::StatusCode::kUnset) n += 2;
  return n;
}

// The Span message's body.
size_t SpanSize(const SpanData& span) {
  size_t n = FieldSize(16) + FieldSize(8) + FieldSize(span.name.size()) + 2 + 9 + 9;  // ids, name, kind, times
  if (!span.trace_state.empty()) n += FieldSize(span.trace_state.size());
  if (!IsZero(span.parent_span_id)) n += FieldSize(8);
  for (const auto& [key, value] : span.attributes) n += AttributeSize(key, value);
  for (const SpanData::Link& link : span.links) n += FieldSize(LinkSize(link));
  if (span.status != SpanData::StatusCode::kUnset || !span.status_message.empty()) n += FieldSize(StatusSize(span));
  return n;
}

}  // namespace

void AppendOtlpSpan(const SpanData& span, std::string* out) {
  const size_t size = SpanSize(span);
  const size_t start = out->size();
  out->resize(start + FieldSize(size));
  Writer w(out->data() + start);
  w.Tag(2, kLength);
  w.Varint(size);
  w.Bytes(1, View(span.trace_id));
  w.Bytes(2, View(span.span_id));
  if (!span.trace_state.empty()) w.Bytes(3, span.trace_state);
  if (!IsZero(span.parent_span_id)) w.Bytes(4, View(span.parent_span_id));
  w.Bytes(5, span.name);
  w.Tag(6, kVarint);
  w.Byte(static_cast<uint8_t>(span.kind));  // SpanData's kinds carry OTLP's numbers, all under 128
  w.Fixed64(7, span.start_unix_ns);
  w.Fixed64(8, span.end_unix_ns);
  for (const auto& [key, value] : span.attributes) WriteAttribute(9, key, value, w);
  for (const SpanData::Link& link : span.links) {
    w.Tag(13, kLength);
    w.Varint(LinkSize(link));
    w.Bytes(1, View(link.trace_id));
    w.Bytes(2, View(link.span_id));
    for (const auto& [key, value] : link.attributes) WriteAttribute(4, key, value, w);
  }
  if (span.status != SpanData::StatusCode::kUnset || !span.status_message.empty()) {
    w.Tag(15, kLength);
    w.Varint(StatusSize(span));
    if (!span.status_message.empty()) w.Bytes(2, span.status_message);
    if (span.status != SpanData::StatusCode::kUnset) {
      w.Tag(3, kVarint);
      w.Byte(static_cast<uint8_t>(span.status));
    }
  }
  WEFT_CHECK(w.at() == out->data() + out->size()) << "an OTLP span's computed size is wrong";
}

std::string EncodeOtlpTraceRequest(const std::vector<std::pair<std::string, std::string>>& resource,
                                   std::string_view encoded_spans) {
  // Inside out: the sizes first, so that the body is written once, in order.
  size_t resource_size = 0;
  for (const auto& [key, value] : resource) resource_size += AttributeSize(key, AttributeValue(value));
  const std::string_view version = WEFT_VERSION;
  const size_t scope_size = FieldSize(4) + (version.empty() ? 0 : FieldSize(version.size()));
  const size_t scope_spans_size = FieldSize(scope_size) + encoded_spans.size();
  const size_t resource_spans_size = FieldSize(resource_size) + FieldSize(scope_spans_size);
  std::string out(FieldSize(resource_spans_size), '\0');
  Writer w(out.data());
  w.Tag(1, kLength);  // ExportTraceServiceRequest.resource_spans
  w.Varint(resource_spans_size);
  w.Tag(1, kLength);  // ResourceSpans.resource
  w.Varint(resource_size);
  for (const auto& [key, value] : resource) WriteAttribute(1, key, AttributeValue(value), w);
  w.Tag(2, kLength);  // ResourceSpans.scope_spans
  w.Varint(scope_spans_size);
  w.Tag(1, kLength);  // ScopeSpans.scope
  w.Varint(scope_size);
  w.Bytes(1, "weft");
  if (!version.empty()) w.Bytes(2, version);
  w.Raw(encoded_spans);  // ScopeSpans.spans, each with its own tag
  WEFT_CHECK(w.at() == out.data() + out.size()) << "an OTLP request's computed size is wrong";
  return out;
}

namespace {

// Reads protobuf's wire format from untrusted bytes: every length is checked against what is left.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return bytes_.empty(); }

  std::optional<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (bytes_.empty()) return std::nullopt;
      const auto b = static_cast<uint8_t>(bytes_.front());
      bytes_.remove_prefix(1);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return std::nullopt;  // more than ten bytes
  }
  std::optional<std::string_view> Take(uint64_t n) {
    if (n > bytes_.size()) return std::nullopt;
    std::string_view out = bytes_.substr(0, n);
    bytes_.remove_prefix(n);
    return out;
  }
  // Reads one field: its number, wire type, and its bytes (length-delimited) or value (varint).
  struct Field {
    uint64_t number = 0;
    uint64_t type = 0;
    uint64_t value = 0;
    std::string_view bytes;
  };
  std::optional<Field> Next() {
    std::optional<uint64_t> tag = Varint();
    if (!tag || (*tag >> 3) == 0) return std::nullopt;
    Field f{.number = *tag >> 3, .type = *tag & 7};
    std::optional<std::string_view> taken;
    switch (f.type) {
      case kVarint: {
        std::optional<uint64_t> v = Varint();
        if (!v) return std::nullopt;
        f.value = *v;
        return f;
      }
      case kFixed64: taken = Take(8); break;
      case kFixed32: taken = Take(4); break;
      case kLength: {
        std::optional<uint64_t> n = Varint();
        if (!n) return std::nullopt;
        taken = Take(*n);
        break;
      }
      default: return std::nullopt;  // groups are not used by OTLP
    }
    if (!taken) return std::nullopt;
    f.bytes = *taken;
    return f;
  }

 private:
  std::string_view bytes_;
};

}  // namespace

Result<OtlpPartialSuccess> ParseOtlpExportResponse(std::string_view body) {
  OtlpPartialSuccess out;
  Reader response(body);
  while (!response.done()) {
    std::optional<Reader::Field> field = response.Next();
    if (!field) return InvalidArgument("the collector's answer is not an ExportTraceServiceResponse");
    if (field->number != 1 || field->type != kLength) continue;  // partial_success
    Reader partial(field->bytes);
    while (!partial.done()) {
      std::optional<Reader::Field> f = partial.Next();
      if (!f) return InvalidArgument("the collector's partial_success is not well-formed");
      if (f->number == 1 && f->type == kVarint) out.rejected_spans = static_cast<int64_t>(f->value);
      if (f->number == 2 && f->type == kLength) out.error_message.assign(f->bytes);
    }
  }
  return out;
}

std::string EncodeOtlpTraceRequest(const std::vector<std::pair<std::string, std::string>>& resource,
                                   std::span<const SpanData> spans) {
  std::string encoded;
  for (const SpanData& span : spans) AppendOtlpSpan(span, &encoded);
  return EncodeOtlpTraceRequest(resource, encoded);
}

}  // namespace weft
