#include "engine/checkpoint/checkpoint_request_decider.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow {

std::ostream& operator<<(std::ostream& os, const checkpoint_request& r) {
  os << "checkpoint_request{id=" << r.request_id << ", kind=" << to_string(r.kind)
     << ", submitted_us=" << r.submitted_us;
  if (!r.target_dir.empty()) os << ", target_dir=" << r.target_dir;
  return os << "}";
}

namespace {
std::size_t index_of(checkpoint_trigger_kind kind) {
  const auto i = static_cast<std::size_t>(kind);
  assert(i < 3);
  return i;
}
}  // namespace

checkpoint_request_decider::checkpoint_request_decider(int max_concurrent,
                                                       std::int64_t min_pause_us,
                                                       std::size_t max_queued)
    : max_concurrent_(max_concurrent), min_pause_us_(min_pause_us), max_queued_(max_queued) {
  assert(max_concurrent >= 1);
  assert(min_pause_us >= 0);
  assert(max_queued >= 1);
}

std::deque<checkpoint_request>& checkpoint_request_decider::queue_of(
    checkpoint_trigger_kind kind) {
  return queues_[index_of(kind)];
}

std::size_t checkpoint_request_decider::queued() const {
  std::size_t n = 0;
  for (const auto& q : queues_) n += q.size();
  return n;
}

void checkpoint_request_decider::set_min_pause_us(std::int64_t min_pause_us) {
  assert(min_pause_us >= 0);
  min_pause_us_ = min_pause_us;
}

void checkpoint_request_decider::set_max_concurrent(int max_concurrent) {
  assert(max_concurrent >= 1);
  max_concurrent_ = max_concurrent;
}

void checkpoint_request_decider::enqueue(checkpoint_request request) {
  auto& q = queue_of(request.kind);
  // Ids arrive increasing, so this is nearly always an append; the search keeps the order right
  // even if a caller re-submits an older request.
  auto at = std::upper_bound(q.begin(), q.end(), request.request_id,
                             [](std::uint64_t id, const checkpoint_request& r) {
                               return id < r.request_id;
                             });
  q.insert(at, std::move(request));
  assert(queue_of(checkpoint_trigger_kind::periodic).size() <= 1);
}

bool checkpoint_request_decider::submitted_is_lowest(const checkpoint_request& submitted) const {
  for (std::size_t k = kind_count; k-- > 0;) {
    if (queues_[k].empty()) continue;
    const std::size_t submitted_kind = index_of(submitted.kind);
    if (submitted_kind != k) return submitted_kind > k;
    return submitted.request_id > queues_[k].back().request_id;
  }
  return true;  // nothing queued
}

checkpoint_request checkpoint_request_decider::remove_lowest() {
  for (std::size_t k = kind_count; k-- > 0;) {
    if (queues_[k].empty()) continue;
    checkpoint_request lowest = std::move(queues_[k].back());
    queues_[k].pop_back();
    return lowest;
  }
  assert(false && "remove_lowest on an empty queue");
  return {};
}

checkpoint_request_decider::decision checkpoint_request_decider::submit(
    checkpoint_request request, const coordinator_load& load) {
  assert(load.pending >= 0);
  decision out;
  auto& periodic = queue_of(checkpoint_trigger_kind::periodic);
  if (request.kind == checkpoint_trigger_kind::periodic && !periodic.empty()) {
    // Two queued periodic requests would only run back to back; the queued one stands for both.
    out.coalesced = true;
  } else if (queued() >= max_queued_ && submitted_is_lowest(request)) {
    out.failed.emplace_back(std::move(request),
                            checkpoint_failure_reason::too_many_checkpoint_requests);
  } else {
    if (queued() >= max_queued_)
      out.failed.emplace_back(remove_lowest(),
                              checkpoint_failure_reason::too_many_checkpoint_requests);
    enqueue(std::move(request));
  }
  assert(queued() <= max_queued_);
  choose(load, out);
  return out;
}

checkpoint_request_decider::decision checkpoint_request_decider::next(
    const coordinator_load& load) {
  assert(load.pending >= 0);
  decision out;
  choose(load, out);
  return out;
}

void checkpoint_request_decider::choose(const coordinator_load& load, decision& out) {
  assert(!out.execute);
  if (load.triggering) return;

  std::deque<checkpoint_request>* head = nullptr;
  for (auto& q : queues_) {
    if (!q.empty()) {
      head = &q;
      break;
    }
  }
  if (head == nullptr) return;

  const checkpoint_trigger_kind kind = head->front().kind;
  if (kind != checkpoint_trigger_kind::savepoint) {
    // Only a savepoint may pass a full house; the rest wait for a checkpoint to end.
    if (load.pending >= max_concurrent_) return;
    // No pause configured means none at all, even if a clock steps back behind the last
    // completion.
    if (kind == checkpoint_trigger_kind::periodic && min_pause_us_ > 0 &&
        load.last_completion_us && load.now_us - *load.last_completion_us < min_pause_us_) {
      // Too early: fail it and tell the caller when the pause ends, instead of keeping it
      // queued; the next periodic trigger takes its place.
      const std::int64_t remaining_us = *load.last_completion_us + min_pause_us_ - load.now_us;
      assert(remaining_us > 0);
      assert(remaining_us <= min_pause_us_ || load.now_us < *load.last_completion_us);
      out.failed.emplace_back(std::move(head->front()),
                              checkpoint_failure_reason::minimum_time_between_checkpoints);
      head->pop_front();
      out.reschedule_periodic_in_us = remaining_us;
      return;
    }
  }
  out.execute = std::move(head->front());
  head->pop_front();
}

std::vector<checkpoint_request> checkpoint_request_decider::drain() {
  std::vector<checkpoint_request> all;
  all.reserve(queued());
  for (auto& q : queues_) {
    for (auto& r : q) all.push_back(std::move(r));
    q.clear();
  }
  return all;
}

}  // namespace snapflow
