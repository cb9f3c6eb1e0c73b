#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "base/result.h"
#include "frontend/http/http_server.h"
#include "frontend/http/request_body.h"

namespace weft {

// HTTP content codings (RFC 9110 section 8.4), as Triton's HTTP frontend and clients use them: a request body sent
// with Content-Encoding gzip or deflate, and a response compressed for a client whose Accept-Encoding allows it.
// "deflate" is the zlib format (RFC 1950), as zlib.compress and Triton's clients write it. Written over zlib.
enum class ContentCoding { kIdentity, kGzip, kDeflate };

std::string_view ContentCodingName(ContentCoding coding);  // "identity", "gzip", "deflate"

// The coding a Content-Encoding header names: empty and "identity" are kIdentity; the names compare without case.
// nullopt for anything else (a coding this server cannot undo, or a list of several).
std::optional<ContentCoding> ParseContentEncoding(std::string_view header);

// The coding to answer with, from a request's Accept-Encoding: gzip when it is accepted (q above 0, by name or by
// "*"), else deflate when accepted, else identity. Malformed entries are ignored.
ContentCoding ChooseResponseCoding(std::string_view accept_encoding);

// `compressed` decoded, into a body whose byte number `anchor` is aligned as RequestBody::Prepare places it.
// InvalidArgument for data that is not valid in `coding` (also trailing bytes after its end); ResourceExhausted when
// it inflates to more than `max_bytes`, found before more than that is written. kIdentity: a copy.
Result<RequestBody> DecodeContent(std::span<const std::byte> compressed, ContentCoding coding, size_t max_bytes,
                                  size_t anchor);

// Compresses `response`'s body and segments, in that order, into its body (the segments are dropped) and names the
// coding in a Content-Encoding header. Nothing changes for kIdentity, or when zlib fails (the response is sent as
// it is: uncompressed is always acceptable).
void EncodeContent(ContentCoding coding, HttpResponse* response);

}  // namespace weft
