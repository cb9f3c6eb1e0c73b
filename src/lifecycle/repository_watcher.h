#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/result.h"

namespace weft {

// Which model directories of a repository changed, learned from inotify. The controller thread polls fd() together
// with its own wake-up descriptor and calls Read() when it is readable; nothing here blocks or starts a thread.
//
// Every directory under the root down to max_depth is watched, except first-level entries whose names start with
// '.' (not models: editors' and stagers' temporary directories) and symbolic links (a link's target may be reached
// by two paths, and inotify would give both the same watch; a model that is a link is reported when the link
// changes, not when its target's contents do). A directory moved or renamed inside the tree is watched afresh at
// its new place; what cannot be accounted for exactly is reported as `everything`.
//
// Not thread-safe: one thread uses it.
class RepositoryWatcher {
 public:
  struct Options {
    std::filesystem::path root;
    size_t max_watches = 65536;  // directories watched at most; past it Sync() fails and the caller polls instead
    int max_depth = 8;           // below the root: model dirs are depth 1, version dirs depth 2; at most kMaxDepth
  };
  static constexpr int kMaxDepth = 64;
  // Directories whose path below the root is longer are not watched (as if too deep): the scan cannot name them
  // either.
  static constexpr size_t kMaxRelativePathBytes = 4096;

  // Watches the root and everything under it (Sync). Errors, all of which mean "poll instead": InvalidArgument for
  // options out of range; NotFound when root does not exist or is not a directory; Unavailable (with the reason)
  // when inotify cannot be used here (ENOSYS, the per-user instance limit, a directory that cannot be watched);
  // ResourceExhausted as for Sync.
  static Result<std::unique_ptr<RepositoryWatcher>> Create(Options options);
  ~RepositoryWatcher();  // closes the descriptor
  RepositoryWatcher(const RepositoryWatcher&) = delete;
  RepositoryWatcher& operator=(const RepositoryWatcher&) = delete;

  int fd() const { return fd_; }  // non-blocking, close-on-exec

  struct Changes {
    std::set<std::string> models;  // first-level entries of root in which (or as which) something changed
    bool everything = false;       // rescan all: the queue overflowed (IN_Q_OVERFLOW), the root itself moved or
                                   // was deleted, or a new directory could not be watched
  };
  // Reads the events waiting, without blocking, and returns what changed since the last call. New directories are
  // watched as their creation is read (and the model they belong to is reported changed, since files may have
  // appeared in them before the watch existed); watches of deleted directories are dropped. When `everything` is
  // set, the watches are brought back in line with the tree (Sync) before returning, so that nothing that changes
  // during the caller's rescan goes unseen; a root that was replaced is watched again. Reads at most 4 MiB of
  // events per call: under a flood the descriptor stays readable and the next call goes on.
  Changes Read();

  // The part of Read() after read(2): decodes `events` (whole inotify_event records as the kernel writes them, at
  // any alignment) and applies them. A record cut short or claiming more bytes than there are ends the decoding
  // and sets `everything`. Public so that tests can feed events the kernel will not produce on demand.
  Changes Apply(std::span<const std::byte> events);

  // Watches every directory under root (down to max_depth) that is not watched yet, and drops watches whose paths
  // no longer hold the directory they were made for; call it after a full rescan. ResourceExhausted when
  // max_watches or the kernel's fs.inotify.max_user_watches is reached, NotFound when the root is gone,
  // Unavailable when a directory cannot be watched (permissions): the caller falls back to polling. Watches made
  // before an error stay.
  Status Sync();

  size_t watch_count() const { return paths_.size(); }
  // The watch descriptor of `relative` (a directory below the root, "" for the root), or -1 when it is not
  // watched. For tests and diagnostics.
  int WatchDescriptorOf(const std::string& relative) const;

 private:
  RepositoryWatcher(Options options, int fd) : options_(std::move(options)), fd_(fd) {}

  // Whether to watch a directory at `relative`; false for paths left out by design (hidden, too deep, too long).
  bool Watchable(const std::string& relative) const;
  // Adds or refreshes the watch of one directory. False when it is not there (anymore) or is not a directory.
  Result<bool> AddWatch(const std::string& relative);
  // Watches `top` and the directories below it; `seen`, when given, collects every directory watched.
  Status WatchTree(const std::string& top, std::set<std::string>* seen);
  // Records that `wd` watches `relative`, replacing whatever either was bound to before.
  void Bind(const std::string& relative, int wd);
  // Removes the watches of `relative` and of every directory below it.
  void DropSubtree(const std::string& relative);
  void DropAll();
  void Watch(const std::string& relative, Changes* changes);
  void Handle(int wd, uint32_t mask, std::string_view name, Changes* changes);
  void Decode(std::span<const std::byte> events, Changes* changes);
  void Finish(Changes* changes);

  const Options options_;
  const int fd_;
  std::unordered_map<int, std::string> paths_;  // watch descriptor -> directory relative to root ("" = root)
  std::map<std::string, int> wds_;              // the inverse; ordered, so that a subtree is one range
};

}  // namespace weft
