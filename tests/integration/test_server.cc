#include "test_server.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "backends/backends.h"
#include "repository/pbtxt/config_pbtxt.h"
#include "repository/repository.h"

namespace weft::testing {

namespace fs = std::filesystem;

fs::path SourceDir() {
  const char* dir = std::getenv("WEFT_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::current_path();
}

namespace {

Result<fs::path> MakeRepository(const TestServerOptions& options) {
  static std::atomic<int> counter{0};
  fs::path root = fs::temp_directory_path() /
                  ("weft_http_it_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)));
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root, ec);
  if (ec) return Internal("cannot create " + root.string() + ": " + ec.message());
  fs::path examples = SourceDir() / "examples" / "models";
  for (const std::string& model : options.example_models) {
    fs::copy(examples / model, root / model, fs::copy_options::recursive, ec);
    if (ec) return Internal("cannot copy example model " + model + ": " + ec.message());
  }
  for (const auto& [name, text] : options.extra_configs) {
    // Version 1 as an empty directory: enough for builtin models, which need no file.
    fs::create_directories(root / name / "1", ec);
    std::ofstream(root / name / "config.pbtxt") << text;
  }
  return root;
}

}  // namespace

Result<std::unique_ptr<TestServer>> TestServer::Start(TestServerOptions options) {
  std::unique_ptr<TestServer> server(new TestServer());
  WEFT_ASSIGN_OR_RETURN(server->repository_, MakeRepository(options));
  RegisterAvailableBackends(&server->backends_);
  RepositoryOptions repository;
  repository.root = server->repository_;
  repository.parse_config = ParseModelConfigFile;
  repository.backends = &server->backends_;
  WEFT_ASSIGN_OR_RETURN(std::vector<ModelEntry> entries, LoadRepository(repository));
  Engine::Options engine;
  engine.max_queue_per_model = options.max_queue_per_model;
  server->engine_ = std::make_unique<Engine>(std::move(entries), engine, &server->metrics_);
  InferenceService::Options inference;
  if (options.allow_shared_memory) {
    server->shared_memory_ = std::make_unique<SharedMemoryRegistry>();
    inference.shared_memory = server->shared_memory_.get();
  }
  server->inference_ = std::make_unique<InferenceService>(server->engine_.get(), &server->metrics_, inference);
  server->metrics_service_ = std::make_unique<MetricsService>(&server->metrics_);

  HttpServer::Options http;
  http.address = "127.0.0.1";
  http.max_body_bytes = options.max_body_bytes;
  http.max_connections = options.max_connections;
  http.max_unsent_response_bytes = options.max_unsent_response_bytes;
  server->http_ = std::make_unique<HttpServer>(http, server->inference_.get());
  WEFT_RETURN_IF_ERROR(server->http_->Start());
  HttpServer::Options metrics_http;
  metrics_http.address = "127.0.0.1";
  metrics_http.io_threads = 1;
  server->metrics_http_ = std::make_unique<HttpServer>(metrics_http, server->metrics_service_.get());
  WEFT_RETURN_IF_ERROR(server->metrics_http_->Start());
  return server;
}

TestServer::~TestServer() {
  // The order the weft binary follows: no new requests, then the engine answers (and drops) what it holds, then
  // the handlers go.
  if (http_) http_->Stop();
  if (metrics_http_) metrics_http_->Stop();
  engine_.reset();
  std::error_code ec;
  if (!repository_.empty()) fs::remove_all(repository_, ec);
}

bool TestServer::ModelReady(const std::string& model) const { return engine_->FindVersion(model, 0).ok(); }

}  // namespace weft::testing
