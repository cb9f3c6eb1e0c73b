#include "trace/trace_context.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <random>

#include "base/ascii.h"

namespace weft {
namespace {

// The spec's limits on tracestate: list members, and the length a vendor must propagate (longer may be cut; we
// drop it whole rather than pick members).
constexpr size_t kMaxTraceStateMembers = 32;
constexpr size_t kMaxTraceStateLength = 512;
// "00-" 32 hex "-" 16 hex "-" 2 hex.
constexpr size_t kTraceparentLength = 55;

int LowerHexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase hex is invalid in traceparent
}

// `hex` (2 * out.size() characters) into `out`; false for anything but lowercase hex.
bool ParseLowerHex(std::string_view hex, std::span<uint8_t> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    const int high = LowerHexDigit(hex[2 * i]);
    const int low = LowerHexDigit(hex[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return true;
}

bool AllZero(std::span<const uint8_t> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

bool IsLcAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsKeyChar(char c) { return IsLcAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '*' || c == '/'; }

// `first` then 0..`max_rest` key characters.
bool KeyPart(std::string_view part, bool (*first)(char), size_t max_rest) {
  if (part.empty() || part.size() > max_rest + 1 || !first(part[0])) return false;
  return std::all_of(part.begin() + 1, part.end(), IsKeyChar);
}

// simple-key = lcalpha 0*255(keychar); multi-tenant-key = tenant-id "@" system-id, where tenant-id =
// (lcalpha / DIGIT) 0*240(keychar) and system-id = lcalpha 0*13(keychar).
bool ValidKey(std::string_view key) {
  const size_t at = key.find('@');
  if (at == std::string_view::npos) return KeyPart(key, IsLcAlpha, 255);
  return KeyPart(
             key.substr(0, at), [](char c) { return IsLcAlpha(c) || IsDigit(c); }, 240) &&
         KeyPart(key.substr(at + 1), IsLcAlpha, 13);
}

// value = 0*255(chr) nblk-chr, where chr is printable ASCII but ',' and '=', and nblk-chr is chr but space.
bool ValidValue(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  return std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7E && c != ',' && c != '='; });
}

// A tracestate already trimmed. Members may be empty (a comma after a comma, or only OWS), keys must be unique.
bool ValidTraceState(std::string_view state) {
  if (state.size() > kMaxTraceStateLength) return false;
  std::array<std::string_view, kMaxTraceStateMembers> keys;
  size_t count = 0;
  while (true) {
    const size_t comma = state.find(',');
    const std::string_view member = TrimOptionalWhitespace(state.substr(0, comma));
    if (!member.empty()) {
      const size_t eq = member.find('=');
      if (eq == std::string_view::npos || count == kMaxTraceStateMembers) return false;
      const std::string_view key = member.substr(0, eq);
      if (!ValidKey(key) || !ValidValue(member.substr(eq + 1))) return false;
      if (std::find(keys.begin(), keys.begin() + count, key) != keys.begin() + count) return false;
      keys[count++] = key;
    }
    if (comma == std::string_view::npos) return true;
    state.remove_prefix(comma + 1);
  }
}

// xoshiro256** (Blackman and Vigna): fast, 256 bits of state, good enough for ids that only need to be unique.
class IdGenerator {
 public:
  IdGenerator() {
    std::random_device device;
    do {
      for (uint64_t& word : state_) word = static_cast<uint64_t>(device()) << 32 | device();
    } while (state_[0] == 0 && state_[1] == 0 && state_[2] == 0 && state_[3] == 0);
  }

  uint64_t Next() {
    const uint64_t result = std::rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = std::rotl(state_[3], 45);
    return result;
  }

  // Fills `out` with random bytes, drawing again in the (2^-64) case that they are all zero.
  void Fill(std::span<uint8_t> out) {
    do {
      for (size_t at = 0; at < out.size(); at += sizeof(uint64_t)) {
        const uint64_t word = Next();
        std::memcpy(out.data() + at, &word, std::min(sizeof word, out.size() - at));
      }
    } while (AllZero(out));
  }

 private:
  std::array<uint64_t, 4> state_{};
};

IdGenerator& ThreadGenerator() {
  thread_local IdGenerator generator;
  return generator;
}

}  // namespace

std::optional<TraceContext> ParseTraceContext(std::string_view traceparent, std::string_view tracestate) {
  const std::string_view parent = TrimOptionalWhitespace(traceparent);
  if (parent.size() < kTraceparentLength) return std::nullopt;
  uint8_t version = 0;
  if (!ParseLowerHex(parent.substr(0, 2), {&version, 1}) || version == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may add fields, after a '-', that this parser ignores.
  if (version == 0 ? parent.size() != kTraceparentLength
                   : parent.size() > kTraceparentLength && parent[kTraceparentLength] != '-') {
    return std::nullopt;
  }
  if (parent[2] != '-' || parent[35] != '-' || parent[52] != '-') return std::nullopt;
  TraceContext context;
  uint8_t flags = 0;
  if (!ParseLowerHex(parent.substr(3, 32), context.trace_id) ||
      !ParseLowerHex(parent.substr(36, 16), context.parent_span_id) ||
      !ParseLowerHex(parent.substr(53, 2), {&flags, 1})) {
    return std::nullopt;
  }
  if (AllZero(context.trace_id) || AllZero(context.parent_span_id)) return std::nullopt;
  context.sampled = (flags & 0x01) != 0;
  const std::string_view state = TrimOptionalWhitespace(tracestate);
  if (ValidTraceState(state)) context.trace_state = std::string(state);
  return context;
}

std::string HexOf(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * bytes.size(), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0x0f];
  }
  return out;
}

std::string FormatTraceparent(const TraceId& trace, const SpanId& span, bool sampled) {
  std::string out;
  out.reserve(kTraceparentLength);
  out += "00-";
  out += HexOf(trace);
  out += '-';
  out += HexOf(span);
  out += sampled ? "-01" : "-00";
  return out;
}

TraceId NewTraceId() {
  TraceId id;
  ThreadGenerator().Fill(id);
  return id;
}

SpanId NewSpanId() {
  SpanId id;
  ThreadGenerator().Fill(id);
  return id;
}

}  // namespace weft
