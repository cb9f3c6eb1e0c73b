#include "repository/repository_scan.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <system_error>

#include "base/small_file.h"

namespace weft {
namespace fs = std::filesystem;

namespace {

int64_t Nanos(const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }
// The ctime alone: every write, truncate, rename or chmod sets it to the kernel's clock, and unlike the mtime no
// user can set it (a file copied with `cp -p` or touched into the future would otherwise look settled, or never).
int64_t NewestChange(const struct stat& st) { return Nanos(st.st_ctim); }

bool IsHidden(const std::string& name) { return !name.empty() && name[0] == '.'; }

class Fingerprint {
 public:
  template <typename T>
  void Add(const T& value) {
    hash_ = Fnv1a(&value, sizeof(value), hash_);
  }
  void Add(const std::string& text) {
    Add(text.size());
    hash_ = Fnv1a(text.data(), text.size(), hash_);
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

// Adds `st` of the entry at `relative` to the fingerprint and the newest change.
void AddEntry(const std::string& relative, const struct stat& st, Fingerprint* fp, int64_t* newest) {
  fp->Add(relative);
  fp->Add(static_cast<uint32_t>(st.st_mode));
  fp->Add(static_cast<int64_t>(st.st_size));
  fp->Add(static_cast<uint64_t>(st.st_ino));
  fp->Add(static_cast<uint64_t>(st.st_dev));
  fp->Add(Nanos(st.st_mtim));
  fp->Add(Nanos(st.st_ctim));
  *newest = std::max(*newest, NewestChange(st));
}

struct WalkState {
  const ScanLimits& limits;
  Fingerprint fingerprint;
  int64_t newest = 0;
  size_t entries = 0;
  Status error;
};

// Walks `dir` (relative path `relative` below the version directory) in name order, so that equal trees give equal
// fingerprints whatever order the file system lists them in.
void Walk(const fs::path& dir, const std::string& relative, int depth, WalkState* state) {
  if (!state->error.ok()) return;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
    if (names.size() > state->limits.max_entries_per_version) break;
  }
  if (ec) {
    state->error = Unavailable(relative + ": cannot be listed: " + ec.message());
    return;
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (++state->entries > state->limits.max_entries_per_version) {
      state->error = InvalidArgument("more than " + std::to_string(state->limits.max_entries_per_version) +
                                     " files and directories: not loaded");
      return;
    }
    const fs::path path = dir / name;
    const std::string entry = relative.empty() ? name : relative + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // gone since the listing: the next scan sees the change
    if (S_ISLNK(st.st_mode)) {
      struct stat target {};
      // A link to a file stands for the file: a new target is a change. A link to a directory is not followed
      // (links may form loops), so it counts with its own times only.
      if (::stat(path.c_str(), &target) == 0 && !S_ISDIR(target.st_mode)) st = target;
    }
    AddEntry(entry, st, &state->fingerprint, &state->newest);
    if (S_ISDIR(st.st_mode)) {
      if (depth >= state->limits.max_depth) {
        state->error = InvalidArgument(entry + ": deeper than " + std::to_string(state->limits.max_depth) +
                                       " directory levels: not loaded");
        return;
      }
      Walk(path, entry, depth + 1, state);
    }
  }
}

VersionDirScan ScanVersionDir(const fs::path& dir, int64_t version, const std::string& shown,
                              const ScanLimits& limits) {
  VersionDirScan scan;
  scan.version = version;
  WalkState state{limits};
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) AddEntry(".", st, &state.fingerprint, &state.newest);
  Walk(dir, "", 1, &state);
  scan.fingerprint = state.fingerprint.value();
  scan.newest_change_ns = state.newest;
  if (!state.error.ok()) scan.error = state.error.WithContext(shown);
  std::error_code ec;
  scan.has_manifest = fs::is_regular_file(dir / "SHA256SUMS", ec);
  return scan;
}

}  // namespace

uint64_t Fnv1a(const void* data, size_t size, uint64_t seed) {
  uint64_t hash = seed;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

std::optional<int64_t> ParseVersionDirName(const std::string& name) {
  if (name.empty() || name[0] < '1' || name[0] > '9') return std::nullopt;
  int64_t version = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), version);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return version;
}

Result<std::vector<std::string>> ListModelDirs(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return NotFound(root.string() + ": model repository not found or not a directory");
  std::vector<std::string> names;
  for (fs::directory_iterator it(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (IsHidden(name) || !it->is_directory(type_ec)) continue;
    names.push_back(std::move(name));
  }
  if (ec) return Unavailable(root.string() + ": model repository cannot be listed: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

ModelDirScan ScanModelDir(const fs::path& root, const std::string& name, const ScanLimits& limits) {
  ModelDirScan scan;
  scan.name = name;
  const fs::path dir = root / name;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (status.type() == fs::file_type::none) {
    // Not gone: a directory that cannot be looked at now (permissions, an I/O error, a stale network mount) must not
    // unload what it serves. The error keeps its versions as they are until it can be read again.
    scan.exists = true;
    scan.error = Unavailable(name + ": cannot be read: " + ec.message());
    return scan;
  }
  scan.exists = fs::is_directory(status);
  if (!scan.exists) return scan;

  const fs::path config_file = dir / "config.pbtxt";
  struct stat st {};
  if (::stat(config_file.c_str(), &st) == 0) {
    scan.config_change_ns = NewestChange(st);
    if (!S_ISREG(st.st_mode)) {
      scan.config_error = InvalidArgument(name + "/config.pbtxt: not a regular file");
    } else if (static_cast<uint64_t>(st.st_size) > limits.max_config_bytes) {
      scan.config_error =
          InvalidArgument(name + "/config.pbtxt: larger than " + std::to_string(limits.max_config_bytes >> 20) +
                          " MiB, the limit for a config");
    } else if (Result<std::string> text = ReadSmallFile(config_file, limits.max_config_bytes); text.ok()) {
      scan.config = std::move(*text);
    } else {
      // Replaced, grown or gone since the stat: the next scan sees what it became.
      scan.config_error = text.status().code() == StatusCode::kInvalidArgument
                              ? InvalidArgument(name + "/config.pbtxt: " + text.status().message())
                              : Unavailable(name + "/config.pbtxt: " + text.status().message());
    }
  }

  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    const std::string entry = it->path().filename().string();
    std::optional<int64_t> version = ParseVersionDirName(entry);
    if (!version) continue;
    scan.versions.push_back(ScanVersionDir(it->path(), *version, name + "/" + entry, limits));
  }
  if (ec) scan.error = Unavailable(name + ": cannot be listed: " + ec.message());
  std::sort(scan.versions.begin(), scan.versions.end(),
            [](const VersionDirScan& a, const VersionDirScan& b) { return a.version < b.version; });
  return scan;
}

}  // namespace weft
