#include "auth/credentials.h"

#include "base/ascii.h"

namespace weft {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

bool IsAlphaNumeric(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsBase64UrlChar(char c) { return IsAlphaNumeric(c) || c == '-' || c == '_'; }

bool IsToken68Char(char c) {
  return IsAlphaNumeric(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::optional<std::string_view>> ParseBearer(std::string_view authorization) {
  authorization = Trim(authorization);
  if (authorization.empty()) return std::optional<std::string_view>();
  size_t scheme_end = 0;
  while (scheme_end < authorization.size() && !IsSpace(authorization[scheme_end])) ++scheme_end;
  if (!EqualsIgnoringAsciiCase(authorization.substr(0, scheme_end), "bearer")) {
    return Unauthenticated("the authorization scheme is not Bearer");
  }
  const std::string_view token = Trim(authorization.substr(scheme_end));
  if (token.empty()) return Unauthenticated("the Bearer credential has no token");
  size_t i = 0;
  while (i < token.size() && IsToken68Char(token[i])) ++i;
  if (i == 0) return Unauthenticated("the Bearer token does not start with a token character");
  while (i < token.size() && token[i] == '=') ++i;
  if (i != token.size()) return Unauthenticated("the Bearer token has a character outside RFC 6750's token68");
  return std::optional<std::string_view>(token);
}

bool LooksLikeJwt(std::string_view token) {
  int dots = 0;
  size_t segment = 0;  // characters in the current segment
  for (char c : token) {
    if (c == '.') {
      if (segment == 0 || ++dots > 2) return false;
      segment = 0;
    } else if (IsBase64UrlChar(c)) {
      ++segment;
    } else {
      return false;
    }
  }
  return dots == 2 && segment > 0;
}

}  // namespace weft
