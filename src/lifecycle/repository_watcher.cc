#include "lifecycle/repository_watcher.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "base/log.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kRootMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO |
                               IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;
// The root may be a link (a deployment's /models -> /data/models); below it links are not followed, so that no
// directory is reached by two paths (inotify would hand both the same watch descriptor).
constexpr uint32_t kMask = kRootMask | IN_DONT_FOLLOW;

constexpr size_t kReadBufferBytes = 64 * 1024;
constexpr size_t kMaxBytesPerRead = size_t{4} << 20;
// Past this many models in one answer a full rescan costs about the same, and the answer stays small.
constexpr size_t kMaxReportedModels = 4096;

std::string ErrnoMessage(int error) { return std::error_code(error, std::generic_category()).message(); }

bool Hidden(std::string_view name) { return !name.empty() && name[0] == '.'; }

int DepthOf(std::string_view relative) {
  if (relative.empty()) return 0;
  return 1 + static_cast<int>(std::count(relative.begin(), relative.end(), '/'));
}

// The first-level entry that `relative` (not the root) lies in.
std::string_view ModelOf(std::string_view relative) { return relative.substr(0, relative.find('/')); }

std::string Child(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
}

void Report(std::string_view model, RepositoryWatcher::Changes* changes) {
  if (model.empty() || Hidden(model)) return;
  std::string name(model);
  if (changes->models.size() >= kMaxReportedModels && !changes->models.contains(name)) {
    changes->everything = true;
    return;
  }
  changes->models.insert(std::move(name));
}

}  // namespace

Result<std::unique_ptr<RepositoryWatcher>> RepositoryWatcher::Create(Options options) {
  if (options.root.empty()) return InvalidArgument("repository watcher: root is empty");
  if (options.max_depth < 0 || options.max_depth > kMaxDepth) {
    return InvalidArgument("repository watcher: max_depth must be 0 to " + std::to_string(kMaxDepth) + ", got " +
                           std::to_string(options.max_depth));
  }
  if (options.max_watches == 0) return InvalidArgument("repository watcher: max_watches must be at least 1");
  const std::string root = options.root.string();
  struct stat st {};
  if (::stat(options.root.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return NotFound(root + ": repository root not found");
    return Unavailable(root + ": repository root cannot be read: " + ErrnoMessage(error));
  }
  if (!S_ISDIR(st.st_mode)) return NotFound(root + ": repository root is not a directory");

  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    std::string reason = ErrnoMessage(error);
    if (error == ENOSYS) reason = "this system has no inotify";
    if (error == EMFILE) {
      reason =
          "the per-user limit of inotify instances (fs.inotify.max_user_instances) or the process's descriptor "
          "limit is reached";
    }
    return Unavailable("inotify cannot be used: " + reason);
  }
  std::unique_ptr<RepositoryWatcher> watcher(new RepositoryWatcher(std::move(options), fd));
  WEFT_RETURN_IF_ERROR(watcher->Sync());
  return watcher;
}

RepositoryWatcher::~RepositoryWatcher() { ::close(fd_); }

int RepositoryWatcher::WatchDescriptorOf(const std::string& relative) const {
  auto it = wds_.find(relative);
  return it == wds_.end() ? -1 : it->second;
}

RepositoryWatcher::Changes RepositoryWatcher::Read() {
  Changes changes;
  alignas(struct inotify_event) std::byte buffer[kReadBufferBytes];
  size_t total = 0;
  while (total < kMaxBytesPerRead) {
    const ssize_t n = ::read(fd_, buffer, sizeof(buffer));
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) break;
      WEFT_LOG(Warning) << "repository watcher: reading inotify events failed: " << ErrnoMessage(error)
                        << "; rescanning everything";
      changes.everything = true;
      break;
    }
    if (n == 0) break;
    Decode(std::span<const std::byte>(buffer, static_cast<size_t>(n)), &changes);
    total += static_cast<size_t>(n);
  }
  Finish(&changes);
  return changes;
}

RepositoryWatcher::Changes RepositoryWatcher::Apply(std::span<const std::byte> events) {
  Changes changes;
  Decode(events, &changes);
  Finish(&changes);
  return changes;
}

void RepositoryWatcher::Decode(std::span<const std::byte> events, Changes* changes) {
  size_t offset = 0;
  while (offset < events.size()) {
    inotify_event header;
    if (events.size() - offset < sizeof(header)) {
      WEFT_LOG(Warning) << "repository watcher: an inotify event cut short; rescanning everything";
      changes->everything = true;
      return;
    }
    // Copied out: a buffer from elsewhere than Read need not be aligned for inotify_event.
    std::memcpy(&header, events.data() + offset, sizeof(header));
    offset += sizeof(header);
    if (header.len > events.size() - offset) {
      WEFT_LOG(Warning) << "repository watcher: an inotify event names " << header.len << " bytes past the "
                        << events.size() - offset << " read; rescanning everything";
      changes->everything = true;
      return;
    }
    // The name is padded with NULs to `len`; a name that fills it has none.
    const char* name = reinterpret_cast<const char*>(events.data() + offset);
    offset += header.len;
    Handle(header.wd, header.mask, std::string_view(name, ::strnlen(name, header.len)), changes);
  }
}

void RepositoryWatcher::Handle(int wd, uint32_t mask, std::string_view name, Changes* changes) {
  if (mask & IN_Q_OVERFLOW) {
    changes->everything = true;
    return;
  }
  auto it = paths_.find(wd);
  // A watch dropped before this event was read: whatever dropped it reported the model or set `everything`.
  if (it == paths_.end()) return;
  const std::string dir = it->second;
  if (mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
    if (dir.empty()) {
      // The root is gone or elsewhere: every path is in doubt. Finish() watches the root again if it is back.
      DropAll();
      changes->everything = true;
      return;
    }
    Report(ModelOf(dir), changes);
    // IN_MOVE_SELF needs nothing more: the parent's IN_MOVED_FROM and IN_MOVED_TO, queued before it, re-derive the
    // paths. A deleted directory was empty, so its watch is the only one to drop; the kernel has dropped it already.
    if (mask & (IN_IGNORED | IN_DELETE_SELF | IN_UNMOUNT)) {
      wds_.erase(dir);
      paths_.erase(it);
    }
    return;
  }
  if (name.find('/') != std::string_view::npos || name == "." || name == "..") {
    WEFT_LOG(Warning) << "repository watcher: an inotify event names an impossible entry; rescanning everything";
    changes->everything = true;
    return;
  }
  if (dir.empty() && name.empty()) {
    // The root's own attributes changed: a chmod may have made every model unreadable, or readable again.
    changes->everything = true;
    return;
  }
  Report(dir.empty() ? name : ModelOf(dir), changes);
  if (name.empty() || !(mask & IN_ISDIR)) return;
  const std::string child = Child(dir, name);
  // Moves are re-derived rather than matched by cookie: the old path's watches go, the new path is watched afresh.
  if (mask & (IN_DELETE | IN_MOVED_FROM)) DropSubtree(child);
  if (mask & (IN_CREATE | IN_MOVED_TO)) {
    Watch(child, changes);
  } else if ((mask & IN_ATTRIB) && !wds_.contains(child)) {
    Watch(child, changes);  // a directory that could not be watched may be readable now
  }
}

void RepositoryWatcher::Watch(const std::string& relative, Changes* changes) {
  Status status = WatchTree(relative, nullptr);
  if (!status.ok()) {
    WEFT_LOG(Warning) << "repository watcher: " << status.ToString() << "; rescanning everything";
    changes->everything = true;
  }
}

void RepositoryWatcher::Finish(Changes* changes) {
  if (!changes->everything) return;
  // Before the caller rescans: a directory created while events were lost, or a root that was replaced, must be
  // watched by then, or what changes in it during the rescan goes unseen.
  Status status = Sync();
  if (!status.ok()) {
    WEFT_LOG(Warning) << "repository watcher: " << status.ToString();
  }
}

Status RepositoryWatcher::Sync() {
  std::set<std::string> seen;
  WEFT_RETURN_IF_ERROR(WatchTree("", &seen));
  // What the walk did not find was deleted or moved with its events unread (or lost in an overflow).
  for (auto it = wds_.begin(); it != wds_.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    ::inotify_rm_watch(fd_, it->second);
    paths_.erase(it->second);
    it = wds_.erase(it);
  }
  return Status::Ok();
}

bool RepositoryWatcher::Watchable(const std::string& relative) const {
  if (relative.size() > kMaxRelativePathBytes) return false;
  if (DepthOf(relative) > options_.max_depth) return false;
  return relative.empty() || !Hidden(ModelOf(relative));
}

Result<bool> RepositoryWatcher::AddWatch(const std::string& relative) {
  const fs::path path = relative.empty() ? options_.root : options_.root / relative;
  const int wd = ::inotify_add_watch(fd_, path.c_str(), relative.empty() ? kRootMask : kMask);
  if (wd < 0) {
    const int error = errno;
    if (relative.empty() && (error == ENOENT || error == ENOTDIR)) {
      return NotFound(path.string() + ": repository root not found");
    }
    // Gone since it was listed or named, a link or no directory (IN_ONLYDIR), or a path the kernel cannot take:
    // not a directory the scan could read either.
    if (error == ENOENT || error == ENOTDIR || error == ELOOP || error == ENAMETOOLONG) return false;
    if (error == ENOSPC) {
      return ResourceExhausted("inotify: the kernel's limit of watches (fs.inotify.max_user_watches) is reached at " +
                               path.string() + ", with " + std::to_string(paths_.size()) + " directories watched");
    }
    return Unavailable(path.string() + ": cannot be watched: " + ErrnoMessage(error));
  }
  if (!paths_.contains(wd) && paths_.size() >= options_.max_watches) {
    ::inotify_rm_watch(fd_, wd);
    return ResourceExhausted("inotify: the limit of " + std::to_string(options_.max_watches) +
                             " watched directories is reached at " + path.string());
  }
  Bind(relative, wd);
  return true;
}

Status RepositoryWatcher::WatchTree(const std::string& top, std::set<std::string>* seen) {
  std::vector<std::string> pending;
  if (Watchable(top)) pending.push_back(top);
  while (!pending.empty()) {
    const std::string relative = std::move(pending.back());
    pending.pop_back();
    // Watched before it is listed: a directory created after the listing is then an event to read.
    WEFT_ASSIGN_OR_RETURN(bool watched, AddWatch(relative));
    if (!watched) continue;
    if (seen != nullptr) seen->insert(relative);
    const fs::path dir = relative.empty() ? options_.root : options_.root / relative;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code type_ec;
      if (it->symlink_status(type_ec).type() != fs::file_type::directory) continue;
      std::string child = Child(relative, it->path().filename().string());
      if (!Watchable(child)) continue;
      // Each pending entry is a directory that needs a watch of its own.
      if (pending.size() >= options_.max_watches) {
        return ResourceExhausted("inotify: more than " + std::to_string(options_.max_watches) +
                                 " directories to watch under " + dir.string());
      }
      pending.push_back(std::move(child));
    }
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
      return Unavailable(dir.string() + ": cannot be listed: " + ec.message());
    }
  }
  return Status::Ok();
}

void RepositoryWatcher::Bind(const std::string& relative, int wd) {
  if (auto it = wds_.find(relative); it != wds_.end() && it->second != wd) {
    // The path holds another directory now. The one watched there before was deleted or moved; if moved within the
    // tree, the event that says so is still queued and watches it afresh where it went.
    ::inotify_rm_watch(fd_, it->second);
    paths_.erase(it->second);
    wds_.erase(it);
  }
  if (auto it = paths_.find(wd); it != paths_.end() && it->second != relative) {
    // The directory moved here from the path it was watched at, and the move's events are not read yet.
    wds_.erase(it->second);
  }
  paths_[wd] = relative;
  wds_[relative] = wd;
}

void RepositoryWatcher::DropSubtree(const std::string& relative) {
  auto drop = [this](std::map<std::string, int>::iterator it) {
    ::inotify_rm_watch(fd_, it->second);
    paths_.erase(it->second);
    return wds_.erase(it);
  };
  if (auto it = wds_.find(relative); it != wds_.end()) drop(it);
  const std::string prefix = relative + "/";
  for (auto it = wds_.lower_bound(prefix); it != wds_.end() && it->first.starts_with(prefix);) it = drop(it);
}

void RepositoryWatcher::DropAll() {
  for (const auto& [wd, path] : paths_) ::inotify_rm_watch(fd_, wd);
  paths_.clear();
  wds_.clear();
}

}  // namespace weft
