#include "metrics/metrics_config.h"

#include <charconv>

namespace weft {
namespace {

std::optional<bool> ParseBool(std::string_view v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return std::nullopt;
}

Result<std::vector<double>> ParseQuantiles(std::string_view text) {
  std::vector<double> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view pair = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::string_view quantile = pair.substr(0, pair.find(':'));
    double q = -1;
    auto [end, error] = std::from_chars(quantile.data(), quantile.data() + quantile.size(), q);
    if (error != std::errc() || end != quantile.data() + quantile.size() || !(q >= 0 && q <= 1)) {
      return InvalidArgument("summary_quantiles: '" + std::string(pair) +
                             "' is not <quantile>:<error> with a quantile in [0, 1]");
    }
    out.push_back(q);
  }
  if (out.empty()) return InvalidArgument("summary_quantiles: names no quantile");
  return out;
}

}  // namespace

Result<std::optional<Summary::Options>> ParseMetricsConfig(const std::vector<std::string>& settings) {
  bool summaries = false;
  Summary::Options options;
  for (const std::string& setting : settings) {
    const size_t equals = setting.find('=');
    if (equals == std::string::npos)
      return InvalidArgument("--metrics-config '" + setting + "': expected <name>=<value>");
    const std::string name = setting.substr(0, equals);
    const std::string_view value = std::string_view(setting).substr(equals + 1);
    if (name == "summary_latencies") {
      std::optional<bool> on = ParseBool(value);
      if (!on) return InvalidArgument("--metrics-config summary_latencies: expected true or false");
      summaries = *on;
    } else if (name == "summary_quantiles") {
      WEFT_ASSIGN_OR_RETURN(options.quantiles, ParseQuantiles(value));
    } else {
      return InvalidArgument("--metrics-config: unknown setting '" + name +
                             "' (known: summary_latencies, summary_quantiles)");
    }
  }
  if (!summaries) return std::optional<Summary::Options>();
  return std::optional<Summary::Options>(std::move(options));
}

}  // namespace weft
