#include "loadgen/load_worker.h"

#include <algorithm>

#include "base/log.h"

namespace weft {

namespace {

// After the last request's deadline: the slack for its timeout to be delivered before the worker ends it itself.
constexpr std::chrono::seconds kHardStopSlack{1};

SteadyTime Now() { return std::chrono::steady_clock::now(); }

}  // namespace

LoadWorker::LoadWorker(WorkerPlan plan, const Transport& transport, std::shared_ptr<const WireRequest> request)
    : plan_(plan),
      transport_(transport),
      request_(std::move(request)),
      arrival_timer_(io_),
      stop_timer_(io_),
      schedule_(plan.arrivals) {
  WEFT_CHECK(plan_.budget && plan_.progress) << "WorkerPlan needs a budget and progress counters";
  WEFT_CHECK(plan_.connections >= 1) << "WorkerPlan needs at least one connection";
}

LoadWorker::~LoadWorker() {
  for (Slot& slot : slots_) {
    if (slot.channel) slot.channel->Close();
  }
}

void LoadWorker::Run() {
  if (plan_.mode == LoadMode::kClosedLoop) {
    slots_.resize(static_cast<size_t>(plan_.connections));
    stats_.peak_connections = slots_.size();
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].channel = transport_.OpenChannel(io_);
      slots_[i].pause = std::make_unique<boost::asio::steady_timer>(io_);
    }
    // Sending ends at send_until even when every connection is stuck waiting for an answer.
    if (plan_.send_until != SteadyTime::max()) {
      arrival_timer_.expires_at(plan_.send_until);
      arrival_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) StopSending();
      });
    }
    for (size_t i = 0; i < slots_.size() && !sending_stopped_; ++i) StartClosedLoop(i);
  } else {
    next_arrival_ = plan_.start + schedule_.Next();
    ArmArrivalTimer();
  }
  if (!finished_) io_.run();
}

void LoadWorker::StartClosedLoop(size_t slot) {
  if (sending_stopped_) return MaybeFinish();
  SteadyTime now = Now();
  if (now >= plan_.send_until) return StopSending();
  Pending pending{.scheduled = now, .recorded = now >= plan_.record_from};
  if (pending.recorded && !plan_.budget->TryTake()) return StopSending();
  if (pending.recorded) {
    ++stats_.sent;
    plan_.progress->sent.fetch_add(1, std::memory_order_relaxed);
  }
  SendOn(slot, pending);
}

void LoadWorker::ArmArrivalTimer() {
  arrival_timer_.expires_at(std::min(next_arrival_, plan_.send_until));
  arrival_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) OnArrivalTimer();
  });
}

void LoadWorker::OnArrivalTimer() {
  // Every arrival that is due leaves now, even when the timer woke late: the schedule, not the timer, says when a
  // request was due, and its latency counts from then.
  SteadyTime now = Now();
  while (!sending_stopped_ && next_arrival_ <= now) {
    Pending pending{.scheduled = next_arrival_, .recorded = next_arrival_ >= plan_.record_from};
    if (pending.scheduled >= plan_.send_until) return StopSending();
    if (pending.recorded && !plan_.budget->TryTake()) return StopSending();
    next_arrival_ = plan_.start + schedule_.Next();
    if (pending.recorded) {
      ++stats_.sent;
      plan_.progress->sent.fetch_add(1, std::memory_order_relaxed);
    }
    Dispatch(pending);
  }
  if (sending_stopped_) return;
  if (next_arrival_ >= plan_.send_until && now >= plan_.send_until) return StopSending();
  ArmArrivalTimer();
}

void LoadWorker::Dispatch(Pending pending) {
  if (!idle_slots_.empty()) {
    size_t slot = idle_slots_.back();
    idle_slots_.pop_back();
    return SendOn(slot, pending);
  }
  if (slots_.size() < static_cast<size_t>(plan_.connections)) {
    slots_.push_back(Slot{.channel = transport_.OpenChannel(io_)});
    stats_.peak_connections = slots_.size();
    return SendOn(slots_.size() - 1, pending);
  }
  waiting_.push_back(pending);
}

void LoadWorker::SendOn(size_t slot, Pending pending) {
  SteadyTime now = Now();
  SteadyTime deadline = pending.scheduled + plan_.request_timeout;
  if (pending.recorded && now - pending.scheduled > plan_.late_threshold) ++stats_.started_late;
  slots_[slot].in_flight = pending;
  ++busy_;
  slots_[slot].channel->Send(request_, deadline,
                             [this, slot](TransportReply reply) { OnReply(slot, std::move(reply)); });
}

void LoadWorker::OnReply(size_t slot, TransportReply reply) {
  SteadyTime now = Now();
  Pending pending = *slots_[slot].in_flight;
  slots_[slot].in_flight.reset();
  --busy_;
  int outcome = OutcomeOf(reply);
  End(pending, outcome, now, reply.failure == TransportReply::Failure::kNone ? reply.body : reply.error);

  if (plan_.mode == LoadMode::kClosedLoop) {
    if (outcome == kOutcomeConnectError && !sending_stopped_) {
      slots_[slot].pause->expires_after(plan_.reconnect_pause);
      slots_[slot].pause->async_wait([this, slot](boost::system::error_code ec) {
        if (!ec) StartClosedLoop(slot);
      });
      return;
    }
    return StartClosedLoop(slot);
  }
  ServeQueue(slot);
  MaybeFinish();
}

void LoadWorker::ServeQueue(size_t slot) {
  SteadyTime now = Now();
  while (!waiting_.empty()) {
    Pending pending = waiting_.front();
    waiting_.pop_front();
    if (now >= pending.scheduled + plan_.request_timeout) {
      End(pending, kOutcomeTimeout, now, "waited its whole timeout for a free connection");
      continue;
    }
    return SendOn(slot, pending);
  }
  idle_slots_.push_back(slot);
}

void LoadWorker::End(const Pending& pending, int outcome, SteadyTime now, std::string_view detail) {
  if (!pending.recorded) return;
  stats_.Record(outcome, now - pending.scheduled, now, detail);
  if (IsAnswer(outcome)) plan_.progress->answered.fetch_add(1, std::memory_order_relaxed);
  if (!IsSuccess(outcome)) plan_.progress->errors.fetch_add(1, std::memory_order_relaxed);
}

void LoadWorker::StopSending() {
  if (sending_stopped_) return;
  sending_stopped_ = true;
  stats_.sending_ended = Now();
  arrival_timer_.cancel();
  // Every request was scheduled before now, so each ends by now + request_timeout on its own.
  stop_timer_.expires_after(plan_.request_timeout + kHardStopSlack);
  stop_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) OnHardStop();
  });
  MaybeFinish();
}

void LoadWorker::MaybeFinish() {
  if (sending_stopped_ && busy_ == 0 && waiting_.empty()) Shutdown();
}

void LoadWorker::OnHardStop() {
  // Not reached unless a transport misses a deadline; the run is bounded anyway and sent == sum of outcomes holds.
  SteadyTime now = Now();
  for (Slot& slot : slots_) {
    if (slot.in_flight) End(*slot.in_flight, kOutcomeTimeout, now, "no answer by the end of the run");
    slot.in_flight.reset();
  }
  for (const Pending& pending : waiting_) End(pending, kOutcomeTimeout, now, "never sent: no free connection");
  waiting_.clear();
  busy_ = 0;
  Shutdown();
}

void LoadWorker::Shutdown() {
  if (finished_) return;
  finished_ = true;
  arrival_timer_.cancel();
  stop_timer_.cancel();
  for (Slot& slot : slots_) {
    if (slot.channel) slot.channel->Close();
    if (slot.pause) slot.pause->cancel();
  }
  io_.stop();
}

}  // namespace weft
