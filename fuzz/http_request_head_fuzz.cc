// Fuzzes the HTTP request head parser (frontend/http/request_head.cc): FindRequestHeadEnd on bytes as a connection
// receives them, in pieces, and ParseRequestHead on the head it delimits. Besides the sanitizers it checks that the
// end found in pieces is the end found at once; that a parsed head keeps its promises (a non-empty target without
// space or control characters; fields whose names are tokens and whose values have no control character and no
// surrounding space; a Content-Length only from one decimal field, never beside Transfer-Encoding; keep-alive as
// the version and Connection say); that parsing into a head that held another request gives the same answer; and,
// because two parsers that disagree on a request are how requests are smuggled, that Beast's parser (which the
// server still uses for chunked bodies) reads every head this one accepts without a Transfer-Encoding the same
// way: method, target, version, fields, Content-Length and keep-alive (but for repeated Connection fields).
//
// Input: the first byte sets the size of the pieces (1 to 16 bytes), the rest is the bytes on the connection.

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/ascii.h"
#include "base/log.h"
#include "frontend/http/request_head.h"
#include "fuzz/fuzz_target.h"

namespace weft {
namespace {

namespace http = boost::beast::http;

bool IsTokenChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void CheckHead(const RequestHead& head) {
  WEFT_CHECK(!head.target.empty());
  for (char c : head.target) WEFT_CHECK(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
  WEFT_CHECK(head.version == 10 || head.version == 11);
  size_t lengths = 0;
  bool transfer_encoding = false;
  for (size_t i = 0; i < head.headers.size(); ++i) {
    const HttpHeaders::Field field = head.headers[i];
    WEFT_CHECK(!field.name.empty());
    for (char c : field.name) WEFT_CHECK(IsTokenChar(c));
    for (char c : field.value) WEFT_CHECK(c == '\t' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
    if (!field.value.empty()) {
      WEFT_CHECK(field.value.front() != ' ' && field.value.front() != '\t');
      WEFT_CHECK(field.value.back() != ' ' && field.value.back() != '\t');
    }
    // Find answers the first of a name.
    WEFT_CHECK(head.headers.Find(field.name).data() == head.headers[i].value.data() ||
               head.headers.Count(field.name) > 1);
    if (EqualsIgnoringAsciiCase(field.name, "content-length")) {
      ++lengths;
      WEFT_CHECK(head.content_length && std::to_string(*head.content_length).size() <= field.value.size());
    }
    if (EqualsIgnoringAsciiCase(field.name, "transfer-encoding")) transfer_encoding = true;
  }
  WEFT_CHECK(lengths == (head.content_length ? 1u : 0u));
  WEFT_CHECK(transfer_encoding == head.transfer_encoding);
  WEFT_CHECK(!(head.content_length && head.transfer_encoding));
}

// Beast must read an accepted head as this parser did.
void CheckBeastAgrees(std::string_view bytes, const RequestHead& head) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(1 << 20);
  parser.body_limit(boost::none);  // the server answers a length over its limit with 413, after the head
  parser.eager(false);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  WEFT_CHECK(!ec || ec == http::error::need_more) << "Beast refused a head weft accepts: " << ec.message();
  WEFT_CHECK(parser.is_header_done()) << "Beast did not finish a head weft accepts";
  const auto& message = parser.get();
  WEFT_CHECK(message.method() == head.method);
  WEFT_CHECK(message.target() == head.target);
  WEFT_CHECK(message.version() == head.version);
  // Beast reads the first Connection field only; weft reads them all as one list, as RFC 9110 section 5.3 says.
  if (head.headers.Count("connection") <= 1) WEFT_CHECK(message.keep_alive() == head.keep_alive);
  WEFT_CHECK(parser.content_length().has_value() == head.content_length.has_value());
  if (head.content_length) WEFT_CHECK(*parser.content_length() == *head.content_length);
  // Beast keeps a repeated name's fields together; each name's values must come in the same order.
  std::vector<bool> matched(head.headers.size());
  size_t fields = 0;
  for (const auto& field : message) {
    size_t i = 0;
    while (i < head.headers.size() && (matched[i] || head.headers[i].name != field.name_string())) ++i;
    WEFT_CHECK(i < head.headers.size()) << "Beast read a field weft did not";
    WEFT_CHECK(field.value() == head.headers[i].value);
    matched[i] = true;
    ++fields;
  }
  WEFT_CHECK(fields == head.headers.size());
}

void FuzzOne(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t piece = 1 + data[0] % 16;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  size_t scanned_at_once = 0;
  Result<std::optional<size_t>> at_once = FindRequestHeadEnd(bytes, &scanned_at_once);
  size_t scanned = 0;
  Result<std::optional<size_t>> end = std::optional<size_t>();
  for (size_t received = std::min(piece, bytes.size());; received = std::min(received + piece, bytes.size())) {
    end = FindRequestHeadEnd(bytes.substr(0, received), &scanned);
    WEFT_CHECK(scanned <= received);
    if (!end.ok() || *end || received == bytes.size()) break;
  }
  WEFT_CHECK(end.ok() == at_once.ok());
  if (!end.ok()) return;
  WEFT_CHECK(*end == *at_once);
  if (!*end) return;
  const std::string_view head_bytes = bytes.substr(0, **end);
  // An empty line first ends a head of its own, which ParseRequestHead refuses.
  WEFT_CHECK(head_bytes == "\r\n" || head_bytes.ends_with("\r\n\r\n"));

  RequestHead head;
  if (!ParseRequestHead(head_bytes, &head).ok()) return;
  CheckHead(head);
  // Parsed again into a head that held another request: the same answer.
  RequestHead reused;
  WEFT_CHECK(
      ParseRequestHead("POST /other HTTP/1.0\r\nContent-Length: 7\r\nExpect: 100-continue\r\nX: y\r\n\r\n", &reused)
          .ok());
  WEFT_CHECK(ParseRequestHead(head_bytes, &reused).ok());
  WEFT_CHECK(reused.method == head.method && reused.target == head.target && reused.version == head.version &&
             reused.content_length == head.content_length && reused.keep_alive == head.keep_alive &&
             reused.expect_continue == head.expect_continue && reused.headers.size() == head.headers.size());
  if (!head.transfer_encoding) CheckBeastAgrees(head_bytes, head);
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::FuzzOne(data, size);
  return 0;
}
