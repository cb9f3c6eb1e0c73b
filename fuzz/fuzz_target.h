#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

#include "base/log.h"
#include "frontend/http/request_body.h"
#include "tensor/tensor.h"

// What the fuzz targets share: their input framing, request bodies laid out as the server lays them out, and the
// check of every tensor they get back.
namespace weft {

// A fuzz input read as the framing its target defines: some lines (a model name, a header value, a small JSON
// body), then the rest as raw bytes. Framing by '\n' keeps the seed files readable and lets libFuzzer's mutations
// stay within one field; every split is well defined, so no input is rejected for its framing.
class FramedInput {
 public:
  FramedInput(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}

  // The bytes up to the next '\n', without it; everything left when there is none.
  std::string_view Line() {
    size_t end = rest_.find('\n');
    std::string_view line = rest_.substr(0, end);
    rest_.remove_prefix(end == std::string_view::npos ? rest_.size() : end + 1);
    return line;
  }
  // Everything not taken yet.
  std::string_view Rest() const { return rest_; }

 private:
  std::string_view rest_;
};

// `bytes` as the HTTP server lays out a request body: in a RequestBody (followed by kRequestBodyPadding readable
// bytes, so the JSON is parsed in place as in production) with body byte `anchor` aligned (the server anchors the
// Inference-Header-Content-Length offset, 0 without one).
inline std::shared_ptr<RequestBody> MakeRequestBody(std::string_view bytes, size_t anchor) {
  auto body = std::make_shared<RequestBody>();
  body->Prepare(bytes.size(), anchor);
  if (!bytes.empty()) std::memcpy(body->Append(bytes.size()), bytes.data(), bytes.size());
  return body;
}

// Reads every byte of `bytes` so that the sanitizers see each one (a view past its buffer shows as an ASan report
// or a SEGV); returns a checksum the caller may ignore.
inline uint8_t ReadEveryByte(std::span<const std::byte> bytes) {
  uint8_t sum = 0;
  for (std::byte b : bytes) sum = static_cast<uint8_t>(sum + static_cast<uint8_t>(b));
  // Through a volatile, so that the loop is not optimized away.
  volatile uint8_t sink = sum;
  return sink;
}

// Checks what every consumer of a decoded tensor relies on (backends read element_count() elements), computed
// here without the decoders' own helpers and without wrapping: its bytes hold exactly its elements (count times
// the element size; for BYTES, that many length-prefixed elements and nothing after them). A tensor that breaks
// it is a bug, not bad input: abort, so that libFuzzer keeps the input. Then reads every byte.
inline void CheckTensor(const Tensor& t) {
  unsigned __int128 count = 1;
  for (int64_t d : t.shape()) {
    WEFT_CHECK(d >= 0) << "tensor '" << t.name() << "' has a negative dimension";
    count *= static_cast<uint64_t>(d);
    WEFT_CHECK(count <= static_cast<uint64_t>(INT64_MAX)) << "tensor '" << t.name() << "' has more than 2^63 elements";
  }
  if (t.type() == DataType::kBytes) {
    size_t at = 0;
    for (unsigned __int128 i = 0; i < count; ++i) {
      WEFT_CHECK(t.byte_size() - at >= 4)
          << "BYTES tensor '" << t.name() << "': element " << static_cast<uint64_t>(i) << " has no length";
      uint32_t length = 0;
      std::memcpy(&length, t.data() + at, 4);
      at += 4;
      WEFT_CHECK(t.byte_size() - at >= length) << "BYTES tensor '" << t.name() << "': element overruns its bytes";
      at += length;
    }
    WEFT_CHECK(at == t.byte_size()) << "BYTES tensor '" << t.name() << "' has bytes after its last element";
  } else {
    WEFT_CHECK(count * DataTypeSize(t.type()) == t.byte_size())
        << "tensor '" << t.name() << "' of " << static_cast<uint64_t>(count) << " elements of "
        << DataTypeSize(t.type()) << " bytes has " << t.byte_size() << " bytes";
  }
  ReadEveryByte(t.bytes());
}

}  // namespace weft
