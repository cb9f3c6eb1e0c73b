#pragma once

// Compact JWS tokens and JSON web keys for the auth tests, made independently of the code under test.

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::jwt_testing {

inline std::string Base64Url(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  auto byte = [&bytes](size_t at) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t group = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[group >> shift & 63];
  }
  if (bytes.size() - i == 1) {
    const uint32_t group = byte(i) << 16;
    for (int shift : {18, 12}) out += kAlphabet[group >> shift & 63];
  } else if (bytes.size() - i == 2) {
    const uint32_t group = byte(i) << 16 | byte(i + 1) << 8;
    for (int shift : {18, 12, 6}) out += kAlphabet[group >> shift & 63];
  }
  return out;
}

inline std::string OctJwk(std::string_view secret, std::string_view kid, std::string_view extra = "") {
  return std::string(R"({"kty":"oct")") + (kid.empty() ? "" : R"(,"kid":")" + std::string(kid) + "\"") + R"(,"k":")" +
         Base64Url(secret) + "\"" + std::string(extra) + "}";
}

inline std::string Jwks(const std::vector<std::string>& keys) {
  std::string out = R"({"keys":[)";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? "," : "") + keys[i];
  return out + "]}";
}

inline std::string Hmac(std::string_view secret, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &size);
  return std::string(reinterpret_cast<char*>(mac), size);
}

using Signer = std::function<std::string(std::string_view)>;

// A compact JWS of `header` and `payload` (JSON text), signed by `sign` over the first two segments.
inline std::string Token(std::string_view header, std::string_view payload, const Signer& sign) {
  const std::string signed_part = Base64Url(header) + "." + Base64Url(payload);
  return signed_part + "." + Base64Url(sign(signed_part));
}

}  // namespace weft::jwt_testing
