#include "lifecycle/version_loader.h"

#include <chrono>

#include "base/thread_name.h"
#include "base/thread_priority.h"
#include "repository/checksums.h"
#include "repository/repository.h"
#include "repository/warmup.h"

namespace weft {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

LoadOutcome LoadOneVersion(const LoadJob& job, const BackendRegistry& backends, bool require_checksums,
                           const std::string& repository_root) {
  LoadOutcome out;
  out.model = job.model;
  out.version = job.version;
  out.copy_id = job.copy_id;
  const std::string shown = job.model + "/" + std::to_string(job.version);
  auto fail = [&](const char* stage, const Status& status) {
    out.failed_stage = stage;
    out.loaded = WithoutRoot(status, repository_root);
    return out;
  };

  auto start = std::chrono::steady_clock::now();
  Result<ManifestResult> manifest = VerifyChecksumManifest(job.model_dir / std::to_string(job.version));
  out.checksum_seconds = SecondsSince(start);
  if (!manifest.ok()) return fail("checksums", manifest.status().WithContext(shown));
  if (*manifest == ManifestResult::kAbsent && require_checksums) {
    return fail("checksums", Unavailable(shown + ": no SHA256SUMS (--require-checksums)"));
  }
  out.verified = *manifest == ManifestResult::kVerified;

  start = std::chrono::steady_clock::now();
  Result<std::shared_ptr<const Backend>> backend = backends.Find(*job.config);
  if (!backend.ok()) return fail("instances", backend.status().WithContext(job.model + "/config.pbtxt"));
  Result<std::shared_ptr<LoadedVersion>> loaded = LoadVersion(*job.config, **backend, job.model_dir, job.version);
  out.load_seconds = SecondsSince(start);
  if (!loaded.ok()) return fail("instances", loaded.status());
  (*loaded)->backend = *backend;

  start = std::chrono::steady_clock::now();
  Status warm = WarmUpVersion(**loaded);
  out.warmup_seconds = SecondsSince(start);
  if (!warm.ok()) return fail("warmup", warm.WithContext(shown));
  out.loaded = std::move(loaded);
  return out;
}

VersionLoader::VersionLoader(Options options, std::function<void(LoadOutcome)> on_done)
    : options_(std::move(options)), on_done_(std::move(on_done)) {
  const int threads = options_.threads > 0 ? options_.threads : 1;
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this](std::stop_token stop) {
      SetCurrentThreadName("model-loader");
      Run(stop);
    });
  }
}

VersionLoader::~VersionLoader() {
  for (auto& t : threads_) t.request_stop();
  work_.notify_all();
  threads_.clear();
}

void VersionLoader::Enqueue(LoadJob job) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
  }
  work_.notify_one();
}

void VersionLoader::Run(std::stop_token stop) {
  // Threads started from here inherit the priority. Serving runs on none of them: the version's scheduler threads are
  // started by the controller, and libtorch's OpenMP keeps a team of threads per calling thread.
  SetCurrentThreadNice(kBackgroundNice);
  for (;;) {
    LoadJob job;
    {
      std::unique_lock lock(mu_);
      if (!work_.wait(lock, stop, [&] { return !jobs_.empty(); })) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    on_done_(LoadOneVersion(job, *options_.backends, options_.require_checksums, options_.repository_root));
  }
}

}  // namespace weft
