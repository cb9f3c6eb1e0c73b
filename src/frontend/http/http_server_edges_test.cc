// The server's edges over real sockets: graceful shutdown with requests on the wire, the shutdown deadline, the
// connection limit and the bound on unsent response bytes.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "frontend/http/http_server.h"
#include "frontend/http/testing/held_responders.h"
#include "frontend/http/testing/http_test_client.h"

namespace weft {
namespace {

namespace http = boost::beast::http;
using testing::HttpTestClient;
using testing::TestResponse;
using namespace std::chrono_literals;

constexpr size_t kBig = size_t{32} << 20;  // more than loopback's socket buffers hold, so its write stays pending

// /echo answers the body; /hold keeps the responder until released; /block holds the I/O thread that runs it until
// released (only a test may, to keep requests unread on the wire); /big answers kBig bytes, /big_built the same
// through SendBuilt, counting builds and answered statuses.
class EdgeHandler : public HttpHandler {
 public:
  EdgeHandler() : big_(std::make_shared<std::string>(kBig, 'b')) {}

  void Handle(HttpRequest request, HttpResponder responder) override {
    std::string_view path = request.path();
    if (path == "/echo") {
      HttpResponse r;
      r.content_type = "text/plain";
      r.body = std::string(request.body->view());
      return responder.Send(std::move(r));
    }
    if (path == "/hold") return held_.Hold(std::move(responder), request.cancel);
    if (path == "/block") {
      std::unique_lock lock(mu_);
      blocked_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, 30s, [&] { return unblocked_; });
      return responder.Send(HttpResponse());
    }
    if (path == "/big") return responder.Send(Big());
    if (path == "/big_built") {
      return responder.SendBuilt(
          [this] {
            builds_.fetch_add(1);
            return Big();
          },
          [this](unsigned status) {
            std::lock_guard lock(mu_);
            answered_.push_back(status);
          });
    }
    HttpResponse r;
    r.status = 404;
    responder.Send(std::move(r));
  }

  HttpResponse Big() const {
    HttpResponse r;
    r.content_type = "application/octet-stream";
    r.body.clear();
    r.segments.push_back({big_, std::as_bytes(std::span(big_->data(), big_->size()))});
    return r;
  }

  std::shared_ptr<CancelToken> WaitHeld(size_t n) { return held_.WaitHeld(n); }
  void ReleaseHeld(unsigned status) { held_.ReleaseHeld(status); }
  bool WaitBlocked() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return blocked_; });
  }
  void Unblock() {
    std::lock_guard lock(mu_);
    unblocked_ = true;
    cv_.notify_all();
  }
  int builds() const { return builds_.load(); }
  std::vector<unsigned> answered() {
    std::lock_guard lock(mu_);
    return answered_;
  }

 private:
  const std::shared_ptr<std::string> big_;
  std::mutex mu_;
  std::condition_variable cv_;
  testing::HeldResponders held_;
  bool blocked_ = false;
  bool unblocked_ = false;
  std::atomic<int> builds_{0};
  std::vector<unsigned> answered_;
};

class HttpServerEdgesTest : public ::testing::Test {
 protected:
  void StartServer(HttpServer::Options options = {}) {
    options.address = "127.0.0.1";
    server_ = std::make_unique<HttpServer>(options, &handler_);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    handler_.Unblock();
    if (server_) server_->Stop();
    handler_.ReleaseHeld(200);
  }
  // Polls `condition` for up to 10 s.
  template <typename F>
  static bool Eventually(F condition) {
    for (int i = 0; i < 1000; ++i) {
      if (condition()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return condition();
  }

  EdgeHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

std::string PostEcho(std::string_view body) {
  return "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         std::string(body);
}

// Issue item 5: a shutdown closed keep-alive connections whose next request was already on the wire. Here the one
// I/O thread is held while 32 idle keep-alive clients send a request each and the shutdown begins, so that every
// request is still unread when the connections learn of the shutdown.
TEST_F(HttpServerEdgesTest, ShutdownAnswersTheRequestsOnTheWireOfEveryKeepAliveConnection) {
  StartServer({.io_threads = 1});
  constexpr int kClients = 32;
  std::vector<std::unique_ptr<HttpTestClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<HttpTestClient>(server_->port()));
    TestResponse warm = clients.back()->Post("/echo", "warm");
    ASSERT_TRUE(warm.ok() && warm.keep_alive) << warm.error;
  }
  HttpTestClient blocker(server_->port());
  ASSERT_EQ(blocker.WriteRaw("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  ASSERT_TRUE(handler_.WaitBlocked());
  for (int i = 0; i < kClients; ++i) ASSERT_EQ(clients[i]->WriteRaw(PostEcho("request " + std::to_string(i))), "");
  server_->BeginShutdown(std::chrono::steady_clock::now() + 30s);
  handler_.Unblock();
  for (int i = 0; i < kClients; ++i) {
    TestResponse r = clients[i]->ReadResponse();
    ASSERT_TRUE(r.ok()) << "client " << i << ": " << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "request " + std::to_string(i));
    EXPECT_FALSE(r.keep_alive) << "the last answer of a shutdown says Connection: close";
    EXPECT_TRUE(clients[i]->WaitForClose());
  }
  TestResponse blocked = blocker.ReadResponse();
  ASSERT_TRUE(blocked.ok()) << blocked.error;
  EXPECT_FALSE(blocked.keep_alive);
  server_->Stop();
}

TEST_F(HttpServerEdgesTest, ShutdownAnswersPipelinedRequestsThatAreAlreadyHere) {
  StartServer({.io_threads = 1});
  HttpTestClient client(server_->port());
  ASSERT_TRUE(client.Post("/echo", "warm").ok());
  HttpTestClient blocker(server_->port());
  ASSERT_EQ(blocker.WriteRaw("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  ASSERT_TRUE(handler_.WaitBlocked());
  ASSERT_EQ(client.WriteRaw(PostEcho("one") + PostEcho("two")), "");
  server_->BeginShutdown(std::chrono::steady_clock::now() + 30s);
  handler_.Unblock();
  TestResponse one = client.ReadResponse();
  TestResponse two = client.ReadResponse();
  ASSERT_TRUE(one.ok() && two.ok()) << one.error << two.error;
  EXPECT_EQ(one.body, "one");
  EXPECT_TRUE(one.keep_alive) << "another request was already here";
  EXPECT_EQ(two.body, "two");
  EXPECT_FALSE(two.keep_alive);
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(HttpServerEdgesTest, ShutdownServesARequestArrivingWithinTheGraceAndClosesIdleConnectionsAfterIt) {
  StartServer({.shutdown_idle_grace = 3s});
  HttpTestClient late(server_->port());
  HttpTestClient idle(server_->port());
  ASSERT_TRUE(late.Post("/echo", "warm").ok());
  ASSERT_TRUE(idle.Post("/echo", "warm").ok());
  server_->BeginShutdown(std::chrono::steady_clock::now() + 30s);
  std::this_thread::sleep_for(50ms);
  TestResponse r = late.Post("/echo", "sent after the shutdown began");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "sent after the shutdown began");
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(idle.WaitForClose());
  // New connections are no longer accepted.
  EXPECT_TRUE(Eventually([&] { return !testing::FetchOnce(server_->port(), http::verb::post, "/echo", "x").ok(); }));
  server_->Stop();
}

TEST_F(HttpServerEdgesTest, ARequestStillUnansweredAtTheDeadlineGets503AndTheLateAnswerIsDropped) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  auto cancel = handler_.WaitHeld(1);
  ASSERT_NE(cancel, nullptr);
  server_->BeginShutdown(std::chrono::steady_clock::now() + 200ms);
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_NE(r.body.find("\"error\":"), std::string::npos) << r.body;
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(client.WaitForClose());
  EXPECT_TRUE(cancel->cancelled());
  handler_.ReleaseHeld(200);  // too late: dropped
  server_->Stop();
}

TEST_F(HttpServerEdgesTest, ARequestLongerThanTheDefaultDrainIsAnsweredBeforeItsDeadline) {
  StartServer({.drain_timeout = 100ms});
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  ASSERT_NE(handler_.WaitHeld(1), nullptr);
  server_->BeginShutdown(std::chrono::steady_clock::now() + 30s);
  std::jthread stopper([&] { server_->Stop(); });
  std::this_thread::sleep_for(300ms);  // past drain_timeout, which BeginShutdown's deadline replaces
  handler_.ReleaseHeld(201);
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 201u);
  EXPECT_FALSE(r.keep_alive);
}

TEST_F(HttpServerEdgesTest, ConnectionsPastTheLimitAreClosedAtOnceAndServedAgainOnceBelowIt) {
  StartServer({.max_connections = 3});
  std::vector<std::unique_ptr<HttpTestClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<HttpTestClient>(server_->port()));
    ASSERT_TRUE(clients.back()->Post("/echo", "in").ok());
  }
  EXPECT_EQ(server_->open_connections(), 3u);
  {
    HttpTestClient over(server_->port());
    EXPECT_TRUE(over.WaitForClose()) << "a connection past the limit is closed, not left waiting";
  }
  // The ones within the limit go on serving.
  TestResponse r = clients[0]->Post("/echo", "still");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "still");
  clients.pop_back();
  EXPECT_TRUE(Eventually([&] {
    TestResponse fresh = testing::FetchOnce(server_->port(), http::verb::post, "/echo", "fresh");
    return fresh.ok() && fresh.body == "fresh";
  }));
  EXPECT_LE(server_->open_connections(), 3u);
}

// Issue item 6: slow readers of large answers held memory without a global bound.
TEST_F(HttpServerEdgesTest, AnswersPastTheBoundOnUnsentBytesGet429UntilTheSlowReaderReads) {
  StartServer({.max_unsent_response_bytes = size_t{16} << 20});
  HttpTestClient slow(server_->port());
  ASSERT_EQ(slow.WriteRaw("GET /big HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  // Alone, an answer larger than the bound goes out; the slow reader keeps it unsent.
  ASSERT_TRUE(Eventually([&] { return server_->unsent_response_bytes() >= kBig; }));

  HttpTestClient other(server_->port());
  TestResponse refused = other.Get("/big");
  ASSERT_TRUE(refused.ok()) << refused.error;
  EXPECT_EQ(refused.status, 429u);
  EXPECT_EQ(refused.header("Retry-After"), "1");
  EXPECT_NE(refused.body.find("\"error\":"), std::string::npos);
  EXPECT_TRUE(refused.keep_alive);
  TestResponse built = other.Get("/big_built");
  ASSERT_TRUE(built.ok()) << built.error;
  EXPECT_EQ(built.status, 429u);
  EXPECT_EQ(handler_.builds(), 0) << "past the bound the big answer is not even built";
  EXPECT_EQ(handler_.answered(), std::vector<unsigned>{429});
  TestResponse small = other.Post("/echo", "small answers still go out");
  ASSERT_TRUE(small.ok()) << small.error;
  EXPECT_EQ(small.status, 200u);
  EXPECT_LE(server_->unsent_response_bytes(), kBig + HttpServer::kAlwaysSentBytes);

  TestResponse slow_answer = slow.ReadResponse();
  ASSERT_TRUE(slow_answer.ok()) << slow_answer.error;
  EXPECT_EQ(slow_answer.status, 200u);
  EXPECT_EQ(slow_answer.body.size(), kBig);
  ASSERT_TRUE(Eventually([&] { return server_->unsent_response_bytes() == 0; }));
  TestResponse again = other.Get("/big_built");
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(again.status, 200u);
  EXPECT_EQ(again.body.size(), kBig);
  EXPECT_EQ(handler_.builds(), 1);
  EXPECT_EQ(handler_.answered(), (std::vector<unsigned>{429, 200}));
}

}  // namespace
}  // namespace weft
