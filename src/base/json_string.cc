#include "base/json_string.h"

namespace weft {
namespace {

// The length of the well-formed UTF-8 sequence at `s[i]` (RFC 3629: no overlong forms, no surrogates, nothing
// past U+10FFFF), or 0 when the bytes there are not one. `s[i]` is at least 0x80.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  auto continuation = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  const unsigned char lead = byte(0);
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    const unsigned char second = byte(1);
    if (lead == 0xE0 && second < 0xA0) return 0;  // overlong
    if (lead == 0xED && second > 0x9F) return 0;  // a UTF-16 surrogate
    return continuation(1) && continuation(2) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    const unsigned char second = byte(1);
    if (lead == 0xF0 && second < 0x90) return 0;  // overlong
    if (lead == 0xF4 && second > 0x8F) return 0;  // past U+10FFFF
    return continuation(1) && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the pending run of bytes that need no escape: appended in one go
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x80) {
      if (size_t length = Utf8SequenceLength(value, i)) {
        i += length - 1;
        continue;
      }
      out->append(value.data() + run, i - run);
      run = i + 1;
      out->append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER, one per byte that is not UTF-8
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(value.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xf]);
    }
  }
  out->append(value.data() + run, value.size() - run);
  out->push_back('"');
}

std::string JsonString(std::string_view value) {
  std::string out;
  out.reserve(value.size() + 2);
  AppendJsonString(&out, value);
  return out;
}

bool IsValidUtf8(std::string_view value) {
  for (size_t i = 0; i < value.size(); ++i) {
    if (static_cast<unsigned char>(value[i]) < 0x80) continue;
    const size_t length = Utf8SequenceLength(value, i);
    if (length == 0) return false;
    i += length - 1;
  }
  return true;
}

std::string TruncateUtf8(std::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return std::string(value);
  size_t cut = max_bytes;
  // Back off to the start of a character, so that a multi-byte one is not split.
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  return std::string(value.substr(0, cut)) + "... (" + std::to_string(value.size() - cut) + " more bytes)";
}

}  // namespace weft
