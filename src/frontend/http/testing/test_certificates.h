#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace weft::testing {

// A certificate and its private key as PEM files.
struct CertificateFiles {
  std::string cert_file;
  std::string key_file;
};

// What a test certificate says about itself.
struct CertificateSpec {
  // The subject's attributes in the order of the name (its RFC 2253 form lists them reversed): {{"O", "acme"},
  // {"CN", "camera-7"}} is "CN=camera-7,O=acme".
  std::vector<std::pair<std::string, std::string>> subject;
  long serial = 1;
  std::string alt_names;  // subjectAltName in OpenSSL's form ("DNS:localhost,IP:127.0.0.1"); empty = none
};

// A certificate authority for tests, made with OpenSSL in a directory: P-256 keys, certificates valid from an hour
// ago for a day. Not thread-safe.
class TestCertificateAuthority {
 public:
  // A self-signed CA written as <dir>/<name>.crt and <dir>/<name>.key.
  static Result<TestCertificateAuthority> Create(const std::string& dir, const std::string& name,
                                                 const CertificateSpec& spec);

  const CertificateFiles& files() const { return files_; }

  // A certificate for `spec` signed by this CA (not a CA itself), written as <dir>/<name>.crt and .key.
  Result<CertificateFiles> Issue(const std::string& name, const CertificateSpec& spec) const;

 private:
  TestCertificateAuthority(std::string dir, CertificateFiles files) : dir_(std::move(dir)), files_(std::move(files)) {}

  std::string dir_;
  CertificateFiles files_;
};

}  // namespace weft::testing
