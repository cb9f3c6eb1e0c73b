#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace weft {

// What the live repository compares between two looks at a model directory: which version directories exist, and
// for each a fingerprint of its files' names, types, sizes, inodes and change times (never their contents: a model
// file may be gigabytes), plus the config file's text, which is small and decides everything else. Two scans with
// equal fingerprints mean "nothing was written in between" for every writer that changes a file's size, mtime, ctime
// or inode: any write, truncate, rename or replacement does (ctime cannot be set from user space, so `cp -p` or
// `touch -d` cannot hide one).

struct VersionDirScan {
  int64_t version = 0;
  uint64_t fingerprint = 0;
  // The newest ctime of the directory and everything below it, in ns since the epoch (CLOCK_REALTIME, the clock of
  // file times): the last time anything in it was written. Settling compares it with the wall clock.
  int64_t newest_change_ns = 0;
  bool has_manifest = false;  // a SHA256SUMS file at its top
  Status error;               // it could not be listed whole (permissions, past the limits): it must not load
};

struct ModelDirScan {
  std::string name;
  bool exists = false;                   // the directory is there
  std::optional<std::string> config;     // the text of config.pbtxt; absent when there is none
  Status config_error;                   // config.pbtxt exists but cannot be read (or is too large)
  int64_t config_change_ns = 0;          // its ctime
  std::vector<VersionDirScan> versions;  // ascending; only directories named as versions (Triton's rule)
  Status error;                          // the model directory could not be listed
};

struct ScanLimits {
  size_t max_entries_per_version = 100000;  // files and directories below one version directory
  int max_depth = 16;                       // directory levels below a version directory
  size_t max_config_bytes = size_t{16} << 20;
};

// The first-level directories of `root` that are models: not hidden ('.'-prefixed), sorted. Errors when the root
// cannot be listed.
Result<std::vector<std::string>> ListModelDirs(const std::filesystem::path& root);

// Looks at <root>/<name>: its config text and every version directory. Never fails as a whole: what cannot be read
// is reported in the fields' statuses, with paths relative to `root`. Symbolic links are followed for files and not
// for directories (a link to a directory is an entry with the link's own times). Thread-safe (reads only).
ModelDirScan ScanModelDir(const std::filesystem::path& root, const std::string& name, const ScanLimits& limits = {});

// Triton's rule: a version directory is named by a decimal number without a leading zero ("0", "007" and "tmp" are
// not versions).
std::optional<int64_t> ParseVersionDirName(const std::string& name);

// A 64-bit FNV-1a hash, to name a source (config text and a version directory's fingerprint) compactly.
uint64_t Fnv1a(const void* data, size_t size, uint64_t seed = 14695981039346656037ull);

}  // namespace weft
