#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

namespace weft {

// Readable bytes allocated after the end of every request body, so that a parser that reads past the end of its
// input in wide blocks (simdjson needs 64) can run over the body in place, without a padded copy.
inline constexpr size_t kRequestBodyPadding = 64;
// The boundary that a body's anchor byte (see RequestBody::Prepare) is placed on: wide enough for every tensor
// element type and for SIMD loads, so tensors that view the body need no copy to be aligned.
inline constexpr size_t kRequestBodyAlignment = 64;

// The bytes of one request body in one buffer, followed by kRequestBodyPadding readable bytes. The HTTP server
// fills it while reading and hands it over immutable, shared, so that tensors can view it in place.
// Thread-compatible.
class RequestBody {
 public:
  RequestBody() = default;
  RequestBody(RequestBody&& other) noexcept { *this = std::move(other); }
  RequestBody& operator=(RequestBody&& other) noexcept;

  // Makes room for `expected` bytes, laid out so that byte number `anchor` of the body starts on a
  // kRequestBodyAlignment boundary. Call once, before the first Append; later growth keeps the anchor aligned.
  void Prepare(size_t expected, size_t anchor);
  // Appends `n` bytes that the caller writes through the returned pointer; grows the buffer when needed.
  std::byte* Append(size_t n);
  // Drops the bytes after the first `size` (at most size()): what an Append reserved and the writer did not fill.
  void Truncate(size_t size) { size_ = size < size_ ? size : size_; }

  const std::byte* data() const { return storage_ ? storage_.get() + lead_ : kEmpty; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data(), size_}; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data()), size_}; }

 private:
  struct AlignedDelete {
    void operator()(std::byte* p) const;
  };
  void Reallocate(size_t capacity);

  // An empty body still points at kRequestBodyPadding readable bytes.
  alignas(kRequestBodyAlignment) static const std::byte kEmpty[kRequestBodyPadding];

  std::unique_ptr<std::byte[], AlignedDelete> storage_;
  size_t lead_ = 0;      // bytes before the body, so that the anchor byte is aligned
  size_t size_ = 0;      // bytes of body written
  size_t capacity_ = 0;  // bytes of body that fit, not counting lead_ and the padding
};

}  // namespace weft
