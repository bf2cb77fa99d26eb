#include "engine/runtime/output_gate.hpp"

#include <cassert>

namespace snapflow {

output_gate::output_gate(partitioner part, std::vector<std::shared_ptr<output_channel>> channels,
                         std::size_t batch_size)
    : partitioner_(part),
      channels_(std::move(channels)),
      pending_(channels_.size()),
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

bool output_gate::broadcast(const stream_element& e) {
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    pending_[i].push_back(e);
    if (!send(i)) return false;
  }
  return true;
}

bool output_gate::flush() {
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (!pending_[i].empty() && !send(i)) return false;
  return true;
}

bool output_gate::can_broadcast_now() {
  // broadcast() sends exactly one batch per channel, whatever is pending.
  for (auto& c : channels_)
    if (!c->can_send_now()) return false;
  return true;
}

void output_gate::cancel() {
  for (auto& c : channels_) c->cancel();
}

bool output_gate::append(std::size_t channel, stream_element e) {
  pending_[channel].push_back(std::move(e));
  if (pending_[channel].size() < batch_size_) return true;
  return send(channel);
}

bool output_gate::send(std::size_t channel) {
  element_batch batch;
  batch.reserve(batch_size_);
  batch.swap(pending_[channel]);
  return channels_[channel]->send(std::move(batch));
}

}  // namespace snapflow
