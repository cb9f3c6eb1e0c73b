#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "frontend/http/testing/http_test_client.h"

namespace weft::testing {

struct TlsClientOptions {
  std::string ca_file;    // the server's certificate must chain to it and name 127.0.0.1; empty = not checked
  std::string cert_file;  // the client's certificate and key (mTLS); empty = none
  std::string key_file;
  // The newest protocol offered (TLS1_1_VERSION, ...); 0 = OpenSSL's. Below TLS 1.2 the client's security level
  // is lowered so that it really offers the old protocol.
  int max_version = 0;
  std::string tls12_ciphers;  // OpenSSL's cipher list for TLS 1.2 and older; empty = OpenSSL's
};

// HttpTestClient over TLS: one keep-alive HTTPS connection, for tests. Every wait is bounded by `timeout`: a test
// fails instead of hanging. Not thread-safe.
class TlsTestClient {
 public:
  TlsTestClient(uint16_t port, TlsClientOptions options, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~TlsTestClient();

  // Empty when connected and the handshake completed, else why not. Over TLS 1.3 the client's handshake
  // completes before the server has checked the client's certificate: a refusal shows in the first response.
  const std::string& connect_error() const { return connect_error_; }
  // The subject of the server's certificate ("CN=server-a"), empty before a handshake.
  std::string server_subject();

  TestResponse Send(boost::beast::http::verb method, std::string_view target, std::string body = {},
                    const HeaderList& headers = {});
  TestResponse Get(std::string_view target) { return Send(boost::beast::http::verb::get, target); }
  TestResponse Post(std::string_view target, std::string body, const HeaderList& headers = {}) {
    return Send(boost::beast::http::verb::post, target, std::move(body), headers);
  }

  // Writes bytes as they are. Returns an error message, empty on success.
  std::string WriteRaw(std::string_view bytes);
  TestResponse ReadResponse();
  // True when the server closes the connection within the timeout; bytes it sends are skipped. `*close_notify`
  // learns whether it said close_notify first.
  bool WaitForClose(bool* close_notify = nullptr);
  // Goes away without close_notify, as a client that crashes.
  void Close();

 private:
  bool RunUntil(const bool& done);

  std::chrono::milliseconds timeout_;
  boost::asio::io_context ioc_;
  boost::asio::ssl::context context_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> stream_;  // set by the constructor
  boost::beast::flat_buffer buffer_;
  std::string connect_error_;
};

}  // namespace weft::testing
