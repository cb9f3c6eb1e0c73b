#include "frontend/http/repository_codec.h"

#include <gtest/gtest.h>

#include "frontend/http/testing/bytes.h"

namespace weft {
namespace {

using weft::testing::Bytes;

TEST(RepositoryCodecTest, DecodesIndexRequests) {
  EXPECT_FALSE(DecodeRepositoryIndexRequest(Bytes("")).value().ready);
  EXPECT_FALSE(DecodeRepositoryIndexRequest(Bytes(" \n")).value().ready);
  EXPECT_FALSE(DecodeRepositoryIndexRequest(Bytes("{}")).value().ready);
  EXPECT_TRUE(DecodeRepositoryIndexRequest(Bytes(R"({"ready": true})")).value().ready);
  for (const char* bad : {R"({"ready": 1})", "[]", "{", R"("ready")"}) {
    EXPECT_EQ(DecodeRepositoryIndexRequest(Bytes(bad)).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RepositoryCodecTest, DecodesLoadRequests) {
  EXPECT_FALSE(DecodeRepositoryLoadRequest(Bytes("")).value().config.has_value());
  EXPECT_FALSE(DecodeRepositoryLoadRequest(Bytes(R"({"parameters": {}})")).value().config.has_value());
  auto r = DecodeRepositoryLoadRequest(Bytes(R"({"parameters": {"config": "{\"max_batch_size\": 4}"}})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r->config, R"({"max_batch_size": 4})");
  EXPECT_EQ(DecodeRepositoryLoadRequest(Bytes(R"({"parameters": {"config": {"max_batch_size": 4}}})")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeRepositoryLoadRequest(Bytes(R"({"parameters": {"file:1/model.pt": "AAAA"}})")).status().code(),
            StatusCode::kUnimplemented);
  Status misspelt = DecodeRepositoryLoadRequest(Bytes(R"({"parameters": {"conifg": "{}"}})")).status();
  EXPECT_EQ(misspelt.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(misspelt.message().find("conifg"), std::string::npos);
  EXPECT_EQ(DecodeRepositoryLoadRequest(Bytes(R"({"parameters": []})")).status().code(), StatusCode::kInvalidArgument);
}

TEST(RepositoryCodecTest, DecodesUnloadRequests) {
  EXPECT_FALSE(DecodeRepositoryUnloadRequest(Bytes("")).value().unload_dependents);
  EXPECT_TRUE(
      DecodeRepositoryUnloadRequest(Bytes(R"({"parameters": {"unload_dependents": true}})")).value().unload_dependents);
  EXPECT_EQ(DecodeRepositoryUnloadRequest(Bytes(R"({"parameters": {"unload_dependents": "yes"}})")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeRepositoryUnloadRequest(Bytes(R"({"parameters": {"force": true}})")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(RepositoryCodecTest, EncodesTheIndex) {
  EXPECT_EQ(EncodeRepositoryIndex({}), "[]");
  std::vector<RepositoryIndexEntry> entries = {{"a", 2, "READY", ""}, {"b", 0, "UNAVAILABLE", "not loaded"}};
  EXPECT_EQ(EncodeRepositoryIndex(entries), R"([{"name":"a","version":"2","state":"READY","reason":""},)"
                                            R"({"name":"b","state":"UNAVAILABLE","reason":"not loaded"}])");
}

}  // namespace
}  // namespace weft
