#pragma once

#include "auth/gatekeeper.h"
#include "frontend/http/http_server.h"
#include "metrics/metrics.h"

namespace weft {

struct MetricsServiceOptions {
  bool triton_families = true;  // the nv_* families (Triton's names); off: weft's own only
  // With authentication on, a scrape needs the "metrics" scope (docs/security.md). Null: open. Must outlive the
  // service.
  Gatekeeper* gatekeeper = nullptr;
};

// Serves GET /metrics: the registry in the Prometheus text exposition format (text/plain; version=0.0.4), for
// the metrics port. Thread-safe.

class MetricsService : public HttpHandler {
 public:
  // `metrics` must outlive the service.
  explicit MetricsService(MetricsRegistry* metrics, MetricsServiceOptions options = {});

  void Handle(HttpRequest request, HttpResponder responder) override;

 private:
  MetricsRegistry* const metrics_;
  const MetricsServiceOptions options_;
  Counter* scrapes_;
};

}  // namespace weft
