#include "frontend/http/request_body.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace weft {

alignas(kRequestBodyAlignment) const std::byte RequestBody::kEmpty[kRequestBodyPadding] = {};

void RequestBody::AlignedDelete::operator()(std::byte* p) const {
  ::operator delete[](p, std::align_val_t(kRequestBodyAlignment));
}

RequestBody& RequestBody::operator=(RequestBody&& other) noexcept {
  storage_ = std::move(other.storage_);
  lead_ = std::exchange(other.lead_, 0);
  size_ = std::exchange(other.size_, 0);
  capacity_ = std::exchange(other.capacity_, 0);
  return *this;
}

void RequestBody::Prepare(size_t expected, size_t anchor) {
  lead_ = (kRequestBodyAlignment - anchor % kRequestBodyAlignment) % kRequestBodyAlignment;
  Reallocate(expected);
}

std::byte* RequestBody::Append(size_t n) {
  if (!storage_ || capacity_ - size_ < n) Reallocate(std::max(size_ + n, capacity_ * 2));
  std::byte* at = storage_.get() + lead_ + size_;
  size_ += n;
  return at;
}

void RequestBody::Reallocate(size_t capacity) {
  size_t total = lead_ + capacity + kRequestBodyPadding;
  std::unique_ptr<std::byte[], AlignedDelete> fresh(
      static_cast<std::byte*>(::operator new[](total, std::align_val_t(kRequestBodyAlignment))));
  if (size_ > 0) std::memcpy(fresh.get() + lead_, storage_.get() + lead_, size_);
  // Zeroed so that a parser reading into the padding sees defined bytes.
  std::memset(fresh.get() + lead_ + capacity, 0, kRequestBodyPadding);
  storage_ = std::move(fresh);
  capacity_ = capacity;
}

}  // namespace weft
