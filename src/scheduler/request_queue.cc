#include "scheduler/request_queue.h"

#include <algorithm>

#include "base/log.h"

namespace weft {
namespace {

LevelPolicy PolicyFromConfig(const QueuePolicyConfig& config) {
  return LevelPolicy{
      .timeout_action = config.timeout_action,
      .default_timeout = Micros(config.default_timeout_us),
      .allow_timeout_override = config.allow_timeout_override,
      .max_queue_size = config.max_queue_size,
  };
}

}  // namespace

size_t DefaultQueueBound(const ModelConfig& config) {
  constexpr size_t kBatchesPerInstance = 16;
  constexpr size_t kMinimum = 64;
  // Both factors are bounded by ValidateModelConfig (2^20 and 1024), so the product cannot overflow.
  const size_t batch = static_cast<size_t>(std::max(1, config.max_batch_size));
  const size_t instances = static_cast<size_t>(std::max(1, config.InstanceCount()));
  return std::max(kMinimum, kBatchesPerInstance * batch * instances);
}

bool ConfigBoundsQueue(const ModelConfig& config) {
  if (!config.dynamic_batching) return false;
  if (config.dynamic_batching->default_queue_policy.max_queue_size > 0) return true;
  for (const auto& [level, policy] : config.dynamic_batching->priority_queue_policy) {
    if (policy.max_queue_size > 0) return true;
  }
  return false;
}

QueueOptions QueueOptions::FromConfig(const ModelConfig& config, size_t max_total) {
  QueueOptions options;
  options.max_total = max_total;
  options.latest_frame_wins = config.Parameter("weft.latest_frame_wins") == "true";
  if (!config.dynamic_batching) return options;
  const DynamicBatchingConfig& batching = *config.dynamic_batching;
  uint32_t levels = std::max<uint32_t>(1, batching.priority_levels);
  options.levels.clear();
  for (uint32_t level = 1; level <= levels; ++level) {
    auto it = batching.priority_queue_policy.find(level);
    options.levels.push_back(
        PolicyFromConfig(it != batching.priority_queue_policy.end() ? it->second : batching.default_queue_policy));
  }
  // Triton requires the default level to be in range; out of range, the lowest level lets every explicit
  // priority go first.
  uint32_t fallback = batching.default_priority_level;
  options.default_level = fallback >= 1 && fallback <= levels ? fallback : levels;
  return options;
}

std::string SourceOf(const InferenceRequest& request) {
  auto it = request.parameters.find("source");
  if (it == request.parameters.end()) return "";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return std::to_string(*i);
  return "";
}

RequestQueue::RequestQueue(QueueOptions options) : options_(std::move(options)) {
  WEFT_CHECK(!options_.levels.empty()) << "a request queue needs at least one level";
  by_level_.resize(options_.levels.size());
}

uint32_t RequestQueue::LevelOf(const InferenceRequest& request) const {
  if (request.priority == 0 || request.priority > levels()) return options_.default_level;
  return request.priority;
}

std::optional<SteadyTime> RequestQueue::DeadlineOf(const InferenceRequest& request, uint32_t level,
                                                   SteadyTime now) const {
  const LevelPolicy& p = policy(level);
  std::optional<SteadyTime> deadline;
  if (p.default_timeout.count() > 0) deadline = now + p.default_timeout;
  if (p.allow_timeout_override && request.deadline && (!deadline || *request.deadline < *deadline)) {
    deadline = request.deadline;
  }
  return deadline;
}

Status RequestQueue::HasRoom(uint32_t level, std::optional<uint64_t> leaving) const {
  size_t total = entries_.size();
  size_t in_level = size(level);
  if (leaving) {
    auto it = entries_.find(*leaving);
    if (it != entries_.end()) {
      --total;
      if (it->second->level == level) --in_level;
    }
  }
  size_t level_max = policy(level).max_queue_size;
  if (level_max > 0 && in_level >= level_max) {
    return ResourceExhausted("the queue of priority level " + std::to_string(level) + " is full (" +
                             std::to_string(level_max) + " requests)");
  }
  if (options_.max_total > 0 && total >= options_.max_total) {
    return ResourceExhausted("the queue is full (" + std::to_string(options_.max_total) + " requests)");
  }
  return Status::Ok();
}

std::optional<uint64_t> RequestQueue::FindSource(const std::string& source) const {
  auto it = by_source_.find(source);
  if (it == by_source_.end()) return std::nullopt;
  return it->second;
}

RequestQueue::OrderKey RequestQueue::KeyOf(const QueueEntry& entry) {
  return {entry.delayed, entry.deadline.value_or(SteadyTime::max()), entry.id};
}

void RequestQueue::Push(std::unique_ptr<QueueEntry> entry) {
  WEFT_CHECK(entry->level >= 1 && entry->level <= levels()) << "level " << entry->level;
  QueueEntry* e = entry.get();
  auto [it, inserted] = entries_.emplace(e->id, std::move(entry));
  WEFT_CHECK(inserted) << "request id " << e->id << " queued twice";
  by_level_[e->level - 1].emplace(KeyOf(*e), e);
  if (e->deadline && !e->delayed) deadlines_.emplace(*e->deadline, e->id);
  if (!e->source.empty()) by_source_[e->source] = e->id;
}

std::unique_ptr<QueueEntry> RequestQueue::Erase(QueueEntry* e) {
  by_level_[e->level - 1].erase(KeyOf(*e));
  if (e->deadline && !e->delayed) deadlines_.erase({*e->deadline, e->id});
  if (!e->source.empty()) {
    auto s = by_source_.find(e->source);
    if (s != by_source_.end() && s->second == e->id) by_source_.erase(s);
  }
  auto it = entries_.find(e->id);
  std::unique_ptr<QueueEntry> out = std::move(it->second);
  entries_.erase(it);
  return out;
}

std::unique_ptr<QueueEntry> RequestQueue::Remove(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  return Erase(it->second.get());
}

bool RequestQueue::Expire(SteadyTime now, std::vector<std::unique_ptr<QueueEntry>>* expired) {
  bool changed = false;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    QueueEntry* e = entries_.at(deadlines_.begin()->second).get();
    changed = true;
    if (policy(e->level).timeout_action == QueuePolicyConfig::TimeoutAction::kReject) {
      expired->push_back(Erase(e));
      continue;
    }
    auto& level = by_level_[e->level - 1];
    level.erase(KeyOf(*e));
    deadlines_.erase(deadlines_.begin());
    e->delayed = true;
    level.emplace(KeyOf(*e), e);
  }
  return changed;
}

std::optional<SteadyTime> RequestQueue::NextDeadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

void RequestQueue::Snapshot(size_t max, QueueSnapshot* snapshot) const {
  snapshot->requests.clear();
  for (const auto& level : by_level_) {
    for (const auto& [key, e] : level) {
      if (snapshot->requests.size() >= max) return;
      snapshot->requests.push_back(QueuedRequest{
          .batch_size = e->batch_size,
          .batch_key = e->batch_key,
          .enqueued = e->enqueued,
          .deadline = e->delayed ? std::nullopt : e->deadline,
      });
    }
  }
}

void RequestQueue::PopFront(size_t count, std::vector<std::unique_ptr<QueueEntry>>* out) {
  for (auto& level : by_level_) {
    while (count > 0 && !level.empty()) {
      out->push_back(Erase(level.begin()->second));
      --count;
    }
  }
  WEFT_CHECK(count == 0) << "popped more requests than are queued";
}

std::vector<std::unique_ptr<QueueEntry>> RequestQueue::TakeAll() {
  std::vector<std::unique_ptr<QueueEntry>> out;
  PopFront(entries_.size(), &out);
  return out;
}

}  // namespace weft
