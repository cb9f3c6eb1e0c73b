#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "loadgen/arrival_schedule.h"
#include "loadgen/bench_options.h"
#include "loadgen/run_stats.h"
#include "loadgen/transport.h"

namespace weft {

// What the progress line shows, bumped by every worker. Thread-safe; relaxed, as the line is advisory.
struct ProgressCounters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> errors{0};  // answers that are not 2xx, and requests without an answer
};

// The --requests budget, shared by the workers. Thread-safe.
class RequestBudget {
 public:
  explicit RequestBudget(std::optional<uint64_t> limit) : limit_(limit) {}
  // Takes one request; false once the limit was taken.
  bool TryTake() { return !limit_ || taken_.fetch_add(1, std::memory_order_relaxed) < *limit_; }

 private:
  const std::optional<uint64_t> limit_;
  std::atomic<uint64_t> taken_{0};
};

// One worker's share of a run.
struct WorkerPlan {
  LoadMode mode = LoadMode::kClosedLoop;
  // Closed loop: the connections, each with one request outstanding. Open loop: the most connections to open.
  int connections = 1;
  ArrivalSchedule::Options arrivals;          // open loop; offsets from `start`
  SteadyTime start;                           // closed loop: when the loops begin
  SteadyTime record_from;                     // start + warmup: requests scheduled earlier are not recorded
  SteadyTime send_until = SteadyTime::max();  // no request is scheduled from then on
  std::chrono::nanoseconds request_timeout{std::chrono::seconds(30)};
  // Open loop: a request sent later than its schedule by more than this counts as started late.
  std::chrono::nanoseconds late_threshold{std::chrono::milliseconds(1)};
  // Closed loop: the pause before a connection tries again after a connect error, so that a server that is down
  // is not hammered in a busy loop.
  std::chrono::nanoseconds reconnect_pause{std::chrono::milliseconds(10)};
  RequestBudget* budget = nullptr;       // required
  ProgressCounters* progress = nullptr;  // required
};

// Drives one io_context on the thread that calls Run(): closed loop (each connection sends its next request when
// the answer to the previous one arrives) or open loop (requests leave on schedule over connections opened on
// demand up to a limit; when all are busy the request waits here, and that wait is part of its latency, which is
// measured from its scheduled time). Everything ends in bounded time: sending stops at send_until or when the
// budget is spent, each request ends by its scheduled time + request_timeout, and what is still open a second
// after that is ended as a timeout. Not thread-safe: one thread, one worker.
class LoadWorker {
 public:
  LoadWorker(WorkerPlan plan, const Transport& transport, std::shared_ptr<const WireRequest> request);
  ~LoadWorker();
  LoadWorker(const LoadWorker&) = delete;
  LoadWorker& operator=(const LoadWorker&) = delete;

  // Runs the plan until every recorded request has an outcome. Call once.
  void Run();
  // Valid after Run() returned.
  const RunStats& stats() const { return stats_; }

 private:
  struct Pending {
    SteadyTime scheduled;
    bool recorded = false;  // scheduled after warmup
  };
  struct Slot {
    std::shared_ptr<Channel> channel;
    std::optional<Pending> in_flight;
    std::unique_ptr<boost::asio::steady_timer> pause;  // closed loop: reconnect pause
  };

  void StartClosedLoop(size_t slot);
  void OnArrivalTimer();
  void ArmArrivalTimer();
  void Dispatch(Pending pending);
  void SendOn(size_t slot, Pending pending);
  void OnReply(size_t slot, TransportReply reply);
  // Open loop: gives a free connection the oldest waiting request that has not expired.
  void ServeQueue(size_t slot);
  // Records how a request ended; `detail` is the answer's body or the failure, kept for the first of each error.
  void End(const Pending& pending, int outcome, SteadyTime now, std::string_view detail);
  void StopSending();
  void MaybeFinish();
  void OnHardStop();
  void Shutdown();

  const WorkerPlan plan_;
  const Transport& transport_;
  const std::shared_ptr<const WireRequest> request_;
  boost::asio::io_context io_;  // before the members that hold its timers and sockets
  boost::asio::steady_timer arrival_timer_;
  boost::asio::steady_timer stop_timer_;
  ArrivalSchedule schedule_;
  SteadyTime next_arrival_;
  std::vector<Slot> slots_;
  std::vector<size_t> idle_slots_;  // open loop
  std::deque<Pending> waiting_;     // open loop: due, no connection free yet
  size_t busy_ = 0;
  bool sending_stopped_ = false;
  bool finished_ = false;
  RunStats stats_;
};

}  // namespace weft
