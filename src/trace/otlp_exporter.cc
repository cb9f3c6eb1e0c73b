#include "trace/otlp_exporter.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <functional>
#include <iterator>
#include <optional>
#include <random>

#include "base/ascii.h"
#include "base/log.h"
#include "trace/otlp_encoding.h"

#ifndef WEFT_VERSION
#define WEFT_VERSION ""
#endif

namespace weft {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

Result<OtlpUrl> ParseOtlpUrl(std::string_view url) {
  OtlpUrl parsed;
  std::string_view rest = url;
  size_t scheme_end = rest.find("://");
  if (scheme_end == std::string_view::npos) {
    return InvalidArgument("OTLP endpoint '" + std::string(url) + "': expected http://host[:port]/path");
  }
  std::string_view scheme = rest.substr(0, scheme_end);
  if (EqualsIgnoringAsciiCase(scheme, "https")) {
    parsed.tls = true;
    parsed.port = 443;
  } else if (!EqualsIgnoringAsciiCase(scheme, "http")) {
    return InvalidArgument("OTLP endpoint '" + std::string(url) + "': unsupported scheme '" + std::string(scheme) +
                           "'");
  }
  rest.remove_prefix(scheme_end + 3);
  rest = rest.substr(0, rest.find('#'));
  size_t authority_end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view target = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument("OTLP endpoint '" + std::string(url) + "': credentials in the URL are not supported");
  }

  std::string_view port;
  if (authority.starts_with('[')) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("OTLP endpoint '" + std::string(url) + "': unclosed '['");
    }
    parsed.host = std::string(authority.substr(0, close + 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') {
      return InvalidArgument("OTLP endpoint '" + std::string(url) + "': unexpected text after ']'");
    }
    if (!after.empty()) port = after.substr(1);
    if (after == ":") return InvalidArgument("OTLP endpoint '" + std::string(url) + "': empty port");
  } else {
    size_t colon = authority.find(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return InvalidArgument("OTLP endpoint '" + std::string(url) + "': empty port");
    }
  }
  if (parsed.host.empty() || parsed.host == "[]") {
    return InvalidArgument("OTLP endpoint '" + std::string(url) + "': no host");
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("OTLP endpoint '" + std::string(url) + "': bad port '" + std::string(port) + "'");
    }
    parsed.port = static_cast<uint16_t>(value);
  }
  if (target.empty()) {
    parsed.target = "/";
  } else if (target[0] == '?') {
    parsed.target = "/" + std::string(target);
  } else {
    parsed.target = std::string(target);
  }
  return parsed;
}

namespace {

// What one HTTP exchange with the collector came to.
struct Reply {
  int status = 0;     // 0: no answer (see error)
  std::string error;  // why there was no answer
  std::optional<std::chrono::seconds> retry_after;
  std::string body;
};

// A blocking HTTP/1.1 client for one thread, over one kept-alive connection that it opens again when it breaks.
// Beast's timeouts (tcp_stream::expires_at) work on asynchronous operations only, so each step starts one and runs
// the private io_context until it completes. Not thread-safe.
class HttpClient {
 public:
  // `abandoned` is asked every few milliseconds while a step waits: true closes the connection at once.
  explicit HttpClient(std::function<bool()> abandoned) : abandoned_(std::move(abandoned)) {}
  ~HttpClient() { Close(); }

  // POSTs `body` as protobuf to `url`; gives up at `deadline`.
  Reply Post(const OtlpUrl& url, const std::string& body, SteadyTime deadline) {
    bool reused = stream_.has_value() && peer_ == Peer(url);
    bool answered = false;
    Reply reply = Exchange(url, body, deadline, &answered);
    // A kept-alive connection that the collector closed while it was idle fails before any answer byte comes; that
    // is no failure of the collector, so the request goes again at once on a new connection.
    if (reply.status == 0 && reused && !answered && steady_clock::now() < deadline && !abandoned_()) {
      reply = Exchange(url, body, deadline, &answered);
    }
    return reply;
  }

 private:
  static std::string Peer(const OtlpUrl& url) { return url.host + ":" + std::to_string(url.port); }

  Reply Exchange(const OtlpUrl& url, const std::string& body, SteadyTime deadline, bool* answered) {
    Reply reply;
    if (error_code ec = Connect(url, deadline)) {
      reply.error = "connect to " + Peer(url) + ": " + Describe(ec);
      return reply;
    }
    http::request<http::string_body> request{http::verb::post, url.target, 11};
    request.set(http::field::host, url.port == (url.tls ? 443 : 80) ? url.host : Peer(url));
    request.set(http::field::user_agent, "weft/" WEFT_VERSION);
    request.set(http::field::content_type, "application/x-protobuf");
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();

    bool done = false;
    error_code ec;
    stream_->expires_at(deadline);
    http::async_write(*stream_, request, [&](error_code e, size_t) {
      ec = e;
      done = true;
    });
    Wait(done, deadline, [this] { stream_->cancel(); });
    if (ec) {
      Close();
      reply.error = "send: " + Describe(ec);
      return reply;
    }

    http::response_parser<http::string_body> parser;
    parser.body_limit(4 << 20);  // a collector's answer is a few bytes; this only bounds a broken one
    done = false;
    stream_->expires_at(deadline);
    http::async_read(*stream_, buffer_, parser, [&](error_code e, size_t) {
      ec = e;
      done = true;
    });
    Wait(done, deadline, [this] { stream_->cancel(); });
    *answered = parser.got_some();
    if (ec) {
      Close();
      reply.error = "answer: " + Describe(ec);
      return reply;
    }
    auto& response = parser.get();
    reply.status = static_cast<int>(response.result_int());
    if (auto it = response.find(http::field::retry_after); it != response.end()) {
      std::string_view value = it->value();
      uint64_t seconds = 0;
      auto [end, parse_ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
      // The HTTP-date form is ignored: the backoff applies instead.
      if (parse_ec == std::errc() && end == value.data() + value.size()) {
        reply.retry_after = std::chrono::seconds(std::min<uint64_t>(seconds, 24 * 3600));
      }
    }
    reply.body = std::move(response.body());
    if (!response.keep_alive()) Close();
    return reply;
  }

  error_code Connect(const OtlpUrl& url, SteadyTime deadline) {
    if (stream_ && peer_ == Peer(url)) return {};
    Close();
    std::string host = url.host;
    if (host.starts_with('[')) host = host.substr(1, host.size() - 2);

    tcp::resolver resolver(io_);
    tcp::resolver::results_type endpoints;
    error_code ec;
    bool done = false;
    resolver.async_resolve(host, std::to_string(url.port), [&](error_code e, tcp::resolver::results_type results) {
      ec = e;
      endpoints = std::move(results);
      done = true;
    });
    if (Wait(done, deadline, [&resolver] { resolver.cancel(); })) return beast::error::timeout;
    if (ec) return ec;

    stream_.emplace(io_);
    stream_->expires_at(deadline);
    done = false;
    stream_->async_connect(endpoints, [&](error_code e, const tcp::endpoint&) {
      ec = e;
      done = true;
    });
    Wait(done, deadline, [this] { stream_->cancel(); });
    if (ec) {
      Close();
      return ec;
    }
    error_code ignored;
    stream_->socket().set_option(tcp::no_delay(true), ignored);
    peer_ = Peer(url);
    return {};
  }

  // Runs the io_context until `done`; at `deadline`, or when the exporter abandons the send, runs `cancel` and
  // then waits for the operation to complete. Returns whether it cancelled.
  bool Wait(const bool& done, SteadyTime deadline, const std::function<void()>& cancel) {
    bool cancelled = false;
    while (!done) {
      SteadyTime now = steady_clock::now();
      if (!cancelled && (now >= deadline || abandoned_())) {
        cancel();
        cancelled = true;
      }
      if (io_.stopped()) io_.restart();
      // Short slices, so that an abandoned send ends promptly; run_one returns as soon as a handler ran.
      auto slice = cancelled ? milliseconds(100) : std::min<SteadyTime::duration>(deadline - now, milliseconds(20));
      io_.run_one_for(slice);
    }
    return cancelled;
  }

  void Close() {
    if (stream_) {
      error_code ignored;
      stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_->close();
      stream_.reset();
    }
    buffer_.clear();
    peer_.clear();
  }

  static std::string Describe(error_code ec) {
    if (ec == beast::error::timeout || ec == asio::error::operation_aborted) return "timed out";
    return ec.message();
  }

  const std::function<bool()> abandoned_;
  asio::io_context io_;
  std::optional<beast::tcp_stream> stream_;  // empty when not connected
  std::string peer_;                         // "host:port" that stream_ is connected to
  beast::flat_buffer buffer_;
};

OtlpExporter::Options Normalized(OtlpExporter::Options options) {
  options.max_export_batch_size = std::max<size_t>(options.max_export_batch_size, 1);
  options.max_attempts = std::max(options.max_attempts, 1);
  options.initial_backoff = std::max(options.initial_backoff, milliseconds(1));
  options.max_backoff = std::max(options.max_backoff, options.initial_backoff);
  // Deadlines are now + timeout: a day is more than any collector needs, and far from overflowing.
  options.timeout = std::clamp(options.timeout, milliseconds(1), milliseconds(std::chrono::hours(24)));
  return options;
}

bool Retryable(int status) { return status == 0 || status == 429 || status == 502 || status == 503 || status == 504; }

// The spans the collector turned away in a successful answer (OTLP's partial success); 0 when the body says none or
// is no protobuf ExportTraceServiceResponse.
int64_t RejectedSpans(const std::string& body, size_t sent, std::string* message) {
  Result<OtlpPartialSuccess> response = ParseOtlpExportResponse(body);
  if (!response.ok()) return 0;
  *message = std::move(response->error_message);
  return std::clamp<int64_t>(response->rejected_spans, 0, static_cast<int64_t>(sent));
}

}  // namespace

struct OtlpExporter::ThreadState {
  explicit ThreadState(OtlpExporter* exporter) : http([exporter] { return exporter->StopDeadlinePassed(); }) {}

  HttpClient http;
  LogRateLimiter failure_log{std::chrono::seconds(10)};
  bool tls_logged = false;
  std::minstd_rand random{std::random_device{}()};
};

OtlpExporter::Options OtlpExporter::OptionsFrom(const TraceSettings& s) {
  Options options;
  options.url = s.otel_url;
  options.resource = s.otel_resource;
  options.max_queue_size = s.bsp_max_queue_size;
  options.max_export_batch_size = s.bsp_max_export_batch_size;
  options.schedule_delay = s.bsp_schedule_delay;
  return options;
}

OtlpExporter::OtlpExporter(Options options, Counters counters)
    : counters_(counters), options_(Normalized(std::move(options))), thread_([this] { Run(); }) {}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    stop_deadline_ = steady_clock::now() + options_.timeout;
  }
  work_cv_.notify_all();
  thread_.join();
}

void OtlpExporter::Add(std::vector<SpanData> spans) {
  if (spans.empty()) return;
  std::string encoded;
  std::vector<std::pair<size_t, size_t>> records;
  records.reserve(spans.size());
  for (const SpanData& span : spans) {
    AppendOtlpSpan(span, &encoded);
    records.emplace_back(encoded.size(), 1);
  }
  Enqueue(encoded, records, /*whole=*/false);
}

void OtlpExporter::AddEncoded(std::string encoded, size_t count) {
  if (count == 0) return;
  const std::pair<size_t, size_t> record(encoded.size(), count);
  Enqueue(encoded, {&record, 1}, /*whole=*/true);
}

size_t OtlpExporter::Enqueue(std::string_view encoded, std::span<const std::pair<size_t, size_t>> records, bool whole) {
  size_t total = 0;
  for (const auto& [end, count] : records) total += count;
  SteadyTime now = steady_clock::now();
  size_t taken = 0;
  size_t queue_bound = 0;
  bool wake = false;
  bool log = false;
  uint64_t unlogged = 0;
  {
    std::lock_guard lock(mu_);
    queue_bound = options_.max_queue_size;
    const size_t room = queued_spans_ < queue_bound ? queue_bound - queued_spans_ : 0;
    size_t bytes = 0;
    size_t fitting = 0;  // records
    for (const auto& [end, count] : records) {
      if (taken + count > room) break;
      taken += count;
      bytes = end;
      ++fitting;
    }
    if (whole && taken < total) {
      taken = 0;
      fitting = 0;
      bytes = 0;
    }
    // The thread waits without a deadline on an empty queue and for the delay on a partial batch; it looks at the
    // queue before each wait, so only these two changes need to wake it.
    const size_t batch = options_.max_export_batch_size;
    wake = taken > 0 && (queued_spans_ == 0 || (queued_spans_ < batch && queued_spans_ + taken >= batch));
    if (queued_spans_ == 0 && taken > 0) oldest_ = now;
    const size_t base = queue_.size();
    queue_.append(encoded.substr(0, bytes));
    for (size_t i = 0; i < fitting; ++i) records_.emplace_back(base + records[i].first, records[i].second);
    queued_spans_ += taken;
    queued_total_ += taken;
    if (taken < total) log = drop_log_.Allow(now, &unlogged);
  }
  if (wake) work_cv_.notify_one();
  const size_t dropped = total - taken;
  if (dropped > 0) {
    Count(counters_.dropped, static_cast<double>(dropped));
    if (log) {
      WEFT_LOG(Warning) << "trace export queue full (" << queue_bound << " spans): dropped " << dropped << " spans"
                        << (unlogged > 0 ? " (" + std::to_string(unlogged) + " more drops not logged)" : "");
    }
  }
  return taken;
}

void OtlpExporter::SetOptions(Options options) {
  options = Normalized(std::move(options));
  {
    std::lock_guard lock(mu_);
    options_ = std::move(options);
  }
  work_cv_.notify_one();  // a smaller batch or a shorter delay may be due now
}

bool OtlpExporter::Flush(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  uint64_t target = queued_total_;
  flush_until_ = std::max(flush_until_, target);
  work_cv_.notify_one();
  return done_cv_.wait_for(lock, wait, [&] { return finished_total_ >= target; });
}

void OtlpExporter::Run() {
  ThreadState state(this);
  std::unique_lock lock(mu_);
  while (true) {
    if (queued_spans_ == 0) {
      if (stopping_) break;
      work_cv_.wait(lock);
      continue;
    }
    SteadyTime now = steady_clock::now();
    if (stopping_ && now >= stop_deadline_) break;
    size_t batch_size = options_.max_export_batch_size;
    SteadyTime due = oldest_ + options_.schedule_delay;
    bool send_now = stopping_ || queued_spans_ >= batch_size || taken_total_ < flush_until_ || now >= due;
    if (!send_now) {
      work_cv_.wait_until(lock, due);
      continue;
    }
    // Whole records up to the batch size (one at least, whatever its size).
    size_t records = 0;
    size_t n = 0;
    while (records < records_.size() && (records == 0 || n + records_[records].second <= batch_size)) {
      n += records_[records].second;
      ++records;
    }
    std::string encoded;
    if (records == records_.size()) {
      encoded.swap(queue_);
      records_.clear();
    } else {
      const size_t cut = records_[records - 1].first;
      encoded.assign(queue_, 0, cut);
      queue_.erase(0, cut);
      records_.erase(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(records));
      for (auto& record : records_) record.first -= cut;
      oldest_ = now;  // the rest came after the batch's first span; at the latest, now
    }
    queued_spans_ -= n;
    taken_total_ += n;
    Options options = options_;
    lock.unlock();
    Export(state, std::move(encoded), n, options);
    lock.lock();
    finished_total_ += n;
    done_cv_.notify_all();
  }
  // Stopped with spans still queued: the destructor's deadline passed.
  size_t left = queued_spans_;
  queue_.clear();
  records_.clear();
  queued_spans_ = 0;
  taken_total_ += left;
  finished_total_ += left;
  lock.unlock();
  done_cv_.notify_all();
  if (left > 0) {
    Count(counters_.dropped, static_cast<double>(left));
    WEFT_LOG(Warning) << "trace export: " << left << " spans still queued at shutdown were dropped";
  }
}

void OtlpExporter::Export(ThreadState& state, std::string encoded, size_t n, const Options& options) {
  auto fail = [&](const std::string& why) {
    Count(counters_.failed_exports, 1);
    Count(counters_.dropped, static_cast<double>(n));
    uint64_t unlogged = 0;
    if (state.failure_log.Allow(steady_clock::now(), &unlogged)) {
      WEFT_LOG(Warning) << "trace export to " << options.url << " failed: " << why << "; dropped " << n << " spans"
                        << (unlogged > 0 ? " (" + std::to_string(unlogged) + " more failures not logged)" : "");
    }
  };

  Result<OtlpUrl> url = ParseOtlpUrl(options.url);
  if (!url.ok()) return fail(url.status().message());
  if (url->tls) {
    // Said once, not per batch: until TLS is supported every batch to this endpoint would say the same.
    if (!state.tls_logged) {
      state.tls_logged = true;
      WEFT_LOG(Warning) << "trace export: " << options.url
                        << ": TLS (https) is not supported yet; spans are dropped (use http:// or a local collector)";
    }
    Count(counters_.failed_exports, 1);
    Count(counters_.dropped, static_cast<double>(n));
    return;
  }

  const std::string body = EncodeOtlpTraceRequest(options.resource, encoded);
  encoded = std::string();
  const SteadyTime deadline = steady_clock::now() + options.timeout;
  std::string why;
  for (int attempt = 1;; ++attempt) {
    SteadyTime attempt_deadline = deadline;
    {
      std::lock_guard lock(mu_);
      if (stopping_) attempt_deadline = std::min(attempt_deadline, stop_deadline_);
    }
    Reply reply = state.http.Post(*url, body, attempt_deadline);
    if (reply.status >= 200 && reply.status < 300) {
      std::string message;
      int64_t rejected = RejectedSpans(reply.body, n, &message);
      Count(counters_.exported, static_cast<double>(n - static_cast<size_t>(rejected)));
      if (rejected > 0) {
        Count(counters_.dropped, static_cast<double>(rejected));
        uint64_t unlogged = 0;
        if (state.failure_log.Allow(steady_clock::now(), &unlogged)) {
          WEFT_LOG(Warning) << "trace export to " << options.url << ": the collector rejected " << rejected << " of "
                            << n << " spans: " << message;
        }
      }
      return;
    }
    why = reply.status == 0 ? reply.error : "HTTP " + std::to_string(reply.status);
    if (!Retryable(reply.status)) break;
    if (attempt >= options.max_attempts) {
      why += " (after " + std::to_string(attempt) + " tries)";
      break;
    }
    // Exponential backoff with jitter in [half, all] of it, so that many servers do not retry in step.
    milliseconds ceiling = options.max_backoff;
    int doublings = std::min(attempt - 1, 30);
    milliseconds backoff = std::min(ceiling, options.initial_backoff * (int64_t{1} << doublings));
    std::uniform_int_distribution<int64_t> jitter(backoff.count() / 2, backoff.count());
    milliseconds wait(jitter(state.random));
    if (reply.retry_after) wait = std::min<milliseconds>(*reply.retry_after, ceiling);
    SteadyTime retry_at = steady_clock::now() + wait;
    if (retry_at >= deadline) {
      why += " (no time left to retry within " + std::to_string(options.timeout.count()) + " ms)";
      break;
    }
    if (!SleepUntil(retry_at)) {
      why += " (shutting down)";
      break;
    }
  }
  fail(why);
}

bool OtlpExporter::SleepUntil(SteadyTime until) {
  std::unique_lock lock(mu_);
  while (true) {
    SteadyTime now = steady_clock::now();
    if (stopping_ && now >= stop_deadline_) return false;
    if (now >= until) return true;
    work_cv_.wait_until(lock, stopping_ ? std::min(until, stop_deadline_) : until);
  }
}

bool OtlpExporter::StopDeadlinePassed() {
  std::lock_guard lock(mu_);
  return stopping_ && steady_clock::now() >= stop_deadline_;
}

void OtlpExporter::Count(Counter* counter, double n) {
  if (counter != nullptr && n > 0) counter->Increment(n);
}

}  // namespace weft
