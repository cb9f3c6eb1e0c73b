#include "loadgen/bench_options.h"

#include <charconv>
#include <cmath>

namespace weft {

namespace {

std::optional<int64_t> ParseInt64(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

Result<std::pair<std::string, std::vector<int64_t>>> ParseShapeFlag(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument("--shape wants NAME:d1,d2,... , got '" + text + "'");
  }
  std::string name = text.substr(0, colon);
  std::vector<int64_t> dims;
  std::string_view rest = std::string_view(text).substr(colon + 1);
  while (true) {
    size_t comma = rest.find(',');
    std::optional<int64_t> dim = ParseInt64(rest.substr(0, comma));
    if (!dim || *dim <= 0) {
      return InvalidArgument("--shape " + text + ": dims must be positive integers separated by commas");
    }
    dims.push_back(*dim);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return std::pair{std::move(name), std::move(dims)};
}

Result<std::pair<std::string, BenchParameterValue>> ParseParameterFlag(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return InvalidArgument("--parameter wants key=value, got '" + text + "'");
  std::string key = text.substr(0, eq);
  std::string value = text.substr(eq + 1);
  for (const char* reserved : {"priority", "timeout", "binary_data_output"}) {
    if (key == reserved) {
      return InvalidArgument("--parameter " + key + " is reserved: use " +
                             (key == "priority"  ? "--priority"
                              : key == "timeout" ? "--timeout-us"
                                                 : "--binary"));
    }
  }
  if (std::optional<int64_t> number = ParseInt64(value)) return std::pair{std::move(key), BenchParameterValue(*number)};
  return std::pair{std::move(key), BenchParameterValue(std::move(value))};
}

Result<std::pair<std::string, std::string>> ParseHeaderFlag(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0)
    return InvalidArgument("--header wants 'Name: value', got '" + text + "'");
  std::string name = text.substr(0, colon);
  static constexpr std::string_view kTokenPunctuation = "!#$%&'*+-.^_`|~";
  for (char c : name) {
    const bool letter_or_digit = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!letter_or_digit && kTokenPunctuation.find(c) == std::string_view::npos) {
      return InvalidArgument("--header: '" + name + "' is not a header name");
    }
  }
  std::string_view value = std::string_view(text).substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  for (char c : value) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return InvalidArgument("--header " + name + ": the value may hold printable characters only");
    }
  }
  return std::pair{std::move(name), std::string(value)};
}

Status ValidateBenchOptions(const BenchOptions& o) {
  if (o.model.empty()) return InvalidArgument("--model is required");
  if (o.batch_size < 1) return InvalidArgument("--batch-size must be at least 1");
  if (o.string_length < 0 || o.string_length > kMaxStringLength) {
    return InvalidArgument("--string-length must be from 0 to " + std::to_string(kMaxStringLength));
  }
  if (o.threads < 1 || o.threads > 64) return InvalidArgument("--threads must be from 1 to 64");
  if (o.mode == LoadMode::kClosedLoop && o.concurrency < 1) return InvalidArgument("--concurrency must be at least 1");
  if (o.mode == LoadMode::kOpenLoop) {
    if (!(o.request_rate > 0) || !std::isfinite(o.request_rate)) {
      return InvalidArgument("--request-rate must be a positive number");
    }
    if (o.max_connections < 1) return InvalidArgument("--max-connections must be at least 1");
  }
  if (o.duration && !(o.duration->count() > 0)) return InvalidArgument("--duration must be positive");
  if (o.requests && *o.requests == 0) return InvalidArgument("--requests must be at least 1");
  if (o.warmup.count() < 0) return InvalidArgument("--warmup must not be negative");
  if (!(o.request_timeout.count() > 0)) return InvalidArgument("--request-timeout must be positive");
  if (o.priority && *o.priority < 0) return InvalidArgument("--priority must not be negative");
  if (o.timeout_us && *o.timeout_us < 0) return InvalidArgument("--timeout-us must not be negative");
  if (o.protocol == Protocol::kGrpc && o.binary) {
    return InvalidArgument("--binary is the HTTP binary tensor extension; gRPC always sends raw tensors");
  }
  if (o.shared_memory != SharedMemoryMode::kNone && o.binary) {
    return InvalidArgument("--binary does not apply to --shared-memory (no tensor travels in the request)");
  }
  if (!o.input_data_path.empty()) {
    if (o.protocol != Protocol::kHttp)
      return InvalidArgument("--input-data is an HTTP request body: use --protocol http");
    if (o.shared_memory != SharedMemoryMode::kNone) {
      return InvalidArgument("--shared-memory does not apply to --input-data (the file is sent as it is)");
    }
    // The file is sent as it is; these flags would have to rewrite it.
    if (o.binary) return InvalidArgument("--binary does not apply to --input-data (the file is sent as it is)");
    if (!o.shapes.empty()) return InvalidArgument("--shape does not apply to --input-data");
    if (o.priority || o.timeout_us || !o.parameters.empty()) {
      return InvalidArgument(
          "--priority, --timeout-us and --parameter do not apply to --input-data: put them in the file's "
          "\"parameters\"");
    }
  }
  return Status::Ok();
}

}  // namespace weft
