#include "frontend/http/tls_socket.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "frontend/http/testing/test_certificates.h"
#include "frontend/http/tls_context.h"

namespace weft {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

std::string RandomBytes(size_t n) {
  std::mt19937 random(7);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

// A server-side TlsSocket on the test's thread and a blocking asio TLS client on another.
class TlsSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/weft_tls_socket_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto ca = testing::TestCertificateAuthority::Create(dir_, "ca", {.subject = {{"CN", "weft test CA"}}});
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    auto server = ca->Issue("server", {.subject = {{"CN", "server"}}, .alt_names = "IP:127.0.0.1"});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    auto context = MakeServerSslContext(TlsFiles{.cert_file = server->cert_file, .key_file = server->key_file});
    ASSERT_TRUE(context.ok()) << context.status().ToString();
    server_context_ = *context;
    ca_file_ = ca->files().cert_file;
  }

  // Each test joins its client before the locals that the client uses go away; this is for a test that failed
  // before it could.
  void TearDown() override {
    if (client_thread_.joinable()) client_thread_.join();
    std::filesystem::remove_all(dir_);
  }

  // Connects a client that runs `client` on its own thread once its handshake is done, and returns the server's
  // side with the handshake done too.
  std::unique_ptr<TlsSocket> Connect(std::function<void(net::ssl::stream<tcp::socket>&)> client) {
    tcp::acceptor acceptor(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    uint16_t port = acceptor.local_endpoint().port();
    client_thread_ = std::thread([this, port, client = std::move(client)] {
      net::io_context ioc;
      net::ssl::context context(net::ssl::context::tls_client);
      context.load_verify_file(ca_file_);
      context.set_verify_mode(net::ssl::verify_peer);
      net::ssl::stream<tcp::socket> stream(ioc, context);
      error_code ec;
      stream.next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
      if (!ec) stream.handshake(net::ssl::stream_base::client, ec);
      if (ec) {
        ADD_FAILURE() << "client: " << ec.message();
        return;
      }
      client(stream);
    });
    TcpSocket socket(ioc_);
    acceptor.accept(socket);
    auto tls = std::make_unique<TlsSocket>(std::move(socket), *server_context_);
    std::optional<error_code> handshake;
    tls->async_handshake([&](error_code ec) { handshake = ec; });
    RunUntil([&] { return handshake.has_value(); });
    EXPECT_EQ(handshake.value_or(net::error::timed_out), error_code());
    return tls;
  }

  // Runs the server's side until `done` or 20 s.
  void RunUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    ioc_.restart();
    while (!done() && std::chrono::steady_clock::now() < deadline) ioc_.run_for(10ms);
    ASSERT_TRUE(done()) << "timed out";
  }

  // One async_read_some into a buffer of `capacity` bytes: its error and byte count.
  std::pair<error_code, size_t> ReadSome(TlsSocket& tls, size_t capacity) {
    std::string into(capacity, '\0');
    std::optional<std::pair<error_code, size_t>> result;
    tls.async_read_some(net::buffer(into), [&](error_code ec, size_t n) { result.emplace(ec, n); });
    RunUntil([&] { return result.has_value(); });
    return result.value_or(std::pair<error_code, size_t>(net::error::timed_out, 0));
  }

  // Reads until `n` bytes or an error.
  std::pair<error_code, std::string> Read(TlsSocket& tls, size_t n) {
    std::string into(n, '\0');
    std::optional<std::pair<error_code, size_t>> result;
    net::async_read(tls, net::buffer(into), [&](error_code ec, size_t got) { result.emplace(ec, got); });
    RunUntil([&] { return result.has_value(); });
    if (!result) return {net::error::timed_out, {}};
    into.resize(result->second);
    return {result->first, into};
  }

  std::string dir_;
  std::string ca_file_;
  std::shared_ptr<net::ssl::context> server_context_;
  net::io_context ioc_;
  std::thread client_thread_;
};

TEST_F(TlsSocketTest, CarriesSmallAndLargeMessagesBothWays) {
  const std::string large = RandomBytes(3 << 20);
  std::string echoed;
  auto tls = Connect([&](net::ssl::stream<tcp::socket>& client) {
    net::write(client, net::buffer(std::string("hello")));
    net::write(client, net::buffer(large));
    echoed.resize(3 + large.size());
    error_code ec;
    net::read(client, net::buffer(echoed), ec);
    EXPECT_FALSE(ec) << ec.message();
  });
  auto [hello_error, hello] = Read(*tls, 5);
  EXPECT_FALSE(hello_error) << hello_error.message();
  EXPECT_EQ(hello, "hello");
  auto [large_error, received] = Read(*tls, large.size());
  EXPECT_FALSE(large_error) << large_error.message();
  EXPECT_TRUE(received == large) << "the large message differs";

  // A small buffer before a large one: gathered into the first record, and the rest written as it is.
  std::vector<net::const_buffer> answer{net::buffer("ok:", 3), net::buffer(received)};
  std::optional<error_code> written;
  net::async_write(*tls, answer, [&](error_code ec, size_t) { written = ec; });
  RunUntil([&] { return written.has_value(); });
  EXPECT_FALSE(*written) << written->message();
  client_thread_.join();
  EXPECT_TRUE(echoed == "ok:" + large) << "the client read something else";
}

TEST_F(TlsSocketTest, RecordsReceivedTogetherAreReadInOneStep) {
  std::promise<void> sent;
  std::future<void> sent_seen = sent.get_future();
  auto tls = Connect([&](net::ssl::stream<tcp::socket>& client) {
    for (int i = 0; i < 3; ++i) net::write(client, net::buffer(std::string(100, static_cast<char>('a' + i))));
    sent.set_value();
    char byte;
    error_code ec;
    client.read_some(net::buffer(&byte, 1), ec);  // until the server closes
  });
  sent_seen.wait();
  std::this_thread::sleep_for(50ms);  // loopback has delivered the three records by now

  auto [error, n] = ReadSome(*tls, 1000);
  EXPECT_FALSE(error);
  EXPECT_EQ(n, 300u);
  EXPECT_FALSE(tls->HasPendingInput());

  tls->next_layer().close();
  client_thread_.join();  // before `sent` goes
}

TEST_F(TlsSocketTest, BytesLeftAfterASmallReadArePending) {
  std::promise<void> sent;
  std::future<void> sent_seen = sent.get_future();
  auto tls = Connect([&](net::ssl::stream<tcp::socket>& client) {
    net::write(client, net::buffer(std::string(100, 'x')));
    sent.set_value();
    char byte;
    error_code ec;
    client.read_some(net::buffer(&byte, 1), ec);
  });
  sent_seen.wait();
  auto [error, first] = Read(*tls, 10);
  EXPECT_FALSE(error);
  EXPECT_TRUE(tls->HasPendingInput());
  auto [rest_error, rest] = Read(*tls, 90);
  EXPECT_FALSE(rest_error);
  EXPECT_FALSE(tls->HasPendingInput());
  tls->next_layer().close();
  client_thread_.join();  // before `sent` goes
}

TEST_F(TlsSocketTest, APeerGoneWithoutCloseNotifyIsTruncated) {
  // The client ends its side with a FIN and no close_notify, as a client that crashes.
  std::promise<void> read_done;
  std::future<void> read_done_seen = read_done.get_future();
  auto tls = Connect([&](net::ssl::stream<tcp::socket>& client) {
    client.next_layer().shutdown(tcp::socket::shutdown_send);
    read_done_seen.wait();
  });
  error_code read = ReadSome(*tls, 100).first;
  EXPECT_EQ(read, net::ssl::error::stream_truncated) << read.message();
  read_done.set_value();
  client_thread_.join();  // before `read_done_seen` goes
}

TEST_F(TlsSocketTest, WritesToAPeerThatHasGoneFailWithoutSigpipe) {
  // The default action of SIGPIPE ends the process: a send that raised it would end this test.
  struct sigaction previous {};
  struct sigaction fatal {};
  fatal.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &fatal, &previous), 0);

  auto tls = Connect([](net::ssl::stream<tcp::socket>& client) { client.next_layer().close(); });
  client_thread_.join();
  const std::string chunk = RandomBytes(1 << 20);
  error_code write_error;
  for (int i = 0; i < 64 && !write_error; ++i) {
    std::optional<error_code> written;
    net::async_write(*tls, net::buffer(chunk), [&](error_code ec, size_t) { written = ec; });
    RunUntil([&] { return written.has_value(); });
    write_error = *written;
  }
  EXPECT_TRUE(write_error == net::error::broken_pipe || write_error == net::error::connection_reset)
      << write_error.message();
  sigaction(SIGPIPE, &previous, nullptr);
}

TEST_F(TlsSocketTest, ThePeersCloseNotifyReadsAsEndOfStreamAndOursIsSent) {
  std::optional<error_code> client_saw;
  auto tls = Connect([&](net::ssl::stream<tcp::socket>& client) {
    error_code ec;
    client.shutdown(ec);  // close_notify, then waits for the server's
    client_saw = ec;
  });
  error_code read = ReadSome(*tls, 100).first;
  EXPECT_EQ(read, net::error::eof) << read.message();

  std::optional<error_code> shutdown;
  tls->async_shutdown([&](error_code ec) { shutdown = ec; });
  RunUntil([&] { return shutdown.has_value(); });
  EXPECT_FALSE(*shutdown) << shutdown->message();
  client_thread_.join();
  ASSERT_TRUE(client_saw.has_value());
  EXPECT_FALSE(*client_saw) << client_saw->message();
}

TEST_F(TlsSocketTest, CancellingTheSocketEndsAPendingRead) {
  std::promise<void> done;
  std::future<void> done_seen = done.get_future();
  auto tls = Connect([&](net::ssl::stream<tcp::socket>&) { done_seen.wait(); });
  std::string into(100, '\0');
  std::optional<error_code> read;
  tls->async_read_some(net::buffer(into), [&](error_code ec, size_t) { read = ec; });
  ioc_.restart();
  ioc_.run_for(20ms);
  EXPECT_FALSE(read.has_value());
  tls->next_layer().cancel();
  RunUntil([&] { return read.has_value(); });
  EXPECT_EQ(*read, net::error::operation_aborted);
  done.set_value();
  client_thread_.join();  // before `done_seen` goes
}

}  // namespace
}  // namespace weft
