#include "loadgen/http_transport.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(HttpUrlTest, ParsesTheUsualForms) {
  auto full = ParseHttpUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->host, "127.0.0.1");
  EXPECT_EQ(full->port, 8000);
  EXPECT_EQ(full->base_path, "");

  auto bare = ParseHttpUrl("localhost:8000");  // perf_analyzer's -u form
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->host, "localhost");
  EXPECT_EQ(bare->port, 8000);

  auto path = ParseHttpUrl("http://gateway/weft/");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->port, 80);
  EXPECT_EQ(path->base_path, "/weft");

  auto v6 = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "[::1]");
  EXPECT_EQ(v6->port, 9000);
  EXPECT_EQ(v6->ToString(), "http://[::1]:9000");
}

TEST(HttpUrlTest, RejectsWhatItCannotUse) {
  EXPECT_EQ(ParseHttpUrl("https://host").status().code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(ParseHttpUrl("grpc://host:8001").ok());
  EXPECT_FALSE(ParseHttpUrl("http://:8000").ok());
  EXPECT_FALSE(ParseHttpUrl("http://host:").ok());
  EXPECT_FALSE(ParseHttpUrl("http://host:0").ok());
  EXPECT_FALSE(ParseHttpUrl("http://host:70000").ok());
  EXPECT_FALSE(ParseHttpUrl("http://[::1").ok());
}

TEST(HttpTransportTest, NothingListeningIsAConnectError) {
  // Port 1 on loopback: nothing listens there on a test machine, and the connect is refused at once.
  auto transport = HttpTransport::Create(*ParseHttpUrl("http://127.0.0.1:1"));
  ASSERT_TRUE(transport.ok());
  PreparedRequest get;
  get.method = "GET";
  get.target = "/v2/health/live";
  TransportReply reply = ExchangeOnce(**transport, get, std::chrono::seconds(5));
  EXPECT_EQ(reply.failure, TransportReply::Failure::kConnect) << reply.error;
}

}  // namespace
}  // namespace weft
