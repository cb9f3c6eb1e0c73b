#pragma once

#include <sstream>
#include <string_view>

namespace weft {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Process-wide minimum level; messages below it are dropped. Thread-safe.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Writes one line "<time> <level> <file>:<line>] <message>" to stderr atomically.
void WriteLogLine(LogLevel level, std::string_view file, int line, std::string_view message);

namespace internal {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~LogMessage() { WriteLogLine(level_, file_, line_, stream_.str()); }
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
}  // namespace internal

}  // namespace weft

#define WEFT_LOG(level)                                     \
  if (::weft::LogLevel::k##level < ::weft::GetLogLevel()) { \
  } else                                                    \
    ::weft::internal::LogMessage(::weft::LogLevel::k##level, __FILE__, __LINE__).stream()

// A broken invariant is a bug: log and abort. Never use it on input.
#define WEFT_CHECK(cond) \
  if (cond) {            \
  } else                 \
    ::weft::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

namespace weft::internal {
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
}  // namespace weft::internal
