#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "loadgen/transport.h"

namespace weft {

// The server's address as --url gives it: [http://]host[:port][/base/path].
struct HttpUrl {
  std::string host;  // as in the Host header; an IPv6 address keeps its brackets
  uint16_t port = 80;
  std::string base_path;  // "" or "/prefix", without a trailing slash

  std::string ToString() const;
};

// InvalidArgument for a malformed URL; Unimplemented for https (TLS is not built in).
Result<HttpUrl> ParseHttpUrl(std::string_view text);

// HTTP/1.1 over TCP with Boost.Beast: async, keep-alive, one exchange at a time per connection (no pipelining,
// as Triton's and weft's servers answer one request at a time per connection). The host is resolved once.
class HttpTransport final : public Transport {
 public:
  // Unavailable when the host does not resolve. `headers` go with every request.
  static Result<std::unique_ptr<HttpTransport>> Create(const HttpUrl& url,
                                                       std::vector<std::pair<std::string, std::string>> headers = {});

  std::shared_ptr<const WireRequest> Encode(const PreparedRequest& request) const override;
  std::shared_ptr<Channel> OpenChannel(boost::asio::io_context& io) const override;

 private:
  HttpTransport(HttpUrl url, std::vector<boost::asio::ip::tcp::endpoint> endpoints, std::string extra_headers);

  const HttpUrl url_;
  const std::string extra_headers_;  // "Name: value\r\n" lines
  const std::shared_ptr<const std::vector<boost::asio::ip::tcp::endpoint>> endpoints_;
};

}  // namespace weft
