#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

// SHA256SUMS manifests: a version directory may list the SHA-256 of its files, and the live repository loads the
// version only when every listed file matches. The manifest is untrusted input (it arrives with the model files).
//
// Thread-safety: every function here is pure or touches only the files it is given; all are safe to call
// concurrently.
namespace weft {

inline constexpr char kChecksumManifestName[] = "SHA256SUMS";
inline constexpr size_t kMaxChecksumManifestBytes = size_t{1} << 20;  // a manifest larger than this is refused
// A line is at least 68 bytes, so kMaxChecksumManifestBytes alone allows about 15,400 entries; this bound holds
// should that limit grow.
inline constexpr size_t kMaxChecksumEntries = 100000;

using Sha256Digest = std::array<uint8_t, 32>;
std::string ToHex(const Sha256Digest& digest);  // lowercase

struct ChecksumEntry {
  std::string path;  // relative to the version directory, unescaped, "." components dropped ("sub/weights.bin")
  Sha256Digest digest;
};

// Parses the text of a SHA256SUMS file: what GNU sha256sum writes, a strict subset of what `sha256sum -c` reads.
// One entry per line, in one of these forms (hex in either case):
//   <64 hex><space><space|*><name>      the default (text mode) and -b (binary mode)
//   SHA256 (<name>) = <64 hex>          --tag; the name ends at the line's last ") = "
// A name holding a backslash, a newline or a carriage return is escaped: the line starts with '\' and the name has
// "\\", "\n" and "\r" for them; any other escape is an error. coreutils writes "\r" since 9.0 and the byte itself
// before; since 9.0 `sha256sum -c` drops a '\r' that ends a line, so that CRLF manifests verify, and so does this
// parser (a name ending in '\r' listed by an older sha256sum then does not verify, there either). Empty lines are
// skipped. Unlike `sha256sum -c`, this refuses '#' comment lines, leading blanks, tabs as separators and the
// one-space BSD `-r` form: sha256sum writes none of them, and a manifest is safer read narrowly.
//
// Paths: "." components are dropped ("./sub/x", as `find . -type f -exec sha256sum {} +` writes, is "sub/x"); an
// entry for the manifest itself is skipped (`sha256sum * > SHA256SUMS` run again lists it, and a manifest cannot
// verify itself); the same path listed twice with the same digest is kept once.
//
// Errors (InvalidArgument) read "SHA256SUMS:<line>: <why>": a malformed line, a bad escape, an absolute path, a
// ".." or empty component, a name with a NUL byte, one path with two digests, more than kMaxChecksumEntries entries;
// and "SHA256SUMS: ..." for text larger than kMaxChecksumManifestBytes, checked before anything is allocated.
Result<std::vector<ChecksumEntry>> ParseChecksumManifest(std::string_view text);

// The same with other limits; for tests, since the byte limit keeps the entry limit out of reach.
struct ChecksumManifestLimits {
  size_t max_bytes = kMaxChecksumManifestBytes;
  size_t max_entries = kMaxChecksumEntries;
};
Result<std::vector<ChecksumEntry>> ParseChecksumManifest(std::string_view text, const ChecksumManifestLimits& limits);

// SHA-256 of a regular file's contents (symlinks followed), read in 1 MiB chunks. Errors: NotFound when it does not
// exist, InvalidArgument when it is not a regular file (a FIFO or device is refused without blocking on it),
// Internal when it cannot be read. Blocks on the file's I/O.
Result<Sha256Digest> Sha256OfFile(const std::filesystem::path& file);

enum class ManifestResult { kAbsent, kVerified };

// Reads <dir>/SHA256SUMS and checks every listed file: it must exist under `dir` (a listed path cannot leave it,
// though a symlink in it is followed wherever it points: the manifest vouches for contents, not for places), be a
// regular file and hash to its digest. Files in `dir` that the manifest does not list are not checked.
// Returns kAbsent when there is no manifest (the caller decides whether that is allowed), kVerified when every
// entry matches. Errors name the file by its entry path (control bytes escaped):
//   InvalidArgument  a malformed manifest; a manifest listing nothing (it would verify nothing); a manifest that is
//                    not a regular file; "SHA256SUMS: model.pt: checksum mismatch (listed <hex>, file has <hex>)";
//                    "SHA256SUMS: sub: not a regular file"
//   NotFound         "SHA256SUMS: model.pt: listed but missing"; `dir` does not exist
//   Internal         a file that cannot be read (permissions, I/O error)
// Stops at the first failing entry. Blocks while it reads every listed file.
Result<ManifestResult> VerifyChecksumManifest(const std::filesystem::path& dir);

}  // namespace weft
