#pragma once

#include <boost/beast/http/verb.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/small_vector.h"

namespace weft {

struct RequestHead;
Status ParseRequestHead(std::string_view head, RequestHead* out);

// A request's header fields in the order received, kept as one block of text and the places of each name and
// value in it: a request's fields cost one allocation, not one each, and a lookup is a scan (a request has a
// handful of fields).
class HttpHeaders {
 public:
  struct Field {
    std::string_view name;
    std::string_view value;
  };

  // Appends a field (tests, and the fields of a request that Beast parsed). `name` and `value` as they go on the
  // wire; nothing is checked.
  void Add(std::string_view name, std::string_view value);
  // The first field named `name` (case-insensitive), empty when absent.
  std::string_view Find(std::string_view name) const;
  // How many fields of that name there are.
  size_t Count(std::string_view name) const;

  size_t size() const { return places_.size(); }
  bool empty() const { return places_.empty(); }
  Field operator[](size_t i) const;

 private:
  friend Status ParseRequestHead(std::string_view head, RequestHead* out);
  struct Place {
    uint32_t name_at;
    uint32_t name_size;
    uint32_t value_at;
    uint32_t value_size;
  };
  std::string text_;
  boost::container::small_vector<Place, 12> places_;
};

// The head of one HTTP/1.x request: its request line and its fields, with what the connection needs of them.
struct RequestHead {
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  std::string target;     // as sent: path and query
  unsigned version = 11;  // 10 or 11
  HttpHeaders headers;
  std::optional<uint64_t> content_length;  // from Content-Length
  bool transfer_encoding = false;          // Transfer-Encoding: chunked
  bool keep_alive = true;                  // from the version and the Connection field
  bool expect_continue = false;            // Expect: 100-continue, on HTTP/1.1
};

// The bytes of the empty lines (CRLF) at the start of `bytes`: RFC 9112 section 2.2 asks a server to ignore at
// least one before a request line (some clients send one after a body). A lone CR waits for its LF.
size_t EmptyLinesAtStart(std::string_view bytes);

// Where the head ends in `bytes`: the offset just past the empty line that ends it; nullopt while the empty line
// has not arrived. `scanned` carries the offset of the first line not yet seen between calls on a growing buffer
// (start at 0). InvalidArgument for a line that ends in a bare LF (RFC 9112 section 2.2 lets a server reject it,
// and a lone LF is how request smuggling starts).
Result<std::optional<size_t>> FindRequestHeadEnd(std::string_view bytes, size_t* scanned);

// Parses a complete head (`head` ends with its empty line, as FindRequestHeadEnd delimits it) into `out`, which
// keeps a copy of its bytes (and reuses its storage when it has some). InvalidArgument with the reason for anything RFC
// 9112 does not allow in a request head, and for what weft refuses on purpose because intermediaries disagree on it
// (request smuggling): obsolete line folding, whitespace before a field's colon, a version other than HTTP/1.0 and 1.1,
// a Content-Length that is not one decimal number below 2^64, a repeated Content-Length, a Transfer-Encoding other than
// one `chunked` on HTTP/1.1, and Content-Length beside Transfer-Encoding. Connection and Proxy-Connection must be lists
// of tokens, as Beast requires.
Status ParseRequestHead(std::string_view head, RequestHead* out);

}  // namespace weft
