#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <stdlib.h>

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "auth/certificate_subject.h"
#include "frontend/http/http_server.h"
#include "frontend/http/testing/held_responders.h"
#include "frontend/http/testing/http_test_client.h"
#include "frontend/http/testing/test_certificates.h"
#include "frontend/http/testing/tls_test_client.h"
#include "frontend/http/tls_context.h"

namespace weft {
namespace {

namespace http = boost::beast::http;
using testing::CertificateFiles;
using testing::HttpTestClient;
using testing::TestCertificateAuthority;
using testing::TestResponse;
using testing::TlsClientOptions;
using testing::TlsTestClient;
using namespace std::chrono_literals;

// /hold keeps the request in flight until the test releases it; every other path answers with the body and what
// the server knows of the client.
class IdentityEchoHandler : public HttpHandler {
 public:
  void Handle(HttpRequest request, HttpResponder responder) override {
    if (request.path() == "/hold") return held.Hold(std::move(responder), request.cancel);
    HttpResponse r;
    r.content_type = "text/plain";
    r.headers.emplace_back("X-Client-Subject", request.client_subject);
    r.headers.emplace_back("X-Peer-Address", request.peer_address);
    r.body = std::string(request.body->view());
    responder.Send(std::move(r));
  }

  testing::HeldResponders held;
};

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// As an operator's tooling replaces a file: written beside it, then renamed over it.
void ReplaceFile(const std::string& path, const std::string& content) {
  WriteFile(path + ".new", content);
  std::filesystem::rename(path + ".new", path);
}

// Certificates made once per test in a fresh directory: a CA, two server certificates it signs (CN=server-a and
// CN=server-b, for 127.0.0.1 and localhost), a client certificate it signs (CN=camera-7,O=acme) and one with the
// same subject signed by another CA. The server reads server.crt/server.key, which start as server-a.
class TlsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/weft_tls_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto ca = TestCertificateAuthority::Create(dir_, "ca", {.subject = {{"CN", "weft test CA"}}});
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    auto other_ca = TestCertificateAuthority::Create(dir_, "other-ca", {.subject = {{"CN", "another CA"}}});
    ASSERT_TRUE(other_ca.ok()) << other_ca.status().ToString();
    ca_file_ = ca->files().cert_file;
    const std::string alt_names = "DNS:localhost,IP:127.0.0.1";
    auto server_a = ca->Issue("server-a", {.subject = {{"CN", "server-a"}}, .serial = 10, .alt_names = alt_names});
    auto server_b = ca->Issue("server-b", {.subject = {{"CN", "server-b"}}, .serial = 11, .alt_names = alt_names});
    auto camera = ca->Issue("camera-7", {.subject = {{"O", "acme"}, {"CN", "camera-7"}}, .serial = 12});
    auto stranger = other_ca->Issue("stranger", {.subject = {{"O", "acme"}, {"CN", "camera-7"}}, .serial = 13});
    for (const auto* issued : {&server_a, &server_b, &camera, &stranger}) {
      ASSERT_TRUE(issued->ok()) << issued->status().ToString();
    }
    server_a_ = *server_a;
    server_b_ = *server_b;
    camera_ = *camera;
    stranger_ = *stranger;
    cert_file_ = dir_ + "/server.crt";
    key_file_ = dir_ + "/server.key";
    WriteFile(cert_file_, ReadFile(server_a_.cert_file));
    WriteFile(key_file_, ReadFile(server_a_.key_file));
  }

  void TearDown() override {
    if (server_) server_->Stop();
    handler_.held.ReleaseHeld(200);
    server_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  HttpServer::Options TlsOptions() const {
    HttpServer::Options options;
    options.address = "127.0.0.1";
    options.tls.cert_file = cert_file_;
    options.tls.key_file = key_file_;
    options.tls.reload_interval = 20ms;
    return options;
  }

  void StartServer(HttpServer::Options options) {
    server_ = std::make_unique<HttpServer>(options, &handler_);
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
  }

  // Verifies the server against the test CA.
  TlsClientOptions Trusting() const { return {.ca_file = ca_file_}; }
  TlsClientOptions WithCertificate(const CertificateFiles& files) const {
    return {.ca_file = ca_file_, .cert_file = files.cert_file, .key_file = files.key_file};
  }

  // One request on a fresh TLS connection.
  TestResponse FetchOverTls(const TlsClientOptions& options, std::string body = "hello") {
    TlsTestClient client(server_->port(), options, 10s);
    return client.Post("/echo", std::move(body));
  }

  void ExpectHealthy() {
    TestResponse r = FetchOverTls(Trusting(), "still here");
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "still here");
  }

  // Waits (up to 30 s) until a new connection is served with the certificate of `subject`; every connection on
  // the way must be served.
  bool WaitForServerCertificate(const std::string& subject) {
    for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
      TlsTestClient client(server_->port(), Trusting(), 10s);
      TestResponse r = client.Get("/echo");
      EXPECT_TRUE(r.ok()) << r.error;
      if (!r.ok()) return false;
      if (client.server_subject() == subject) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

  std::string dir_;
  std::string ca_file_;
  std::string cert_file_;
  std::string key_file_;
  CertificateFiles server_a_, server_b_, camera_, stranger_;
  IdentityEchoHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

using HttpServerTlsTest = TlsFixture;

TEST_F(HttpServerTlsTest, ServesRequestsOverTlsWithKeepAlive) {
  StartServer(TlsOptions());
  TlsTestClient client(server_->port(), Trusting());
  ASSERT_EQ(client.connect_error(), "");
  EXPECT_EQ(client.server_subject(), "CN=server-a");
  for (std::string body : {"one", "two"}) {
    TestResponse r = client.Post("/echo", body);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, body);
    EXPECT_TRUE(r.keep_alive);
    EXPECT_EQ(r.header("X-Peer-Address"), "127.0.0.1");
    EXPECT_EQ(r.header("X-Client-Subject"), "");
  }
  EXPECT_EQ(server_->open_connections(), 1u);  // both requests came over the one connection
}

TEST_F(HttpServerTlsTest, Tls12IsServedWithModernCiphersOnly) {
  StartServer(TlsOptions());
  TestResponse r = FetchOverTls({.ca_file = ca_file_, .max_version = TLS1_2_VERSION});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
  // CBC with SHA-1 MACs: not in the server's list.
  TlsTestClient weak(server_->port(),
                     {.ca_file = ca_file_, .max_version = TLS1_2_VERSION, .tls12_ciphers = "ECDHE-ECDSA-AES128-SHA"});
  EXPECT_NE(weak.connect_error(), "");
  ExpectHealthy();
}

TEST_F(HttpServerTlsTest, AClientOfferingOnlyTls11IsRefused) {
  StartServer(TlsOptions());
  TlsTestClient old(server_->port(), {.ca_file = ca_file_, .max_version = TLS1_1_VERSION});
  // The server's alert, not the client's own refusal: the client did offer TLS 1.1.
  EXPECT_NE(old.connect_error().find("protocol version"), std::string::npos) << old.connect_error();
  ExpectHealthy();
}

TEST_F(HttpServerTlsTest, PlainHttpToTheTlsPortIsClosedAndTlsIsStillServed) {
  StartServer(TlsOptions());
  HttpTestClient plain(server_->port(), 10s);
  ASSERT_EQ(plain.WriteRaw("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  // Closed (end of stream, or a reset for the request bytes it left unread), not answered and not left open.
  TestResponse r = plain.ReadResponse();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error, "read timed out");
  ExpectHealthy();
}

TEST_F(HttpServerTlsTest, AHandshakeThatNeverComesIsBoundedByTheIoTimeout) {
  HttpServer::Options options = TlsOptions();
  options.io_timeout = 200ms;
  StartServer(options);
  HttpTestClient silent(server_->port(), 10s);
  ASSERT_EQ(silent.connect_error(), "");
  EXPECT_TRUE(silent.WaitForClose());
  ExpectHealthy();
}

TEST_F(HttpServerTlsTest, RequiredClientCertificatesAreVerifiedAndNamedToTheHandler) {
  HttpServer::Options options = TlsOptions();
  options.tls.client_ca_file = ca_file_;
  options.tls.require_client_cert = true;
  StartServer(options);

  EXPECT_FALSE(FetchOverTls(Trusting()).ok()) << "no client certificate";
  EXPECT_FALSE(FetchOverTls(WithCertificate(stranger_)).ok()) << "a certificate from another CA";

  TlsTestClient client(server_->port(), WithCertificate(camera_));
  for (int i = 0; i < 2; ++i) {  // the identity holds for every request of the connection
    TestResponse r = client.Post("/echo", "hi");
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.header("X-Client-Subject"), "CN=camera-7,O=acme");
    EXPECT_EQ(r.header("X-Peer-Address"), "127.0.0.1");
  }
}

TEST_F(HttpServerTlsTest, OptionalClientCertificatesAreVerifiedWhenSent) {
  HttpServer::Options options = TlsOptions();
  options.tls.client_ca_file = ca_file_;
  options.tls.require_client_cert = false;
  StartServer(options);

  TestResponse anonymous = FetchOverTls(Trusting());
  ASSERT_TRUE(anonymous.ok()) << anonymous.error;
  EXPECT_EQ(anonymous.status, 200u);
  EXPECT_EQ(anonymous.header("X-Client-Subject"), "");

  TestResponse named = FetchOverTls(WithCertificate(camera_));
  ASSERT_TRUE(named.ok()) << named.error;
  EXPECT_EQ(named.header("X-Client-Subject"), "CN=camera-7,O=acme");

  EXPECT_FALSE(FetchOverTls(WithCertificate(stranger_)).ok()) << "a certificate sent must verify";
}

TEST_F(HttpServerTlsTest, ANewCertificateServesNewConnectionsWhileOpenOnesKeepTheirs) {
  StartServer(TlsOptions());
  TlsTestClient open(server_->port(), Trusting());
  ASSERT_TRUE(open.Get("/echo").ok());
  ASSERT_EQ(open.server_subject(), "CN=server-a");

  // The certificate first, then the key: in between the pair does not match and the old one stays in use.
  ReplaceFile(cert_file_, ReadFile(server_b_.cert_file));
  ReplaceFile(key_file_, ReadFile(server_b_.key_file));
  EXPECT_TRUE(WaitForServerCertificate("CN=server-b"));

  TestResponse r = open.Post("/echo", "still open");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "still open");
  EXPECT_EQ(open.server_subject(), "CN=server-a");
}

TEST_F(HttpServerTlsTest, ABrokenCertificateFileKeepsTheOldCertificateInUse) {
  HttpServer::Options options = TlsOptions();
  StartServer(options);
  WriteFile(cert_file_, "-----BEGIN CERTIFICATE-----\nhalf writ");
  // Many looks at the broken file: every connection meanwhile still gets the old certificate.
  for (auto until = std::chrono::steady_clock::now() + 20 * options.tls.reload_interval;
       std::chrono::steady_clock::now() < until;) {
    TlsTestClient client(server_->port(), Trusting(), 10s);
    ASSERT_TRUE(client.Get("/echo").ok());
    EXPECT_EQ(client.server_subject(), "CN=server-a");
  }
  // The reloading goes on: a good file is taken up.
  ReplaceFile(key_file_, ReadFile(server_b_.key_file));
  ReplaceFile(cert_file_, ReadFile(server_b_.cert_file));
  EXPECT_TRUE(WaitForServerCertificate("CN=server-b"));
}

TEST_F(HttpServerTlsTest, StartFailsCleanlyWhenTheFilesDoNotLoad) {
  HttpServer::Options options = TlsOptions();
  options.tls.key_file = dir_ + "/missing.key";
  HttpServer missing_key(options, &handler_);
  Status status = missing_key.Start();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("missing.key"), std::string::npos) << status.ToString();

  options = TlsOptions();
  options.tls.key_file = server_b_.key_file;
  HttpServer mismatch(options, &handler_);
  status = mismatch.Start();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("does not match"), std::string::npos) << status.ToString();

  options = TlsOptions();
  options.tls.client_ca_file = dir_ + "/no-such-ca.crt";
  HttpServer missing_ca(options, &handler_);
  status = missing_ca.Start();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("no-such-ca.crt"), std::string::npos) << status.ToString();
}

TEST_F(HttpServerTlsTest, ThePlainServerFillsThePeerAddress) {
  HttpServer::Options options;
  options.address = "127.0.0.1";
  StartServer(options);
  TestResponse r = testing::FetchOnce(server_->port(), http::verb::post, "/echo", "plain");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.header("X-Peer-Address"), "127.0.0.1");
  EXPECT_EQ(r.header("X-Client-Subject"), "");
}

// What the server does over TCP works the same over TLS.

TEST_F(HttpServerTlsTest, ContinueChunkedPipelinedAndLargeBodiesWorkOverTls) {
  StartServer(TlsOptions());
  TlsTestClient client(server_->port(), Trusting());
  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"), "");
  TestResponse interim = client.ReadResponse();
  ASSERT_TRUE(interim.ok()) << interim.error;
  EXPECT_EQ(interim.status, 100u);
  ASSERT_EQ(client.WriteRaw("data"), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "data");

  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "");
  r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "hello world");

  ASSERT_EQ(client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
                            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo"),
            "");
  TestResponse first = client.ReadResponse();
  TestResponse second = client.ReadResponse();
  ASSERT_TRUE(first.ok() && second.ok()) << first.error << second.error;
  EXPECT_EQ(first.body, "one");
  EXPECT_EQ(second.body, "two");

  std::string large(3 << 20, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 7 + i / 4096);
  r = client.Post("/echo", large);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(r.body == large);
}

TEST_F(HttpServerTlsTest, OversizedBodyGets413ThenCloseNotify) {
  HttpServer::Options options = TlsOptions();
  options.max_body_bytes = 1000;
  StartServer(options);
  TlsTestClient client(server_->port(), Trusting());
  ASSERT_EQ(
      client.WriteRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n" + std::string(20000, 'a')), "");
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 413u);
  EXPECT_FALSE(r.keep_alive);
  // The client keeps sending what it announced; the server drains it and closes.
  EXPECT_EQ(client.WriteRaw(std::string(30000, 'a')), "");
  bool close_notify = false;
  EXPECT_TRUE(client.WaitForClose(&close_notify));
  EXPECT_TRUE(close_notify);
  ExpectHealthy();
}

TEST_F(HttpServerTlsTest, ClientLeavingWhileInFlightCancelsTheRequest) {
  StartServer(TlsOptions());
  std::shared_ptr<CancelToken> cancel;
  {
    TlsTestClient client(server_->port(), Trusting());
    ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
    cancel = handler_.held.WaitHeld(1);
    ASSERT_NE(cancel, nullptr);
    EXPECT_FALSE(cancel->cancelled());
  }
  for (int i = 0; i < 1000 && !cancel->cancelled(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(cancel->cancelled());
  handler_.held.ReleaseHeld(200);
  ExpectHealthy();
}

TEST_F(HttpServerTlsTest, StopAnswersTheRequestInFlightAndClosesWithCloseNotify) {
  StartServer(TlsOptions());
  TlsTestClient idle(server_->port(), Trusting());
  ASSERT_TRUE(idle.Get("/echo").ok());
  TlsTestClient client(server_->port(), Trusting());
  ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  auto cancel = handler_.held.WaitHeld(1);
  ASSERT_NE(cancel, nullptr);
  std::jthread stopper([&] { server_->Stop(); });
  bool close_notify = false;
  EXPECT_TRUE(idle.WaitForClose(&close_notify));  // after shutdown_idle_grace
  EXPECT_TRUE(close_notify);
  handler_.held.ReleaseHeld(201);
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 201u);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_FALSE(cancel->cancelled());
  stopper.join();
  EXPECT_TRUE(client.WaitForClose(&close_notify));
  EXPECT_TRUE(close_notify);
}

TEST_F(HttpServerTlsTest, AtTheDeadlineARequestInFlightGets503OverTls) {
  HttpServer::Options options = TlsOptions();
  options.drain_timeout = 100ms;
  StartServer(options);
  TlsTestClient client(server_->port(), Trusting());
  ASSERT_EQ(client.WriteRaw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  auto cancel = handler_.held.WaitHeld(1);
  ASSERT_NE(cancel, nullptr);
  server_->Stop();
  EXPECT_TRUE(cancel->cancelled());
  TestResponse r = client.ReadResponse();
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 503u);
}

TEST_F(HttpServerTlsTest, ConnectionsPastTheLimitAreClosedOverTlsToo) {
  HttpServer::Options options = TlsOptions();
  options.max_connections = 1;
  StartServer(options);
  TlsTestClient first(server_->port(), Trusting());
  ASSERT_TRUE(first.Get("/echo").ok());
  TlsTestClient second(server_->port(), Trusting(), 10s);
  EXPECT_FALSE(second.Get("/echo").ok());
  TestResponse r = first.Post("/echo", "first still served");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.body, "first still served");
}

// The reloading itself, without a server or a clock.

using ServerTlsContextTest = TlsFixture;

std::string SubjectServedBy(const boost::asio::ssl::context& context) {
  return CertificateSubject(SSL_CTX_get0_certificate(const_cast<boost::asio::ssl::context&>(context).native_handle()));
}

TEST_F(ServerTlsContextTest, ReloadsOnlyFilesThatChangedAndLoad) {
  auto loaded = ServerTlsContext::Load({.cert_file = cert_file_, .key_file = key_file_});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ServerTlsContext& tls = **loaded;
  auto first = tls.current();
  EXPECT_EQ(SubjectServedBy(*first), "CN=server-a");
  EXPECT_FALSE(tls.ReloadIfChanged());  // nothing changed

  WriteFile(cert_file_, "-----BEGIN CERTIFICATE-----\nhalf writ");
  EXPECT_FALSE(tls.ReloadIfChanged());
  EXPECT_EQ(tls.current(), first);

  ReplaceFile(cert_file_, ReadFile(server_b_.cert_file));  // the key is still server-a's
  EXPECT_FALSE(tls.ReloadIfChanged());
  EXPECT_EQ(tls.current(), first);

  ReplaceFile(key_file_, ReadFile(server_b_.key_file));
  EXPECT_TRUE(tls.ReloadIfChanged());
  EXPECT_EQ(SubjectServedBy(*tls.current()), "CN=server-b");
  EXPECT_EQ(SubjectServedBy(*first), "CN=server-a");  // held by connections accepted before, unchanged
  EXPECT_FALSE(tls.ReloadIfChanged());
}

}  // namespace
}  // namespace weft
