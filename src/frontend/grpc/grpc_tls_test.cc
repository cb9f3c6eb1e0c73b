// The gRPC port with TLS and mTLS: a real GrpcServer, real certificates made here with OpenSSL, the generated client
// over gRPC's SSL credentials. And who a call comes from (peer_identity.h), on both kinds of port.

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "frontend/grpc/grpc_acceptor.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/grpc/peer_identity.h"
#include "frontend/grpc/tls_credentials.h"
#include "grpc_service.grpc.pb.h"
#include "metrics/metrics.h"

namespace weft {
namespace {

using namespace std::chrono_literals;

// ---- Certificates ----

// A key and its certificate, as objects (to sign others) and as PEM (for files and gRPC).
struct Certified {
  std::shared_ptr<EVP_PKEY> key;
  std::shared_ptr<X509> certificate;
  std::string key_pem;
  std::string certificate_pem;
};

enum class Kind { kCa, kServer, kClient };

std::string PemOf(const std::function<int(BIO*)>& write) {
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), &BIO_free);
  EXPECT_EQ(write(out.get()), 1);
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

void AddExtension(X509* certificate, X509V3_CTX* context, int nid, const char* value) {
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, context, nid, value);
  ASSERT_NE(extension, nullptr) << value;
  EXPECT_EQ(X509_add_ext(certificate, extension, -1), 1);
  X509_EXTENSION_free(extension);
}

// `names` in the order they are added to the subject; RFC 2253 prints them last first.
Certified MakeCertified(const std::vector<std::pair<std::string, std::string>>& names, Kind kind, long serial,
                        const Certified* issuer) {
  Certified out;
  out.key.reset(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  EXPECT_NE(out.key, nullptr);
  out.certificate.reset(X509_new(), &X509_free);
  X509* certificate = out.certificate.get();
  X509_set_version(certificate, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(certificate), serial);
  X509_gmtime_adj(X509_getm_notBefore(certificate), -3600);
  X509_gmtime_adj(X509_getm_notAfter(certificate), 24 * 3600);
  X509_set_pubkey(certificate, out.key.get());
  X509_NAME* subject = X509_get_subject_name(certificate);
  for (const auto& [field, value] : names) {
    X509_NAME_add_entry_by_txt(subject, field.c_str(), MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  }
  X509* signer = issuer ? issuer->certificate.get() : certificate;
  X509_set_issuer_name(certificate, X509_get_subject_name(signer));
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, signer, certificate, nullptr, nullptr, 0);
  switch (kind) {
    case Kind::kCa:
      AddExtension(certificate, &context, NID_basic_constraints, "critical,CA:TRUE");
      AddExtension(certificate, &context, NID_key_usage, "critical,keyCertSign,cRLSign");
      break;
    case Kind::kServer:
      AddExtension(certificate, &context, NID_basic_constraints, "CA:FALSE");
      AddExtension(certificate, &context, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
      AddExtension(certificate, &context, NID_ext_key_usage, "serverAuth");
      break;
    case Kind::kClient:
      AddExtension(certificate, &context, NID_basic_constraints, "CA:FALSE");
      AddExtension(certificate, &context, NID_ext_key_usage, "clientAuth");
      break;
  }
  EXPECT_GT(X509_sign(certificate, issuer ? issuer->key.get() : out.key.get(), EVP_sha256()), 0);
  out.key_pem = PemOf(
      [&](BIO* bio) { return PEM_write_bio_PrivateKey(bio, out.key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  out.certificate_pem = PemOf([&](BIO* bio) { return PEM_write_bio_X509(bio, certificate); });
  return out;
}

// Two CAs, each with a server certificate for 127.0.0.1 and localhost and a client certificate.
struct Pki {
  Certified ca = MakeCertified({{"O", "weft test"}, {"CN", "weft test CA one"}}, Kind::kCa, 1, nullptr);
  Certified other_ca = MakeCertified({{"O", "weft test"}, {"CN", "weft test CA two"}}, Kind::kCa, 2, nullptr);
  Certified server = MakeCertified({{"CN", "localhost"}}, Kind::kServer, 10, &ca);
  Certified renewed_server = MakeCertified({{"CN", "localhost"}}, Kind::kServer, 11, &other_ca);
  Certified camera = MakeCertified({{"O", "acme"}, {"CN", "camera-7"}}, Kind::kClient, 20, &ca);
  Certified stranger = MakeCertified({{"O", "acme"}, {"CN", "camera-7"}}, Kind::kClient, 21, &other_ca);
};

// A directory of files for one test, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "weft_grpc_tls_XXXXXX").string();
    EXPECT_NE(mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  // Writes `text` to `name` in one step (a rename), as a certificate renewal should.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::filesystem::path target = path_ / name;
    const std::filesystem::path staged = path_ / (name + ".new");
    std::ofstream(staged, std::ios::binary | std::ios::trunc) << text;
    std::filesystem::rename(staged, target);
    return target.string();
  }

 private:
  std::filesystem::path path_;
};

// ---- Server and clients ----

// The smallest engine that answers ServerLive, and a GrpcServer in front of it.
class TlsServer {
 public:
  explicit TlsServer(TlsFiles tls, uint16_t port = 0)
      : engine_(Engine::Options{}, &metrics_),
        server_(GrpcServer::Options{.address = "127.0.0.1", .port = port, .tls = std::move(tls)}, &engine_, &metrics_,
                nullptr) {}
  Status Start() { return server_.Start(); }
  uint16_t port() const { return server_.port(); }

 private:
  MetricsRegistry metrics_;
  Engine engine_;
  GrpcServer server_;
};

// A channel of its own (no subchannel shared with another test's channel), so every new channel is a new
// connection with a new handshake.
std::shared_ptr<grpc::Channel> Channel(uint16_t port, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), std::move(credentials), arguments);
}

std::shared_ptr<grpc::Channel> TlsChannel(uint16_t port, const Certified& root, const Certified* client = nullptr) {
  grpc::SslCredentialsOptions ssl{.pem_root_certs = root.certificate_pem,
                                  .pem_private_key = client ? client->key_pem : "",
                                  .pem_cert_chain = client ? client->certificate_pem : ""};
  return Channel(port, grpc::SslCredentials(ssl));
}

// ServerLive over `channel`; the deadline only bounds a hung test.
grpc::Status Live(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 60s);
  inference::ServerLiveRequest request;
  inference::ServerLiveResponse response;
  grpc::Status status = stub->ServerLive(&context, request, &response);
  if (status.ok() && !response.live()) return grpc::Status(grpc::StatusCode::INTERNAL, "answered not live");
  return status;
}

TlsFiles ServerFiles(const TempDir& dir, const Certified& server) {
  return TlsFiles{.cert_file = dir.Write("server.crt", server.certificate_pem),
                  .key_file = dir.Write("server.key", server.key_pem)};
}

// ---- Tests ----

TEST(GrpcTlsTest, ServesOverTlsAndRefusesPlaintext) {
  Pki pki;
  TempDir dir;
  TlsServer server(ServerFiles(dir, pki.server));
  ASSERT_TRUE(server.Start().ok());
  ASSERT_NE(server.port(), 0);

  grpc::Status secure = Live(TlsChannel(server.port(), pki.ca));
  EXPECT_TRUE(secure.ok()) << secure.error_message();
  EXPECT_FALSE(Live(Channel(server.port(), grpc::InsecureChannelCredentials())).ok());
  // A client that trusts another CA does not accept this server.
  EXPECT_FALSE(Live(TlsChannel(server.port(), pki.other_ca)).ok());
}

TEST(GrpcTlsTest, MutualTlsRequiresACertificateFromTheClientCa) {
  Pki pki;
  TempDir dir;
  TlsFiles tls = ServerFiles(dir, pki.server);
  tls.client_ca_file = dir.Write("clients.crt", pki.ca.certificate_pem);
  tls.require_client_cert = true;
  TlsServer server(tls);
  ASSERT_TRUE(server.Start().ok());

  EXPECT_FALSE(Live(TlsChannel(server.port(), pki.ca)).ok());                 // no certificate
  EXPECT_FALSE(Live(TlsChannel(server.port(), pki.ca, &pki.stranger)).ok());  // another CA's
  grpc::Status good = Live(TlsChannel(server.port(), pki.ca, &pki.camera));   // the client CA's
  EXPECT_TRUE(good.ok()) << good.error_message();
  EXPECT_FALSE(Live(Channel(server.port(), grpc::InsecureChannelCredentials())).ok());
}

TEST(GrpcTlsTest, OptionalClientCertificatesAreStillVerified) {
  Pki pki;
  TempDir dir;
  TlsFiles tls = ServerFiles(dir, pki.server);
  tls.client_ca_file = dir.Write("clients.crt", pki.ca.certificate_pem);
  tls.require_client_cert = false;
  TlsServer server(tls);
  ASSERT_TRUE(server.Start().ok());

  EXPECT_TRUE(Live(TlsChannel(server.port(), pki.ca)).ok());
  EXPECT_TRUE(Live(TlsChannel(server.port(), pki.ca, &pki.camera)).ok());
  EXPECT_FALSE(Live(TlsChannel(server.port(), pki.ca, &pki.stranger)).ok());
}

// A renewed certificate is served to new connections without a restart; an open connection keeps working.
TEST(GrpcTlsTest, RenewedCertificateIsUsedByNewConnectionsWhileOpenOnesStay) {
  Pki pki;
  TempDir dir;
  TlsFiles tls = ServerFiles(dir, pki.server);
  tls.reload_interval = 200ms;  // rounded up to gRPC's one second
  TlsServer server(tls);
  ASSERT_TRUE(server.Start().ok());
  std::shared_ptr<grpc::Channel> open = TlsChannel(server.port(), pki.ca);
  ASSERT_TRUE(Live(open).ok());

  // Only the other CA signed the renewed certificate: a client trusting it alone tells which one is served.
  dir.Write("server.key", pki.renewed_server.key_pem);
  dir.Write("server.crt", pki.renewed_server.certificate_pem);
  bool renewed = false;
  for (int attempt = 0; attempt < 120 && !renewed; ++attempt) {
    renewed = Live(TlsChannel(server.port(), pki.other_ca)).ok();
    if (!renewed) std::this_thread::sleep_for(250ms);
  }
  ASSERT_TRUE(renewed) << "the renewed certificate was never served";
  EXPECT_FALSE(Live(TlsChannel(server.port(), pki.ca)).ok());  // the old one is not served any more
  // The connection made before is still the same one: it could not be made again with the old certificate.
  grpc::Status still = Live(open);
  EXPECT_TRUE(still.ok()) << still.error_message();
}

TEST(GrpcTlsTest, StartFailsCleanlyOnBadFilesAndATakenPort) {
  Pki pki;
  TempDir dir;
  const TlsFiles good = ServerFiles(dir, pki.server);
  const std::string garbage = dir.Write("garbage.pem", "not a certificate\n");
  const std::string truncated =
      dir.Write("truncated.crt", pki.server.certificate_pem + "-----BEGIN CERTIFICATE-----\nAAAA\n");

  auto start_fails_naming = [&](TlsFiles tls, const std::string& file) {
    TlsServer server(std::move(tls));
    Status status = server.Start();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
    EXPECT_NE(status.message().find(file), std::string::npos) << status.message();
  };
  TlsFiles tls = good;
  tls.cert_file = (std::filesystem::path(good.cert_file).parent_path() / "missing.crt").string();
  start_fails_naming(tls, tls.cert_file);
  tls = good;
  tls.cert_file = garbage;
  start_fails_naming(tls, garbage);
  tls = good;
  tls.cert_file = truncated;
  start_fails_naming(tls, truncated);
  tls = good;
  tls.key_file = garbage;
  start_fails_naming(tls, garbage);
  tls = good;
  tls.key_file = dir.Write("other.key", pki.camera.key_pem);  // a key, but not the certificate's
  start_fails_naming(tls, tls.key_file);
  tls = good;
  tls.client_ca_file = garbage;
  start_fails_naming(tls, garbage);

  TlsServer first(good);
  ASSERT_TRUE(first.Start().ok());
  TlsServer second(good, first.port());
  EXPECT_EQ(second.Start().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Live(TlsChannel(first.port(), pki.ca)).ok());
}

// gRPC 1.51 offers no setting for the TLS versions; this checks that its own floor is TLS 1.2.
TEST(GrpcTlsTest, RefusesTlsBelow12) {
  Pki pki;
  TempDir dir;
  TlsServer server(ServerFiles(dir, pki.server));
  ASSERT_TRUE(server.Start().ok());

  auto handshake = [&](int max_version) {
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()), &SSL_CTX_free);
    SSL_CTX_set_security_level(context.get(), 0);  // so that only the server can be the one saying no
    SSL_CTX_set_min_proto_version(context.get(), TLS1_VERSION);
    SSL_CTX_set_max_proto_version(context.get(), max_version);
    static const unsigned char kH2[] = {2, 'h', '2'};
    SSL_CTX_set_alpn_protos(context.get(), kH2, sizeof(kH2));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(server.port());
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context.get()), &SSL_free);
    SSL_set_fd(ssl.get(), fd);
    const bool ok = SSL_connect(ssl.get()) == 1;
    close(fd);
    return ok;
  };
  EXPECT_TRUE(handshake(TLS1_2_VERSION));  // the client works at all
  EXPECT_FALSE(handshake(TLS1_1_VERSION));
  EXPECT_FALSE(handshake(TLS1_VERSION));
}

// ---- Who is calling ----

// A service that only records who called ServerLive, to look at PeerAddress and ClientCertificateSubject on a real
// call's context.
class IdentityProbe final : public inference::GRPCInferenceService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    {
      std::lock_guard lock(mu_);
      address_ = PeerAddress(*context);
      subject_ = ClientCertificateSubject(*context);
    }
    response->set_live(true);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::pair<std::string, std::string> last() const {
    std::lock_guard lock(mu_);
    return {address_, subject_};
  }

 private:
  mutable std::mutex mu_;
  std::string address_;
  std::string subject_;
};

TEST(PeerIdentityTest, TlsCallsCarryTheAddressAndTheVerifiedSubject) {
  Pki pki;
  TempDir dir;
  TlsFiles tls = ServerFiles(dir, pki.server);
  tls.client_ca_file = dir.Write("clients.crt", pki.ca.certificate_pem);
  tls.require_client_cert = false;
  auto credentials = TlsServerCredentialsFor(tls);
  ASSERT_TRUE(credentials.ok()) << credentials.status().ToString();
  IdentityProbe probe;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", *credentials, &port);
  builder.RegisterService(&probe);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  ASSERT_TRUE(Live(TlsChannel(static_cast<uint16_t>(port), pki.ca, &pki.camera)).ok());
  EXPECT_EQ(probe.last(), std::make_pair(std::string("127.0.0.1"), std::string("CN=camera-7,O=acme")));
  ASSERT_TRUE(Live(TlsChannel(static_cast<uint16_t>(port), pki.ca)).ok());
  EXPECT_EQ(probe.last(), std::make_pair(std::string("127.0.0.1"), std::string()));
  server->Shutdown();
}

// The plaintext port hands connections to gRPC by descriptor, which gRPC names "fd:N": the address still comes out.
TEST(PeerIdentityTest, PlaintextCallsThroughTheAcceptorCarryTheAddress) {
  IdentityProbe probe;
  grpc::ServerBuilder builder;
  builder.RegisterService(&probe);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto acceptor = GrpcAcceptor::Listen("127.0.0.1", 0);
  ASSERT_TRUE(acceptor.ok()) << acceptor.status().ToString();
  (*acceptor)->Start(server.get());

  ASSERT_TRUE(Live(Channel((*acceptor)->port(), grpc::InsecureChannelCredentials())).ok());
  EXPECT_EQ(probe.last(), std::make_pair(std::string("127.0.0.1"), std::string()));
  (*acceptor)->Stop();
  server->Shutdown();
}

TEST(PeerIdentityTest, AddressesFromGrpcPeerStrings) {
  EXPECT_EQ(PeerAddressOf("ipv4:10.1.2.3:5000"), "10.1.2.3");
  EXPECT_EQ(PeerAddressOf("ipv6:[::1]:5000"), "::1");
  EXPECT_EQ(PeerAddressOf("ipv6:[2001:db8::7]:443"), "2001:db8::7");
  EXPECT_EQ(PeerAddressOf("ipv6:[::ffff:10.1.2.3]:5000"), "10.1.2.3");
  EXPECT_EQ(PeerAddressOf("ipv6:[fe80::1%25eth0]:5000"), "fe80::1%eth0");
  EXPECT_EQ(PeerAddressOf("unix:/run/weft.sock"), "");
  EXPECT_EQ(PeerAddressOf("ipv6:::1"), "");
  EXPECT_EQ(PeerAddressOf(""), "");
  EXPECT_EQ(PeerAddressOf("fd:x"), "");
  EXPECT_EQ(PeerAddressOf("fd:-1"), "");
  EXPECT_EQ(PeerAddressOf("fd:99999999999"), "");
  // A descriptor that is not a socket has no address.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(PeerAddressOf("fd:" + std::to_string(pipe_fds[0])), "");
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace weft
