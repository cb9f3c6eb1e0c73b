// weft: the command line. Flags become options, signals stop the server; the logic lives in the parts.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>

#include "app/serve.h"
#include "base/log.h"

int main(int argc, char** argv) {
  CLI::App app{"weft: an inference server for many models on one machine and one GPU"};
  app.require_subcommand(1);

  weft::ServeOptions serve;
  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve a model repository over the Open Inference Protocol");
  serve_cmd->add_option("--model-repository", serve.model_repository,
                        "Directory with <model>/config.pbtxt and <model>/<version>/ (Triton's layout)")
      ->required();
  serve_cmd->add_option("--http-port", serve.http_port, "HTTP port of the inference API (0 = any free port)")
      ->capture_default_str();
  serve_cmd->add_option("--metrics-port", serve.metrics_port, "HTTP port of GET /metrics (Prometheus text)")
      ->capture_default_str();
  serve_cmd->add_option("--http-address", serve.http_address, "Address the HTTP and metrics ports bind to")
      ->capture_default_str();
  serve_cmd->add_option("--http-threads", serve.http_threads, "I/O threads of the HTTP server")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  serve_cmd->add_option("--max-request-body-bytes", serve.max_request_body_bytes,
                        "Largest accepted HTTP request body; larger bodies get 413")
      ->capture_default_str();
  serve_cmd->add_option("--max-queue-per-model", serve.max_queue_per_model,
                        "Requests queued per model version before new ones get 429 (0 = unbounded)")
      ->capture_default_str();
  std::string log_level = "info";
  serve_cmd->add_option("--log-level", log_level, "debug, info, warning or error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));

  CLI11_PARSE(app, argc, argv);

  if (log_level == "debug") weft::SetLogLevel(weft::LogLevel::kDebug);
  if (log_level == "warning") weft::SetLogLevel(weft::LogLevel::kWarning);
  if (log_level == "error") weft::SetLogLevel(weft::LogLevel::kError);

  if (serve_cmd->parsed()) return weft::RunServe(serve);
  return 2;
}
