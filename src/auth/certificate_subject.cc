#include "auth/certificate_subject.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <climits>
#include <memory>

namespace weft {

std::string CertificateSubject(X509* certificate) {
  if (certificate == nullptr) return {};
  X509_NAME* name = X509_get_subject_name(certificate);
  if (name == nullptr) return {};
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), &BIO_free);
  if (!out) return {};
  // RFC 2253 with UTF-8 kept as it is (not escaped as \XX), as operators write it in a key file.
  const unsigned long flags = XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB;
  if (X509_NAME_print_ex(out.get(), name, 0, flags) < 0) return {};
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return size > 0 ? std::string(data, static_cast<size_t>(size)) : std::string();
}

Result<std::string> CertificateSubjectOfPem(std::string_view pem) {
  if (pem.size() > INT_MAX) return InvalidArgument("the certificate is too large");
  std::unique_ptr<BIO, decltype(&BIO_free)> in(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  if (!in) return Internal("cannot read the certificate: out of memory");
  std::unique_ptr<X509, decltype(&X509_free)> certificate(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr),
                                                          &X509_free);
  if (!certificate) return InvalidArgument("the certificate is not PEM");
  return CertificateSubject(certificate.get());
}

}  // namespace weft
