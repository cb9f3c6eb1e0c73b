#include "frontend/http/metrics_service.h"

#include "frontend/http/status_mapping.h"

namespace weft {

namespace http = boost::beast::http;

MetricsService::MetricsService(MetricsRegistry* metrics, MetricsServiceOptions options)
    : metrics_(metrics),
      options_(options),
      scrapes_(metrics->GetCounter("weft_http_requests_total", "HTTP requests answered, by endpoint and status class.",
                                   {{"endpoint", "metrics"}, {"code", "2xx"}})) {}

void MetricsService::Handle(HttpRequest request, HttpResponder responder) {
  if (options_.gatekeeper != nullptr && options_.gatekeeper->active()) {
    Admission admission = options_.gatekeeper->Admit(
        Caller{.authorization = request.header(http::field::authorization),
               .client_subject = request.client_subject,
               .peer_address = request.peer_address,
               .memo = request.caller_memo},
        Permission::kMetrics, {}, std::string(http::to_string(request.method)) + " " + std::string(request.path()));
    if (!admission.status.ok()) return responder.Send(AuthErrorResponse(admission.status));
  }
  if (request.path() != "/metrics") return responder.Send(ErrorResponse(404, "not found: the metrics are at /metrics"));
  if (request.method != http::verb::get && request.method != http::verb::head) {
    HttpResponse response = ErrorResponse(405, "method not allowed: use GET");
    response.headers.emplace_back("Allow", "GET, HEAD");
    return responder.Send(std::move(response));
  }
  // Counted before rendering, so that a scrape sees itself: the count is of scrapes started.
  scrapes_->Increment();
  HttpResponse response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = metrics_->Exposition(options_.triton_families ? "" : "nv_");
  responder.Send(std::move(response));
}

}  // namespace weft
