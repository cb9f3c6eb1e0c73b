#include "frontend/http/content_coding.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace weft {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string Text(const RequestBody& body) { return std::string(body.view()); }

// What zlib.compress (deflate) and gzip.compress write, made with zlib directly rather than with EncodeContent.
std::string Compressed(const std::string& data, bool gzip) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, data.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

TEST(ContentCodingTest, NamesHeadersAsTritonsClientsSendThem) {
  EXPECT_EQ(ParseContentEncoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding("identity"), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding(" GZIP "), ContentCoding::kGzip);
  EXPECT_EQ(ParseContentEncoding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ParseContentEncoding("br"), std::nullopt);
  EXPECT_EQ(ParseContentEncoding("gzip, deflate"), std::nullopt);

  EXPECT_EQ(ChooseResponseCoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ChooseResponseCoding("deflate, gzip;q=0.5"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("gzip;q=0, deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ChooseResponseCoding("*"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("*;q=0"), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("br, identity"), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("gzip;q=2, deflate;q=abc"), ContentCoding::kIdentity);  // malformed: ignored
}

TEST(ContentCodingTest, InflatesBothCodingsWithTheBinarySectionAligned) {
  std::string data = R"({"inputs":[]})";
  for (int i = 0; i < 5000; ++i) data += static_cast<char>(i * 7);
  for (ContentCoding coding : {ContentCoding::kGzip, ContentCoding::kDeflate, ContentCoding::kIdentity}) {
    const std::string sent =
        coding == ContentCoding::kIdentity ? data : Compressed(data, coding == ContentCoding::kGzip);
    auto body = DecodeContent(Bytes(sent), coding, data.size(), 13);
    ASSERT_TRUE(body.ok()) << ContentCodingName(coding) << ": " << body.status().ToString();
    EXPECT_EQ(Text(*body), data);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(body->data() + 13) % kRequestBodyAlignment, 0u);
  }
}

TEST(ContentCodingTest, RefusesBombsBrokenDataAndTrailingBytes) {
  const std::string zeros(size_t{8} << 20, '\0');
  auto bomb = DecodeContent(Bytes(Compressed(zeros, true)), ContentCoding::kGzip, size_t{1} << 20, 0);
  EXPECT_EQ(bomb.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(bomb.status().message().find("1048576"), std::string::npos) << bomb.status().message();
  auto exact = DecodeContent(Bytes(Compressed(zeros, true)), ContentCoding::kGzip, zeros.size(), 0);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->size(), zeros.size());

  const std::string good = Compressed("hello, weft", false);
  auto check = [](const std::string& sent, const std::string& needle) {
    auto body = DecodeContent(Bytes(sent), ContentCoding::kDeflate, 1024, 0);
    ASSERT_FALSE(body.ok()) << needle;
    EXPECT_EQ(body.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(body.status().message().find(needle), std::string::npos) << body.status().message();
  };
  check("", "ends before");
  check(good.substr(0, good.size() - 3), "ends before");
  check(good + "xyz", "3 bytes after");
  check("this is not deflate", "not valid deflate");
}

// A limit of SIZE_MAX ("no limit") once wrapped the room left for the inflated bytes to 0, and the decoder spun.
TEST(ContentCodingTest, TheLargestLimitInflatesLikeAnyOther) {
  for (ContentCoding coding : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    auto body = DecodeContent(Bytes(Compressed("abc", coding == ContentCoding::kGzip)), coding,
                              std::numeric_limits<size_t>::max(), 0);
    ASSERT_TRUE(body.ok()) << body.status().ToString();
    EXPECT_EQ(Text(*body), "abc");
  }
}

TEST(ContentCodingTest, CompressesTheBodyAndItsSegmentsInOrder) {
  auto tensor = std::make_shared<std::string>(3000, 'x');
  for (ContentCoding coding : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    HttpResponse response;
    response.body = R"({"outputs":[]})";
    response.segments.push_back({tensor, Bytes(*tensor)});
    EncodeContent(coding, &response);
    EXPECT_TRUE(response.segments.empty());
    ASSERT_EQ(response.headers.size(), 1u);
    EXPECT_EQ(response.headers[0],
              (std::pair<std::string, std::string>{"Content-Encoding", std::string(ContentCodingName(coding))}));
    EXPECT_LT(response.body.size(), 200u);
    auto back = DecodeContent(Bytes(response.body), coding, 1 << 20, 0);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(Text(*back), R"({"outputs":[]})" + *tensor);
  }
  HttpResponse plain;
  plain.body = "{}";
  EncodeContent(ContentCoding::kIdentity, &plain);
  EXPECT_EQ(plain.body, "{}");
  EXPECT_TRUE(plain.headers.empty());
}

}  // namespace
}  // namespace weft
