#include "frontend/grpc/tls_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "auth/openssl_error_scope.h"

namespace weft {

namespace {

using UniqueBio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using UniqueX509 = std::unique_ptr<X509, decltype(&X509_free)>;
using UniqueKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

Result<UniqueBio> OpenFile(const std::string& path, const std::string& what) {
  errno = 0;
  UniqueBio file(BIO_new_file(path.c_str(), "r"), &BIO_free);
  if (!file) {
    return InvalidArgument("cannot read the " + what + " file " + Quoted(path) + ": " +
                           (errno != 0 ? std::strerror(errno) : "cannot open it"));
  }
  return file;
}

// The first certificate of a PEM file (the server's own in a chain) after checking that every one parses.
Result<UniqueX509> ReadCertificates(const std::string& path, const std::string& what) {
  WEFT_ASSIGN_OR_RETURN(UniqueBio file, OpenFile(path, what));
  UniqueX509 first(nullptr, &X509_free);
  while (true) {
    UniqueX509 next(PEM_read_bio_X509(file.get(), nullptr, nullptr, nullptr), &X509_free);
    if (!next) break;
    if (!first) first = std::move(next);
  }
  // The loop ends at the end of the file (no further PEM block) or at a block that does not parse.
  const unsigned long error = ERR_peek_last_error();
  const bool at_end = ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
  if (!first) return InvalidArgument("the " + what + " file " + Quoted(path) + " holds no PEM certificate");
  if (!at_end) {
    return InvalidArgument("the " + what + " file " + Quoted(path) + " holds a certificate that does not parse");
  }
  return first;
}

// No passphrase prompt: an encrypted key fails to load (gRPC could not read it either).
int NoPassphrase(char*, int, int, void*) { return 0; }

Result<UniqueKey> ReadPrivateKey(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(UniqueBio file, OpenFile(path, "TLS key"));
  UniqueKey key(PEM_read_bio_PrivateKey(file.get(), nullptr, &NoPassphrase, nullptr), &EVP_PKEY_free);
  if (!key) {
    return InvalidArgument("the TLS key file " + Quoted(path) +
                           " does not hold a PEM private key (an encrypted key is not supported)");
  }
  return key;
}

Status CheckFiles(const TlsFiles& tls) {
  OpensslErrorScope errors;
  if (tls.key_file.empty()) return InvalidArgument("TLS needs a key file as well as the certificate file");
  WEFT_ASSIGN_OR_RETURN(UniqueX509 certificate, ReadCertificates(tls.cert_file, "TLS certificate"));
  WEFT_ASSIGN_OR_RETURN(UniqueKey key, ReadPrivateKey(tls.key_file));
  if (X509_check_private_key(certificate.get(), key.get()) != 1) {
    return InvalidArgument("the TLS key file " + Quoted(tls.key_file) + " holds a key that does not belong to " +
                           "the certificate in " + Quoted(tls.cert_file));
  }
  if (!tls.client_ca_file.empty()) {
    Result<UniqueX509> ca = ReadCertificates(tls.client_ca_file, "TLS client CA");
    if (!ca.ok()) return ca.status();
  }
  return Status::Ok();
}

unsigned int RefreshSeconds(std::chrono::milliseconds interval) {
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(interval).count();
  return static_cast<unsigned int>(std::clamp<decltype(seconds)>(seconds, 1, 24 * 3600));
}

}  // namespace

Result<std::shared_ptr<grpc::ServerCredentials>> TlsServerCredentialsFor(const TlsFiles& tls) {
  WEFT_RETURN_IF_ERROR(CheckFiles(tls));
  using grpc::experimental::FileWatcherCertificateProvider;
  const unsigned int refresh = RefreshSeconds(tls.reload_interval);
  // gRPC's credentials hold their own reference to the provider (and its watcher thread) from here on.
  auto provider =
      tls.client_ca_file.empty()
          ? std::make_shared<FileWatcherCertificateProvider>(tls.key_file, tls.cert_file, refresh)
          : std::make_shared<FileWatcherCertificateProvider>(tls.key_file, tls.cert_file, tls.client_ca_file, refresh);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(tls.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                          : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::experimental::TlsServerCredentials(options);
  if (!credentials) return Internal("gRPC could not make TLS credentials");
  return credentials;
}

}  // namespace weft
