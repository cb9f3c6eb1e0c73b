#include "auth/certificate_subject.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace {

using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;

// A self-signed P-256 certificate whose subject has `entries` (name, UTF-8 value) in this order, so that RFC 2253
// prints them last first.
Certificate SelfSigned(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  Certificate certificate(X509_new(), &X509_free);
  if (!key || !certificate) return Certificate(nullptr, &X509_free);
  X509_set_version(certificate.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(certificate.get()), 7);
  X509_gmtime_adj(X509_getm_notBefore(certificate.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(certificate.get()), 3600);
  X509_NAME* name = X509_get_subject_name(certificate.get());
  for (const auto& [field, value] : entries) {
    if (X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0) != 1) {
      return Certificate(nullptr, &X509_free);
    }
  }
  if (X509_set_issuer_name(certificate.get(), name) != 1 || X509_set_pubkey(certificate.get(), key.get()) != 1 ||
      X509_sign(certificate.get(), key.get(), EVP_sha256()) <= 0) {
    return Certificate(nullptr, &X509_free);
  }
  return certificate;
}

std::string Pem(X509* certificate) {
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), &BIO_free);
  if (PEM_write_bio_X509(out.get(), certificate) != 1) return "";
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

TEST(CertificateSubjectTest, WritesTheSubjectInRfc2253FormFromX509AndPem) {
  Certificate certificate = SelfSigned({{"O", "acme"}, {"CN", "camera-7"}});
  ASSERT_NE(certificate, nullptr);
  EXPECT_EQ(CertificateSubject(certificate.get()), "CN=camera-7,O=acme");
  Result<std::string> from_pem = CertificateSubjectOfPem(Pem(certificate.get()));
  ASSERT_TRUE(from_pem.ok()) << from_pem.status().ToString();
  EXPECT_EQ(*from_pem, "CN=camera-7,O=acme");
}

TEST(CertificateSubjectTest, KeepsUtf8AndEscapesSpecialCharacters) {
  Certificate certificate = SelfSigned({{"C", "CH"}, {"L", "Z\xc3\xbcrich"}, {"CN", "cam,7+a"}});
  ASSERT_NE(certificate, nullptr);
  const std::string expected = "CN=cam\\,7\\+a,L=Z\xc3\xbcrich,C=CH";
  EXPECT_EQ(CertificateSubject(certificate.get()), expected);
  Result<std::string> from_pem = CertificateSubjectOfPem(Pem(certificate.get()));
  ASSERT_TRUE(from_pem.ok()) << from_pem.status().ToString();
  EXPECT_EQ(*from_pem, expected);
}

TEST(CertificateSubjectTest, RefusesWhatIsNotACertificate) {
  EXPECT_EQ(CertificateSubject(nullptr), "");
  for (std::string_view bad :
       {"", "not a certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}) {
    Result<std::string> subject = CertificateSubjectOfPem(bad);
    ASSERT_FALSE(subject.ok()) << bad;
    EXPECT_EQ(subject.status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace weft
