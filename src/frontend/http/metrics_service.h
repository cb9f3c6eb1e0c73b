#pragma once

#include "frontend/http/http_server.h"
#include "metrics/metrics.h"

namespace weft {

// Serves GET /metrics: the registry in the Prometheus text exposition format (text/plain; version=0.0.4), for
// the metrics port. Thread-safe.
class MetricsService : public HttpHandler {
 public:
  // `metrics` must outlive the service.
  explicit MetricsService(MetricsRegistry* metrics);

  void Handle(HttpRequest request, HttpResponder responder) override;

 private:
  MetricsRegistry* const metrics_;
  Counter* scrapes_;
};

}  // namespace weft
