#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::testing {

struct TestResponse {
  std::string error;  // empty when a response was read
  unsigned status = 0;
  boost::beast::http::fields headers;
  std::string body;
  bool keep_alive = false;

  bool ok() const { return error.empty(); }
  std::string header(std::string_view name) const;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A blocking HTTP/1.1 client over one keep-alive connection, for tests. Every wait is bounded by `timeout`:
// a test fails instead of hanging. Not thread-safe.
class HttpTestClient {
 public:
  explicit HttpTestClient(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~HttpTestClient();

  // Empty when connected, else why not.
  const std::string& connect_error() const { return connect_error_; }

  TestResponse Send(boost::beast::http::verb method, std::string_view target, std::string body = {},
                    const HeaderList& headers = {});
  TestResponse Get(std::string_view target) { return Send(boost::beast::http::verb::get, target); }
  TestResponse Post(std::string_view target, std::string body, const HeaderList& headers = {}) {
    return Send(boost::beast::http::verb::post, target, std::move(body), headers);
  }

  // Writes bytes as they are (malformed or partial requests). Returns an error message, empty on success.
  std::string WriteRaw(std::string_view bytes);
  TestResponse ReadResponse();
  // True when the server closes the connection (EOF or reset) within the timeout; bytes it sends are skipped.
  bool WaitForClose();
  void Close();

 private:
  // Runs the io_context until `done` or the timeout; on timeout cancels the socket's operations.
  bool RunUntil(const bool& done);

  std::chrono::milliseconds timeout_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  std::string connect_error_;
};

// One request on a fresh connection.
TestResponse FetchOnce(uint16_t port, boost::beast::http::verb method, std::string_view target, std::string body = {},
                       const HeaderList& headers = {});

}  // namespace weft::testing
