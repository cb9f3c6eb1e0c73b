#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace weft {

// The one error vocabulary inside the process. Each frontend maps it to its protocol in one function.
enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // the request is malformed or does not match the model
  kNotFound,           // unknown model, version or route
  kUnavailable,        // the model exists but cannot serve now (loading, failed to load)
  kResourceExhausted,  // a queue or byte budget is full; retry later
  kDeadlineExceeded,   // the request's deadline passed before it ran
  kCancelled,          // the client went away
  kAborted,            // replaced by a newer request (latest frame wins)
  kUnimplemented,      // a valid request for a feature this server lacks
  kInternal,           // a broken invariant or a runtime fault; a bug or an environment problem
  kOutOfMemory,        // a model's execution could not allocate (device or host memory); the server's fault
  kUnauthenticated,    // no credential, or one that is not valid (unknown key, bad signature, expired)
  kPermissionDenied,   // a valid credential without the scope the route needs
  kAlreadyExists,      // a name the client chose is taken (a shared memory region's)
};

// The last code: arrays indexed by code have kStatusCodeCount entries.
inline constexpr size_t kStatusCodeCount = static_cast<size_t>(StatusCode::kAlreadyExists) + 1;

std::string_view StatusCodeName(StatusCode code);

// A cheap success value (one null pointer) or an error code with a message. Thread-compatible.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  std::string ToString() const;

  // Returns a copy whose message is "context: message"; an ok status stays ok.
  Status WithContext(std::string_view context) const;

  // When a retry is likely to succeed (a breaker that closes again, a queue that drains): frontends send it as
  // Retry-After. Zero when the error says nothing about it. An ok status stays ok.
  Status WithRetryAfter(std::chrono::milliseconds after) const;
  std::chrono::milliseconds retry_after() const { return state_ ? state_->retry_after : std::chrono::milliseconds(0); }

 private:
  struct State {
    StatusCode code;
    std::string message;
    std::chrono::milliseconds retry_after{0};
  };
  std::shared_ptr<const State> state_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status DeadlineExceeded(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
inline Status Aborted(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status OutOfMemory(std::string m) { return Status(StatusCode::kOutOfMemory, std::move(m)); }
inline Status Unauthenticated(std::string m) { return Status(StatusCode::kUnauthenticated, std::move(m)); }
inline Status PermissionDenied(std::string m) { return Status(StatusCode::kPermissionDenied, std::move(m)); }
inline Status AlreadyExists(std::string m) { return Status(StatusCode::kAlreadyExists, std::move(m)); }

}  // namespace weft

#define WEFT_RETURN_IF_ERROR(expr)        \
  do {                                    \
    ::weft::Status weft_status_ = (expr); \
    if (!weft_status_.ok()) {             \
      return weft_status_;                \
    }                                     \
  } while (0)
