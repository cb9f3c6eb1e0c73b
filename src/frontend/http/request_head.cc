#include "frontend/http/request_head.h"

#include <array>
#include <cstring>
#include <limits>

#include "base/ascii.h"
#include "base/checked_math.h"

namespace weft {
namespace {

namespace http = boost::beast::http;

// RFC 9110 section 5.6.2: tchar, the characters of a method and of a field's name.
constexpr std::array<bool, 256> MakeTokenChars() {
  std::array<bool, 256> token{};
  for (int c = 0; c < 256; ++c) {
    const bool alphanumeric = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    token[c] = alphanumeric || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  }
  return token;
}
constexpr std::array<bool, 256> kTokenChars = MakeTokenChars();

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// The checks below have no early exit: without a branch per byte the compiler checks many bytes at a time (the
// last two), or at least one per cycle (the first). A field value is often a JWT of several hundred bytes, and
// they run on every request.

// Whether `s` is a non-empty token.
bool IsToken(std::string_view s) {
  bool all = !s.empty();
  for (char c : s) all &= kTokenChars[static_cast<unsigned char>(c)];
  return all;
}

// Whether `value` holds a control character other than HTAB (CR and LF included) or DEL, which a field value may
// not (RFC 9110 section 5.5).
bool HasControl(std::string_view value) {
  uint8_t bad = 0;
  for (char ch : value) {
    const auto c = static_cast<uint8_t>(ch);
    bad |= static_cast<uint8_t>((c < 0x20) & (c != '\t')) | static_cast<uint8_t>(c == 0x7f);
  }
  return bad != 0;
}

// Whether `target` is a non-empty request-target (RFC 9112 section 3.2): visible ASCII and, as Beast and most
// servers allow, bytes above 0x7f; no space, no control character.
bool IsTarget(std::string_view target) {
  uint8_t bad = target.empty() ? 1 : 0;
  for (char ch : target) {
    const auto c = static_cast<uint8_t>(ch);
    bad |= static_cast<uint8_t>(c <= 0x20) | static_cast<uint8_t>(c == 0x7f);
  }
  return bad == 0;
}

// Connection is a comma-separated list of options, each a token (RFC 9110 sections 5.6.1 and 7.6.1; empty elements
// are ignored). False when it is not.
bool ReadConnectionOptions(std::string_view value, bool* close, bool* keep_alive) {
  for (;;) {
    const size_t comma = value.find(',');
    const std::string_view option = TrimOptionalWhitespace(value.substr(0, comma));
    if (!option.empty() && !IsToken(option)) return false;
    if (EqualsIgnoringAsciiCase(option, "close")) *close = true;
    if (EqualsIgnoringAsciiCase(option, "keep-alive")) *keep_alive = true;
    if (comma == std::string_view::npos) return true;
    value.remove_prefix(comma + 1);
  }
}

// 1*DIGIT below 2^64.
std::optional<uint64_t> ParseLength(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    std::optional<uint64_t> next = CheckedMul<uint64_t>(n, 10);
    if (next) next = CheckedAdd<uint64_t>(*next, static_cast<uint64_t>(c - '0'));
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

}  // namespace

void HttpHeaders::Add(std::string_view name, std::string_view value) {
  const size_t at = text_.size();
  // The places are 32-bit: a head is bounded far below that (HttpServer::Options::max_header_bytes).
  if (at + name.size() + value.size() > std::numeric_limits<uint32_t>::max()) return;
  text_.append(name);
  text_.append(value);
  places_.push_back(Place{static_cast<uint32_t>(at), static_cast<uint32_t>(name.size()),
                          static_cast<uint32_t>(at + name.size()), static_cast<uint32_t>(value.size())});
}

HttpHeaders::Field HttpHeaders::operator[](size_t i) const {
  const Place& p = places_[i];
  const std::string_view text = text_;
  return Field{text.substr(p.name_at, p.name_size), text.substr(p.value_at, p.value_size)};
}

std::string_view HttpHeaders::Find(std::string_view name) const {
  for (size_t i = 0; i < places_.size(); ++i) {
    // Most names differ in length: the size test ends those comparisons before any character is read.
    if (places_[i].name_size != name.size()) continue;
    const Field field = (*this)[i];
    if (EqualsIgnoringAsciiCase(field.name, name)) return field.value;
  }
  return {};
}

size_t HttpHeaders::Count(std::string_view name) const {
  size_t n = 0;
  for (size_t i = 0; i < places_.size(); ++i) {
    if (places_[i].name_size == name.size() && EqualsIgnoringAsciiCase((*this)[i].name, name)) ++n;
  }
  return n;
}

size_t EmptyLinesAtStart(std::string_view bytes) {
  size_t n = 0;
  while (bytes.size() - n >= 2 && bytes[n] == '\r' && bytes[n + 1] == '\n') n += 2;
  return n;
}

Result<std::optional<size_t>> FindRequestHeadEnd(std::string_view bytes, size_t* scanned) {
  size_t line = *scanned;
  while (line < bytes.size()) {
    const void* found = std::memchr(bytes.data() + line, '\n', bytes.size() - line);
    if (found == nullptr) break;
    const size_t lf = static_cast<size_t>(static_cast<const char*>(found) - bytes.data());
    if (lf == 0 || bytes[lf - 1] != '\r') return InvalidArgument("a line of the request head ends in a bare LF");
    if (lf - 1 == line) {
      *scanned = lf + 1;
      return std::optional<size_t>(lf + 1);
    }
    line = lf + 1;
  }
  *scanned = line;
  return std::optional<size_t>();
}

Status ParseRequestHead(std::string_view head, RequestHead* out) {
  if (head.size() > std::numeric_limits<uint32_t>::max()) return InvalidArgument("the request head is too large");
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") {
    return InvalidArgument("the request head does not end with an empty line");
  }
  out->content_length.reset();
  out->transfer_encoding = false;
  out->expect_continue = false;
  HttpHeaders& headers = out->headers;
  headers.places_.clear();
  headers.text_.assign(head);
  const std::string_view text = headers.text_;

  // Lines end at their LF: FindRequestHeadEnd has seen a CR before each, and a CR anywhere else fails a check.
  auto line_end = [&text](size_t from) {
    return static_cast<size_t>(static_cast<const char*>(std::memchr(text.data() + from, '\n', text.size() - from)) -
                               text.data()) -
           1;
  };

  // request-line = method SP request-target SP HTTP-version CRLF
  const size_t request_line_end = line_end(0);
  std::string_view line = text.substr(0, request_line_end);
  const size_t method_end = line.find(' ');
  if (method_end == std::string_view::npos || !IsToken(line.substr(0, method_end))) {
    return InvalidArgument("the request line does not start with a method and one space");
  }
  out->method = http::string_to_verb(line.substr(0, method_end));
  line.remove_prefix(method_end + 1);
  const size_t target_end = line.find(' ');
  if (target_end == std::string_view::npos || !IsTarget(line.substr(0, target_end))) {
    return InvalidArgument("the request target is empty, has a control character, or is not followed by one space");
  }
  out->target.assign(line.substr(0, target_end));
  const std::string_view version = line.substr(target_end + 1);
  if (version == "HTTP/1.1") {
    out->version = 11;
  } else if (version == "HTTP/1.0") {
    out->version = 10;
  } else {
    return InvalidArgument("the HTTP version is not HTTP/1.0 or HTTP/1.1");
  }

  bool close = false;
  bool keep_alive = false;
  size_t at = request_line_end + 2;
  for (;;) {
    const size_t end = line_end(at);  // the head ends with CRLF CRLF, so there is one
    if (end == at) break;             // the empty line
    const std::string_view field = text.substr(at, end - at);
    if (IsSpace(field.front())) return InvalidArgument("a header field uses obsolete line folding");
    const size_t name_size = field.find(':');
    if (name_size == std::string_view::npos || !IsToken(field.substr(0, name_size))) {
      return InvalidArgument("a header field's name is empty, has a character outside a token, or no colon");
    }
    const std::string_view name = field.substr(0, name_size);
    const std::string_view value = TrimOptionalWhitespace(field.substr(name_size + 1));
    if (HasControl(value)) return InvalidArgument("a header field's value has a control character");
    headers.places_.push_back(HttpHeaders::Place{static_cast<uint32_t>(at), static_cast<uint32_t>(name_size),
                                                 static_cast<uint32_t>(value.data() - text.data()),
                                                 static_cast<uint32_t>(value.size())});
    at = end + 2;

    // What the connection needs: the names by length first, as Find does.
    if (name.size() == 14 && EqualsIgnoringAsciiCase(name, "content-length")) {
      if (out->content_length) return InvalidArgument("the request has more than one Content-Length");
      out->content_length = ParseLength(value);
      if (!out->content_length) return InvalidArgument("Content-Length is not a decimal number below 2^64");
    } else if (name.size() == 17 && EqualsIgnoringAsciiCase(name, "transfer-encoding")) {
      // RFC 9112 section 6.1: chunked must be the last coding, and weft knows no other (a gzip body says so with
      // Content-Encoding). HTTP/1.0 has no transfer codings at all.
      if (out->transfer_encoding || out->version != 11 || !EqualsIgnoringAsciiCase(value, "chunked")) {
        return InvalidArgument("Transfer-Encoding other than one 'chunked' on HTTP/1.1");
      }
      out->transfer_encoding = true;
    } else if (name.size() == 10 && EqualsIgnoringAsciiCase(name, "connection")) {
      if (!ReadConnectionOptions(value, &close, &keep_alive)) {
        return InvalidArgument("the Connection field is not a list of tokens");
      }
    } else if (name.size() == 16 && EqualsIgnoringAsciiCase(name, "proxy-connection")) {
      // An old form of Connection that means nothing here; its syntax is checked as Beast checks it.
      bool unused_close = false;
      bool unused_keep_alive = false;
      if (!ReadConnectionOptions(value, &unused_close, &unused_keep_alive)) {
        return InvalidArgument("the Proxy-Connection field is not a list of tokens");
      }
    } else if (name.size() == 6 && EqualsIgnoringAsciiCase(name, "expect")) {
      // RFC 9110 section 10.1.1: an HTTP/1.0 request's expectation is ignored (its client knows no 1xx).
      out->expect_continue = out->version == 11 && EqualsIgnoringAsciiCase(value, "100-continue");
    }
  }
  if (out->content_length && out->transfer_encoding) {
    // RFC 9112 section 6.3: the two disagree on where the body ends, the classic way to smuggle a request.
    return InvalidArgument("the request has both Content-Length and Transfer-Encoding");
  }
  out->keep_alive = out->version == 11 ? !close : keep_alive && !close;
  return Status::Ok();
}

}  // namespace weft
