#include "auth/credentials.h"

#include <gtest/gtest.h>

#include <string>

namespace weft {
namespace {

TEST(ParseBearerTest, ReturnsTheTokenAsAViewIntoTheHeader) {
  const std::string header = "Bearer abc-DEF_012.~+/xyz==";
  Result<std::optional<std::string_view>> token = ParseBearer(header);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  ASSERT_TRUE(token->has_value());
  EXPECT_EQ(**token, "abc-DEF_012.~+/xyz==");
  EXPECT_EQ((*token)->data(), header.data() + 7);
}

TEST(ParseBearerTest, MatchesTheSchemeInAnyCaseAndDropsSpaces) {
  for (std::string_view header : {"bearer t0k", "BEARER t0k", "BeArEr t0k", "  Bearer   t0k  ", "\tBearer\tt0k\t"}) {
    Result<std::optional<std::string_view>> token = ParseBearer(header);
    ASSERT_TRUE(token.ok()) << header << ": " << token.status().ToString();
    ASSERT_TRUE(token->has_value()) << header;
    EXPECT_EQ(**token, "t0k") << header;
  }
}

TEST(ParseBearerTest, AnEmptyValueIsNoCredential) {
  for (std::string_view header : {"", " ", "\t \t"}) {
    Result<std::optional<std::string_view>> token = ParseBearer(header);
    ASSERT_TRUE(token.ok()) << "'" << header << "'";
    EXPECT_FALSE(token->has_value());
  }
}

TEST(ParseBearerTest, RefusesOtherSchemesAndMalformedTokens) {
  for (std::string_view header :
       {"Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "Bearerabc", "Token abc", "abc", "Bearer a b", "Bearer a,b",
        "Bearer =abc", "Bearer a=b", "Bearer ab=c=", "Bearer \"abc\"", "Bearer abc\r\n", "Bearer ab\x01",
        "Bearer caf\xc3\xa9", "Bearer, abc",
        "Bearer\x0b"
        "abc"}) {
    Result<std::optional<std::string_view>> token = ParseBearer(header);
    ASSERT_FALSE(token.ok()) << "'" << header << "' gave a token";
    EXPECT_EQ(token.status().code(), StatusCode::kUnauthenticated) << header;
  }
}

// Every byte inside a token, against the RFCs' alphabets written out here: token68 (RFC 6750) for the header, and
// base64url (RFC 4648) for a JWT's segments.
TEST(ParseBearerTest, EveryByteIsClassedAsRfc6750Says) {
  const std::string_view token68 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/";
  const std::string_view base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const std::string token = std::string("a") + c + "a";
    const bool in_token68 = token68.find(c) != std::string_view::npos;
    EXPECT_EQ(ParseBearer("Bearer " + token).ok(), in_token68) << "byte " << b;
    const bool in_base64url = base64url.find(c) != std::string_view::npos;
    EXPECT_EQ(LooksLikeJwt(token + ".b.c"), in_base64url) << "byte " << b;
  }
}

TEST(LooksLikeJwtTest, WantsThreeNonEmptyBase64UrlSegments) {
  EXPECT_TRUE(LooksLikeJwt("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"));
  EXPECT_TRUE(LooksLikeJwt("a.b.c"));
  EXPECT_TRUE(LooksLikeJwt("A-_.0-9.z_"));
  for (std::string_view token : {"", "a", "a.b", "a.b.", ".b.c", "a..c", "a.b.c.", "a.b.c.d", "..", "a.b+.c", "a.b/.c",
                                 "a.b.c=", "a.b.c~", "a b.c.d"}) {
    EXPECT_FALSE(LooksLikeJwt(token)) << token;
  }
}

TEST(LooksLikeJwtTest, ApiKeySecretsDoNotLookLikeJwts) {
  EXPECT_FALSE(LooksLikeJwt("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"));
  EXPECT_FALSE(LooksLikeJwt("q1_Lw3-ZsPz4x8bVf5Y2nT0oR7cJm6kAeHdUgSiXyW9"));
}

}  // namespace
}  // namespace weft
