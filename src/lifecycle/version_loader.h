#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "model/backend.h"
#include "repository/repository.h"

namespace weft {

// One version to load: verify its files, create its instances, warm them up.
struct LoadJob {
  std::string model;
  int64_t version = 0;
  uint64_t copy_id = 0;  // the caller's name for this load
  std::shared_ptr<const ModelConfig> config;
  std::filesystem::path model_dir;
};

struct LoadOutcome {
  std::string model;
  int64_t version = 0;
  uint64_t copy_id = 0;
  // Loaded and warmed, ready for Engine::StartVersion (which the caller does on a thread of normal priority: the
  // version's scheduler threads inherit it).
  Result<std::shared_ptr<LoadedVersion>> loaded = Unavailable("not loaded");
  std::string failed_stage;  // "checksums", "instances" or "warmup" when it failed
  bool verified = false;     // a SHA256SUMS manifest was checked and matched
  double checksum_seconds = 0;
  double load_seconds = 0;  // creating the instances
  double warmup_seconds = 0;
};

// The stages of a load, in order: the version directory's SHA256SUMS (refused without one when checksums are
// required), the backend's instances, the config's warm-up samples on each instance. Errors name the model's files
// relative to the repository. Runs on the calling thread; thread-safe.
LoadOutcome LoadOneVersion(const LoadJob& job, const BackendRegistry& backends, bool require_checksums,
                           const std::string& repository_root);

// Runs LoadOneVersion on a few threads of their own, at low priority, off the request path (a load reads and
// deserializes a model file, a warm-up runs it: neither should take a core from serving). Each outcome goes to
// `on_done`, on the loading thread. Thread-safe.
class VersionLoader {
 public:
  struct Options {
    int threads = 4;
    bool require_checksums = false;
    std::string repository_root;
    const BackendRegistry* backends = nullptr;
  };
  VersionLoader(Options options, std::function<void(LoadOutcome)> on_done);
  // Drops the jobs not started and waits for those under way (their outcomes still go to on_done).
  ~VersionLoader();
  VersionLoader(const VersionLoader&) = delete;
  VersionLoader& operator=(const VersionLoader&) = delete;

  void Enqueue(LoadJob job);

 private:
  void Run(std::stop_token stop);

  const Options options_;
  const std::function<void(LoadOutcome)> on_done_;
  std::mutex mu_;
  std::condition_variable_any work_;
  std::deque<LoadJob> jobs_;  // guarded by mu_
  std::vector<std::jthread> threads_;
};

}  // namespace weft
