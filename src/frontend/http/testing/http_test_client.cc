#include "frontend/http/testing/http_test_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>

namespace weft::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {
TestResponse Failed(std::string why) {
  TestResponse r;
  r.error = std::move(why);
  return r;
}
}  // namespace

std::string TestResponse::header(std::string_view name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : std::string(it->value());
}

HttpTestClient::HttpTestClient(uint16_t port, std::chrono::milliseconds timeout) : timeout_(timeout), socket_(ioc_) {
  error_code ec;
  socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) connect_error_ = "connect: " + ec.message();
  socket_.set_option(tcp::no_delay(true), ec);
}

HttpTestClient::~HttpTestClient() { Close(); }

bool HttpTestClient::RunUntil(const bool& done) {
  ioc_.restart();
  ioc_.run_for(timeout_);
  if (done) return true;
  error_code ec;
  socket_.cancel(ec);
  ioc_.restart();
  ioc_.run();  // lets the cancelled operation complete
  return false;
}

std::string HttpTestClient::WriteRaw(std::string_view bytes) {
  bool done = false;
  error_code result;
  net::async_write(socket_, net::buffer(bytes.data(), bytes.size()), [&](error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done)) return "write timed out";
  return result ? "write: " + result.message() : std::string();
}

TestResponse HttpTestClient::ReadResponse() {
  TestResponse out;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  bool done = false;
  error_code result;
  http::async_read(socket_, buffer_, parser, [&](error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done)) {
    out.error = "read timed out";
    return out;
  }
  if (result) {
    out.error = "read: " + result.message();
    return out;
  }
  auto message = parser.release();
  out.status = message.result_int();
  out.keep_alive = message.keep_alive();
  out.body = std::move(message.body());
  out.headers = std::move(static_cast<http::fields&>(message));
  return out;
}

TestResponse HttpTestClient::Send(http::verb method, std::string_view target, std::string body,
                                  const HeaderList& headers) {
  if (!connect_error_.empty()) return Failed(connect_error_);
  http::request<http::string_body> request(method, target, 11);
  request.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = std::move(body);
  if (method == http::verb::post || !request.body().empty()) request.prepare_payload();
  bool done = false;
  error_code result;
  http::async_write(socket_, request, [&](error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done)) return Failed("write timed out");
  if (result) return Failed("write: " + result.message());
  return ReadResponse();
}

bool HttpTestClient::WaitForClose() {
  char scratch[4096];
  for (;;) {
    bool done = false;
    error_code result;
    socket_.async_read_some(net::buffer(scratch), [&](error_code ec, size_t) {
      result = ec;
      done = true;
    });
    if (!RunUntil(done)) return false;
    if (result) return true;
  }
}

void HttpTestClient::Close() {
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

TestResponse FetchOnce(uint16_t port, http::verb method, std::string_view target, std::string body,
                       const HeaderList& headers) {
  HttpTestClient client(port);
  return client.Send(method, target, std::move(body), headers);
}

}  // namespace weft::testing
