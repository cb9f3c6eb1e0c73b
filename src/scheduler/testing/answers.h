#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "model/request.h"

namespace weft::testing {

// Collects the answers by request id. Thread-safe.
class Answers {
 public:
  InferenceCallback Callback(std::string id) {
    return [this, id](Result<InferenceResponse> r) {
      std::lock_guard lock(mu_);
      results_[id].push_back(std::move(r));
      order_.push_back(id);
      cv_.notify_all();
    };
  }
  // The answer for `id`, waiting for it up to 10 s.
  Result<InferenceResponse> Wait(const std::string& id) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return results_.count(id) > 0; })) {
      return Internal("no answer for " + id);
    }
    return results_[id].front();
  }
  bool Has(const std::string& id) {
    std::lock_guard lock(mu_);
    return results_.count(id) > 0;
  }
  std::vector<std::string> Order() {
    std::lock_guard lock(mu_);
    return order_;
  }
  // Ids answered other than exactly once, out of `ids`.
  std::vector<std::string> NotOnce(const std::vector<std::string>& ids) {
    std::lock_guard lock(mu_);
    std::vector<std::string> bad;
    for (const auto& id : ids) {
      auto it = results_.find(id);
      if (it == results_.end() || it->second.size() != 1) bad.push_back(id);
    }
    return bad;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<Result<InferenceResponse>>> results_;  // guarded by mu_
  std::vector<std::string> order_;                                         // guarded by mu_
};

}  // namespace weft::testing
