// Fuzzes SHA256SUMS manifest parsing (repository/checksums.cc): ParseChecksumManifest, with the default limits and
// with a limit of 3 entries. Besides the sanitizers, it checks what VerifyChecksumManifest relies on to read only
// inside the version directory, and aborts when an accepted manifest breaks it: every path is non-empty and
// relative, has no "..", "." or empty component and no NUL byte, is not the manifest itself, and appears once.
// Then an accepted manifest, written back as sha256sum writes it (text, binary and --tag lines, names escaped as
// coreutils escapes them), must parse to the same entries: the parser reads back what the tool writes.
//
// Input: the text of a SHA256SUMS file, nothing else.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "repository/checksums.h"

namespace weft {
namespace {

void CheckPath(const std::string& path) {
  WEFT_CHECK(!path.empty()) << "an empty path";
  WEFT_CHECK(path.front() != '/') << "absolute path '" << path << "'";
  WEFT_CHECK(path.find('\0') == std::string::npos) << "a NUL byte in a path";
  WEFT_CHECK(path != kChecksumManifestName) << "the manifest lists itself";
  size_t begin = 0;
  while (true) {
    const size_t slash = path.find('/', begin);
    const std::string_view component = std::string_view(path).substr(begin, slash - begin);
    WEFT_CHECK(!component.empty()) << "an empty component in '" << path << "'";
    WEFT_CHECK(component != "..") << "a '..' component in '" << path << "'";
    WEFT_CHECK(component != ".") << "a '.' component in '" << path << "'";
    if (slash == std::string::npos) break;
    begin = slash + 1;
  }
}

// `entries` as sha256sum writes them; `form` picks text mode, binary mode or --tag for each line.
std::string Write(const std::vector<ChecksumEntry>& entries, uint8_t form) {
  std::string text;
  for (const ChecksumEntry& e : entries) {
    const bool escape = e.path.find_first_of("\\\n\r") != std::string::npos;
    std::string name;
    for (char c : e.path) {
      if (escape && c == '\\') {
        name += "\\\\";
      } else if (escape && c == '\n') {
        name += "\\n";
      } else if (escape && c == '\r') {
        name += "\\r";
      } else {
        name += c;
      }
    }
    if (escape) text += '\\';
    switch (form++ % 3) {
      case 0: text += ToHex(e.digest) + "  " + name; break;
      case 1: text += ToHex(e.digest) + " *" + name; break;
      default: text += "SHA256 (" + name + ") = " + ToHex(e.digest); break;
    }
    text += '\n';
  }
  return text;
}

void CheckEntries(const std::vector<ChecksumEntry>& entries, size_t max_entries, uint8_t form) {
  WEFT_CHECK(entries.size() <= max_entries) << entries.size() << " entries, more than " << max_entries;
  std::set<std::string_view> paths;
  for (const ChecksumEntry& e : entries) {
    CheckPath(e.path);
    WEFT_CHECK(paths.insert(e.path).second) << "'" << e.path << "' listed twice";
  }
  const std::string written = Write(entries, form);
  Result<std::vector<ChecksumEntry>> again = ParseChecksumManifest(written, {.max_bytes = SIZE_MAX});
  WEFT_CHECK(again.ok()) << "what sha256sum would write does not parse: " << again.status().ToString();
  WEFT_CHECK(again->size() == entries.size())
      << "written back, " << entries.size() << " entries became " << again->size();
  for (size_t i = 0; i < entries.size(); ++i) {
    WEFT_CHECK((*again)[i].path == entries[i].path && (*again)[i].digest == entries[i].digest)
        << "written back, entry " << i << " '" << entries[i].path << "' became '" << (*again)[i].path << "'";
  }
}

void Parse(std::string_view text) {
  // The form of the written-back lines follows the input, so that each form meets every kind of name.
  const uint8_t form = text.empty() ? 0 : static_cast<uint8_t>(text.back());
  Result<std::vector<ChecksumEntry>> parsed = ParseChecksumManifest(text);
  if (parsed.ok()) CheckEntries(*parsed, kMaxChecksumEntries, form);
  constexpr size_t kFew = 3;
  Result<std::vector<ChecksumEntry>> few = ParseChecksumManifest(text, {.max_entries = kFew});
  WEFT_CHECK(few.ok() == (parsed.ok() && parsed->size() <= kFew))
      << "a limit of " << kFew << " entries decided otherwise than the count";
  if (few.ok()) CheckEntries(*few, kFew, form);
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::Parse(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
