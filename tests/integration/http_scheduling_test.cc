// What the engine's scheduling looks like over HTTP: backpressure (429), deadlines (504) and a client that goes
// away while its request waits (cancelled, never run). A builtin model that sleeps 300 ms per batch of one keeps
// a request busy so that the next one queues behind it.

#include <gtest/gtest.h>

#include <thread>

#include "kserve_test_util.h"
#include "test_server.h"

namespace weft::testing {
namespace {

namespace http = boost::beast::http;
using namespace std::chrono_literals;

std::unique_ptr<TestServer> StartSlowServer(size_t max_queue) {
  TestServerOptions options;
  options.example_models = {};
  options.max_queue_per_model = max_queue;
  options.extra_configs["slow"] =
      "name: \"slow\"\nbackend: \"weft_builtin\"\nmax_batch_size: 1\n"
      "input [{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [1] }]\n"
      "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [1] }]\n"
      "parameters { key: \"builtin\" value: { string_value: \"sleep\" } }\n"
      "parameters { key: \"batch_delay_us\" value: { string_value: \"300000\" } }\n";
  auto server = TestServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return nullptr;
  EXPECT_TRUE((*server)->ModelReady("slow"));
  return std::move(server).value();
}

std::string SlowBody(std::string_view extra = {}) {
  return InferJson({JsonInput("INPUT0", "FP32", {1, 1}, "[[1]]")}, extra);
}

// Sends the request and waits until the server has it (the first answer would take 300 ms).
std::unique_ptr<HttpTestClient> SendBusyRequest(uint16_t port) {
  auto client = std::make_unique<HttpTestClient>(port);
  std::string body = SlowBody();
  EXPECT_EQ(client->WriteRaw("POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body),
            "");
  std::this_thread::sleep_for(50ms);
  return client;
}

TEST(HttpSchedulingTest, FullQueueIs429WithRetryAfter) {
  auto server = StartSlowServer(1);
  ASSERT_NE(server, nullptr);
  std::vector<TestResponse> responses(6);
  {
    std::vector<std::jthread> clients;
    for (auto& r : responses) {
      clients.emplace_back(
          [&r, port = server->port()] { r = FetchOnce(port, http::verb::post, "/v2/models/slow/infer", SlowBody()); });
    }
  }
  int rejected = 0, served = 0;
  for (const auto& r : responses) {
    ASSERT_TRUE(r.ok()) << r.error;
    if (r.status == 429) {
      ++rejected;
      EXPECT_EQ(r.header("Retry-After"), "1");
      EXPECT_NE(ErrorMessage(r), r.body) << "not an {\"error\"} body: " << r.body;
    } else {
      EXPECT_EQ(r.status, 200u) << r.body;
      ++served;
    }
  }
  EXPECT_GE(rejected, 1);
  EXPECT_GE(served, 1);
}

TEST(HttpSchedulingTest, PassedDeadlineIs504) {
  auto server = StartSlowServer(0);
  ASSERT_NE(server, nullptr);
  auto busy = SendBusyRequest(server->port());
  HttpTestClient client(server->port());
  auto start = std::chrono::steady_clock::now();
  TestResponse late = client.Post("/v2/models/slow/infer", SlowBody(R"("parameters":{"timeout":20000})"));
  ASSERT_TRUE(late.ok()) << late.error;
  EXPECT_EQ(late.status, 504u) << late.body;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms) << "the deadline should be enforced while queued";
  TestResponse first = busy->ReadResponse();
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 200u) << first.body;
}

TEST(HttpSchedulingTest, ClientThatLeavesCancelsItsQueuedRequest) {
  auto server = StartSlowServer(0);
  ASSERT_NE(server, nullptr);
  auto busy = SendBusyRequest(server->port());
  SendBusyRequest(server->port()).reset();  // queued behind the first, then the client closes
  TestResponse first = busy->ReadResponse();
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 200u) << first.body;
  // The second request was answered "cancelled" by the engine and never ran.
  std::string exposition;
  for (int i = 0; i < 100; ++i) {
    exposition = server->metrics().Exposition();
    if (exposition.find("reason=\"cancelled\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_NE(exposition.find("reason=\"cancelled\"} 1"), std::string::npos) << exposition;
  EXPECT_NE(exposition.find("weft_inference_request_success_total{model=\"slow\",version=\"1\"} 1"), std::string::npos)
      << exposition;
}

}  // namespace
}  // namespace weft::testing
