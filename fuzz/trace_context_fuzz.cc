// Fuzzes request tracing's parsers of untrusted input: ParseTraceContext (the W3C traceparent and tracestate headers
// of every request), ParseTraceSettingJson (the body of POST /v2/trace/setting and /v2/models/{m}/trace/setting)
// with ApplyTraceSettingUpdate and ApplyModelTraceSettingUpdate on what it returns, and ParseTraceConfig (the
// `--trace-config` flags), and ParseOtlpExportResponse (a collector's answer to an export, read by the exporter).
// Besides the sanitizers it checks that a parsed context has non-zero ids and a tracestate
// within the limits, kept as received, and that its traceparent, formatted again, parses to the same ids and flag;
// that every error is InvalidArgument; that all settings that parse stay within the documented bounds; and that
// their view, written as JSON and posted back, gives the same settings.
//
// Input: line 1: the traceparent header; line 2: the tracestate header; the rest: a POST body, and the
// `--trace-config` values one per line.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_string.h"
#include "frontend/http/trace_codec.h"
#include "fuzz/fuzz_target.h"
#include "trace/otlp_encoding.h"
#include "trace/trace_context.h"
#include "trace/trace_settings.h"

namespace weft {
namespace {

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

void CheckContext(std::string_view traceparent, std::string_view tracestate) {
  std::optional<TraceContext> context = ParseTraceContext(traceparent, tracestate);
  if (!context) return;
  WEFT_CHECK(context->trace_id != TraceId{}) << "an all-zero trace id parsed";
  WEFT_CHECK(context->parent_span_id != SpanId{}) << "an all-zero parent id parsed";
  WEFT_CHECK(context->trace_state.empty() || context->trace_state == TrimOws(tracestate))
      << "the tracestate was not kept as received";
  WEFT_CHECK(context->trace_state.size() <= 512) << "a tracestate of " << context->trace_state.size() << " bytes";
  const std::string formatted = FormatTraceparent(context->trace_id, context->parent_span_id, context->sampled);
  WEFT_CHECK(formatted.size() == 55) << "traceparent " << formatted;
  std::optional<TraceContext> again = ParseTraceContext(formatted, context->trace_state);
  WEFT_CHECK(again.has_value()) << "a formatted traceparent does not parse: " << formatted;
  WEFT_CHECK(again->trace_id == context->trace_id && again->parent_span_id == context->parent_span_id &&
             again->sampled == context->sampled)
      << "traceparent " << formatted << " parses to another context";
  WEFT_CHECK(again->trace_state == context->trace_state) << "a kept tracestate is refused the second time";
}

void CheckRefusal(const Status& status) {
  WEFT_CHECK(status.code() == StatusCode::kInvalidArgument) << "unexpected error " << status.ToString();
}

void CheckBounds(const TraceSettings& s) {
  WEFT_CHECK(s.rate <= kMaxTraceRate) << "rate " << s.rate;
  WEFT_CHECK(s.count >= -1) << "count " << s.count;
  WEFT_CHECK(s.bsp_max_queue_size >= 1 && s.bsp_max_queue_size <= kMaxBspQueueSize)
      << "queue size " << s.bsp_max_queue_size;
  WEFT_CHECK(s.bsp_max_export_batch_size >= 1 && s.bsp_max_export_batch_size <= s.bsp_max_queue_size)
      << "batch size " << s.bsp_max_export_batch_size << " for a queue of " << s.bsp_max_queue_size;
  WEFT_CHECK(s.bsp_schedule_delay.count() >= 1 && s.bsp_schedule_delay <= kMaxBspScheduleDelay)
      << "schedule delay " << s.bsp_schedule_delay.count();
  WEFT_CHECK(s.otel_url.starts_with("http://")) << "url " << s.otel_url;
  for (size_t i = 0; i < s.otel_resource.size(); ++i) {
    WEFT_CHECK(!s.otel_resource[i].first.empty()) << "a resource attribute without a key";
    for (size_t j = 0; j < i; ++j) {
      WEFT_CHECK(s.otel_resource[i].first != s.otel_resource[j].first)
          << "resource key " << s.otel_resource[i].first << " twice";
    }
  }
}

// What GET answers, posted back, must give the same settings. JSON holds UTF-8 only, so a file name from a flag that
// is not UTF-8 comes back otherwise (as U+FFFD) and is left out of the comparison.
void CheckViewRoundTrip(const TraceSettings& s) {
  if (!IsValidUtf8(s.file)) return;
  const auto view = TraceSettingsView(s, nullptr);
  Result<TraceSettingUpdate> update = ParseTraceSettingJson(TraceSettingsJson(view));
  WEFT_CHECK(update.ok()) << "the settings' JSON does not parse: " << update.status().ToString();
  Result<TraceSettings> back = ApplyTraceSettingUpdate(TraceSettings{.file = s.file}, *update);
  WEFT_CHECK(back.ok()) << "the settings' view does not apply: " << back.status().ToString();
  WEFT_CHECK(TraceSettingsView(*back, nullptr) == view) << "the settings' view applies to other settings";
}

void CheckSettings(std::string_view body) {
  Result<TraceSettingUpdate> update = ParseTraceSettingJson(body);
  if (!update.ok()) return CheckRefusal(update.status());
  Result<TraceSettings> server = ApplyTraceSettingUpdate(TraceSettings{}, *update);
  if (server.ok()) {
    CheckBounds(*server);
    CheckViewRoundTrip(*server);
  } else {
    CheckRefusal(server.status());
  }
  Result<ModelTraceSettings> model = ApplyModelTraceSettingUpdate(ModelTraceSettings{.rate = 1}, *update);
  if (!model.ok()) return CheckRefusal(model.status());
  WEFT_CHECK(!model->rate || *model->rate <= kMaxTraceRate) << "model rate " << *model->rate;
  WEFT_CHECK(!model->count || *model->count >= -1) << "model count " << *model->count;
  auto rate = update->find("trace_rate");
  WEFT_CHECK(rate == update->end() || rate->second || !model->rate) << "a null trace_rate kept the override";
  const std::string json = TraceSettingsJson(TraceSettingsView(TraceSettings{}, &*model));
  WEFT_CHECK(ParseTraceSettingJson(json).ok()) << "a model's settings JSON does not parse: " << json;
}

void CheckConfig(std::string_view text) {
  std::vector<std::string> flags;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    flags.emplace_back(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  Result<TraceSettings> settings = ParseTraceConfig(flags);
  if (!settings.ok()) return CheckRefusal(settings.status());
  CheckBounds(*settings);
  CheckViewRoundTrip(*settings);
}

// The collector's answer is the rest of the input, as bytes. A parsed answer's message is part of it.
void CheckExportResponse(std::string_view body) {
  Result<OtlpPartialSuccess> response = ParseOtlpExportResponse(body);
  if (!response.ok()) return CheckRefusal(response.status());
  WEFT_CHECK(response->error_message.size() <= body.size()) << "a partial success message longer than the answer";
}

void Run(FramedInput input) {
  const std::string_view traceparent = input.Line();
  const std::string_view tracestate = input.Line();
  CheckContext(traceparent, tracestate);
  CheckSettings(input.Rest());
  CheckConfig(input.Rest());
  CheckExportResponse(input.Rest());
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::Run(weft::FramedInput(data, size));
  return 0;
}
