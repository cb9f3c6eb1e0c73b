#include "auth/jwt.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "auth/jwt_testing.h"

namespace weft {
namespace {

constexpr int64_t kNow = 1700000000;
constexpr std::string_view kIssuer = "https://issuer.example";
constexpr std::string_view kAudience = "weft";

using Pkey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using jwt_testing::Base64Url;
using jwt_testing::Hmac;
using jwt_testing::Jwks;
using jwt_testing::OctJwk;
using jwt_testing::Signer;
using jwt_testing::Token;

// A BIGNUM parameter of `key` as big-endian bytes, left-padded to `size` when it is not zero.
std::string BignumParam(EVP_PKEY* key, const char* name, int size = 0) {
  BIGNUM* n = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &n) != 1) return "";
  std::string out(static_cast<size_t>(size ? size : BN_num_bytes(n)), '\0');
  auto* data = reinterpret_cast<unsigned char*>(out.data());
  if (size) {
    BN_bn2binpad(n, data, size);
  } else {
    BN_bn2bin(n, data);
  }
  BN_free(n);
  return out;
}

std::string RsaJwk(EVP_PKEY* key, std::string_view kid, std::string_view extra = "") {
  return std::string(R"({"kty":"RSA")") + (kid.empty() ? "" : R"(,"kid":")" + std::string(kid) + "\"") + R"(,"n":")" +
         Base64Url(BignumParam(key, OSSL_PKEY_PARAM_RSA_N)) + R"(","e":")" +
         Base64Url(BignumParam(key, OSSL_PKEY_PARAM_RSA_E)) + "\"" + std::string(extra) + "}";
}

std::string EcJwk(EVP_PKEY* key, std::string_view kid, std::string_view extra = "") {
  return std::string(R"({"kty":"EC","crv":"P-256")") + (kid.empty() ? "" : R"(,"kid":")" + std::string(kid) + "\"") +
         R"(,"x":")" + Base64Url(BignumParam(key, OSSL_PKEY_PARAM_EC_PUB_X, 32)) + R"(","y":")" +
         Base64Url(BignumParam(key, OSSL_PKEY_PARAM_EC_PUB_Y, 32)) + "\"" + std::string(extra) + "}";
}

// An RSA (PKCS #1 v1.5) or ECDSA (DER) signature with SHA-256, as OpenSSL makes it.
std::string SignWith(EVP_PKEY* key, std::string_view data) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  size_t size = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(data.data());
  if (EVP_DigestSignInit_ex(ctx.get(), nullptr, "SHA256", nullptr, nullptr, key, nullptr) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size, in, data.size()) != 1) {
    return "";
  }
  std::string out(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &size, in, data.size()) != 1) return "";
  out.resize(size);
  return out;
}

// RFC 7518 3.4: the DER signature as r || s, 32 bytes each.
std::string DerToRaw(std::string_view der) {
  const auto* in = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(d2i_ECDSA_SIG(nullptr, &in, static_cast<long>(der.size())),
                                                            &ECDSA_SIG_free);
  if (!sig) return "";
  std::string out(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(sig.get()), reinterpret_cast<unsigned char*>(out.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig.get()), reinterpret_cast<unsigned char*>(out.data()) + 32, 32);
  return out;
}

std::string Payload(const std::string& extra = "") {
  return R"({"sub":"alice","iss":")" + std::string(kIssuer) + R"(","aud":")" + std::string(kAudience) + R"(","exp":)" +
         std::to_string(kNow + 300) + R"(,"scope":"infer:detector metadata openid")" + extra + "}";
}

class JwtTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = EVP_RSA_gen(2048);
    other_rsa_ = EVP_RSA_gen(2048);
    ec_ = EVP_EC_gen("P-256");
    secret_ = new std::string(32, '\0');
    ASSERT_EQ(RAND_bytes(reinterpret_cast<unsigned char*>(secret_->data()), 32), 1);
    ASSERT_NE(rsa_, nullptr);
    ASSERT_NE(other_rsa_, nullptr);
    ASSERT_NE(ec_, nullptr);
  }
  static void TearDownTestSuite() {
    EVP_PKEY_free(rsa_);
    EVP_PKEY_free(other_rsa_);
    EVP_PKEY_free(ec_);
    delete secret_;
  }

  static JsonWebKeySet Keys(const std::vector<std::string>& jwks) {
    Result<JsonWebKeySet> keys = JsonWebKeySet::Parse(Jwks(jwks));
    EXPECT_TRUE(keys.ok()) << keys.status().ToString();
    return keys.ok() ? std::move(*keys) : JsonWebKeySet();
  }
  // RSA, P-256 and oct keys, one each.
  static JsonWebKeySet AllKeys() {
    return Keys({RsaJwk(rsa_, "rsa-1"), EcJwk(ec_, "ec-1"), OctJwk(*secret_, "oct-1")});
  }
  static JwtPolicy Policy() { return JwtPolicy{.issuer = std::string(kIssuer), .audience = std::string(kAudience)}; }

  static Signer Rs256(EVP_PKEY* key) {
    return [key](std::string_view data) { return SignWith(key, data); };
  }
  static Signer Es256() {
    return [](std::string_view data) { return DerToRaw(SignWith(ec_, data)); };
  }
  static Signer Hs256(std::string secret) {
    return [secret](std::string_view data) { return Hmac(secret, data); };
  }

  static std::string Rs256Token(const std::string& payload = Payload(), std::string_view kid = "rsa-1") {
    return Token(Header("RS256", kid), payload, Rs256(rsa_));
  }
  static std::string Header(std::string_view alg, std::string_view kid = "") {
    return R"({"typ":"JWT","alg":")" + std::string(alg) + "\"" +
           (kid.empty() ? "" : R"(,"kid":")" + std::string(kid) + "\"") + "}";
  }

  // The message of the refusal of `token`, which must be Unauthenticated; "(accepted)" when it is not refused.
  static std::string Refusal(std::string_view token, const JsonWebKeySet& keys, const JwtPolicy& policy = Policy(),
                             int64_t now = kNow) {
    Result<JwtClaims> claims = VerifyJwt(token, keys, policy, now);
    if (claims.ok()) return "(accepted)";
    EXPECT_EQ(claims.status().code(), StatusCode::kUnauthenticated) << claims.status().ToString();
    return claims.status().message();
  }

  static EVP_PKEY* rsa_;
  static EVP_PKEY* other_rsa_;
  static EVP_PKEY* ec_;
  static std::string* secret_;
};

EVP_PKEY* JwtTest::rsa_ = nullptr;
EVP_PKEY* JwtTest::other_rsa_ = nullptr;
EVP_PKEY* JwtTest::ec_ = nullptr;
std::string* JwtTest::secret_ = nullptr;

#define EXPECT_REFUSED(token, keys, expected)                                       \
  do {                                                                              \
    const std::string message = Refusal(token, keys);                               \
    EXPECT_NE(message.find(expected), std::string::npos) << "message: " << message; \
  } while (0)

TEST_F(JwtTest, AcceptsAGoodRs256Token) {
  Result<JwtClaims> claims = VerifyJwt(Rs256Token(), AllKeys(), Policy(), kNow);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->subject, "alice");
  EXPECT_EQ(claims->key_id, "rsa-1");
  EXPECT_EQ(claims->scopes.ToString(), "metadata infer:detector");
  EXPECT_EQ(claims->expires_at, kNow + 300);
}

TEST_F(JwtTest, AcceptsAGoodEs256Token) {
  Result<JwtClaims> claims = VerifyJwt(Token(Header("ES256", "ec-1"), Payload(), Es256()), AllKeys(), Policy(), kNow);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->key_id, "ec-1");
  EXPECT_EQ(claims->subject, "alice");
}

TEST_F(JwtTest, AcceptsAGoodHs256Token) {
  Result<JwtClaims> claims =
      VerifyJwt(Token(Header("HS256", "oct-1"), Payload(), Hs256(*secret_)), AllKeys(), Policy(), kNow);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->key_id, "oct-1");
}

TEST_F(JwtTest, ReadsOptionalClaimsAsAbsent) {
  const std::string payload = R"({"exp":)" + std::to_string(kNow + 1) + "}";
  Result<JwtClaims> claims = VerifyJwt(Token(Header("HS256"), payload, Hs256(*secret_)), AllKeys(), JwtPolicy{}, kNow);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->subject, "");
  EXPECT_EQ(claims->key_id, "");
  EXPECT_TRUE(claims->scopes.empty());
}

TEST_F(JwtTest, TheKidSelectsTheKey) {
  const JsonWebKeySet keys = Keys({RsaJwk(rsa_, "rsa-1"), RsaJwk(other_rsa_, "rsa-2")});
  Result<JwtClaims> claims =
      VerifyJwt(Token(Header("RS256", "rsa-2"), Payload(), Rs256(other_rsa_)), keys, Policy(), kNow);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->key_id, "rsa-2");
  // Signed by rsa-2 but naming rsa-1: only rsa-1 is tried.
  EXPECT_REFUSED(Token(Header("RS256", "rsa-1"), Payload(), Rs256(other_rsa_)), keys, "the signature does not verify");
}

TEST_F(JwtTest, WithoutAKidEveryKeyOfTheAlgorithmIsTried) {
  const JsonWebKeySet keys =
      Keys({EcJwk(ec_, ""), RsaJwk(rsa_, "rsa-1"), OctJwk(*secret_, ""), RsaJwk(other_rsa_, "")});
  for (EVP_PKEY* key : {rsa_, other_rsa_}) {
    Result<JwtClaims> claims = VerifyJwt(Token(Header("RS256"), Payload(), Rs256(key)), keys, Policy(), kNow);
    EXPECT_TRUE(claims.ok()) << claims.status().ToString();
  }
  EXPECT_EQ(Refusal(Token(Header("ES256"), Payload(), Es256()), keys), "(accepted)");
  EXPECT_EQ(Refusal(Token(Header("HS256"), Payload(), Hs256(*secret_)), keys), "(accepted)");
}

TEST_F(JwtTest, RefusesAnUnknownKid) {
  EXPECT_REFUSED(Rs256Token(Payload(), "rsa-9"), AllKeys(), "no key has kid 'rsa-9'");
  // A kid of a key that is skipped (not for signatures) is unknown too.
  const JsonWebKeySet keys = Keys({RsaJwk(rsa_, "rsa-1", R"(,"use":"enc")"), EcJwk(ec_, "ec-1")});
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_REFUSED(Rs256Token(), keys, "no key has kid 'rsa-1'");
}

TEST_F(JwtTest, RefusesAlgNoneWithOrWithoutASignature) {
  const std::string unsigned_token = Base64Url(R"({"alg":"none"})") + "." + Base64Url(Payload()) + ".";
  EXPECT_REFUSED(unsigned_token, AllKeys(), "not signed");
  for (std::string_view alg : {"none", "None", "NONE", "", "HS512", "RS384", "PS256", "ES384", "EdDSA", "rs256"}) {
    const std::string token = Token(Header(alg), Payload(), Hs256(*secret_));
    EXPECT_REFUSED(token, AllKeys(), "alg '" + std::string(alg) + "' is not accepted");
  }
  EXPECT_REFUSED(Token(R"({"typ":"JWT"})", Payload(), Hs256(*secret_)), AllKeys(), "no alg");
  EXPECT_REFUSED(Token(R"({"alg":null})", Payload(), Hs256(*secret_)), AllKeys(), "no alg");
}

TEST_F(JwtTest, RefusesAnHmacTokenMadeWithAnRsaPublicKey) {
  // The classic algorithm confusion: the attacker knows the public key and uses it as an HMAC secret.
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  ASSERT_EQ(PEM_write_bio_PUBKEY(bio.get(), rsa_), 1);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  const std::string pem(data, static_cast<size_t>(size));
  const std::string modulus = BignumParam(rsa_, OSSL_PKEY_PARAM_RSA_N);
  const JsonWebKeySet public_keys = Keys({RsaJwk(rsa_, "rsa-1"), EcJwk(ec_, "ec-1")});
  for (const std::string& secret : {pem, modulus, Base64Url(modulus)}) {
    EXPECT_REFUSED(Token(Header("HS256", "rsa-1"), Payload(), Hs256(secret)), public_keys,
                   "the key 'rsa-1' does not verify HS256");
    EXPECT_REFUSED(Token(Header("HS256"), Payload(), Hs256(secret)), public_keys, "no key verifies HS256");
    EXPECT_REFUSED(Token(Header("HS256"), Payload(), Hs256(secret)), AllKeys(), "the signature does not verify");
  }
}

TEST_F(JwtTest, RefusesAnRs256TokenAgainstAnEcOnlySet) {
  const JsonWebKeySet keys = Keys({EcJwk(ec_, "ec-1")});
  EXPECT_REFUSED(Token(Header("RS256"), Payload(), Rs256(rsa_)), keys, "no key verifies RS256");
  EXPECT_REFUSED(Token(Header("RS256", "ec-1"), Payload(), Rs256(rsa_)), keys, "the key 'ec-1' does not verify RS256");
}

TEST_F(JwtTest, RefusesABadSignature) {
  for (const std::string& token :
       {Rs256Token(), Token(Header("ES256"), Payload(), Es256()), Token(Header("HS256"), Payload(), Hs256(*secret_))}) {
    std::string bad = token;
    // The first character of the signature: all six of its bits are signature bits.
    char& c = bad[bad.rfind('.') + 1];
    c = c == 'A' ? 'B' : 'A';
    EXPECT_REFUSED(bad, AllKeys(), "the signature does not verify");
  }
  EXPECT_REFUSED(Token(Header("HS256"), Payload(), Hs256(std::string(32, 'k'))), AllKeys(),
                 "the signature does not verify");
  EXPECT_REFUSED(Token(Header("RS256"), Payload(), Rs256(other_rsa_)), AllKeys(), "the signature does not verify");
}

TEST_F(JwtTest, RefusesAPayloadChangedAfterSigning) {
  for (const std::string& token :
       {Rs256Token(), Token(Header("ES256"), Payload(), Es256()), Token(Header("HS256"), Payload(), Hs256(*secret_))}) {
    const size_t first = token.find('.');
    const size_t second = token.find('.', first + 1);
    const std::string changed =
        token.substr(0, first + 1) +
        Base64Url(R"({"sub":"alice","scope":"admin","exp":)" + std::to_string(kNow + 300) + "}") + token.substr(second);
    EXPECT_REFUSED(changed, AllKeys(), "the signature does not verify");
  }
}

TEST_F(JwtTest, ChecksExpiryWithTheSkew) {
  auto with_exp = [](int64_t exp) {
    return Rs256Token(R"({"iss":")" + std::string(kIssuer) + R"(","aud":"weft","exp":)" + std::to_string(exp) + "}");
  };
  EXPECT_REFUSED(with_exp(kNow - 120), AllKeys(), "expired");
  EXPECT_REFUSED(with_exp(kNow - 60), AllKeys(), "expired");
  EXPECT_EQ(Refusal(with_exp(kNow - 59), AllKeys()), "(accepted)");
  EXPECT_EQ(Refusal(with_exp(kNow - 30), AllKeys()), "(accepted)");
  JwtPolicy strict = Policy();
  strict.clock_skew = std::chrono::seconds(0);
  EXPECT_NE(Refusal(with_exp(kNow), AllKeys(), strict).find("expired"), std::string::npos);
  EXPECT_EQ(Refusal(with_exp(kNow + 1), AllKeys(), strict), "(accepted)");
  // Dates far out of range neither overflow nor pass when they should not.
  EXPECT_EQ(Refusal(Rs256Token(R"({"iss":")" + std::string(kIssuer) + R"(","aud":"weft","exp":1e300})"), AllKeys()),
            "(accepted)");
  EXPECT_EQ(Refusal(with_exp(INT64_MAX), AllKeys()), "(accepted)");
  EXPECT_REFUSED(Rs256Token(R"({"iss":")" + std::string(kIssuer) + R"(","aud":"weft","exp":-1e300})"), AllKeys(),
                 "expired");
  EXPECT_REFUSED(with_exp(INT64_MIN), AllKeys(), "expired");
  JwtPolicy huge_skew = Policy();
  huge_skew.clock_skew = std::chrono::seconds(INT64_MAX);
  EXPECT_EQ(Refusal(with_exp(kNow - 3600), AllKeys(), huge_skew), "(accepted)");
}

TEST_F(JwtTest, RequiresANumericExp) {
  const std::string base = R"({"iss":")" + std::string(kIssuer) + R"(","aud":"weft")";
  EXPECT_REFUSED(Rs256Token(base + "}"), AllKeys(), "no exp");
  EXPECT_REFUSED(Rs256Token(base + R"(,"exp":")" + std::to_string(kNow + 300) + "\"}"), AllKeys(),
                 "exp is not a number");
  EXPECT_REFUSED(Rs256Token(base + R"(,"exp":null})"), AllKeys(), "exp is not a number");
  EXPECT_EQ(Refusal(Rs256Token(base + R"(,"exp":)" + std::to_string(kNow + 10) + ".5}"), AllKeys()), "(accepted)");
  EXPECT_REFUSED(Rs256Token(base + R"(,"exp":1,"exp":)" + std::to_string(kNow + 300) + "}"), AllKeys(),
                 "gives 'exp' twice");
}

TEST_F(JwtTest, ChecksNotBeforeWithTheSkew) {
  auto with_nbf = [](const std::string& nbf) { return Rs256Token(Payload(R"(,"nbf":)" + nbf)); };
  EXPECT_REFUSED(with_nbf(std::to_string(kNow + 120)), AllKeys(), "not valid before");
  EXPECT_EQ(Refusal(with_nbf(std::to_string(kNow + 60)), AllKeys()), "(accepted)");
  EXPECT_EQ(Refusal(with_nbf(std::to_string(kNow - 600)), AllKeys()), "(accepted)");
  EXPECT_REFUSED(with_nbf("\"soon\""), AllKeys(), "nbf is not a number");
}

TEST_F(JwtTest, ChecksTheIssuer) {
  EXPECT_REFUSED(Rs256Token(R"({"iss":"https://evil.example","aud":"weft","exp":)" + std::to_string(kNow + 60) + "}"),
                 AllKeys(), "iss 'https://evil.example' is not https://issuer.example");
  EXPECT_REFUSED(Rs256Token(R"({"aud":"weft","exp":)" + std::to_string(kNow + 60) + "}"), AllKeys(), "no iss");
  EXPECT_REFUSED(
      Rs256Token(R"({"iss":["https://issuer.example"],"aud":"weft","exp":)" + std::to_string(kNow + 60) + "}"),
      AllKeys(), "iss is not a string");
  // Not checked when the policy names none.
  EXPECT_EQ(Refusal(Rs256Token(R"({"aud":"weft","exp":)" + std::to_string(kNow + 60) + "}"), AllKeys(),
                    JwtPolicy{.audience = "weft"}),
            "(accepted)");
}

TEST_F(JwtTest, ChecksTheAudienceAsAStringOrAnArray) {
  auto with_aud = [](const std::string& aud) {
    return Rs256Token(R"({"iss":")" + std::string(kIssuer) + R"(","exp":)" + std::to_string(kNow + 60) +
                      (aud.empty() ? "" : R"(,"aud":)" + aud) + "}");
  };
  EXPECT_REFUSED(with_aud(R"("other")"), AllKeys(), "aud 'other' is not weft");
  EXPECT_REFUSED(with_aud(R"("weft2")"), AllKeys(), "is not weft");
  EXPECT_REFUSED(with_aud(""), AllKeys(), "no aud");
  EXPECT_EQ(Refusal(with_aud(R"(["other","weft"])"), AllKeys()), "(accepted)");
  EXPECT_REFUSED(with_aud(R"(["other","weft2"])"), AllKeys(), "aud does not hold weft");
  EXPECT_REFUSED(with_aud("[]"), AllKeys(), "aud does not hold weft");
  EXPECT_REFUSED(with_aud(R"(["weft",7])"), AllKeys(), "neither a string nor an array of strings");
  EXPECT_REFUSED(with_aud("7"), AllKeys(), "neither a string nor an array of strings");
  EXPECT_EQ(Refusal(with_aud(R"("anyone")"), AllKeys(), JwtPolicy{.issuer = std::string(kIssuer)}), "(accepted)");
}

TEST_F(JwtTest, RefusesMalformedClaims) {
  EXPECT_REFUSED(Rs256Token(Payload(R"(,"sub":7)")), AllKeys(), "gives 'sub' twice");
  const std::string base = R"({"exp":)" + std::to_string(kNow + 60);
  EXPECT_NE(Refusal(Rs256Token(base + R"(,"sub":7})"), AllKeys(), JwtPolicy{}).find("sub is not a string"),
            std::string::npos);
  EXPECT_NE(Refusal(Rs256Token(base + R"(,"scope":["infer"]})"), AllKeys(), JwtPolicy{}).find("scope is not a string"),
            std::string::npos);
}

TEST_F(JwtTest, RefusesMalformedTokens) {
  const JsonWebKeySet keys = AllKeys();
  const std::string good = Token(Header("HS256"), Payload(), Hs256(*secret_));
  const std::string payload = Base64Url(Payload());
  const std::string signature = good.substr(good.rfind('.') + 1);
  // Segments signed correctly whose content is wrong.
  auto signed_segments = [](const std::string& header, const std::string& payload) {
    const std::string signed_part = header + "." + payload;
    return signed_part + "." + Base64Url(Hmac(*secret_, signed_part));
  };
  struct Case {
    std::string token;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "three segments"},
      {"abc", "three segments"},
      {"a.b", "three segments"},
      {good + ".", "three segments"},
      {good + ".abc.def", "three segments"},
      {".a.b", "empty header or payload"},
      {"a..b", "empty header or payload"},
      {"a.b.", "not signed"},
      {"e*J." + payload + "." + signature, "the header is not base64url"},
      {Base64Url(Header("HS256")) + "=." + payload + "." + signature, "the header is not base64url"},
      {Base64Url("not json") + "." + payload + "." + signature, "the header is not JSON"},
      {Base64Url("[\"HS256\"]") + "." + payload + "." + signature, "the header is not a JSON object"},
      {Base64Url(R"({"alg":"HS256","alg":"HS256"})") + "." + payload + "." + signature, "gives 'alg' twice"},
      {Base64Url(R"({"alg":"HS256","crit":["exp"]})") + "." + payload + "." + signature, "crit"},
      {Base64Url(R"({"alg":"HS256","kid":5})") + "." + payload + "." + signature, "kid is not a string"},
      {good.substr(0, good.rfind('.') + 1) + "ab*d", "the signature is not base64url"},
      {good.substr(0, good.rfind('.') + 1) + "abcde", "the signature is not base64url"},
      {good + "AAAA", "an HS256 signature has 32 bytes, this one 35"},
      {signed_segments(Base64Url(Header("HS256")), Base64Url("not json")), "the payload is not JSON"},
      {signed_segments(Base64Url(Header("HS256")), "pay*load"), "the payload is not base64url"},
      {signed_segments(Base64Url(Header("HS256")), Base64Url("[1,2]")), "the payload is not a JSON object"},
  };
  for (const Case& c : cases) EXPECT_REFUSED(c.token, keys, c.expected);
}

TEST_F(JwtTest, RefusesANonCanonicalBase64Signature) {
  // 32 bytes take 43 characters, whose last carries two bits that must be zero; setting one leaves the decoded
  // bytes as they were, so only the strict decoder tells the two apart.
  const std::string good = Token(Header("HS256"), Payload(), Hs256(*secret_));
  ASSERT_EQ(good.size() - good.rfind('.') - 1, 43u);
  ASSERT_EQ(Refusal(good, AllKeys()), "(accepted)");
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string bad = good;
  bad.back() = kAlphabet[kAlphabet.find(bad.back()) ^ 1];
  EXPECT_REFUSED(bad, AllKeys(), "the signature is not base64url");
}

TEST_F(JwtTest, RefusesAnOversizeTokenBeforeDecodingIt) {
  const std::string big = Rs256Token(Payload(R"(,"pad":")" + std::string(kMaxTokenBytes, 'x') + "\""));
  EXPECT_REFUSED(big, AllKeys(), "more than 16384 bytes");
  EXPECT_REFUSED(std::string(kMaxTokenBytes + 1, 'a'), AllKeys(), "more than 16384 bytes");
  // Just under the limit is fine.
  std::string padding(kMaxTokenBytes, 'x');
  std::string token = Rs256Token(Payload(R"(,"pad":")" + padding + "\""));
  padding.resize(padding.size() - (token.size() - kMaxTokenBytes) * 3 / 4 - 4);
  token = Rs256Token(Payload(R"(,"pad":")" + padding + "\""));
  ASSERT_LE(token.size(), kMaxTokenBytes);
  EXPECT_EQ(Refusal(token, AllKeys()), "(accepted)");
}

TEST_F(JwtTest, RefusesEs256SignaturesOfAnotherLengthOrInDer) {
  const std::string header = Base64Url(Header("ES256"));
  const std::string signed_part = header + "." + Base64Url(Payload());
  const std::string der = SignWith(ec_, signed_part);
  ASSERT_NE(der.size(), 64u);
  const std::string raw = DerToRaw(der);
  ASSERT_EQ(Refusal(signed_part + "." + Base64Url(raw), AllKeys()), "(accepted)");
  EXPECT_REFUSED(signed_part + "." + Base64Url(der), AllKeys(), "an ES256 signature has 64 bytes");
  EXPECT_REFUSED(signed_part + "." + Base64Url(raw.substr(0, 63)), AllKeys(), "this one 63");
  EXPECT_REFUSED(signed_part + "." + Base64Url(raw + '\0'), AllKeys(), "this one 65");
  EXPECT_REFUSED(signed_part + "." + Base64Url('\0' + raw), AllKeys(), "this one 65");
  // r and s swapped, and all zero.
  EXPECT_REFUSED(signed_part + "." + Base64Url(raw.substr(32) + raw.substr(0, 32)), AllKeys(),
                 "the signature does not verify");
  EXPECT_REFUSED(signed_part + "." + Base64Url(std::string(64, '\0')), AllKeys(), "the signature does not verify");
}

TEST_F(JwtTest, RefusesAnRs256SignatureOfTheWrongLength) {
  const std::string token = Rs256Token();
  const std::string signed_part = token.substr(0, token.rfind('.'));
  const std::string signature = SignWith(rsa_, signed_part);
  EXPECT_REFUSED(signed_part + "." + Base64Url(signature.substr(1)), AllKeys(), "the signature does not verify");
  EXPECT_REFUSED(signed_part + "." + Base64Url('\0' + signature), AllKeys(), "the signature does not verify");
}

// --- the key set ---

class JsonWebKeySetTest : public JwtTest {
 protected:
  // The error for a set of `keys`, which must be refused.
  static std::string ParseRefusal(const std::string& json) {
    Result<JsonWebKeySet> keys = JsonWebKeySet::Parse(json);
    if (keys.ok()) return "(accepted)";
    EXPECT_EQ(keys.status().code(), StatusCode::kInvalidArgument) << keys.status().ToString();
    return keys.status().message();
  }
};

TEST_F(JsonWebKeySetTest, ReadsEachKeyType) {
  const JsonWebKeySet keys =
      Keys({RsaJwk(rsa_, "r", R"(,"alg":"RS256","use":"sig","key_ops":["verify"])"),
            EcJwk(ec_, "e", R"(,"alg":"ES256")"), OctJwk(*secret_, "o", R"(,"alg":"HS256")"), RsaJwk(other_rsa_, "")});
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys.keys().size(), 4u);
  // Members beside "keys" are allowed (RFC 7517 5).
  Result<JsonWebKeySet> with_extra = JsonWebKeySet::Parse(R"({"issuer":"x","keys":[)" + OctJwk(*secret_, "o") + "]}");
  ASSERT_TRUE(with_extra.ok()) << with_extra.status().ToString();
  EXPECT_EQ(with_extra->size(), 1u);
  // A moved set keeps its keys.
  JsonWebKeySet moved = std::move(*with_extra);
  EXPECT_EQ(moved.size(), 1u);
}

TEST_F(JsonWebKeySetTest, SkipsKeysThatAreNotForSignatures) {
  const JsonWebKeySet keys = Keys({RsaJwk(rsa_, "enc", R"(,"use":"enc","alg":"RSA-OAEP")"), EcJwk(ec_, "e")});
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_EQ(Keys({}).size(), 0u);
}

TEST_F(JsonWebKeySetTest, RefusesMalformedKeysNamingThem) {
  const std::string n = Base64Url(BignumParam(rsa_, OSSL_PKEY_PARAM_RSA_N));
  const std::string x = Base64Url(BignumParam(ec_, OSSL_PKEY_PARAM_EC_PUB_X, 32));
  std::string y_bytes = BignumParam(ec_, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
  const std::string y = Base64Url(y_bytes);
  y_bytes.back() = static_cast<char>(y_bytes.back() ^ 1);
  const std::string y_off_curve = Base64Url(y_bytes);
  std::string even_n = BignumParam(rsa_, OSSL_PKEY_PARAM_RSA_N);
  even_n.back() = static_cast<char>(even_n.back() & ~1);
  struct Case {
    std::string key;  // the second key of the set; the first is good
    std::string expected;
  };
  const std::vector<Case> cases = {
      {R"("key")", "key 1: must be a JSON object"},
      {R"({"kid":"k"})", "key 1 ('k'): has no 'kty'"},
      {R"({"kid":"k","kty":5})", "key 1 ('k'): 'kty' must be a string"},
      {R"({"kid":"k","kty":"OKP","crv":"Ed25519","x":"AA"})", "key 1 ('k'): unsupported kty 'OKP'"},
      {R"({"kid":7,"kty":"oct"})", "key 1: 'kid' must be a string"},
      {R"({"kid":")" + std::string(257, 'k') + R"(","kty":"oct"})", "key 1: 'kid' has more than 256 bytes"},
      {R"({"kid":"k","kty":"RSA","e":"AQAB"})", "key 1 ('k'): has no 'n'"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"("})", "key 1 ('k'): has no 'e'"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"(=","e":"AQAB"})", "key 1 ('k'): 'n' is not base64url"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"(","e":"AQ+B"})", "key 1 ('k'): 'e' is not base64url"},
      {R"({"kid":"k","kty":"RSA","n":")" + n.substr(0, 168) + R"(","e":"AQAB"})", "fewer than 2048 bits"},
      {R"({"kid":"k","kty":"RSA","n":")" + Base64Url(std::string(2049, '\xff')) + R"(","e":"AQAB"})",
       "more than 16384 bits"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"(","e":""})", "the RSA exponent must be 1 to 8 bytes"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"(","e":"AAAAAAAAAAAAAAAAAAAA"})", "exponent must be 1 to 8 bytes"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"(","e":"AQ"})", "not a valid RSA public key"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"(","e":"AAAAAg"})", "not a valid RSA public key"},
      {R"({"kid":"k","kty":"RSA","n":")" + Base64Url(even_n) + R"(","e":"AQAB"})", "not a valid RSA public key"},
      {R"({"kid":"k","kty":"RSA","n":")" + n + R"(","n":")" + n + R"(","e":"AQAB"})", "'n' is given twice"},
      {R"({"kid":"k","kty":"EC","x":")" + x + R"(","y":")" + y + R"("})", "key 1 ('k'): has no 'crv'"},
      {R"({"kid":"k","kty":"EC","crv":"P-384","x":")" + x + R"(","y":")" + y + R"("})", "unsupported crv 'P-384'"},
      {R"({"kid":"k","kty":"EC","crv":"P-256","y":")" + y + R"("})", "has no 'x'"},
      {R"({"kid":"k","kty":"EC","crv":"P-256","x":")" + Base64Url(std::string(31, '\x01')) + R"(","y":")" + y + R"("})",
       "must be 32 bytes each"},
      {R"({"kid":"k","kty":"EC","crv":"P-256","x":")" + x + R"(","y":")" + y_off_curve + R"("})", "not on P-256"},
      {R"({"kid":"k","kty":"oct"})", "key 1 ('k'): has no 'k'"},
      {R"({"kid":"k","kty":"oct","k":")" + Base64Url(std::string(31, 's')) + R"("})", "must have 32 to 1024 bytes"},
      {R"({"kid":"k","kty":"oct","k":")" + Base64Url(std::string(1025, 's')) + R"("})", "must have 32 to 1024 bytes"},
      {OctJwk(*secret_, "k", R"(,"alg":"RS256")"),
       "key 1 ('k'): 'alg' is 'RS256', but a key of kty oct verifies HS256"},
      {RsaJwk(rsa_, "k", R"(,"alg":"HS256")"), "'alg' is 'HS256', but a key of kty RSA verifies RS256"},
      {RsaJwk(rsa_, "k", R"(,"alg":"RS512")"), "'alg' is 'RS512'"},
      {EcJwk(ec_, "k", R"(,"alg":"ES384")"), "'alg' is 'ES384'"},
      {RsaJwk(rsa_, "k", R"(,"use":5)"), "'use' must be a string"},
  };
  for (const Case& c : cases) {
    const std::string message = ParseRefusal(Jwks({OctJwk(*secret_, "good"), c.key}));
    EXPECT_NE(message.find(c.expected), std::string::npos) << "expected: " << c.expected << "\n  gave: " << message;
  }
}

TEST_F(JsonWebKeySetTest, RefusesAMalformedSet) {
  for (const std::string bad :
       {"", "not json", "[]", "{}", R"({"keys":{}})", R"({"keys":null})", R"({"keys":[],"keys":[]})"}) {
    EXPECT_NE(ParseRefusal(bad), "(accepted)") << bad;
  }
  std::vector<std::string> many(JsonWebKeySet::kMaxKeys + 1, OctJwk(*secret_, ""));
  EXPECT_NE(ParseRefusal(Jwks(many)).find("more than 256 keys"), std::string::npos);
  many.pop_back();
  EXPECT_EQ(Keys(many).size(), JsonWebKeySet::kMaxKeys);
  EXPECT_NE(ParseRefusal(Jwks({}) + std::string(JsonWebKeySet::kMaxFileBytes, ' ')).find("bytes"), std::string::npos);
}

}  // namespace
}  // namespace weft
