#pragma once

#include <sys/types.h>

#include <array>
#include <ctime>
#include <memory>
#include <mutex>

#include "auth/tls_files.h"
#include "base/result.h"

namespace boost::asio::ssl {
class context;
}

namespace weft {

// The OpenSSL context of a TLS server port, built from TlsFiles and built again when the files change: TLS 1.2 or
// newer, forward-secret AEAD ciphers for 1.2 (OpenSSL's defaults for 1.3), no compression, no renegotiation, no
// passphrase prompt (an encrypted key is an error). With client_ca_file, clients are asked for a certificate that
// must chain to those CAs (require_client_cert: refused without one). A certificate that is presented and does not
// verify is refused in both modes. Thread-safe.
class ServerTlsContext {
 public:
  // Reads the files. InvalidArgument naming the file and OpenSSL's reason when one does not load, or when the key
  // does not match the certificate.
  static Result<std::unique_ptr<ServerTlsContext>> Load(TlsFiles files);

  // The newest context that loaded. A connection holds the one it was accepted with until it closes.
  std::shared_ptr<boost::asio::ssl::context> current() const;

  // Builds a new context when one of the files changed (mtime, size or inode) since the last look, and makes it
  // current. Files that do not load (half written, a key that does not match) leave the current context in use
  // and are logged once per change. Returns whether a new context became current. Reads the files on the
  // caller's thread; not to be called concurrently with itself.
  bool ReloadIfChanged();

 private:
  // What stat(2) says of one file: a change to any of it means the file was written or replaced.
  struct FileVersion {
    int error = 0;  // errno when stat failed
    timespec mtime{};
    off_t size = 0;
    ino_t inode = 0;
    dev_t device = 0;

    bool operator==(const FileVersion& other) const;
  };
  using FileVersions = std::array<FileVersion, 3>;  // cert, key, client CA (all zero when none)

  static FileVersions Look(const TlsFiles& files);

  ServerTlsContext(TlsFiles files, FileVersions seen, std::shared_ptr<boost::asio::ssl::context> context);

  const TlsFiles files_;
  FileVersions seen_;  // used by ReloadIfChanged only

  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;  // guarded by mu_; never null
};

// One context built from `files` (what ServerTlsContext loads), with the same errors as ServerTlsContext::Load.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerSslContext(const TlsFiles& files);

}  // namespace weft
