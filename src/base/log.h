#pragma once

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace weft {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// How a line starts: kDefault "2026-12-02T13:22:13.123456Z I file.cc:12] ", kIso8601 "2026-12-02T13:22:13Z I
// file.cc:12] " (Triton's log_format names: "default", "ISO8601").
enum class LogFormat { kDefault, kIso8601 };

// What the process logs, as Triton's logging extension names it (GET/POST /v2/logging, gRPC LogSettings). Debug
// lines are its verbose lines: on while verbose_level > 0. Errors are logged unless `error` is off.
struct LogSettings {
  bool info = true;
  bool warning = true;
  bool error = true;
  uint32_t verbose_level = 0;
  LogFormat format = LogFormat::kDefault;

  friend bool operator==(const LogSettings&, const LogSettings&) = default;
};

// Process-wide. Thread-safe; a line being written as they change is written under the old or the new settings.
void SetLogSettings(const LogSettings& settings);
LogSettings GetLogSettings();
// Runs `change` on a copy of the settings and stores the copy when it returns Ok, with no other change between;
// returns its status and the settings now.
Result<LogSettings> UpdateLogSettings(const std::function<Status(LogSettings*)>& change);
bool LogEnabled(LogLevel level);
// The settings of a minimum level: that level and the ones above on, debug lines only for kDebug.
void SetLogLevel(LogLevel level);

// One setting by Triton's name, applied to `settings`: log_info, log_warning, log_error (bool), log_verbose_level
// (an unsigned integer up to 2^32 - 1), log_format ("default", "ISO8601"), log_file (weft logs to stderr: only ""
// is accepted). InvalidArgument, naming the setting, for an unknown name, a value of the wrong type or out of range.
using LogSettingValue = std::variant<bool, uint64_t, std::string>;
Status ApplyLogSetting(std::string_view name, const LogSettingValue& value, LogSettings* settings);
std::string_view LogFormatName(LogFormat format);  // "default", "ISO8601"
// Every setting by Triton's name, in the order the protocols list them: log_file (always ""), log_info,
// log_warning, log_error, log_verbose_level, log_format.
std::vector<std::pair<std::string_view, LogSettingValue>> NamedLogSettings(const LogSettings& settings);

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

#define WEFT_LOG(level)                                  \
  if (!::weft::LogEnabled(::weft::LogLevel::k##level)) { \
  } else                                                 \
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
