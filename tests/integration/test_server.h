#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"
#include "frontend/http/http_server.h"
#include "frontend/http/inference_service.h"
#include "frontend/http/metrics_service.h"
#include "frontend/shm/shared_memory.h"
#include "metrics/metrics.h"
#include "model/backend.h"

namespace weft::testing {

// The source tree: $WEFT_SOURCE_DIR (set by weft_test), else the current directory.
std::filesystem::path SourceDir();

struct TestServerOptions {
  // Model directories copied from examples/models into a fresh repository.
  std::vector<std::string> example_models = {"add_sub", "detector", "identity", "identity_bytes",
                                             "mlp",     "pair",     "sleep"};
  // More models: name -> config.pbtxt text, written as <repository>/<name>/config.pbtxt with an empty version
  // directory <repository>/<name>/1.
  std::map<std::string, std::string> extra_configs;
  size_t max_body_bytes = size_t{64} << 20;
  size_t max_queue_per_model = 0;
  // HttpServer::Options of the inference port.
  size_t max_connections = 0;
  size_t max_unsent_response_bytes = size_t{1} << 30;
  // The shared memory extensions (weft serve --allow-shared-memory).
  bool allow_shared_memory = false;
};

// The whole server in-process, as the weft binary wires it: BackendRegistry -> LoadRepository (config.pbtxt) ->
// Engine -> InferenceService on an HttpServer, and MetricsService on a second one; both on ephemeral ports of
// 127.0.0.1. The repository lives in a temporary directory that is removed with the server.
class TestServer {
 public:
  static Result<std::unique_ptr<TestServer>> Start(TestServerOptions options);
  ~TestServer();

  uint16_t port() const { return http_->port(); }
  uint16_t metrics_port() const { return metrics_http_->port(); }
  Engine& engine() { return *engine_; }
  HttpServer& http() { return *http_; }
  InferenceService& inference() { return *inference_; }
  MetricsRegistry& metrics() { return metrics_; }
  // Whether a model loaded (a model whose backend this build lacks does not).
  bool ModelReady(const std::string& model) const;

 private:
  TestServer() = default;

  std::filesystem::path repository_;
  BackendRegistry backends_;
  MetricsRegistry metrics_;
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<MetricsService> metrics_service_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpServer> metrics_http_;
};

}  // namespace weft::testing
