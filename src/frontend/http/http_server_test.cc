#include "frontend/http/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "frontend/http/testing/held_responders.h"
#include "frontend/http/testing/http_test_client.h"

namespace weft {
namespace {

namespace http = boost::beast::http;
using testing::HttpTestClient;
using testing::TestResponse;
using namespace std::chrono_literals;

// Answers by path: /echo with facts about the request, /later from another thread, /hold keeps the responder
// until the test releases it, /drop never answers, /throw throws.
class FakeHandler : public HttpHandler {
 public:
  void Handle(HttpRequest request, HttpResponder responder) override {
    std::string_view path = request.path();
    if (path == "/echo") {
      HttpResponse r;
      r.content_type = "text/plain";
      const auto* data = request.body->data();
      std::string offset_header(request.header("Inference-Header-Content-Length"));
      size_t anchor = offset_header.empty() ? 0 : std::stoul(offset_header);
      r.headers.emplace_back("X-Anchor-Aligned",
                             reinterpret_cast<uintptr_t>(data + anchor) % kRequestBodyAlignment == 0 ? "1" : "0");
      r.headers.emplace_back("X-Method", std::string(http::to_string(request.method)));
      r.body = std::string(request.body->view());
      return responder.Send(std::move(r));
    }
    if (path == "/mirror") {
      // The body back as a segment that views it, as the identity model's binary output does.
      HttpResponse r;
      r.content_type = "application/octet-stream";
      const auto* data = request.body->data();
      size_t anchor = AnchorOf(request);
      r.headers.emplace_back("X-Anchor-Aligned",
                             reinterpret_cast<uintptr_t>(data + anchor) % kRequestBodyAlignment == 0 ? "1" : "0");
      r.segments.push_back({request.body, request.body->bytes()});
      return responder.Send(std::move(r));
    }
    if (path == "/later") {
      threads_.emplace_back([responder] {
        std::this_thread::sleep_for(20ms);
        responder.SendBuilt([] {
          HttpResponse r;
          r.body = "built later";
          return r;
        });
      });
      return;
    }
    if (path == "/segments") {
      HttpResponse r;
      r.body = "head:";
      auto tail = std::make_shared<std::string>("tail");
      r.segments.push_back({tail, std::as_bytes(std::span(tail->data(), tail->size()))});
      return responder.Send(std::move(r));
    }
    if (path == "/hold") return held_.Hold(std::move(responder), request.cancel);
    if (path == "/drop") return;
    if (path == "/throw") throw std::runtime_error("handler failure");
    HttpResponse r;
    r.status = 404;
    responder.Send(std::move(r));
  }

  static size_t AnchorOf(const HttpRequest& request) {
    std::string offset_header(request.header("Inference-Header-Content-Length"));
    return offset_header.empty() ? 0 : std::stoul(offset_header);
  }

  std::shared_ptr<CancelToken> WaitHeld(size_t n) { return held_.WaitHeld(n); }
  void ReleaseHeld(unsigned status) { held_.ReleaseHeld(status); }

 private:
  testing::HeldResponders held_;
  std::vector<std::jthread> threads_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServer::Options options = {}) {
    options.address = "127.0.0.1";
    server_ = std::make_unique<HttpServer>(options, &handler_);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    handler_.ReleaseHeld(200);
  }
  // The server still answers a good request on a fresh connection.
  void ExpectHealthy() {
    TestResponse r = testing::FetchOnce(server_->port(), http::verb::post, "/echo", "still here");
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "still here");
  }

  FakeHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

TEST(HttpRequestTest, AHeaderIsFoundWithoutRegardToCaseAndTheFirstOfARepeatedOneFirst) {
  HttpRequest request;
  request.headers.Add("content-TYPE", "application/json");
  request.headers.Add("X-Custom", "one");
  request.headers.Add("Authorization", "Bearer first");
  request.headers.Add("x-custom", "two");
  request.headers.Add("authorization", "Bearer second");
  EXPECT_EQ(request.header("Content-Type"), "application/json");
  EXPECT_EQ(request.header(http::field::content_type), "application/json");
  EXPECT_EQ(request.header("X-CUSTOM"), "one");
  EXPECT_EQ(request.header("authorization"), "Bearer first");
  EXPECT_EQ(request.header(http::field::authorization), "Bearer first");
  EXPECT_EQ(request.header("X-Custo"), "");
  EXPECT_EQ(request.header("Accept-Encoding"), "");
  EXPECT_EQ(request.header(http::field::accept_encoding), "");
}

// A port already taken is refused with the system's reason (it once read "Success": the close overwrote it).
TEST_F(HttpServerTest, APortInUseIsRefusedWithTheReason) {
  StartServer();
  HttpServer second({.address = "127.0.0.1", .port = server_->port()}, &handler_);
  Status started = second.Start();
  EXPECT_EQ(started.code(), StatusCode::kUnavailable);
  EXPECT_NE(started.message().find("in use"), std::string::npos) << started.message();
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  HttpTestClient client(server_->port());
  for (int i = 0; i < 3; ++i) {
    TestResponse r = client.Post("/echo", "body " + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "body " + std::to_string(i));
    EXPECT_TRUE(r.keep_alive);
    EXPECT_EQ(r.header("Content-Type"), "text/plain");
  }
  TestResponse get = client.Get("/echo");
  ASSERT_TRUE(get.ok()) << get.error;
  EXPECT_EQ(get.header("X-Method"), "GET");
  EXPECT_EQ(get.body, "");
}

TEST_F(HttpServerTest, AnswersFromAnotherThreadAndWithSegments) {
  StartServer();
  HttpTestClient client(server_->port());
  TestResponse later = client.Get("/later");
  ASSERT_TRUE(later.ok()) << later.error;
  EXPECT_EQ(later.body, "built later");
  TestResponse segments = client.Get("/segments");
  ASSERT_TRUE(segments.ok()) << segments.error;
  EXPECT_EQ(segments.body, "head:tail");
}

TEST_F(HttpServerTest, PipelinedRequestIsAnsweredAfterTheFirst) {
  StartServer();
  HttpTestClient client(server_->port());
  std::string one = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none";
  std::string two = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo";
  ASSERT_EQ(client.WriteRaw(one + two), "");
  TestResponse first = client.ReadResponse();
  TestResponse second = client.ReadResponse();
  ASSERT_TRUE(first.ok() && second.ok()) << first.error << second.error;
  EXPECT_EQ(first.body, "one");
  EXPECT_EQ(second.body, "two");
}

TEST_F(HttpServerTest, BinaryOffsetOfTheBodyIsAligned) {
  StartServer();
  HttpTestClient client(server_->port());
  for (int anchor : {0, 1, 7, 63, 64, 100}) {
    std::string body(200, 'x');
    TestResponse r = client.Post("/echo", body, {{"Inference-Header-Content-Length", std::to_string(anchor)}});
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.header("X-Anchor-Aligned"), "1") << anchor;
    EXPECT_EQ(r.body, body);
  }
}

TEST_F(HttpServerTest, ChunkedBodyIsAssembled) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "hello world");
}

// A chunk's size line and the trailer pass through the connection's buffer: one that never ends gets 400 once it
// outgrows the cap, instead of growing the buffer until the read deadline.
TEST_F(HttpServerTest, AChunkLineOrTrailerThatNeverEndsGets400) {
  StartServer();
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string trailer;
  while (trailer.size() < (size_t{512} << 10)) trailer += "X-Trailer: y\r\n";
  for (const std::string& rest : {"1;" + std::string(size_t{512} << 10, 'a'), "0\r\n" + trailer}) {
    HttpTestClient client(server_->port());
    ASSERT_EQ(client.WriteRaw(head + rest), "");
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 400u);
    EXPECT_NE(r.body.find("longer than"), std::string::npos) << r.body;
    EXPECT_TRUE(client.WaitForClose());
  }
  ExpectHealthy();
}

// The cap on the buffer is for lines: a chunk larger than it still passes, and the requests after it on the
// connection are read as before.
TEST_F(HttpServerTest, AChunkLargerThanTheLineCapAndTheRequestsAfterItAreServed) {
  StartServer();
  HttpTestClient client(server_->port());
  const std::string chunk(size_t{1} << 20, 'c');
  std::ostringstream size;
  size << std::hex << chunk.size();
  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + size.str() +
                            "\r\n" + chunk + "\r\n0\r\n\r\n"),
            "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, chunk);
  const std::string big(size_t{1} << 20, 'd');
  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(big.size()) +
                            "\r\n\r\n" + big),
            "");
  r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, big);
}

// RFC 9112 section 2.2: an empty line before a request line is ignored, also between pipelined requests.
TEST_F(HttpServerTest, EmptyLinesBeforeARequestLineAreIgnored) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none\r\n\r\n"
                            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo"),
            "");
  for (const char* body : {"one", "two"}) {
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, body);
  }
}

// An HTTP/1.0 client knows no interim response: its expectation is ignored and the first answer is the final one.
TEST_F(HttpServerTest, AnHttp10ExpectContinueGetsNoInterimResponse) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.0\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\ndata"), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, "data");
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimResponse) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"), "");
  TestResponse interim = client.ReadResponse();
  ASSERT_TRUE(interim.ok()) << interim.error;
  EXPECT_EQ(interim.status, 100u);
  ASSERT_EQ(client.WriteRaw("data"), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "data");
}

TEST_F(HttpServerTest, OversizedBodyGets413AndTheConnectionCloses) {
  HttpServer::Options options;
  options.max_body_bytes = 1000;
  StartServer(options);
  {
    HttpTestClient client(server_->port());
    ASSERT_EQ(
        client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + std::string(2000, 'a')), "");
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 413u);
    EXPECT_NE(r.body.find("\"error\""), std::string::npos);
    EXPECT_FALSE(r.keep_alive);
    EXPECT_TRUE(client.WaitForClose());
  }
  {
    HttpTestClient client(server_->port());
    std::string chunk(600, 'b');
    ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n" + chunk +
                              "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n"),
              "");
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 413u);
  }
  // Exactly at the limit is fine.
  TestResponse r = testing::FetchOnce(server_->port(), http::verb::post, "/echo", std::string(1000, 'c'));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
}

TEST_F(HttpServerTest, MalformedRequestGets400) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("THIS IS NOT HTTP\r\n\r\n"), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 400u);
  EXPECT_TRUE(client.WaitForClose());
  ExpectHealthy();
}

// Heads that two parsers could read differently (request smuggling) are refused, each with its reason, and the
// connection closes: whatever follows on it cannot be trusted to start a request.
TEST_F(HttpServerTest, HeadsThatCouldSmuggleARequestGet400AndTheConnectionCloses) {
  StartServer();
  const std::pair<std::string, std::string> heads[] = {
      {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\ndata", "more than one"},
      {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length : 4\r\n\r\ndata", "name"},
      {"POST /echo HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n Content-Length: 4\r\n\r\ndata", "folding"},
      {"POST /echo HTTP/1.1\nHost: x\nContent-Length: 4\n\ndata", "bare LF"},
  };
  for (const auto& [head, reason] : heads) {
    HttpTestClient client(server_->port());
    ASSERT_EQ(client.WriteRaw(head), "");
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 400u) << head;
    EXPECT_NE(r.body.find(reason), std::string::npos) << r.body;
    EXPECT_TRUE(client.WaitForClose()) << head;
  }
  ExpectHealthy();
}

TEST_F(HttpServerTest, AHeadArrivingAByteAtATimeIsServed) {
  StartServer();
  HttpTestClient client(server_->port());
  const std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  for (char c : request) ASSERT_EQ(client.WriteRaw(std::string(1, c)), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, "hello");
}

TEST_F(HttpServerTest, OversizedHeaderGets431) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'h') + "\r\n\r\n"), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 431u);
  ExpectHealthy();
}

TEST_F(HttpServerTest, ClientLeavingMidBodyJustGoesAway) {
  StartServer();
  for (int i = 0; i < 5; ++i) {
    HttpTestClient client(server_->port());
    ASSERT_EQ(
        client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + std::string(500, 'z')),
        "");
    client.Close();
  }
  ExpectHealthy();
}

TEST_F(HttpServerTest, DisconnectWhileInFlightCancelsTheRequest) {
  StartServer();
  std::shared_ptr<CancelToken> cancel;
  {
    HttpTestClient client(server_->port());
    ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
    cancel = handler_.WaitHeld(1);
    ASSERT_NE(cancel, nullptr);
    EXPECT_FALSE(cancel->cancelled());
  }
  for (int i = 0; i < 500 && !cancel->cancelled(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(cancel->cancelled());
  handler_.ReleaseHeld(200);  // an answer for a client that left is dropped
  ExpectHealthy();
}

TEST_F(HttpServerTest, HeldRequestIsAnsweredWhenReleased) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  auto cancel = handler_.WaitHeld(1);
  handler_.ReleaseHeld(202);
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 202u);
  EXPECT_FALSE(cancel->cancelled());
  // The watch that ran while the request was in flight now waits for the next request.
  TestResponse next = client.Post("/echo", "next");
  ASSERT_TRUE(next.ok()) << next.error;
  EXPECT_EQ(next.body, "next");
}

TEST_F(HttpServerTest, DroppedAndThrowingHandlersAnswer500) {
  StartServer();
  HttpTestClient client(server_->port());
  TestResponse dropped = client.Get("/drop");
  ASSERT_TRUE(dropped.ok()) << dropped.error;
  EXPECT_EQ(dropped.status, 500u);
  HttpTestClient other(server_->port());
  TestResponse thrown = other.Get("/throw");
  ASSERT_TRUE(thrown.ok()) << thrown.error;
  EXPECT_EQ(thrown.status, 500u);
  ExpectHealthy();
}

TEST_F(HttpServerTest, Http10WithoutKeepAliveCloses) {
  StartServer();
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("GET /echo HTTP/1.0\r\n\r\n"), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(HttpServerTest, IdleConnectionTimesOut) {
  HttpServer::Options options;
  options.io_timeout = 200ms;
  StartServer(options);
  HttpTestClient client(server_->port(), 5s);
  TestResponse r = client.Get("/echo");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(client.WaitForClose());
}

// The connection's timer waits for the deadline it was first given and finds it moved later: a client that keeps
// sending within io_timeout stays connected past several io_timeouts, and is closed one io_timeout after it stops.
TEST_F(HttpServerTest, AKeptAliveConnectionLivesPastItsFirstDeadlineAndClosesAfterItsLast) {
  HttpServer::Options options;
  options.io_timeout = 400ms;
  StartServer(options);
  HttpTestClient client(server_->port(), 5s);
  const auto start = std::chrono::steady_clock::now();
  auto last_answer = start;
  for (int i = 0; i < 8; ++i) {  // 7 x 150 ms between requests: more than two io_timeouts in all
    if (i > 0) std::this_thread::sleep_for(150ms);
    TestResponse r = client.Get("/echo");
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.error;
    ASSERT_TRUE(r.keep_alive);
    last_answer = std::chrono::steady_clock::now();
  }
  EXPECT_GT(last_answer - start, 1000ms);
  EXPECT_TRUE(client.WaitForClose());
  // The last deadline was set as the last answer was written, just before it arrived here.
  EXPECT_GE(std::chrono::steady_clock::now() - last_answer, 300ms);
}

TEST_F(HttpServerTest, StopWaitsForTheAnswerInFlight) {
  StartServer();
  HttpTestClient idle(server_->port());
  ASSERT_TRUE(idle.Get("/echo").ok());
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  auto cancel = handler_.WaitHeld(1);
  ASSERT_NE(cancel, nullptr);
  std::jthread stopper([&] { server_->Stop(); });
  EXPECT_TRUE(idle.WaitForClose());  // idle connections close after shutdown_idle_grace
  handler_.ReleaseHeld(201);
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 201u);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_FALSE(cancel->cancelled());
  stopper.join();
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(HttpServerTest, StopWithARequestInFlightAnswers503AndLaterAnswersAreDropped) {
  HttpServer::Options options;
  options.drain_timeout = 100ms;
  StartServer(options);
  HttpTestClient client(server_->port());
  ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  auto cancel = handler_.WaitHeld(1);
  ASSERT_NE(cancel, nullptr);
  server_->Stop();
  EXPECT_TRUE(cancel->cancelled());
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 503u);
  handler_.ReleaseHeld(200);
  server_.reset();
}

TEST_F(HttpServerTest, StartFailsOnABadAddressOrABusyPort) {
  HttpServer::Options bad;
  bad.address = "not-an-address";
  HttpServer server(bad, &handler_);
  EXPECT_EQ(server.Start().code(), StatusCode::kInvalidArgument);

  StartServer();
  HttpServer::Options busy;
  busy.address = "127.0.0.1";
  busy.port = server_->port();
  HttpServer second(busy, &handler_);
  EXPECT_EQ(second.Start().code(), StatusCode::kUnavailable);
}

// Bytes that differ from position to position, so that a shifted or repeated piece does not compare equal.
std::string PatternBytes(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245 + 12345;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

std::string PostHead(size_t content_length, std::string_view extra = "") {
  return "POST /mirror HTTP/1.1\r\nHost: x\r\n" + std::string(extra) +
         "Content-Length: " + std::to_string(content_length) + "\r\n\r\n";
}

TEST_F(HttpServerTest, LargeBodyRoundTripsByteExactWithItsBinaryOffsetAligned) {
  StartServer();
  HttpTestClient client(server_->port());
  for (size_t anchor : {size_t{0}, size_t{100}, size_t{4093}}) {
    std::string body = PatternBytes((size_t{8} << 20) + 7);
    TestResponse r = client.Post("/mirror", body, {{"Inference-Header-Content-Length", std::to_string(anchor)}});
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.header("X-Anchor-Aligned"), "1") << anchor;
    ASSERT_EQ(r.body.size(), body.size());
    EXPECT_TRUE(r.body == body) << "the body came back changed";
    EXPECT_TRUE(r.keep_alive);
  }
}

TEST_F(HttpServerTest, BodyArrivingInPiecesIsAssembledAndAPipelinedRequestAfterItIsServed) {
  StartServer();
  HttpTestClient client(server_->port());
  std::string body = PatternBytes(3 << 20);
  std::string next = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nnext";
  // The header with the first bytes, pieces with pauses between them, then the last piece and the next request
  // in one write.
  ASSERT_EQ(client.WriteRaw(PostHead(body.size()) + body.substr(0, 1000)), "");
  size_t at = 1000;
  for (size_t piece : {size_t{1}, size_t{65536}, size_t{1} << 20}) {
    std::this_thread::sleep_for(20ms);
    ASSERT_EQ(client.WriteRaw(std::string_view(body).substr(at, piece)), "");
    at += piece;
  }
  ASSERT_EQ(client.WriteRaw(body.substr(at) + next), "");
  TestResponse first = client.ReadResponse();
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 200u);
  EXPECT_TRUE(first.body == body) << "the body came back changed";
  TestResponse second = client.ReadResponse();
  ASSERT_TRUE(second.ok()) << second.error;
  EXPECT_EQ(second.body, "next");
}

TEST_F(HttpServerTest, BodyExactlyAtTheLimitIsServedAndOneByteOverGets413) {
  HttpServer::Options options;
  options.max_body_bytes = size_t{1} << 20;
  StartServer(options);
  std::string at_limit = PatternBytes(options.max_body_bytes);
  {
    HttpTestClient client(server_->port());
    TestResponse r = client.Post("/mirror", at_limit);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_TRUE(r.body == at_limit);
    EXPECT_TRUE(r.keep_alive);
    // The connection goes on serving.
    TestResponse again = client.Post("/echo", "again");
    ASSERT_TRUE(again.ok()) << again.error;
    EXPECT_EQ(again.body, "again");
  }
  {
    HttpTestClient client(server_->port());
    ASSERT_EQ(client.WriteRaw(PostHead(at_limit.size() + 1) + at_limit + "x"), "");
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 413u);
    EXPECT_FALSE(r.keep_alive);
    EXPECT_TRUE(client.WaitForClose());
  }
  ExpectHealthy();
}

TEST_F(HttpServerTest, ClientLeavingMidLargeBodyLeavesTheServerServing) {
  StartServer();
  std::string part = PatternBytes(1 << 20);
  for (int i = 0; i < 3; ++i) {
    HttpTestClient client(server_->port());
    ASSERT_EQ(client.WriteRaw(PostHead(size_t{4} << 20) + part), "");
    std::this_thread::sleep_for(10ms);  // the server is reading the body in place when the client goes
    client.Close();
  }
  ExpectHealthy();
  std::string body = PatternBytes(size_t{2} << 20);
  TestResponse r = testing::FetchOnce(server_->port(), http::verb::post, "/mirror", body);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(r.body == body);
}

TEST_F(HttpServerTest, BodyThatStallsTimesOut) {
  HttpServer::Options options;
  options.io_timeout = 200ms;
  StartServer(options);
  HttpTestClient client(server_->port(), 5s);
  ASSERT_EQ(client.WriteRaw(PostHead(100000) + std::string(5000, 's')), "");
  EXPECT_TRUE(client.WaitForClose());
  ExpectHealthy();
}

TEST(RequestBodyTest, GrowsKeepsAnchorAlignedAndPadded) {
  RequestBody body;
  body.Prepare(0, 13);
  std::string expected;
  for (int i = 0; i < 1000; ++i) {
    char c = static_cast<char>('a' + i % 26);
    *body.Append(1) = static_cast<std::byte>(c);
    expected += c;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(body.data() + 13) % kRequestBodyAlignment, 0u);
  }
  EXPECT_EQ(body.view(), expected);
  RequestBody moved = std::move(body);
  EXPECT_EQ(moved.view(), expected);
  EXPECT_EQ(body.size(), 0u);  // NOLINT(bugprone-use-after-move): a moved-from body is empty
  EXPECT_NE(body.data(), nullptr);
}

}  // namespace
}  // namespace weft
