#include "auth/credentials.h"

#include <array>
#include <cstdint>

#include "base/ascii.h"

namespace weft {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// Character classes of a bearer token, one table lookup per byte: the token is scanned twice on every request that
// carries one, and a JWT is several hundred bytes. The chains of comparisons they replace were 4.5 % of a server's
// samples under JWT load, the lookups 3.1 % (docs/benchmarks.md, issue 16). Branch-free forms written to vectorize
// did not: 5.6 %.
constexpr uint8_t kBase64Url = 1;  // RFC 4648's URL-safe alphabet: A-Z a-z 0-9 - _
constexpr uint8_t kToken68 = 2;    // RFC 6750's token68 before its trailing '=': the above and . ~ + /

constexpr std::array<uint8_t, 256> MakeCharClasses() {
  std::array<uint8_t, 256> classes{};
  for (int c = 0; c < 256; ++c) {
    const bool alphanumeric = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (alphanumeric || c == '-' || c == '_') classes[c] |= kBase64Url | kToken68;
    if (c == '.' || c == '~' || c == '+' || c == '/') classes[c] |= kToken68;
  }
  return classes;
}
constexpr std::array<uint8_t, 256> kCharClasses = MakeCharClasses();

bool Is(char c, uint8_t char_class) { return (kCharClasses[static_cast<unsigned char>(c)] & char_class) != 0; }

}  // namespace

Result<std::optional<std::string_view>> ParseBearer(std::string_view authorization) {
  authorization = TrimOptionalWhitespace(authorization);
  if (authorization.empty()) return std::optional<std::string_view>();
  size_t scheme_end = 0;
  while (scheme_end < authorization.size() && !IsSpace(authorization[scheme_end])) ++scheme_end;
  if (!EqualsIgnoringAsciiCase(authorization.substr(0, scheme_end), "bearer")) {
    return Unauthenticated("the authorization scheme is not Bearer");
  }
  const std::string_view token = TrimOptionalWhitespace(authorization.substr(scheme_end));
  if (token.empty()) return Unauthenticated("the Bearer credential has no token");
  size_t i = 0;
  while (i < token.size() && Is(token[i], kToken68)) ++i;
  if (i == 0) return Unauthenticated("the Bearer token does not start with a token character");
  while (i < token.size() && token[i] == '=') ++i;
  if (i != token.size()) return Unauthenticated("the Bearer token has a character outside RFC 6750's token68");
  return std::optional<std::string_view>(token);
}

bool LooksLikeJwt(std::string_view token) {
  // An API key has no dot: memchr rules it out at a few bytes per cycle, before the per-byte scan.
  if (token.find('.') == std::string_view::npos) return false;
  int dots = 0;
  size_t segment = 0;  // characters in the current segment
  for (char c : token) {
    if (c == '.') {
      if (segment == 0 || ++dots > 2) return false;
      segment = 0;
    } else if (Is(c, kBase64Url)) {
      ++segment;
    } else {
      return false;
    }
  }
  return dots == 2 && segment > 0;
}

}  // namespace weft
