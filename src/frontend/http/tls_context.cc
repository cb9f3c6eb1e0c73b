#include "frontend/http/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <boost/asio/ssl/context.hpp>
#include <cerrno>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "base/log.h"

namespace weft {

namespace ssl = boost::asio::ssl;

namespace {

// TLS 1.2 suites: ECDHE key exchange (forward secrecy) and AEAD only, as in Mozilla's "intermediate" profile.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

constexpr const char* kTls13Ciphers = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";

// Sessions resumed with a client certificate need an id context; any fixed name does.
constexpr unsigned char kSessionIdContext[] = "weft-http";

// The reasons OpenSSL queued on this thread, oldest first, without repeats; empties the queue.
std::string TakeOpenSslReasons() {
  std::string reasons;
  while (unsigned long code = ERR_get_error()) {
    std::string text;
    if (ERR_SYSTEM_ERROR(code)) {
      text = std::generic_category().message(ERR_GET_REASON(code));  // errno, "No such file or directory"
    } else if (ERR_GET_REASON(code) == ERR_R_SYS_LIB) {
      continue;  // "system lib": the errno above says it better
    } else {
      const char* reason = ERR_reason_error_string(code);
      text = reason != nullptr ? reason : "error " + std::to_string(code);
    }
    if (reasons.find(text) != std::string::npos) continue;
    if (!reasons.empty()) reasons += ": ";
    reasons += text;
  }
  return reasons.empty() ? "unknown OpenSSL error" : reasons;
}

Status FileError(std::string_view what, const std::string& path) {
  return InvalidArgument("TLS " + std::string(what) + " '" + path + "': " + TakeOpenSslReasons());
}

// Without it, OpenSSL asks for an encrypted key's passphrase on the terminal: the key fails to load instead.
int NoPassphrase(char*, int, int, void*) { return 0; }

using PrivateKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// Read apart from the certificate, so that a key that does not parse and one that does not match say so.
PrivateKey ReadPrivateKey(const std::string& path) {
  std::unique_ptr<BIO, decltype(&BIO_free)> file(BIO_new_file(path.c_str(), "r"), &BIO_free);
  if (!file) return PrivateKey(nullptr, &EVP_PKEY_free);
  return PrivateKey(PEM_read_bio_PrivateKey(file.get(), nullptr, &NoPassphrase, nullptr), &EVP_PKEY_free);
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeServerSslContext(const TlsFiles& files) {
  if (files.cert_file.empty()) return InvalidArgument("TLS needs a certificate file");
  if (files.key_file.empty()) return InvalidArgument("TLS certificate '" + files.cert_file + "' has no key file");
  ERR_clear_error();
  SSL_CTX* native = SSL_CTX_new(TLS_server_method());
  if (native == nullptr) return Internal("cannot create a TLS context: " + TakeOpenSslReasons());
  auto context = std::make_shared<ssl::context>(native);  // owns `native` from here

  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  // The server's order decides, so that AES-128-GCM (the cheapest with AES-NI, and strong enough) is used when the
  // client offers it; OpenSSL's clients put AES-256 first.
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) {
    return Internal("cannot set the TLS 1.2 ciphers: " + TakeOpenSslReasons());
  }
  if (SSL_CTX_set_ciphersuites(native, kTls13Ciphers) != 1) {
    return Internal("cannot set the TLS 1.3 ciphers: " + TakeOpenSslReasons());
  }
  SSL_CTX_set_session_id_context(native, kSessionIdContext, sizeof(kSessionIdContext) - 1);

  if (SSL_CTX_use_certificate_chain_file(native, files.cert_file.c_str()) != 1) {
    return FileError("certificate file", files.cert_file);
  }
  PrivateKey key = ReadPrivateKey(files.key_file);
  if (!key) return FileError("key file", files.key_file);
  if (SSL_CTX_use_PrivateKey(native, key.get()) != 1 || SSL_CTX_check_private_key(native) != 1) {
    return InvalidArgument("TLS key file '" + files.key_file + "' does not match the certificate in '" +
                           files.cert_file + "': " + TakeOpenSslReasons());
  }
  if (!files.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(native, files.client_ca_file.c_str(), nullptr) != 1) {
      return FileError("client CA file", files.client_ca_file);
    }
    // The CA names go into the certificate request, so that a client with several certificates picks the right one.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str());
    if (names == nullptr) return FileError("client CA file", files.client_ca_file);
    SSL_CTX_set_client_CA_list(native, names);
    int mode = SSL_VERIFY_PEER | (files.require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
    SSL_CTX_set_verify(native, mode, nullptr);
  }
  return context;
}

bool ServerTlsContext::FileVersion::operator==(const FileVersion& other) const {
  return error == other.error && mtime.tv_sec == other.mtime.tv_sec && mtime.tv_nsec == other.mtime.tv_nsec &&
         size == other.size && inode == other.inode && device == other.device;
}

ServerTlsContext::FileVersions ServerTlsContext::Look(const TlsFiles& files) {
  FileVersions versions{};
  const std::string* paths[] = {&files.cert_file, &files.key_file, &files.client_ca_file};
  for (size_t i = 0; i < versions.size(); ++i) {
    if (paths[i]->empty()) continue;
    struct stat info {};
    if (::stat(paths[i]->c_str(), &info) != 0) {
      versions[i].error = errno;
      continue;
    }
    versions[i].mtime = info.st_mtim;
    versions[i].size = info.st_size;
    versions[i].inode = info.st_ino;
    versions[i].device = info.st_dev;
  }
  return versions;
}

ServerTlsContext::ServerTlsContext(TlsFiles files, FileVersions seen, std::shared_ptr<ssl::context> context)
    : files_(std::move(files)), seen_(seen), current_(std::move(context)) {}

Result<std::unique_ptr<ServerTlsContext>> ServerTlsContext::Load(TlsFiles files) {
  // Looked at before reading: a file written while it is read shows as a change next time.
  FileVersions seen = Look(files);
  WEFT_ASSIGN_OR_RETURN(auto context, MakeServerSslContext(files));
  return std::unique_ptr<ServerTlsContext>(new ServerTlsContext(std::move(files), seen, std::move(context)));
}

std::shared_ptr<ssl::context> ServerTlsContext::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

bool ServerTlsContext::ReloadIfChanged() {
  FileVersions now = Look(files_);
  if (now == seen_) return false;
  seen_ = now;
  auto context = MakeServerSslContext(files_);
  if (!context.ok()) {
    WEFT_LOG(Warning) << "the TLS files changed but do not load; the previous certificate stays in use: "
                      << context.status().message();
    return false;
  }
  {
    std::lock_guard lock(mu_);
    current_ = std::move(context).value();
  }
  WEFT_LOG(Info) << "TLS certificate reloaded from '" << files_.cert_file << "'";
  return true;
}

}  // namespace weft
