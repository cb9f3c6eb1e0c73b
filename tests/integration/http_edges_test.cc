// The HTTP server's edges with the whole server in-process: the bound on unsent response bytes against slow
// readers of large answers (issue item 6), and a graceful shutdown with inference requests in flight.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kserve_test_util.h"
#include "test_server.h"

namespace weft::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kAnswerBytes = size_t{16} << 20;  // 4 Mi FP32: more than loopback's socket buffers hold
constexpr size_t kBound = size_t{40} << 20;        // two such answers fit, a third does not

BinaryBody IdentityRequest(const std::string& data) {
  std::string json = InferJson({BinaryInput("INPUT0", "FP32", {static_cast<int64_t>(data.size() / 4)}, data.size())},
                               R"("parameters":{"binary_data_output":true})");
  return MakeBinaryBody(json, {data});
}

std::string RequestBytes(const BinaryBody& request) {
  std::string raw =
      "POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(request.body.size()) +
      "\r\n";
  for (const auto& [name, value] : request.headers) raw += name + ": " + value + "\r\n";
  return raw + "\r\n" + request.body;
}

double InferCount(TestServer& server, const std::string& code) {
  return server.metrics()
      .GetCounter("weft_requests_total", "", {{"protocol", "http"}, {"endpoint", "infer"}, {"code", code}})
      ->value();
}

// Holds each batch for 300 ms: requests sent to it are still in flight a moment later, however fast the machine.
constexpr std::string_view kSlowConfig = R"(name: "slow"
backend: "weft_builtin"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [1] }]
instance_group [{ count: 1 kind: KIND_CPU }]
dynamic_batching { }
parameters { key: "builtin" value: { string_value: "sleep" } }
parameters { key: "batch_delay_us" value: { string_value: "300000" } }
)";

std::unique_ptr<TestServer> StartServer() {
  TestServerOptions options;
  options.example_models = {"identity"};
  options.extra_configs["slow"] = std::string(kSlowConfig);
  options.max_body_bytes = kAnswerBytes + 4096;
  options.max_unsent_response_bytes = kBound;
  auto started = TestServer::Start(options);
  EXPECT_TRUE(started.ok()) << started.status().ToString();
  return started.ok() ? std::move(started).value() : nullptr;
}

// 24 slow readers of 16 MiB answers held 475 MB. Now the answers being written stay within the bound: those past
// it are answered 429 at once, and every request gets exactly one answer.
TEST(HttpEdgesTest, SlowReadersOfLargeAnswersStayWithinTheBoundAndEachGetsOneAnswer) {
  std::unique_ptr<TestServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  std::string data(kAnswerBytes, '\x5a');
  std::string raw = RequestBytes(IdentityRequest(data));
  constexpr int kReaders = 6;
  std::vector<std::unique_ptr<HttpTestClient>> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.push_back(std::make_unique<HttpTestClient>(server->port(), 60s));
    ASSERT_EQ(readers.back()->WriteRaw(raw), "");
  }
  // Nobody reads: wait until every request has been answered (the 429s are counted as they are written).
  auto answered = [&] { return InferCount(*server, "2xx") + InferCount(*server, "4xx"); };
  for (int i = 0; i < 3000 && answered() < kReaders; ++i) {
    EXPECT_LE(server->http().unsent_response_bytes(), kBound + HttpServer::kAlwaysSentBytes * kReaders);
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(answered(), kReaders);
  EXPECT_LE(server->http().unsent_response_bytes(), kBound + HttpServer::kAlwaysSentBytes * kReaders);
  int ok = 0, refused = 0;
  for (auto& reader : readers) {
    TestResponse r = reader->ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    if (r.status == 200) {
      ++ok;
      ParsedInferResponse parsed = ParseInferResponse(r);
      ASSERT_EQ(parsed.error, "");
      ASSERT_NE(parsed.Find("OUTPUT0"), nullptr);
      EXPECT_TRUE(parsed.Find("OUTPUT0")->bytes == data);
    } else {
      ++refused;
      EXPECT_EQ(r.status, 429u) << ErrorMessage(r);
      EXPECT_EQ(r.header("Retry-After"), "1");
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_LE(ok, 2);
  EXPECT_EQ(ok + refused, kReaders);
  EXPECT_EQ(InferCount(*server, "4xx"), refused);
  // Once read, answers flow again.
  for (int i = 0; i < 1000 && server->http().unsent_response_bytes() > 0; ++i) std::this_thread::sleep_for(10ms);
  TestResponse again =
      readers[0]->Post("/v2/models/identity/infer", IdentityRequest(data).body, IdentityRequest(data).headers);
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(again.status, 200u) << ErrorMessage(again);
}

TEST(HttpEdgesTest, ShutdownAnswersInferenceInFlightAndReadinessGoesFalseFirst) {
  std::unique_ptr<TestServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  std::string body = InferJson({JsonInput("INPUT0", "FP32", {1, 1}, "[1.5]")});
  std::vector<std::unique_ptr<HttpTestClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<HttpTestClient>(server->port()));
    ASSERT_TRUE(clients.back()->Get("/v2/health/live").ok());
  }
  server->inference().BeginDraining();
  TestResponse ready = clients[0]->Get("/v2/health/ready");
  EXPECT_EQ(ready.status, 503u);
  EXPECT_NE(ErrorMessage(ready).find("shutting down"), std::string::npos) << ErrorMessage(ready);
  EXPECT_EQ(clients[0]->Get("/v2/health/live").status, 200u);
  for (auto& c : clients) {
    // The example sleep model answers in about a millisecond, which once raced the shutdown below (an answer that
    // left before it kept its connection open): "slow" holds the requests until the shutdown has begun.
    ASSERT_EQ(c->WriteRaw("POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body),
              "");
  }
  server->http().BeginShutdown(std::chrono::steady_clock::now() + 30s);
  for (auto& c : clients) {
    TestResponse r = c->ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u) << ErrorMessage(r);
    EXPECT_FALSE(r.keep_alive);
  }
  server->http().Stop();
}

}  // namespace
}  // namespace weft::testing
