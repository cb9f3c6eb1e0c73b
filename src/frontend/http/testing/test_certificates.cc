#include "frontend/http/testing/test_certificates.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace weft::testing {

namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;
using File = std::unique_ptr<BIO, decltype(&BIO_free)>;

Status OpenSslError(const std::string& what) {
  char reason[256] = "unknown error";
  if (unsigned long code = ERR_get_error()) ERR_error_string_n(code, reason, sizeof(reason));
  ERR_clear_error();
  return Internal(what + ": " + reason);
}

Status AddExtension(X509* certificate, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_nconf_nid(nullptr, &context, nid, value);
  if (extension == nullptr) return OpenSslError(std::string("extension ") + value);
  int added = X509_add_ext(certificate, extension, -1);
  X509_EXTENSION_free(extension);
  return added == 1 ? Status::Ok() : OpenSslError("adding an extension");
}

Status Write(const std::string& path, X509* certificate, EVP_PKEY* key) {
  if (certificate != nullptr) {
    File file(BIO_new_file(path.c_str(), "w"), &BIO_free);
    if (!file || PEM_write_bio_X509(file.get(), certificate) != 1) return OpenSslError("writing " + path);
  } else {
    File file(BIO_new_file(path.c_str(), "w"), &BIO_free);
    if (!file || PEM_write_bio_PrivateKey(file.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
      return OpenSslError("writing " + path);
    }
  }
  return Status::Ok();
}

// A certificate for `spec` and its new key, signed by `issuer` with `issuer_key`, or self-signed when they are null.
Status Make(const CertificateSpec& spec, bool is_ca, X509* issuer, EVP_PKEY* issuer_key, const CertificateFiles& out) {
  Key key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  if (!key) return OpenSslError("generating a key");
  Certificate certificate(X509_new(), &X509_free);
  if (!certificate) return OpenSslError("X509_new");
  X509* c = certificate.get();
  X509_set_version(c, X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(c), spec.serial);
  X509_gmtime_adj(X509_getm_notBefore(c), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c), 24 * 3600);
  X509_set_pubkey(c, key.get());
  X509_NAME* name = X509_get_subject_name(c);
  for (const auto& [field, value] : spec.subject) {
    if (X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0) != 1) {
      return OpenSslError("subject field " + field);
    }
  }
  X509_set_issuer_name(c, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509* signer = issuer != nullptr ? issuer : c;
  Status status = AddExtension(c, signer, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (status.ok() && is_ca) status = AddExtension(c, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  if (status.ok() && !spec.alt_names.empty()) {
    status = AddExtension(c, signer, NID_subject_alt_name, spec.alt_names.c_str());
  }
  if (!status.ok()) return status;
  if (X509_sign(c, issuer_key != nullptr ? issuer_key : key.get(), EVP_sha256()) == 0) return OpenSslError("signing");
  status = Write(out.cert_file, c, nullptr);
  return status.ok() ? Write(out.key_file, nullptr, key.get()) : status;
}

CertificateFiles FilesFor(const std::string& dir, const std::string& name) {
  return {.cert_file = dir + "/" + name + ".crt", .key_file = dir + "/" + name + ".key"};
}

}  // namespace

Result<TestCertificateAuthority> TestCertificateAuthority::Create(const std::string& dir, const std::string& name,
                                                                  const CertificateSpec& spec) {
  CertificateFiles files = FilesFor(dir, name);
  Status status = Make(spec, /*is_ca=*/true, nullptr, nullptr, files);
  if (!status.ok()) return status;
  return TestCertificateAuthority(dir, std::move(files));
}

Result<CertificateFiles> TestCertificateAuthority::Issue(const std::string& name, const CertificateSpec& spec) const {
  File cert_in(BIO_new_file(files_.cert_file.c_str(), "r"), &BIO_free);
  if (!cert_in) return OpenSslError("reading " + files_.cert_file);
  Certificate ca(PEM_read_bio_X509(cert_in.get(), nullptr, nullptr, nullptr), &X509_free);
  File key_in(BIO_new_file(files_.key_file.c_str(), "r"), &BIO_free);
  if (!ca || !key_in) return OpenSslError("reading " + files_.key_file);
  Key ca_key(PEM_read_bio_PrivateKey(key_in.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!ca_key) return OpenSslError("reading " + files_.key_file);
  CertificateFiles files = FilesFor(dir_, name);
  Status status = Make(spec, /*is_ca=*/false, ca.get(), ca_key.get(), files);
  if (!status.ok()) return status;
  return files;
}

}  // namespace weft::testing
