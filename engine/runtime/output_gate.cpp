#include "engine/runtime/output_gate.hpp"

#include <algorithm>
#include <cassert>

#include "engine/runtime/byte_gauge.hpp"

namespace snapflow {

output_gate::output_gate(partitioner part, std::vector<std::shared_ptr<output_channel>> channels,
                         std::size_t batch_size)
    : partitioner_(part),
      channels_(std::move(channels)),
      pending_(channels_.size()),
      pending_bytes_(channels_.size(), 0),
      backlog_(channels_.size()),
      batch_size_(batch_size) {
  assert(!channels_.empty());
  assert(channels_.size() == partitioner_.num_channels());
  assert(batch_size_ >= 1);
  for (auto& p : pending_) p.reserve(batch_size_);
}

bool output_gate::emit(record r) {
  const std::uint32_t target = partitioner_.select(r);
  if (target != partitioner::all_channels) {
    assert(target < channels_.size());
    return append(target, std::move(r));
  }
  for (std::size_t i = 0; i + 1 < channels_.size(); ++i)
    if (!append(i, r)) return false;
  return append(channels_.size() - 1, std::move(r));
}

bool output_gate::emit_watermark(const watermark& w) {
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (!append(i, w)) return false;
  return true;
}

bool output_gate::broadcast(const stream_element& e) {
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    if (!pending_[i].empty() && !send(i)) return false;
    if (!ship(i, element_batch{e})) return false;
  }
  return true;
}

bool output_gate::flush() {
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (!pending_[i].empty() && !send(i)) return false;
  return true;
}

bool output_gate::drain() {
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    auto& backlog = backlog_[i];
    while (!backlog.empty()) {
      const send_status s = channels_[i]->try_send(backlog.front());
      if (s == send_status::cancelled) return false;
      if (s == send_status::no_room) break;
      backlog.pop_front();
      if (backlog.empty()) --backlogged_channels_;
    }
  }
  return true;
}

bool output_gate::can_broadcast_now() {
  // Then broadcast() sends exactly one batch per channel.
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (!pending_[i].empty() || !backlog_[i].empty() || !channels_[i]->can_send_now())
      return false;
  return true;
}

bool output_gate::overtake(const checkpoint_barrier& barrier, std::vector<overtaken>& out) {
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    overtaken held{i, {}};
    for (const auto& batch : backlog_[i]) copy_records(batch, held.records);
    copy_records(pending_[i], held.records);
    if (!channels_[i]->send_priority(element_batch{barrier})) return false;
    if (!held.records.empty()) out.push_back(std::move(held));
  }
  return true;
}

bool output_gate::holds_barrier(checkpoint_id id) const {
  for (const auto& backlog : backlog_)
    for (const auto& batch : backlog)
      if (is_single_barrier(batch) && std::get<checkpoint_barrier>(batch.front()).id == id)
        return true;
  return false;
}

bool output_gate::overtake_backlogged(checkpoint_id id, std::vector<overtaken>& out) {
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    auto& backlog = backlog_[i];
    auto it = std::find_if(backlog.begin(), backlog.end(), [id](const element_batch& b) {
      return is_single_barrier(b) && std::get<checkpoint_barrier>(b.front()).id == id;
    });
    if (it == backlog.end()) continue;
    overtaken held{i, {}};
    for (auto ahead = backlog.begin(); ahead != it; ++ahead) copy_records(*ahead, held.records);
    checkpoint_barrier barrier = std::get<checkpoint_barrier>(it->front());
    barrier.options.aligned_timeout_ms = 0;
    backlog.erase(it);
    if (backlog.empty()) --backlogged_channels_;
    if (!channels_[i]->send_priority(element_batch{barrier})) return false;
    if (!held.records.empty()) out.push_back(std::move(held));
  }
  return true;
}

bool output_gate::emit_to(std::size_t channel, record r) {
  assert(channel < channels_.size());
  return append(channel, std::move(r));
}

void output_gate::copy_records(const element_batch& batch, std::vector<record>& out) {
  for (const auto& e : batch)
    if (const auto* r = std::get_if<record>(&e)) out.push_back(*r);
}

void output_gate::cancel() {
  for (auto& c : channels_) c->cancel();
}

bool output_gate::append(std::size_t channel, stream_element e) {
  if (const auto* r = std::get_if<record>(&e)) {
    const std::uint64_t bytes = approximate_bytes(*r);
    const std::uint64_t bound = channels_[channel]->in_flight_bytes_bound();
    if (bound != 0 && pending_bytes_[channel] != 0 && pending_bytes_[channel] + bytes > bound &&
        !send(channel))
      return false;
    pending_bytes_[channel] += bytes;
  }
  pending_[channel].push_back(std::move(e));
  if (pending_[channel].size() < batch_size_) return true;
  return send(channel);
}

bool output_gate::send(std::size_t channel) {
  element_batch batch;
  batch.reserve(batch_size_);
  batch.swap(pending_[channel]);
  pending_bytes_[channel] = 0;
  return ship(channel, std::move(batch));
}

bool output_gate::ship(std::size_t channel, element_batch batch) {
  auto& backlog = backlog_[channel];
  if (!backlog.empty()) {
    backlog.push_back(std::move(batch));  // behind what the channel has not taken yet
    return true;
  }
  switch (channels_[channel]->try_send(batch)) {
    case send_status::sent:
      return true;
    case send_status::cancelled:
      return false;
    case send_status::no_room:
      break;
  }
  backlog.push_back(std::move(batch));
  ++backlogged_channels_;
  return true;
}

}  // namespace snapflow
