#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "frontend/http/http_server.h"

namespace weft::testing {

// Responders a test handler keeps instead of answering, until the test releases them: requests held in flight.
// Thread-safe.
class HeldResponders {
 public:
  void Hold(HttpResponder responder, std::shared_ptr<CancelToken> cancel) {
    std::lock_guard lock(mu_);
    held_.emplace_back(std::move(responder), std::move(cancel));
    cv_.notify_all();
  }
  // Waits up to 10 s until `n` requests are held; the cancel token of the n-th, or null.
  std::shared_ptr<CancelToken> WaitHeld(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_.size() >= n; });
    return held_.size() >= n ? held_[n - 1].second : nullptr;
  }
  // Answers every held request with an empty response of `status`.
  void ReleaseHeld(unsigned status) {
    std::lock_guard lock(mu_);
    for (auto& [responder, cancel] : held_) {
      HttpResponse r;
      r.status = status;
      responder.Send(std::move(r));
    }
    held_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<HttpResponder, std::shared_ptr<CancelToken>>> held_;  // guarded by mu_
};

}  // namespace weft::testing
