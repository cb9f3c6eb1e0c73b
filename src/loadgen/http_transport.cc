#include "loadgen/http_transport.h"

#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/optional.hpp>
#include <charconv>
#include <optional>

#include "base/log.h"

namespace weft {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

std::string HttpUrl::ToString() const { return "http://" + host + ":" + std::to_string(port) + base_path; }

Result<HttpUrl> ParseHttpUrl(std::string_view text) {
  std::string_view rest = text;
  if (size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    std::string_view name = rest.substr(0, scheme);
    if (name == "https") return Unimplemented("https is not supported; use http:// (or a TLS proxy)");
    if (name != "http") return InvalidArgument("--url: unsupported scheme '" + std::string(name) + "'");
    rest.remove_prefix(scheme + 3);
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);

  HttpUrl url;
  std::string_view port;
  if (authority.starts_with('[')) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("--url: unclosed '[' in '" + std::string(text) + "'");
    url.host = std::string(authority.substr(0, close + 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return InvalidArgument("--url: unexpected text after ']' in '" + std::string(text) + "'");
      port = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty() || url.host == "[]") return InvalidArgument("--url: no host in '" + std::string(text) + "'");
  if (authority.find(':') != std::string_view::npos && !authority.starts_with('[') && port.empty()) {
    return InvalidArgument("--url: empty port in '" + std::string(text) + "'");
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("--url: bad port '" + std::string(port) + "'");
    }
    url.port = static_cast<uint16_t>(value);
  }
  url.base_path = std::string(path);
  return url;
}

namespace {

// The largest answer body read: a gRPC message's largest, so that both transports take the same answers. Larger
// ones fail their exchange (kIo, "body limit exceeded") and the run goes on.
constexpr uint64_t kMaxAnswerBytes = (uint64_t{4} << 30) - 1;
// Reserved up front at most, whatever the answer declares: the rest grows as bytes arrive, so that memory follows
// what was received, not what a header claimed.
constexpr uint64_t kMaxReservedBytes = uint64_t{64} << 20;

// A string body whose reader does not reserve a declared length beyond kMaxReservedBytes (Beast's string_body
// reserves all of it, which a Content-Length of 10^15 turns into std::bad_alloc out of the io thread).
struct AnswerBody {
  using value_type = std::string;

  class reader {
   public:
    template <bool kIsRequest, typename Fields>
    reader(http::header<kIsRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<uint64_t>& length, error_code& ec) {
      if (length) body_.reserve(static_cast<size_t>(std::min(*length, kMaxReservedBytes)));
      ec = {};
    }

    template <typename ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, error_code& ec) {
      // The parser's body limit (kMaxAnswerBytes) bounds the size before any byte is put.
      const size_t size = asio::buffer_size(buffers);
      for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
        const asio::const_buffer piece = *it;
        body_.append(static_cast<const char*>(piece.data()), piece.size());  // grows by doubling
      }
      ec = {};
      return size;
    }

    void finish(error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

class HttpWireRequest final : public WireRequest {
 public:
  std::string head;  // request line and header fields, ending with the empty line
  std::string body;
};

// One TCP connection. Each asynchronous operation holds the connection it runs on, so that an operation that
// finishes after its connection was dropped (a timeout) touches only that dropped connection, never its successor.
struct Connection {
  explicit Connection(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  boost::beast::flat_buffer buffer;
  std::optional<http::response_parser<AnswerBody>> parser;
  bool reused = false;  // an exchange completed on it before: the server may have closed it while idle
};

class HttpChannel final : public Channel, public std::enable_shared_from_this<HttpChannel> {
 public:
  HttpChannel(asio::io_context& io, std::shared_ptr<const std::vector<tcp::endpoint>> endpoints)
      : io_(io), timer_(io), endpoints_(std::move(endpoints)) {}

  void Send(std::shared_ptr<const WireRequest> request, SteadyTime deadline,
            std::function<void(TransportReply)> done) override {
    WEFT_CHECK(!done_) << "HttpChannel::Send while an exchange is in flight";
    request_ = std::static_pointer_cast<const HttpWireRequest>(std::move(request));
    done_ = std::move(done);
    ++exchange_;
    retried_ = false;
    timer_.expires_at(deadline);
    timer_.async_wait([self = shared_from_this(), exchange = exchange_](error_code ec) {
      if (!ec) self->OnDeadline(exchange);
    });
    if (connection_) {
      Write(connection_, exchange_);
    } else {
      Connect(exchange_);
    }
  }

  void Close() override {
    ++exchange_;
    done_ = nullptr;
    timer_.cancel();
    DropConnection();
  }

 private:
  void Connect(uint64_t exchange) {
    auto connection = std::make_shared<Connection>(io_);
    connection_ = connection;
    asio::async_connect(connection->socket, *endpoints_,
                        [self = shared_from_this(), connection, exchange](error_code ec, const tcp::endpoint&) {
                          if (!self->Current(connection, exchange)) return;
                          if (ec) {
                            self->DropConnection();
                            return self->Fail(TransportReply::Failure::kConnect, "connect: " + ec.message());
                          }
                          error_code ignored;
                          connection->socket.set_option(tcp::no_delay(true), ignored);
                          self->Write(connection, exchange);
                        });
  }

  void Write(const std::shared_ptr<Connection>& connection, uint64_t exchange) {
    connection->parser.emplace();
    connection->parser->body_limit(kMaxAnswerBytes);
    std::array<asio::const_buffer, 2> buffers{asio::buffer(request_->head), asio::buffer(request_->body)};
    // request_ stays alive until the exchange ends: the buffers point into it.
    asio::async_write(connection->socket, buffers,
                      [self = shared_from_this(), connection, exchange](error_code ec, size_t) {
                        if (!self->Current(connection, exchange)) return;
                        if (ec) return self->OnConnectionError(connection, ec, "write");
                        self->Read(connection, exchange);
                      });
  }

  void Read(const std::shared_ptr<Connection>& connection, uint64_t exchange) {
    // Beast reads only as much as the buffer has room for: without room, a large answer arrives in pieces of a few
    // hundred bytes, and the client, not the server, becomes what a benchmark measures.
    connection->buffer.reserve(64 << 10);
    http::async_read(connection->socket, connection->buffer, *connection->parser,
                     [self = shared_from_this(), connection, exchange](error_code ec, size_t) {
                       if (!self->Current(connection, exchange)) return;
                       if (ec) return self->OnConnectionError(connection, ec, "read");
                       auto& response = connection->parser->get();
                       TransportReply reply;
                       reply.status = response.result_int();
                       reply.body = std::move(response.body());
                       if (response.keep_alive()) {
                         connection->reused = true;
                       } else {
                         self->DropConnection();
                       }
                       self->Finish(std::move(reply));
                     });
  }

  // A kept-alive connection that the server closed while it was idle fails the next exchange before any answer
  // byte arrives; that is not the server failing this request, so it is retried once on a new connection.
  void OnConnectionError(const std::shared_ptr<Connection>& connection, error_code ec, const char* what) {
    bool nothing_answered = !connection->parser || !connection->parser->got_some();
    bool stale = connection->reused && nothing_answered && !retried_;
    DropConnection();
    if (stale) {
      retried_ = true;
      return Connect(exchange_);
    }
    Fail(TransportReply::Failure::kIo, std::string(what) + ": " + ec.message());
  }

  void OnDeadline(uint64_t exchange) {
    if (exchange != exchange_ || !done_) return;
    DropConnection();
    Fail(TransportReply::Failure::kTimeout, "no answer before the deadline");
  }

  bool Current(const std::shared_ptr<Connection>& connection, uint64_t exchange) const {
    return exchange == exchange_ && done_ && connection == connection_;
  }

  void DropConnection() {
    if (!connection_) return;
    error_code ignored;
    connection_->socket.close(ignored);  // pending operations on it complete with operation_aborted
    connection_.reset();
  }

  void Fail(TransportReply::Failure failure, std::string error) {
    TransportReply reply;
    reply.failure = failure;
    reply.error = std::move(error);
    Finish(std::move(reply));
  }

  void Finish(TransportReply reply) {
    timer_.cancel();
    request_.reset();
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(reply));  // may call Send again
  }

  asio::io_context& io_;
  asio::steady_timer timer_;
  const std::shared_ptr<const std::vector<tcp::endpoint>> endpoints_;
  std::shared_ptr<Connection> connection_;  // null when not connected
  std::shared_ptr<const HttpWireRequest> request_;
  std::function<void(TransportReply)> done_;  // set while an exchange is in flight
  uint64_t exchange_ = 0;                     // tells the operations of an ended exchange from those of the current one
  bool retried_ = false;
};

}  // namespace

HttpTransport::HttpTransport(HttpUrl url, std::vector<tcp::endpoint> endpoints, std::string extra_headers)
    : url_(std::move(url)),
      extra_headers_(std::move(extra_headers)),
      endpoints_(std::make_shared<const std::vector<tcp::endpoint>>(std::move(endpoints))) {}

Result<std::unique_ptr<HttpTransport>> HttpTransport::Create(const HttpUrl& url,
                                                             std::vector<std::pair<std::string, std::string>> headers) {
  std::string host = url.host;
  if (host.starts_with('[')) host = host.substr(1, host.size() - 2);
  asio::io_context io;
  tcp::resolver resolver(io);
  error_code ec;
  auto results = resolver.resolve(host, std::to_string(url.port), ec);
  if (ec || results.empty()) {
    return Unavailable("cannot resolve '" + host + "': " + (ec ? ec.message() : "no addresses"));
  }
  std::vector<tcp::endpoint> endpoints;
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  std::string extra;
  for (const auto& [name, value] : headers) extra += name + ": " + value + "\r\n";
  return std::unique_ptr<HttpTransport>(new HttpTransport(url, std::move(endpoints), std::move(extra)));
}

std::shared_ptr<const WireRequest> HttpTransport::Encode(const PreparedRequest& request) const {
  auto wire = std::make_shared<HttpWireRequest>();
  std::string& head = wire->head;
  head = request.method + " " + request.target + " HTTP/1.1\r\nHost: " + url_.host + ":" + std::to_string(url_.port) +
         "\r\nUser-Agent: weft-bench\r\n" + extra_headers_;
  for (const auto& [name, value] : request.headers) head += name + ": " + value + "\r\n";
  if (!request.body.empty() || request.method != "GET") {
    head += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  head += "\r\n";
  wire->body = request.body;
  return wire;
}

std::shared_ptr<Channel> HttpTransport::OpenChannel(asio::io_context& io) const {
  return std::make_shared<HttpChannel>(io, endpoints_);
}

}  // namespace weft
