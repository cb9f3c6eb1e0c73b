#include "frontend/http/content_coding.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/ascii.h"

namespace weft {
namespace {

// zlib's window bits: 15 (the largest window) plus 16 to write a gzip wrapper, or plus 32 to read either wrapper.
constexpr int kGzipWindow = 15 + 16;
constexpr int kZlibWindow = 15;
constexpr int kDetectWindow = 15 + 32;
// zlib counts in uInt; feed it at most this much per call.
constexpr size_t kMaxStep = size_t{1} << 30;
constexpr size_t kInflateChunk = size_t{64} << 10;

// The q-value of one Accept-Encoding entry's parameters ("q=0.5"); 1 without one; nullopt when malformed.
std::optional<double> QualityOf(std::string_view params) {
  while (!params.empty()) {
    size_t semi = params.find(';');
    std::string_view param = TrimOptionalWhitespace(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (param.size() < 2 || std::tolower(static_cast<unsigned char>(param[0])) != 'q' || param[1] != '=') continue;
    std::string_view value = param.substr(2);
    double q = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), q);
    if (error != std::errc() || end != value.data() + value.size() || q < 0 || q > 1) return std::nullopt;
    return q;
  }
  return 1.0;
}

}  // namespace

std::string_view ContentCodingName(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kGzip: return "gzip";
    case ContentCoding::kDeflate: return "deflate";
    case ContentCoding::kIdentity: break;
  }
  return "identity";
}

std::optional<ContentCoding> ParseContentEncoding(std::string_view header) {
  header = TrimOptionalWhitespace(header);
  if (header.empty() || EqualsIgnoringAsciiCase(header, "identity")) return ContentCoding::kIdentity;
  if (EqualsIgnoringAsciiCase(header, "gzip") || EqualsIgnoringAsciiCase(header, "x-gzip")) return ContentCoding::kGzip;
  if (EqualsIgnoringAsciiCase(header, "deflate")) return ContentCoding::kDeflate;
  return std::nullopt;
}

ContentCoding ChooseResponseCoding(std::string_view accept_encoding) {
  std::optional<double> gzip, deflate, any;
  while (!accept_encoding.empty()) {
    size_t comma = accept_encoding.find(',');
    std::string_view entry = accept_encoding.substr(0, comma);
    accept_encoding = comma == std::string_view::npos ? std::string_view() : accept_encoding.substr(comma + 1);
    size_t semi = entry.find(';');
    std::string_view name = TrimOptionalWhitespace(entry.substr(0, semi));
    std::optional<double> q = QualityOf(semi == std::string_view::npos ? std::string_view() : entry.substr(semi + 1));
    if (!q) continue;
    if (EqualsIgnoringAsciiCase(name, "gzip") || EqualsIgnoringAsciiCase(name, "x-gzip")) gzip = q;
    if (EqualsIgnoringAsciiCase(name, "deflate")) deflate = q;
    if (name == "*") any = q;
  }
  auto accepted = [&](const std::optional<double>& named) { return named ? *named > 0 : any && *any > 0; };
  if (accepted(gzip)) return ContentCoding::kGzip;
  if (accepted(deflate)) return ContentCoding::kDeflate;
  return ContentCoding::kIdentity;
}

Result<RequestBody> DecodeContent(std::span<const std::byte> compressed, ContentCoding coding, size_t max_bytes,
                                  size_t anchor) {
  RequestBody body;
  if (coding == ContentCoding::kIdentity) {
    if (compressed.size() > max_bytes) return ResourceExhausted("the body is over the limit");
    body.Prepare(compressed.size(), anchor);
    if (!compressed.empty()) std::memcpy(body.Append(compressed.size()), compressed.data(), compressed.size());
    return body;
  }
  const std::string name(ContentCodingName(coding));
  z_stream stream{};
  if (inflateInit2(&stream, kDetectWindow) != Z_OK) return Internal("zlib could not start inflating");
  // Guessing 4x saves most regrowth for tensors; the limit caps the guess.
  body.Prepare(std::min(max_bytes, std::max(kInflateChunk, compressed.size() / 2 * 8)), anchor);
  const std::byte* in = compressed.data();
  size_t in_left = compressed.size();
  int result = Z_OK;
  Status error;
  while (result != Z_STREAM_END) {
    if (stream.avail_in == 0 && in_left > 0) {
      const size_t step = std::min(in_left, kMaxStep);
      stream.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(in));  // zlib's API is not const
      stream.avail_in = static_cast<uInt>(step);
      in += step;
      in_left -= step;
    }
    const size_t written = body.size();
    // One byte past the limit is enough to tell that the body is over it. (`left + 1` is taken only below
    // kInflateChunk: a limit of SIZE_MAX would wrap it to 0.)
    const size_t left = max_bytes - std::min(max_bytes, written);
    const size_t room = left >= kInflateChunk ? kInflateChunk : left + 1;
    stream.next_out = reinterpret_cast<Bytef*>(body.Append(room));
    stream.avail_out = static_cast<uInt>(room);
    const bool had_input = stream.avail_in > 0;
    result = inflate(&stream, Z_NO_FLUSH);
    body.Truncate(written + (room - stream.avail_out));
    if (result == Z_NEED_DICT || result == Z_DATA_ERROR || result == Z_STREAM_ERROR) {
      error = InvalidArgument("the " + name + " body is not valid " + name + " data" +
                              (stream.msg ? std::string(" (") + stream.msg + ")" : std::string()));
      break;
    }
    if (result == Z_MEM_ERROR) {
      error = ResourceExhausted("out of memory inflating the " + name + " body");
      break;
    }
    if (body.size() > max_bytes) {
      error = ResourceExhausted("the " + name + " body inflates to more than " + std::to_string(max_bytes) +
                                " bytes, the server's limit");
      break;
    }
    if (result == Z_BUF_ERROR && !had_input && in_left == 0) {
      error = InvalidArgument("the " + name + " body ends before its compressed data does");
      break;
    }
  }
  const size_t trailing = stream.avail_in + in_left;
  inflateEnd(&stream);
  if (!error.ok()) return error;
  if (trailing > 0) {
    return InvalidArgument("the " + name + " body has " + std::to_string(trailing) +
                           " bytes after its compressed data");
  }
  return body;
}

void EncodeContent(ContentCoding coding, HttpResponse* response) {
  if (coding == ContentCoding::kIdentity) return;
  z_stream stream{};
  // Level 1: responses are mostly tensors, which compress little more at higher levels and cost the I/O thread
  // several times the time.
  if (deflateInit2(&stream, 1, Z_DEFLATED, coding == ContentCoding::kGzip ? kGzipWindow : kZlibWindow, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return;
  }
  std::vector<std::span<const std::byte>> pieces;
  pieces.emplace_back(reinterpret_cast<const std::byte*>(response->body.data()), response->body.size());
  size_t total = response->body.size();
  for (const HttpResponse::Segment& segment : response->segments) {
    pieces.push_back(segment.bytes);
    total += segment.bytes.size();
  }
  std::string out;
  out.resize(
      std::min<size_t>(deflateBound(&stream, static_cast<uLong>(std::min<size_t>(total, kMaxStep))), total + 1024));
  size_t produced = 0;
  bool ok = true;
  for (size_t i = 0; i < pieces.size() && ok; ++i) {
    std::span<const std::byte> piece = pieces[i];
    const bool last_piece = i + 1 == pieces.size();
    do {
      const size_t step = std::min(piece.size(), kMaxStep);
      stream.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(piece.data()));
      stream.avail_in = static_cast<uInt>(step);
      piece = piece.subspan(step);
      const int flush = last_piece && piece.empty() ? Z_FINISH : Z_NO_FLUSH;
      int result = Z_OK;
      do {
        if (out.size() - produced < 64) out.resize(out.size() * 2 + 64);
        const size_t room = std::min(out.size() - produced, kMaxStep);
        stream.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
        stream.avail_out = static_cast<uInt>(room);
        result = deflate(&stream, flush);
        produced += room - stream.avail_out;
        if (result == Z_STREAM_ERROR) ok = false;
      } while (ok && (stream.avail_out == 0 || stream.avail_in > 0 || (flush == Z_FINISH && result != Z_STREAM_END)));
    } while (ok && !piece.empty());
  }
  deflateEnd(&stream);
  if (!ok) return;
  out.resize(produced);
  response->body = std::move(out);
  response->segments.clear();
  response->headers.emplace_back("Content-Encoding", std::string(ContentCodingName(coding)));
}

}  // namespace weft
