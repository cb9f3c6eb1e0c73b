#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace weft::testing {

// A request body as the HTTP codecs take it.
inline std::span<const std::byte> Bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace weft::testing
