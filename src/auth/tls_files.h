#pragma once

#include <chrono>
#include <string>

namespace weft {

// Where a port's TLS certificate and key are (PEM), and how clients are checked. Shared by the HTTP and gRPC
// frontends (--tls-cert, --tls-key, --tls-client-ca, --tls-client-auth). The files are read again when they
// change; a connection keeps the certificate it was accepted with.
struct TlsFiles {
  std::string cert_file;            // the server's certificate chain; empty = no TLS
  std::string key_file;             // its private key
  std::string client_ca_file;       // CA certificates that client certificates must chain to; empty = none asked for
  bool require_client_cert = true;  // with client_ca_file: refuse a client without one (mTLS); false = optional
  std::chrono::milliseconds reload_interval{1000};  // how often the files are checked for a change

  bool enabled() const { return !cert_file.empty(); }
};

}  // namespace weft
