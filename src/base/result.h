#pragma once

#include <cstdlib>
#include <optional>
#include <utility>

#include "base/status.h"

namespace weft {

// A value or an error Status (never an ok Status). Accessing the value of an error is a bug and aborts.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) std::abort();
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }

 private:
  T& Checked() {
    if (!value_) std::abort();
    return *value_;
  }
  std::optional<T> value_;
  Status status_;
};

}  // namespace weft

#define WEFT_CONCAT_INNER(a, b) a##b
#define WEFT_CONCAT(a, b) WEFT_CONCAT_INNER(a, b)
#define WEFT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
// WEFT_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error Status if MakeX() failed.
#define WEFT_ASSIGN_OR_RETURN(lhs, expr) WEFT_ASSIGN_OR_RETURN_IMPL(WEFT_CONCAT(weft_result_, __LINE__), lhs, expr)
