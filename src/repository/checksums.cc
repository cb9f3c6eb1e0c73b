#include "repository/checksums.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "base/json_string.h"
#include "base/small_file.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

constexpr size_t kHexDigits = 64;
constexpr char kLowerHex[] = "0123456789abcdef";
constexpr std::string_view kTagPrefix = "SHA256 (";
constexpr std::string_view kTagSeparator = ") = ";
// Large enough that the per-read overhead vanishes next to hashing, small enough for any number of concurrent loads.
constexpr size_t kReadChunk = size_t{1} << 20;
// Names in messages are cut here: a name may be most of a 1 MiB line, and errors end up in logs and responses.
constexpr size_t kMaxNameInMessage = 256;

// `name` for a message: control bytes and backslashes escaped (a listed name may hold a newline, which would
// otherwise forge a log line), cut to kMaxNameInMessage.
std::string Printable(std::string_view name) {
  std::string out;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kLowerHex[u >> 4];
      out += kLowerHex[u & 0xf];
    } else {
      out += c;
    }
    if (out.size() > kMaxNameInMessage) break;
  }
  return TruncateUtf8(out, kMaxNameInMessage);
}

std::string Quoted(std::string_view name) { return "\"" + Printable(name) + "\""; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t LeadingHexDigits(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && HexValue(s[n]) >= 0) ++n;
  return n;
}

// The digest in the first kHexDigits characters of `hex`; the caller has checked that they are hex digits.
Sha256Digest DigestFromHex(std::string_view hex) {
  Sha256Digest digest{};
  for (size_t i = 0; i < digest.size(); ++i) {
    digest[i] = static_cast<uint8_t>(HexValue(hex[2 * i]) << 4 | HexValue(hex[2 * i + 1]));
  }
  return digest;
}

// Undoes sha256sum's escaping, exactly as coreutils' filename_unescape does: "\\", "\n" and "\r" only.
Result<std::string> Unescape(std::string_view escaped) {
  std::string name;
  name.reserve(escaped.size());
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '\\') {
      name += escaped[i];
      continue;
    }
    if (++i == escaped.size()) return InvalidArgument("the name ends in a lone backslash");
    switch (escaped[i]) {
      case '\\': name += '\\'; break;
      case 'n': name += '\n'; break;
      case 'r': name += '\r'; break;
      default:
        return InvalidArgument("invalid escape \"\\" + Printable(escaped.substr(i, 1)) +
                               "\" in the name (sha256sum writes only \\\\, \\n and \\r)");
    }
  }
  return name;
}

// `name` as a path relative to the version directory with its "." components dropped (`find .` writes "./x"), or
// why it is refused: a path that could leave the directory, or with an empty component ("a//b", "sub/"). What is
// left has one spelling per file, which the duplicate check relies on.
Result<std::string> NormalizedPath(std::string_view name) {
  if (name.find('\0') != std::string_view::npos) return InvalidArgument("the name contains a NUL byte");
  if (name.empty()) return InvalidArgument("empty name");
  if (name.front() == '/') return InvalidArgument("absolute path " + Quoted(name));
  std::string path;
  size_t begin = 0;
  while (true) {
    const size_t slash = name.find('/', begin);
    const std::string_view component =
        name.substr(begin, slash == std::string_view::npos ? std::string_view::npos : slash - begin);
    if (component.empty()) return InvalidArgument("path " + Quoted(name) + " has an empty component");
    if (component == "..") return InvalidArgument("path " + Quoted(name) + " has a \"..\" component");
    if (component != ".") {
      if (!path.empty()) path += '/';
      path += component;
    }
    if (slash == std::string_view::npos) break;
    begin = slash + 1;
  }
  if (path.empty()) return InvalidArgument("path " + Quoted(name) + " names the directory itself");
  return path;
}

Status TooLarge(size_t limit) {
  return InvalidArgument(std::string(kChecksumManifestName) + ": larger than " + std::to_string(limit) +
                         " bytes, the limit for a manifest");
}

struct ParsedLine {
  Sha256Digest digest;
  std::string path;
};

// One non-empty line, without its line ending.
Result<ParsedLine> ParseLine(std::string_view line) {
  const bool escaped = line.front() == '\\';
  if (escaped) line.remove_prefix(1);

  std::string_view hex;
  std::string_view raw_name;
  if (line.starts_with(kTagPrefix)) {
    // The name may hold ") = " itself; the digest cannot, so the separator is the last one.
    const std::string_view rest = line.substr(kTagPrefix.size());
    const size_t close = rest.rfind(kTagSeparator);
    if (close == std::string_view::npos || rest.size() - close - kTagSeparator.size() != kHexDigits ||
        LeadingHexDigits(rest.substr(close + kTagSeparator.size())) != kHexDigits) {
      return InvalidArgument("malformed line: expected \"SHA256 (<name>) = <64 hex digits>\"");
    }
    raw_name = rest.substr(0, close);
    hex = rest.substr(close + kTagSeparator.size());
  } else {
    const size_t digits = LeadingHexDigits(line);
    if (digits != kHexDigits && digits > 0 && digits < line.size() && line[digits] == ' ') {
      // Most likely another algorithm's manifest (sha1sum: 40, sha512sum: 128): say so.
      return InvalidArgument("a digest of " + std::to_string(digits) + " hex digits; SHA-256 has 64");
    }
    if (digits != kHexDigits || line.size() < kHexDigits + 2 || line[kHexDigits] != ' ' ||
        (line[kHexDigits + 1] != ' ' && line[kHexDigits + 1] != '*')) {
      return InvalidArgument(
          "malformed line: expected \"<64 hex digits>  <name>\", \"<64 hex digits> *<name>\" or "
          "\"SHA256 (<name>) = <64 hex digits>\"");
    }
    hex = line.substr(0, kHexDigits);
    raw_name = line.substr(kHexDigits + 2);
  }

  ParsedLine parsed{DigestFromHex(hex), {}};
  std::string name;
  if (escaped) {
    WEFT_ASSIGN_OR_RETURN(name, Unescape(raw_name));
  } else {
    name = std::string(raw_name);
  }
  WEFT_ASSIGN_OR_RETURN(parsed.path, NormalizedPath(name));
  return parsed;
}

std::string ErrnoMessage(int err) { return std::error_code(err, std::generic_category()).message(); }

// Reads into buffer[0, size); returns the bytes read (0 at the end of the file) or -errno.
ssize_t ReadSome(int fd, uint8_t* buffer, size_t size) {
  while (true) {
    const ssize_t n = ::read(fd, buffer, size);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

Result<Sha256Digest> HashOpenFile(int fd) {
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Internal("OpenSSL cannot start a SHA-256 digest");
  }
  const auto buffer = std::make_unique_for_overwrite<uint8_t[]>(kReadChunk);
  while (true) {
    const ssize_t n = ReadSome(fd, buffer.get(), kReadChunk);
    if (n < 0) return Internal("read failed: " + ErrnoMessage(static_cast<int>(-n)));
    if (n == 0) break;
    if (EVP_DigestUpdate(ctx.get(), buffer.get(), static_cast<size_t>(n)) != 1) {
      return Internal("OpenSSL failed to update a SHA-256 digest");
    }
  }
  Sha256Digest digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) != 1 || length != digest.size()) {
    return Internal("OpenSSL failed to finish a SHA-256 digest");
  }
  return digest;
}

// The manifest's text, refused before anything is allocated when it is over the limit. Its size is checked again
// while reading: the file may grow after the fstat.
Result<std::string> ReadManifest(int fd, off_t size) {
  constexpr size_t kLimit = kMaxChecksumManifestBytes;
  if (size < 0 || static_cast<uint64_t>(size) > kLimit) return TooLarge(kLimit);
  // One byte more than expected, to see the end of the file (or that it grew) without a second allocation.
  std::string text(static_cast<size_t>(size) + 1, '\0');
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() > kLimit) return TooLarge(kLimit);
      text.resize(kLimit + 1);
    }
    const ssize_t n = ReadSome(fd, reinterpret_cast<uint8_t*>(text.data()) + got, text.size() - got);
    if (n < 0) {
      return Internal(std::string(kChecksumManifestName) + ": read failed: " + ErrnoMessage(static_cast<int>(-n)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace

std::string ToHex(const Sha256Digest& digest) {
  std::string hex;
  hex.reserve(2 * digest.size());
  for (uint8_t b : digest) {
    hex += kLowerHex[b >> 4];
    hex += kLowerHex[b & 0xf];
  }
  return hex;
}

Result<std::vector<ChecksumEntry>> ParseChecksumManifest(std::string_view text) {
  return ParseChecksumManifest(text, ChecksumManifestLimits{});
}

Result<std::vector<ChecksumEntry>> ParseChecksumManifest(std::string_view text, const ChecksumManifestLimits& limits) {
  if (text.size() > limits.max_bytes) return TooLarge(limits.max_bytes);
  const std::string manifest(kChecksumManifestName);
  std::vector<ChecksumEntry> entries;
  // path -> (index in entries, line that listed it first)
  std::unordered_map<std::string, std::pair<size_t, size_t>> seen;
  size_t line_number = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t newline = text.find('\n', begin);
    const size_t end = newline == std::string_view::npos ? text.size() : newline;
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    // As `sha256sum -c` (coreutils >= 9.0) does, so that a manifest written or edited on Windows verifies.
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty()) continue;

    const std::string where = manifest + ":" + std::to_string(line_number);
    Result<ParsedLine> parsed = ParseLine(line);
    if (!parsed.ok()) return parsed.status().WithContext(where);
    if (parsed->path == kChecksumManifestName) continue;

    auto [it, inserted] = seen.try_emplace(parsed->path, entries.size(), line_number);
    if (!inserted) {
      if (entries[it->second.first].digest == parsed->digest) continue;
      return InvalidArgument(where + ": " + Quoted(parsed->path) +
                             " is listed again with a different digest (first on line " +
                             std::to_string(it->second.second) + ")");
    }
    if (entries.size() == limits.max_entries) {
      return InvalidArgument(where + ": more than " + std::to_string(limits.max_entries) + " entries");
    }
    entries.push_back({std::move(parsed->path), parsed->digest});
  }
  return entries;
}

Result<Sha256Digest> Sha256OfFile(const fs::path& file) {
  Result<OpenFile> opened = OpenRegularFile(file);
  if (!opened.ok()) return opened.status().WithContext(file.string());
  Result<Sha256Digest> digest = HashOpenFile(opened->fd.get());
  if (!digest.ok()) return digest.status().WithContext(file.string());
  return digest;
}

Result<ManifestResult> VerifyChecksumManifest(const fs::path& dir) {
  const std::string manifest(kChecksumManifestName);
  std::error_code ec;
  const fs::file_status dir_status = fs::status(dir, ec);
  if (!fs::exists(dir_status)) {
    if (ec && ec != std::errc::no_such_file_or_directory) return Internal(dir.string() + ": " + ec.message());
    return NotFound(dir.string() + ": no such directory");
  }
  if (!fs::is_directory(dir_status)) return InvalidArgument(dir.string() + ": not a directory");

  std::string text;
  {
    Result<OpenFile> opened = OpenRegularFile(dir / kChecksumManifestName);
    if (!opened.ok()) {
      if (opened.status().code() == StatusCode::kNotFound) return ManifestResult::kAbsent;
      return opened.status().WithContext(manifest);
    }
    WEFT_ASSIGN_OR_RETURN(text, ReadManifest(opened->fd.get(), opened->size));
  }
  WEFT_ASSIGN_OR_RETURN(const std::vector<ChecksumEntry> entries, ParseChecksumManifest(text));
  if (entries.empty()) return InvalidArgument(manifest + ": lists no files, so it would verify nothing");

  for (const ChecksumEntry& entry : entries) {
    const std::string where = manifest + ": " + Printable(entry.path);
    Result<OpenFile> file = OpenRegularFile(dir / entry.path);
    if (!file.ok()) {
      if (file.status().code() == StatusCode::kNotFound) return NotFound(where + ": listed but missing");
      return file.status().WithContext(where);
    }
    Result<Sha256Digest> digest = HashOpenFile(file->fd.get());
    if (!digest.ok()) return digest.status().WithContext(where);
    if (*digest != entry.digest) {
      return InvalidArgument(where + ": checksum mismatch (listed " + ToHex(entry.digest) + ", file has " +
                             ToHex(*digest) + ")");
    }
  }
  return ManifestResult::kVerified;
}

}  // namespace weft
