#include "frontend/http/testing/tls_test_client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>

#include "auth/certificate_subject.h"

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

// Every setting is made through OpenSSL, which reports errors as values; the first one wins.
std::string Configure(SSL_CTX* context, const TlsClientOptions& options) {
  if (options.max_version != 0) {
    SSL_CTX_set_max_proto_version(context, options.max_version);
    if (options.max_version < TLS1_2_VERSION) {
      SSL_CTX_set_min_proto_version(context, 0);
      SSL_CTX_set_security_level(context, 0);
    }
  }
  if (!options.tls12_ciphers.empty() && SSL_CTX_set_cipher_list(context, options.tls12_ciphers.c_str()) != 1) {
    return "bad cipher list " + options.tls12_ciphers;
  }
  if (!options.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(context, options.ca_file.c_str(), nullptr) != 1) {
      return "cannot load " + options.ca_file;
    }
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(context), "127.0.0.1");
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context, options.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(context, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return "cannot load " + options.cert_file + " or " + options.key_file;
    }
  }
  return {};
}

}  // namespace

TlsTestClient::TlsTestClient(uint16_t port, TlsClientOptions options, std::chrono::milliseconds timeout)
    : timeout_(timeout), context_(net::ssl::context::tls_client) {
  connect_error_ = Configure(context_.native_handle(), options);
  stream_.emplace(ioc_, context_);  // after the context is configured: the stream copies its settings
  if (!connect_error_.empty()) return;
  error_code ec;
  stream_->next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) {
    connect_error_ = "connect: " + ec.message();
    return;
  }
  stream_->next_layer().set_option(tcp::no_delay(true), ec);
  bool done = false;
  error_code result;
  stream_->async_handshake(net::ssl::stream_base::client, [&](error_code e) {
    result = e;
    done = true;
  });
  if (!RunUntil(done)) {
    connect_error_ = "handshake timed out";
  } else if (result) {
    connect_error_ = "handshake: " + result.message();
  }
}

TlsTestClient::~TlsTestClient() { Close(); }

std::string TlsTestClient::server_subject() {
  if (!stream_) return {};
  return CertificateSubject(SSL_get0_peer_certificate(stream_->native_handle()));
}

bool TlsTestClient::RunUntil(const bool& done) {
  ioc_.restart();
  ioc_.run_for(timeout_);
  if (done) return true;
  error_code ec;
  stream_->next_layer().cancel(ec);
  ioc_.restart();
  ioc_.run();  // lets the cancelled operation complete
  return false;
}

std::string TlsTestClient::WriteRaw(std::string_view bytes) {
  if (!connect_error_.empty()) return connect_error_;
  bool done = false;
  error_code result;
  net::async_write(*stream_, net::buffer(bytes.data(), bytes.size()), [&](error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done)) return "write timed out";
  return result ? "write: " + result.message() : std::string();
}

TestResponse TlsTestClient::ReadResponse() {
  if (!connect_error_.empty()) return Failed(connect_error_);
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  bool done = false;
  error_code result;
  http::async_read(*stream_, buffer_, parser, [&](error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done)) return Failed("read timed out");
  if (result) return Failed("read: " + result.message());
  auto message = parser.release();
  TestResponse out;
  out.status = message.result_int();
  out.keep_alive = message.keep_alive();
  out.body = std::move(message.body());
  out.headers = std::move(static_cast<http::fields&>(message));
  return out;
}

TestResponse TlsTestClient::Send(http::verb method, std::string_view target, std::string body,
                                 const HeaderList& headers) {
  if (!connect_error_.empty()) return Failed(connect_error_);
  http::request<http::string_body> request(method, target, 11);
  request.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = std::move(body);
  if (method == http::verb::post || !request.body().empty()) request.prepare_payload();
  bool done = false;
  error_code result;
  http::async_write(*stream_, request, [&](error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done)) return Failed("write timed out");
  if (result) return Failed("write: " + result.message());
  return ReadResponse();
}

bool TlsTestClient::WaitForClose(bool* close_notify) {
  if (close_notify != nullptr) *close_notify = false;
  char scratch[4096];
  for (;;) {
    bool done = false;
    error_code result;
    stream_->async_read_some(net::buffer(scratch), [&](error_code ec, size_t) {
      result = ec;
      done = true;
    });
    if (!RunUntil(done)) return false;
    if (!result) continue;
    // OpenSSL reports a close_notify as the end of the stream, a socket closed without one as truncation.
    if (close_notify != nullptr) *close_notify = result == net::error::eof;
    return true;
  }
}

void TlsTestClient::Close() {
  if (!stream_) return;
  error_code ec;
  stream_->next_layer().shutdown(tcp::socket::shutdown_both, ec);
  stream_->next_layer().close(ec);
}

}  // namespace weft::testing
