#include "frontend/http/request_head.h"

#include <gtest/gtest.h>

#include <string>

namespace weft {
namespace {

namespace http = boost::beast::http;

// The head's end in `bytes` fed in one go, or the error's message; "more" while it is incomplete.
std::string EndOf(std::string_view bytes) {
  size_t scanned = 0;
  Result<std::optional<size_t>> end = FindRequestHeadEnd(bytes, &scanned);
  if (!end.ok()) return end.status().message();
  return *end ? std::to_string(**end) : "more";
}

std::string ErrorOf(std::string_view head) {
  RequestHead parsed;
  Status status = ParseRequestHead(head, &parsed);
  return status.ok() ? "ok" : status.message();
}

Result<RequestHead> Parse(std::string_view head) {
  RequestHead parsed;
  Status status = ParseRequestHead(head, &parsed);
  if (!status.ok()) return status;
  return parsed;
}

TEST(FindRequestHeadEndTest, EndsAfterTheFirstEmptyLine) {
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), "27");
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\n\r\n"), "18");
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\nHost: a\r\n"), "more");
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\nHost: a\r\n\r"), "more");
  EXPECT_EQ(EndOf(""), "more");
  // An empty line first ends an (empty) head: ParseRequestHead refuses it.
  EXPECT_EQ(EndOf("\r\nGET / HTTP/1.1\r\n\r\n"), "2");
}

TEST(EmptyLinesAtStartTest, CountsWholeEmptyLinesOnly) {
  EXPECT_EQ(EmptyLinesAtStart(""), 0u);
  EXPECT_EQ(EmptyLinesAtStart("GET / HTTP/1.1\r\n\r\n"), 0u);
  EXPECT_EQ(EmptyLinesAtStart("\r\nGET / HTTP/1.1\r\n\r\n"), 2u);
  EXPECT_EQ(EmptyLinesAtStart("\r\n\r\n\r"), 4u);  // the last CR waits for its LF
  EXPECT_EQ(EmptyLinesAtStart("\r"), 0u);
  EXPECT_EQ(EmptyLinesAtStart("\n\r\n"), 0u);  // a bare LF is left to FindRequestHeadEnd to refuse
}

TEST(FindRequestHeadEndTest, ABareLineFeedIsRefusedAtOnce) {
  EXPECT_NE(EndOf("GET / HTTP/1.1\n\n").find("bare LF"), std::string::npos);
  EXPECT_NE(EndOf("GET / HTTP/1.1\r\nHost: a\n").find("bare LF"), std::string::npos);
  EXPECT_NE(EndOf("\n").find("bare LF"), std::string::npos);
}

TEST(FindRequestHeadEndTest, ResumesWhereTheLastCallStopped) {
  const std::string head = "POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 2\r\n\r\n";
  size_t scanned = 0;
  for (size_t n = 0; n < head.size(); ++n) {
    Result<std::optional<size_t>> end = FindRequestHeadEnd(std::string_view(head).substr(0, n), &scanned);
    ASSERT_TRUE(end.ok()) << n;
    ASSERT_FALSE(*end) << n;
    ASSERT_LE(scanned, n);
  }
  Result<std::optional<size_t>> end = FindRequestHeadEnd(head + "{}", &scanned);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, head.size());
}

TEST(ParseRequestHeadTest, ReadsTheRequestLineAndTheFieldsInOrder) {
  Result<RequestHead> head = Parse(
      "POST /v2/models/mlp/infer?x=1 HTTP/1.1\r\nHost: localhost\r\nContent-Type:  application/json \t\r\n"
      "X-Empty:\r\nContent-Length: 42\r\nx-custom: one\r\nX-Custom: two\r\n\r\n");
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->method, http::verb::post);
  EXPECT_EQ(head->target, "/v2/models/mlp/infer?x=1");
  EXPECT_EQ(head->version, 11u);
  EXPECT_EQ(head->content_length, 42u);
  EXPECT_FALSE(head->transfer_encoding);
  EXPECT_TRUE(head->keep_alive);
  EXPECT_FALSE(head->expect_continue);
  ASSERT_EQ(head->headers.size(), 6u);
  EXPECT_EQ(head->headers[1].name, "Content-Type");
  EXPECT_EQ(head->headers[1].value, "application/json");
  EXPECT_EQ(head->headers[2].value, "");
  EXPECT_EQ(head->headers.Find("content-type"), "application/json");
  EXPECT_EQ(head->headers.Find("X-CUSTOM"), "one");
  EXPECT_EQ(head->headers.Count("x-custom"), 2u);
  EXPECT_EQ(head->headers.Find("Accept"), "");
}

TEST(ParseRequestHeadTest, AnUnknownMethodIsKeptAsUnknown) {
  Result<RequestHead> head = Parse("BREW /pot HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->method, http::verb::unknown);
  EXPECT_FALSE(head->content_length);
}

TEST(ParseRequestHeadTest, KeepAliveFollowsTheVersionAndTheConnectionOptions) {
  auto keep_alive = [](std::string_view version, std::string_view connection) {
    std::string text = "GET / " + std::string(version) + "\r\n";
    if (!connection.empty()) text += "Connection: " + std::string(connection) + "\r\n";
    Result<RequestHead> head = Parse(text + "\r\n");
    EXPECT_TRUE(head.ok()) << head.status().message();
    return head.ok() && head->keep_alive;
  };
  EXPECT_TRUE(keep_alive("HTTP/1.1", ""));
  EXPECT_FALSE(keep_alive("HTTP/1.1", "close"));
  EXPECT_FALSE(keep_alive("HTTP/1.1", "Upgrade, CLOSE"));
  EXPECT_TRUE(keep_alive("HTTP/1.1", "keep-alive"));
  EXPECT_FALSE(keep_alive("HTTP/1.0", ""));
  EXPECT_TRUE(keep_alive("HTTP/1.0", "Keep-Alive"));
  EXPECT_TRUE(keep_alive("HTTP/1.0", "foo ,keep-alive"));
  EXPECT_TRUE(keep_alive("HTTP/1.0", ", ,keep-alive,"));
  EXPECT_FALSE(keep_alive("HTTP/1.0", "keep-alive, close"));
}

TEST(ParseRequestHeadTest, ExpectContinueAndTransferEncodingAreNoted) {
  Result<RequestHead> head = Parse("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_TRUE(head.ok());
  EXPECT_TRUE(head->expect_continue);
  EXPECT_TRUE(head->transfer_encoding);
  EXPECT_FALSE(head->content_length);
}

// RFC 9110 section 10.1.1: a server ignores the expectation of an HTTP/1.0 request, whose client knows no 1xx.
TEST(ParseRequestHeadTest, AnHttp10RequestExpectsNoContinue) {
  Result<RequestHead> head = Parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  ASSERT_TRUE(head.ok());
  EXPECT_FALSE(head->expect_continue);
}

TEST(ParseRequestHeadTest, TheLargestContentLengthIsReadAndOneMoreIsRefused) {
  Result<RequestHead> head = Parse("POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->content_length, 18446744073709551615u);
  EXPECT_NE(ErrorOf("POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n").find("below 2^64"),
            std::string::npos);
}

// Each of these is refused, with a reason; several are the ways two parsers come to disagree on where a request
// ends (request smuggling).
TEST(ParseRequestHeadTest, MalformedHeadsAreRefused) {
  const char* heads[] = {
      "\r\n",                                                               // no request line
      "GET /\r\n\r\n",                                                      // no version
      "GET  / HTTP/1.1\r\n\r\n",                                            // two spaces
      "GET / HTTP/1.1 \r\n\r\n",                                            // a space after the version
      "GET / HTTP/2.0\r\n\r\n",                                             // another version
      "GET / http/1.1\r\n\r\n",                                             // the version's name in lower case
      "G(T / HTTP/1.1\r\n\r\n",                                             // not a token
      " GET / HTTP/1.1\r\n\r\n",                                            // a space first
      "GET /a\x01 HTTP/1.1\r\n\r\n",                                        // a control character in the target
      "GET / HTTP/1.1\r\nHost : a\r\n\r\n",                                 // space before the colon
      "GET / HTTP/1.1\r\nHost a\r\n\r\n",                                   // no colon
      "GET / HTTP/1.1\r\n: a\r\n\r\n",                                      // no name
      "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n",                        // obsolete line folding
      "GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n",                                // a bare CR in a value
      "GET / HTTP/1.1\r\nX-A: a\x7f\r\n\r\n",                               // DEL in a value
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",  // repeated
      "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n",                    // a list
      "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",                      // not a number
      "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",                      // not only digits
      "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",                         // empty
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",           // both
      "GET / HTTP/1.1\r\nHost: a\r\n",                                                        // no empty line
      "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",                                   // not chunked
      "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",                          // another coding too
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",  // twice
      "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",                                // on HTTP/1.0
      "GET / HTTP/1.1\r\nConnection: keep/alive\r\n\r\n",                                     // not a token
      "GET / HTTP/1.1\r\nProxy-Connection: a b\r\n\r\n",                                      // not a token
  };
  for (const char* head : heads) EXPECT_NE(ErrorOf(head), "ok") << head;
  // A value's NUL is a control character too (a C string could not carry it in the list above).
  constexpr char kNul[] = "GET / HTTP/1.1\r\nX-A: a\0b\r\n\r\n";
  EXPECT_NE(ErrorOf(std::string_view(kNul, sizeof(kNul) - 1)), "ok");
  // obs-text (bytes above 0x7f) is allowed in values and targets.
  EXPECT_EQ(ErrorOf("GET /caf\xc3\xa9 HTTP/1.1\r\nX-A: caf\xc3\xa9\r\n\r\n"), "ok");
}

// A connection parses each request into the same RequestHead: nothing of the one before may stay.
TEST(ParseRequestHeadTest, AHeadParsedIntoAnotherKeepsNothingOfIt) {
  RequestHead head;
  ASSERT_TRUE(ParseRequestHead("POST /a HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: "
                               "keep-alive\r\nX-A: 1\r\n\r\n",
                               &head)
                  .ok());
  ASSERT_TRUE(ParseRequestHead("GET /b HTTP/1.1\r\nConnection: close\r\n\r\n", &head).ok());
  EXPECT_EQ(head.method, http::verb::get);
  EXPECT_EQ(head.target, "/b");
  EXPECT_EQ(head.version, 11u);
  EXPECT_FALSE(head.content_length);
  EXPECT_FALSE(head.expect_continue);
  EXPECT_FALSE(head.keep_alive);
  ASSERT_EQ(head.headers.size(), 1u);
  EXPECT_EQ(head.headers.Find("X-A"), "");
  ASSERT_TRUE(ParseRequestHead("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &head).ok());
  ASSERT_TRUE(ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\n", &head).ok());
  EXPECT_FALSE(head.transfer_encoding);
  EXPECT_TRUE(head.keep_alive);
}

TEST(HttpHeadersTest, AddedFieldsAreFoundInOrder) {
  HttpHeaders headers;
  headers.Add("X-A", "1");
  headers.Add("x-a", "2");
  headers.Add("Authorization", "Bearer t");
  EXPECT_EQ(headers.size(), 3u);
  EXPECT_EQ(headers.Find("X-a"), "1");
  EXPECT_EQ(headers.Count("X-A"), 2u);
  EXPECT_EQ(headers[2].name, "Authorization");
  EXPECT_EQ(headers[2].value, "Bearer t");
  // A copy has its own text.
  HttpHeaders copy = headers;
  headers.Add("Y", "3");
  EXPECT_EQ(copy.size(), 3u);
  EXPECT_EQ(copy.Find("authorization"), "Bearer t");
}

}  // namespace
}  // namespace weft
