#include "trace/otlp_exporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace weft {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
using opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr milliseconds kWait{10000};  // the most a test waits for something that should come at once

// How the collector answers one request.
struct Answer {
  int status = 200;
  std::optional<int> retry_after;  // seconds
  std::string body;
};

// What the collector received in one request.
struct Received {
  std::string target;
  std::string content_type;
  ExportTraceServiceRequest request;
  int connection = 0;  // which TCP connection it came on, counted from 1
  SteadyTime at;
};

// An OTLP/HTTP collector on 127.0.0.1, port 0, served by one thread: records each request and answers it as
// scripted (200 with an empty ExportTraceServiceResponse unless told otherwise), or holds the answers while stalled.
class FakeCollector {
 public:
  FakeCollector() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeCollector() {
    io_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + path; }

  // The next `times` requests get `answer`; later ones 200 again.
  void AnswerNext(Answer answer, int times = 1) {
    std::lock_guard lock(mu_);
    for (int i = 0; i < times; ++i) script_.push_back(answer);
  }
  // While stalled, requests are recorded but not answered; unstalling answers the held ones.
  void Stall(bool stalled) {
    std::lock_guard lock(mu_);
    stalled_ = stalled;
    if (!stalled) {
      for (auto& answer : held_) asio::post(io_, std::move(answer));
      held_.clear();
    }
  }
  // Closes every connection right after answering, without saying so (no `Connection: close`): the exporter
  // learns only when it sends the next request on it.
  void CloseAfterEachAnswer() {
    std::lock_guard lock(mu_);
    close_after_answer_ = true;
  }

  std::vector<Received> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  size_t request_count() {
    std::lock_guard lock(mu_);
    return requests_.size();
  }
  // Names of all spans received, in order.
  std::vector<std::string> span_names() {
    std::lock_guard lock(mu_);
    std::vector<std::string> names;
    for (const Received& r : requests_) {
      for (const auto& rs : r.request.resource_spans()) {
        for (const auto& ss : rs.scope_spans()) {
          for (const auto& span : ss.spans()) names.push_back(span.name());
        }
      }
    }
    return names;
  }
  bool WaitForRequests(size_t n, milliseconds timeout = kWait) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }

  std::string path = "/v1/traces";

 private:
  struct Connection {
    explicit Connection(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    int id = 0;
  };

  void Accept() {
    acceptor_.async_accept([this](error_code ec, tcp::socket socket) {
      if (ec) return;
      auto connection = std::make_shared<Connection>(std::move(socket));
      connection->id = ++connections_;
      Read(connection);
      Accept();
    });
  }

  void Read(const std::shared_ptr<Connection>& c) {
    c->request = {};
    http::async_read(c->socket, c->buffer, c->request, [this, c](error_code ec, size_t) {
      if (ec) return;
      Received received;
      received.target = std::string(c->request.target());
      received.content_type = std::string(c->request[http::field::content_type]);
      EXPECT_TRUE(received.request.ParseFromString(c->request.body()));
      received.connection = c->id;
      received.at = steady_clock::now();
      Answer answer;
      bool close = false;
      std::unique_lock lock(mu_);
      requests_.push_back(std::move(received));
      cv_.notify_all();
      if (!script_.empty()) {
        answer = script_.front();
        script_.pop_front();
      }
      close = close_after_answer_;
      auto respond = [this, c, answer, close] { Respond(c, answer, close); };
      if (stalled_) {
        held_.push_back(respond);
      } else {
        lock.unlock();
        respond();
      }
    });
  }

  void Respond(const std::shared_ptr<Connection>& c, const Answer& answer, bool close) {
    auto response = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(answer.status), 11);
    response->set(http::field::content_type, "application/x-protobuf");
    if (answer.retry_after) response->set(http::field::retry_after, std::to_string(*answer.retry_after));
    response->body() =
        answer.status == 200 && answer.body.empty() ? ExportTraceServiceResponse().SerializeAsString() : answer.body;
    response->keep_alive(c->request.keep_alive());
    response->prepare_payload();
    http::async_write(c->socket, *response, [this, c, response, close](error_code ec, size_t) {
      if (ec) return;
      if (close) {
        error_code ignored;
        c->socket.close(ignored);
        return;
      }
      if (response->keep_alive()) Read(c);
    });
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  int connections_ = 0;  // used on the io thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> requests_;
  std::deque<Answer> script_;
  bool stalled_ = false;
  bool close_after_answer_ = false;
  std::vector<std::function<void()>> held_;
  std::thread thread_;
};

std::vector<SpanData> Spans(int n, const std::string& prefix = "span-", int first = 0) {
  std::vector<SpanData> spans(n);
  for (int i = 0; i < n; ++i) {
    SpanData& span = spans[i];
    span.trace_id[0] = 1;
    span.span_id[0] = static_cast<uint8_t>(i + 1);
    span.name = prefix + std::to_string(first + i);
    span.kind = SpanData::Kind::kServer;
    span.start_unix_ns = 1000;
    span.end_unix_ns = 2000;
    span.attributes = {{"i", int64_t{first + i}}};
  }
  return spans;
}

std::vector<std::string> Names(int n, const std::string& prefix = "span-") {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

int SpanCount(const Received& received) { return received.request.resource_spans(0).scope_spans(0).spans_size(); }

// Counters, and options that send at once and retry quickly, so that no test sleeps long.
class OtlpExporterTest : public ::testing::Test {
 protected:
  OtlpExporter::Options FastOptions(const std::string& url) {
    OtlpExporter::Options options;
    options.url = url;
    options.resource = {{"service.name", "weft-test"}};
    options.schedule_delay = milliseconds(10000);  // tests Flush or fill batches unless they test the delay
    options.timeout = milliseconds(10000);
    options.initial_backoff = milliseconds(5);
    options.max_backoff = milliseconds(50);
    return options;
  }
  OtlpExporter::Counters counters() { return {&exported_, &dropped_, &failed_}; }

  Counter exported_;
  Counter dropped_;
  Counter failed_;
};

TEST_F(OtlpExporterTest, SpansArriveDecodedWithTheContentTypeAndPath) {
  FakeCollector collector;
  OtlpExporter exporter(FastOptions(collector.url()), counters());
  exporter.Add(Spans(3));
  ASSERT_TRUE(exporter.Flush(kWait));

  std::vector<Received> requests = collector.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/v1/traces");
  EXPECT_EQ(requests[0].content_type, "application/x-protobuf");
  const auto& resource_spans = requests[0].request.resource_spans(0);
  ASSERT_EQ(resource_spans.resource().attributes_size(), 1);
  EXPECT_EQ(resource_spans.resource().attributes(0).key(), "service.name");
  EXPECT_EQ(resource_spans.resource().attributes(0).value().string_value(), "weft-test");
  EXPECT_EQ(resource_spans.scope_spans(0).scope().name(), "weft");
  EXPECT_EQ(collector.span_names(), Names(3));
  const auto& span = resource_spans.scope_spans(0).spans(2);
  EXPECT_EQ(span.kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(span.attributes(0).value().int_value(), 2);
  EXPECT_EQ(exported_.value(), 3);
  EXPECT_EQ(dropped_.value(), 0);
  EXPECT_EQ(failed_.value(), 0);
}

TEST_F(OtlpExporterTest, BatchesHoldAtMostMaxExportBatchSize) {
  FakeCollector collector;
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_export_batch_size = 10;
  OtlpExporter exporter(options, counters());
  exporter.Add(Spans(25));
  // Full batches go without waiting for the delay (10 s) or a flush.
  ASSERT_TRUE(collector.WaitForRequests(2));
  ASSERT_TRUE(exporter.Flush(kWait));

  std::vector<Received> requests = collector.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(SpanCount(requests[0]), 10);
  EXPECT_EQ(SpanCount(requests[1]), 10);
  EXPECT_EQ(SpanCount(requests[2]), 5);
  EXPECT_EQ(collector.span_names(), Names(25));
  EXPECT_EQ(exported_.value(), 25);
}

TEST_F(OtlpExporterTest, ScheduleDelaySendsAPartialBatch) {
  FakeCollector collector;
  OtlpExporter::Options options = FastOptions(collector.url());
  options.schedule_delay = milliseconds(30);
  OtlpExporter exporter(options, counters());
  exporter.Add(Spans(3));
  ASSERT_TRUE(collector.WaitForRequests(1));  // no Flush: the delay sends it
  EXPECT_EQ(collector.span_names(), Names(3));
}

TEST_F(OtlpExporterTest, AFullQueueDropsAndCountsWithoutWaitingForTheCollector) {
  FakeCollector collector;
  collector.Stall(true);
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_queue_size = 10;
  options.max_export_batch_size = 5;
  options.timeout = milliseconds(60000);
  OtlpExporter exporter(options, counters());
  exporter.Add(Spans(5, "first-"));
  ASSERT_TRUE(collector.WaitForRequests(1));  // the thread now waits for an answer that does not come

  auto start = steady_clock::now();
  for (int i = 0; i < 30; ++i) exporter.Add(Spans(1, "later-", i));
  // Only a functional check that Add does not wait for the stalled collector (60 s timeout).
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(dropped_.value(), 20);
  EXPECT_FALSE(exporter.Flush(milliseconds(20)));

  collector.Stall(false);
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(exported_.value(), 15);
  EXPECT_EQ(dropped_.value(), 20);
  EXPECT_EQ(failed_.value(), 0);
  std::vector<std::string> names = collector.span_names();
  ASSERT_EQ(names.size(), 15u);
  EXPECT_EQ(names[5], "later-0");
  EXPECT_EQ(names[14], "later-9");
}

TEST_F(OtlpExporterTest, RetryableAnswersAreRetriedAndTheSpansCountOnce) {
  for (int status : {503, 429, 502, 504}) {
    SCOPED_TRACE(status);
    FakeCollector collector;
    collector.AnswerNext({.status = status});
    Counter exported, dropped, failed;
    OtlpExporter exporter(FastOptions(collector.url()), {&exported, &dropped, &failed});
    exporter.Add(Spans(2));
    ASSERT_TRUE(exporter.Flush(kWait));
    std::vector<Received> requests = collector.requests();
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_EQ(SpanCount(requests[0]), 2);
    EXPECT_EQ(requests[0].request.SerializeAsString(), requests[1].request.SerializeAsString());
    EXPECT_EQ(exported.value(), 2);
    EXPECT_EQ(dropped.value(), 0);
    EXPECT_EQ(failed.value(), 0);
  }
}

TEST_F(OtlpExporterTest, RetryAfterIsHonoured) {
  FakeCollector collector;
  collector.AnswerNext({.status = 429, .retry_after = 1});
  OtlpExporter::Options options = FastOptions(collector.url());
  options.initial_backoff = milliseconds(1);
  options.max_backoff = milliseconds(5000);
  OtlpExporter exporter(options, counters());
  exporter.Add(Spans(1));
  ASSERT_TRUE(exporter.Flush(kWait));
  std::vector<Received> requests = collector.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_GE(requests[1].at - requests[0].at, milliseconds(950));
  EXPECT_EQ(exported_.value(), 1);
}

TEST_F(OtlpExporterTest, RetryAfterIsCappedByMaxBackoff) {
  FakeCollector collector;
  collector.AnswerNext({.status = 503, .retry_after = 3600});
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_backoff = milliseconds(20);
  OtlpExporter exporter(options, counters());
  exporter.Add(Spans(1));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(collector.request_count(), 2u);
  EXPECT_EQ(exported_.value(), 1);
}

TEST_F(OtlpExporterTest, ClientErrorsAreNotRetried) {
  FakeCollector collector;
  collector.AnswerNext({.status = 400});
  OtlpExporter exporter(FastOptions(collector.url()), counters());
  exporter.Add(Spans(3));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(collector.request_count(), 1u);
  EXPECT_EQ(failed_.value(), 1);
  EXPECT_EQ(dropped_.value(), 3);
  EXPECT_EQ(exported_.value(), 0);

  exporter.Add(Spans(1));  // the next batch is unaffected
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(collector.request_count(), 2u);
  EXPECT_EQ(exported_.value(), 1);
}

TEST_F(OtlpExporterTest, GivesUpAfterMaxAttempts) {
  FakeCollector collector;
  collector.AnswerNext({.status = 503}, 10);
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_attempts = 3;
  OtlpExporter exporter(options, counters());
  exporter.Add(Spans(2));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(collector.request_count(), 3u);
  EXPECT_EQ(failed_.value(), 1);
  EXPECT_EQ(dropped_.value(), 2);
  EXPECT_EQ(exported_.value(), 0);
}

TEST_F(OtlpExporterTest, PartialSuccessCountsTheRejectedSpansAsDropped) {
  FakeCollector collector;
  ExportTraceServiceResponse response;
  response.mutable_partial_success()->set_rejected_spans(2);
  response.mutable_partial_success()->set_error_message("too old");
  collector.AnswerNext({.status = 200, .body = response.SerializeAsString()});
  OtlpExporter exporter(FastOptions(collector.url()), counters());
  exporter.Add(Spans(5));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(collector.request_count(), 1u);
  EXPECT_EQ(exported_.value(), 3);
  EXPECT_EQ(dropped_.value(), 2);
  EXPECT_EQ(failed_.value(), 0);
}

TEST_F(OtlpExporterTest, AnUnreachableCollectorCostsOnlyCounts) {
  uint16_t closed_port = 0;
  {
    asio::io_context io;
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed_port = acceptor.local_endpoint().port();
  }
  OtlpExporter::Options options = FastOptions("http://127.0.0.1:" + std::to_string(closed_port) + "/v1/traces");
  options.max_attempts = 2;
  options.initial_backoff = milliseconds(1);
  options.schedule_delay = milliseconds(1);
  OtlpExporter exporter(options, counters());

  auto start = steady_clock::now();
  for (int i = 0; i < 100; ++i) exporter.Add(Spans(100));
  // A functional check, not a benchmark: Add never touches the network, so 10k spans take far less than the
  // export timeout (10 s).
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(exported_.value(), 0);
  EXPECT_EQ(dropped_.value(), 10000);
  EXPECT_GE(failed_.value(), 1);
}

TEST_F(OtlpExporterTest, SetOptionsChangesTheUrlAndResourceAtRunTime) {
  FakeCollector first;
  FakeCollector second;
  second.path = "/other/v1/traces";
  OtlpExporter::Options options = FastOptions(first.url());
  OtlpExporter exporter(options, counters());
  exporter.Add(Spans(1));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(first.request_count(), 1u);

  options.url = second.url();
  options.resource = {{"service.name", "renamed"}};
  exporter.SetOptions(options);
  exporter.Add(Spans(2));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(first.request_count(), 1u);
  std::vector<Received> requests = second.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/other/v1/traces");
  EXPECT_EQ(SpanCount(requests[0]), 2);
  EXPECT_EQ(requests[0].request.resource_spans(0).resource().attributes(0).value().string_value(), "renamed");
  EXPECT_EQ(exported_.value(), 3);
}

TEST_F(OtlpExporterTest, SetOptionsChangesTheBatchSize) {
  FakeCollector collector;
  OtlpExporter exporter(FastOptions(collector.url()), counters());
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_export_batch_size = 2;
  exporter.SetOptions(options);
  exporter.Add(Spans(4));
  ASSERT_TRUE(collector.WaitForRequests(2));  // two full batches, without a flush
  EXPECT_EQ(collector.span_names(), Names(4));
}

TEST_F(OtlpExporterTest, TheDestructorSendsWhatIsQueued) {
  FakeCollector collector;
  {
    OtlpExporter exporter(FastOptions(collector.url()), counters());
    exporter.Add(Spans(7));
  }
  EXPECT_EQ(collector.span_names(), Names(7));
  EXPECT_EQ(exported_.value(), 7);
}

TEST_F(OtlpExporterTest, TheDestructorGivesUpAfterTheTimeout) {
  FakeCollector collector;
  collector.Stall(true);
  OtlpExporter::Options options = FastOptions(collector.url());
  options.timeout = milliseconds(300);
  options.max_export_batch_size = 3;
  auto exporter = std::make_unique<OtlpExporter>(options, counters());
  exporter->Add(Spans(3));
  ASSERT_TRUE(collector.WaitForRequests(1));
  exporter->Add(Spans(4));

  auto start = steady_clock::now();
  exporter.reset();
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(exported_.value(), 0);
  EXPECT_EQ(dropped_.value(), 7);
  EXPECT_GE(failed_.value(), 1);
}

TEST_F(OtlpExporterTest, HttpsIsNotSupportedYetAndItsBatchesAreDropped) {
  OtlpExporter exporter(FastOptions("https://127.0.0.1:1/v1/traces"), counters());
  exporter.Add(Spans(3));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(failed_.value(), 1);
  EXPECT_EQ(dropped_.value(), 3);
  EXPECT_EQ(exported_.value(), 0);
}

TEST_F(OtlpExporterTest, KeepsTheConnectionAlive) {
  FakeCollector collector;
  OtlpExporter exporter(FastOptions(collector.url()), counters());
  for (int i = 0; i < 3; ++i) {
    exporter.Add(Spans(1));
    ASSERT_TRUE(exporter.Flush(kWait));
  }
  std::vector<Received> requests = collector.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[1].connection, requests[0].connection);
  EXPECT_EQ(requests[2].connection, requests[0].connection);
}

TEST_F(OtlpExporterTest, ReconnectsWhenTheCollectorClosedAnIdleConnection) {
  FakeCollector collector;
  collector.CloseAfterEachAnswer();
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_attempts = 1;  // the request on a new connection is no retry
  OtlpExporter exporter(options, counters());
  for (int i = 0; i < 3; ++i) {
    exporter.Add(Spans(1));
    ASSERT_TRUE(exporter.Flush(kWait));
  }
  std::vector<Received> requests = collector.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_NE(requests[1].connection, requests[0].connection);
  EXPECT_NE(requests[2].connection, requests[1].connection);
  EXPECT_EQ(exported_.value(), 3);
  EXPECT_EQ(failed_.value(), 0);
}

TEST_F(OtlpExporterTest, AddFromManyThreads) {
  FakeCollector collector;
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_queue_size = 100000;
  options.max_export_batch_size = 256;
  options.schedule_delay = milliseconds(5);
  OtlpExporter exporter(options, counters());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&exporter, t] {
      for (int i = 0; i < 100; ++i) exporter.Add(Spans(10, "t" + std::to_string(t) + "-", i * 10));
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(exported_.value(), 4000);
  std::vector<std::string> names = collector.span_names();
  EXPECT_EQ(names.size(), 4000u);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), 4000u);
}

TEST_F(OtlpExporterTest, CountersMayBeNull) {
  FakeCollector collector;
  collector.AnswerNext({.status = 400});
  OtlpExporter::Options options = FastOptions(collector.url());
  options.max_queue_size = 2;
  OtlpExporter exporter(options, {});
  exporter.Add(Spans(5));
  ASSERT_TRUE(exporter.Flush(kWait));
  EXPECT_EQ(collector.request_count(), 1u);
}

TEST(OtlpExporterOptionsTest, FromTraceSettings) {
  TraceSettings settings;
  settings.otel_url = "http://collector:4318/v1/traces";
  settings.otel_resource = {{"service.name", "svc"}, {"deployment.environment", "test"}};
  settings.bsp_max_queue_size = 10;
  settings.bsp_max_export_batch_size = 3;
  settings.bsp_schedule_delay = milliseconds(77);
  OtlpExporter::Options options = OtlpExporter::OptionsFrom(settings);
  EXPECT_EQ(options.url, settings.otel_url);
  EXPECT_EQ(options.resource, settings.otel_resource);
  EXPECT_EQ(options.max_queue_size, 10u);
  EXPECT_EQ(options.max_export_batch_size, 3u);
  EXPECT_EQ(options.schedule_delay, milliseconds(77));
  EXPECT_EQ(options.max_attempts, OtlpExporter::Options().max_attempts);
}

TEST(ParseOtlpUrlTest, HostPortAndPath) {
  Result<OtlpUrl> url = ParseOtlpUrl("http://collector:4318/v1/traces");
  ASSERT_TRUE(url.ok());
  EXPECT_FALSE(url->tls);
  EXPECT_EQ(url->host, "collector");
  EXPECT_EQ(url->port, 4318);
  EXPECT_EQ(url->target, "/v1/traces");

  url = ParseOtlpUrl("http://collector");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->port, 80);
  EXPECT_EQ(url->target, "/");

  url = ParseOtlpUrl("HTTP://[::1]:9/a?b=c#frag");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "[::1]");
  EXPECT_EQ(url->port, 9);
  EXPECT_EQ(url->target, "/a?b=c");

  url = ParseOtlpUrl("https://collector/v1/traces");
  ASSERT_TRUE(url.ok());
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->port, 443);
}

TEST(ParseOtlpUrlTest, Errors) {
  for (const char* bad : {"collector:4318/v1/traces", "grpc://collector:4317", "http:///v1/traces", "http://h:/x",
                          "http://h:0/x", "http://h:65536/x", "http://h:12ab/x", "http://[::1/x", "http://u:p@h/x"}) {
    SCOPED_TRACE(bad);
    Result<OtlpUrl> url = ParseOtlpUrl(bad);
    ASSERT_FALSE(url.ok());
    EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace weft
