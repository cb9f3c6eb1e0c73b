#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

namespace weft {
namespace {
// One bit per LogLevel that is logged, and the format: read on every WEFT_LOG, so atomics, not a lock.
constexpr uint32_t Bit(LogLevel level) { return uint32_t{1} << static_cast<int>(level); }
std::atomic<uint32_t> g_enabled{Bit(LogLevel::kInfo) | Bit(LogLevel::kWarning) | Bit(LogLevel::kError)};
std::atomic<LogFormat> g_format{LogFormat::kDefault};
// The whole settings, for GetLogSettings (the verbose level is more than its one bit).
std::mutex g_settings_mu;
LogSettings g_settings;

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
  }
  return '?';
}

std::string_view BaseName(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

void StoreLocked(const LogSettings& settings) {
  g_settings = settings;
  uint32_t enabled = 0;
  if (settings.verbose_level > 0) enabled |= Bit(LogLevel::kDebug);
  if (settings.info) enabled |= Bit(LogLevel::kInfo);
  if (settings.warning) enabled |= Bit(LogLevel::kWarning);
  if (settings.error) enabled |= Bit(LogLevel::kError);
  g_enabled.store(enabled, std::memory_order_relaxed);
  g_format.store(settings.format, std::memory_order_relaxed);
}
}  // namespace

void SetLogSettings(const LogSettings& settings) {
  std::lock_guard lock(g_settings_mu);
  StoreLocked(settings);
}

Result<LogSettings> UpdateLogSettings(const std::function<Status(LogSettings*)>& change) {
  std::lock_guard lock(g_settings_mu);
  LogSettings settings = g_settings;
  WEFT_RETURN_IF_ERROR(change(&settings));
  StoreLocked(settings);
  return settings;
}

LogSettings GetLogSettings() {
  std::lock_guard lock(g_settings_mu);
  return g_settings;
}

bool LogEnabled(LogLevel level) { return (g_enabled.load(std::memory_order_relaxed) & Bit(level)) != 0; }

void SetLogLevel(LogLevel level) {
  LogSettings settings = GetLogSettings();
  settings.verbose_level = level == LogLevel::kDebug ? 1 : 0;
  settings.info = level <= LogLevel::kInfo;
  settings.warning = level <= LogLevel::kWarning;
  settings.error = true;
  SetLogSettings(settings);
}

std::string_view LogFormatName(LogFormat format) { return format == LogFormat::kIso8601 ? "ISO8601" : "default"; }

std::vector<std::pair<std::string_view, LogSettingValue>> NamedLogSettings(const LogSettings& settings) {
  return {{"log_file", std::string()},
          {"log_info", settings.info},
          {"log_warning", settings.warning},
          {"log_error", settings.error},
          {"log_verbose_level", uint64_t{settings.verbose_level}},
          {"log_format", std::string(LogFormatName(settings.format))}};
}

Status ApplyLogSetting(std::string_view name, const LogSettingValue& value, LogSettings* settings) {
  const std::string quoted = "log setting '" + std::string(name) + "'";
  auto flag = [&](bool* field) -> Status {
    if (!std::holds_alternative<bool>(value)) return InvalidArgument(quoted + " must be a boolean");
    *field = std::get<bool>(value);
    return Status::Ok();
  };
  if (name == "log_info") return flag(&settings->info);
  if (name == "log_warning") return flag(&settings->warning);
  if (name == "log_error") return flag(&settings->error);
  if (name == "log_verbose_level") {
    if (!std::holds_alternative<uint64_t>(value) || std::get<uint64_t>(value) > UINT32_MAX) {
      return InvalidArgument(quoted + " must be an integer in [0, " + std::to_string(UINT32_MAX) + "]");
    }
    settings->verbose_level = static_cast<uint32_t>(std::get<uint64_t>(value));
    return Status::Ok();
  }
  const std::string* text = std::get_if<std::string>(&value);
  if (name == "log_format") {
    if (text && *text == "default") {
      settings->format = LogFormat::kDefault;
    } else if (text && *text == "ISO8601") {
      settings->format = LogFormat::kIso8601;
    } else {
      return InvalidArgument(quoted + " must be \"default\" or \"ISO8601\"");
    }
    return Status::Ok();
  }
  if (name == "log_file") {
    if (!text) return InvalidArgument(quoted + " must be a string");
    if (!text->empty()) {
      return InvalidArgument(quoted +
                             ": weft writes its log to stderr (redirect it, or let the container runtime "
                             "collect it); only \"\" is accepted");
    }
    return Status::Ok();
  }
  return InvalidArgument("unknown " + quoted +
                         " (known: log_file, log_info, log_warning, log_error, log_verbose_level, log_format)");
}

void WriteLogLine(LogLevel level, std::string_view file, int line, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out;
  out.reserve(64 + message.size());
  out += stamp;
  if (g_format.load(std::memory_order_relaxed) == LogFormat::kIso8601) {
    out += "Z ";
  } else {
    char frac[16];
    std::snprintf(frac, sizeof(frac), ".%06ldZ ", static_cast<long>(micros));
    out += frac;
  }
  out += LevelLetter(level);
  out += ' ';
  out += BaseName(file);
  out += ':';
  out += std::to_string(line);
  out += "] ";
  out += message;
  out += '\n';
  // One fwrite per line keeps lines whole across threads.
  std::fwrite(out.data(), 1, out.size(), stderr);
}

namespace internal {
CheckFailure::CheckFailure(const char* file, int line, const char* cond) : file_(file), line_(line) {
  stream_ << "CHECK failed: " << cond << " ";
}
CheckFailure::~CheckFailure() {
  WriteLogLine(LogLevel::kError, file_, line_, stream_.str());
  std::abort();
}
}  // namespace internal

}  // namespace weft
