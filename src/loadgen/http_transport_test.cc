#include "loadgen/http_transport.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace weft {
namespace {

TEST(HttpUrlTest, ParsesTheUsualForms) {
  auto full = ParseHttpUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->host, "127.0.0.1");
  EXPECT_EQ(full->port, 8000);
  EXPECT_EQ(full->base_path, "");

  auto bare = ParseHttpUrl("localhost:8000");  // perf_analyzer's -u form
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->host, "localhost");
  EXPECT_EQ(bare->port, 8000);

  auto path = ParseHttpUrl("http://gateway/weft/");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->port, 80);
  EXPECT_EQ(path->base_path, "/weft");

  auto v6 = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "[::1]");
  EXPECT_EQ(v6->port, 9000);
  EXPECT_EQ(v6->ToString(), "http://[::1]:9000");
}

TEST(HttpUrlTest, RejectsWhatItCannotUse) {
  EXPECT_EQ(ParseHttpUrl("https://host").status().code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(ParseHttpUrl("grpc://host:8001").ok());
  EXPECT_FALSE(ParseHttpUrl("http://:8000").ok());
  EXPECT_FALSE(ParseHttpUrl("http://host:").ok());
  EXPECT_FALSE(ParseHttpUrl("http://host:0").ok());
  EXPECT_FALSE(ParseHttpUrl("http://host:70000").ok());
  EXPECT_FALSE(ParseHttpUrl("http://[::1").ok());
}

TEST(HttpTransportTest, NothingListeningIsAConnectError) {
  // Port 1 on loopback: nothing listens there on a test machine, and the connect is refused at once.
  auto transport = HttpTransport::Create(*ParseHttpUrl("http://127.0.0.1:1"));
  ASSERT_TRUE(transport.ok());
  PreparedRequest get;
  get.method = "GET";
  get.target = "/v2/health/live";
  TransportReply reply = ExchangeOnce(**transport, get, std::chrono::seconds(5));
  EXPECT_EQ(reply.failure, TransportReply::Failure::kConnect) << reply.error;
}

// A server that accepts one connection, reads its request and answers `answer`, then closes. Real sockets: what
// the transport must survive is what a real peer sends.
class OneAnswerServer {
 public:
  explicit OneAnswerServer(std::string answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(::listen(listener_, 1), 0);
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      const int connection = ::accept(listener_, nullptr, nullptr);
      if (connection < 0) return;
      char request[4096];
      (void)::recv(connection, request, sizeof(request), 0);
      (void)::send(connection, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      ::shutdown(connection, SHUT_RDWR);
      ::close(connection);
    });
  }
  ~OneAnswerServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }

 private:
  std::string answer_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TransportReply GetFrom(int port) {
  auto transport = HttpTransport::Create(*ParseHttpUrl("http://127.0.0.1:" + std::to_string(port)));
  EXPECT_TRUE(transport.ok());
  PreparedRequest get;
  get.method = "GET";
  get.target = "/v2/health/live";
  return ExchangeOnce(**transport, get, std::chrono::seconds(5));
}

TEST(HttpTransportTest, AnAnswerLargerThanTheLimitFailsThatExchangeOnly) {
  // Declared: refused before anything is allocated for it.
  OneAnswerServer declared("HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\nabc");
  TransportReply reply = GetFrom(declared.port());
  EXPECT_EQ(reply.failure, TransportReply::Failure::kIo) << reply.error;
  EXPECT_NE(reply.error.find("body limit"), std::string::npos) << reply.error;

  OneAnswerServer small("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
  reply = GetFrom(small.port());
  EXPECT_EQ(reply.failure, TransportReply::Failure::kNone) << reply.error;
  EXPECT_EQ(reply.body, "abc");
}

}  // namespace
}  // namespace weft
