// Fuzzes the HTTP bodies of the model repository routes (frontend/http/repository_codec.cc): POST
// v2/repository/index, v2/repository/models/{m}/load (with a model config as a JSON string in parameters.config)
// and .../unload; of the rollout route (frontend/http/rollout_codec.cc): POST v2/models/{m}/rollout; and of the
// logging route (frontend/http/logging_codec.cc): POST v2/logging.
//
// Input framing: line 1 names the route ("index", "load", "unload", "rollout" or "logging"; anything else: all five),
// the rest is the request body. An index encoded from what was decoded must be valid for a round trip of its own. A
// rollout spec that decodes must encode (EncodeRolloutSpec) to JSON that decodes to the same spec, and a report holding
// it must encode too. Log settings that decode must encode to JSON that decodes to the same settings.

#include <limits>
#include <string>
#include <vector>

#include "base/log.h"
#include "frontend/http/logging_codec.h"
#include "frontend/http/repository_codec.h"
#include "frontend/http/rollout_codec.h"
#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::FramedInput input(data, size);
  const std::string_view route = input.Line();
  const std::string_view rest = input.Rest();
  const std::span<const std::byte> body(reinterpret_cast<const std::byte*>(rest.data()), rest.size());
  const bool all = route != "index" && route != "load" && route != "unload" && route != "rollout" && route != "logging";
  if (all || route == "logging") {
    weft::Result<weft::LogSettings> settings = weft::DecodeLogSettingsUpdate(body, {});
    if (settings.ok()) {
      const std::string json = weft::EncodeLogSettings(*settings);
      weft::Result<weft::LogSettings> again = weft::DecodeLogSettingsUpdate(
          {reinterpret_cast<const std::byte*>(json.data()), json.size()}, {.info = false, .verbose_level = 9});
      WEFT_CHECK(again.ok()) << json << ": " << again.status().ToString();
      WEFT_CHECK(*again == *settings) << json;
    }
  }
  if (all || route == "index") {
    weft::Result<weft::RepositoryIndexRequest> index = weft::DecodeRepositoryIndexRequest(body);
    if (index.ok()) {
      // The index answers with names and reasons from elsewhere: the body's text stands in for them.
      std::vector<weft::RepositoryIndexEntry> entries = {{std::string(rest), 1, "READY", std::string(route)}};
      std::string json = weft::EncodeRepositoryIndex(entries);
      WEFT_CHECK(!json.empty() && json.front() == '[' && json.back() == ']') << json;
    }
  }
  if (all || route == "load") {
    weft::Result<weft::RepositoryLoadRequest> load = weft::DecodeRepositoryLoadRequest(body);
    if (load.ok() && load->config) {
      WEFT_CHECK(load->config->size() <= rest.size());
    }
  }
  if (all || route == "unload") (void)weft::DecodeRepositoryUnloadRequest(body);
  if (all || route == "rollout") {
    weft::Result<weft::RolloutSpec> spec = weft::DecodeRolloutRequest(body);
    if (spec.ok()) {
      const std::string json = weft::EncodeRolloutSpec(*spec);
      weft::Result<weft::RolloutSpec> again =
          weft::DecodeRolloutRequest({reinterpret_cast<const std::byte*>(json.data()), json.size()});
      WEFT_CHECK(again.ok()) << json << ": " << again.status().ToString();
      WEFT_CHECK(*again == *spec) << json;
      WEFT_CHECK(!spec->stages.empty()) << json;
      // The report's names, times and reasons come from elsewhere: the body's text stands in for them. Its figures
      // come from the spec, with non-finite values among them.
      weft::RolloutReport report{.model = std::string(route),
                                 .state = "canary",
                                 .primary = spec->candidate - 1,
                                 .candidate = spec->candidate,
                                 .stage = spec->stages.size() - 1,
                                 .spec = *spec,
                                 .started = std::string(rest)};
      report.figures.primary = {.requests = spec->stages[0].min_requests, .p99_seconds = spec->stages[0].share};
      report.figures.candidate.p99_seconds = std::numeric_limits<double>::quiet_NaN();
      report.figures.divergence.max_abs = std::numeric_limits<double>::infinity();
      report.figures.noise.max_rel = spec->criteria.rel_tolerance;
      report.decisions.push_back(
          {.time = std::string(rest), .action = "start", .reason = std::string(rest), .figures = report.figures});
      const std::string report_json = weft::EncodeRolloutReport(report);
      WEFT_CHECK(!report_json.empty() && report_json.front() == '{' && report_json.back() == '}') << report_json;
    }
  }
  return 0;
}
