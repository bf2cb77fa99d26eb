#include "tests/sim/sim_task.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow::sim {

sim_task::sim_task(sim_task_host& host, sim_role role, execution_attempt_id attempt,
                   std::uint64_t instance)
    : host_(host), role_(role), attempt_(attempt), instance_(instance) {}

void sim_task::connect(std::vector<sim_channel*> inputs, std::vector<sim_channel*> outputs) {
  assert(role_ == sim_role::source || !inputs.empty());
  assert(role_ == sim_role::sink || !outputs.empty());
  inputs_ = std::move(inputs);
  outputs_ = std::move(outputs);
  blocked_.assign(inputs_.size(), false);
  owed_.assign(inputs_.size(), false);
}

void sim_task::restore(checkpoint_id id, const sim_task_state* state) {
  assert(id >= 0);
  last_done_ = id;
  if (state == nullptr) return;
  next_seq_ = state->next_seq;
  processed_ = state->processed;
  // 2PC recovery: what the checkpoint pre-committed is committed now (idempotently: a
  // transaction committed before the failure is recognised by its uid).
  if (role_ == sim_role::sink)
    for (const auto& txn : state->pending) host_.commit(*this, txn);
  // Unaligned: the records in flight at the checkpoint come first, before anything new.
  for (const sim_record& r : state->channel_records) {
    if (role_ == sim_role::sink)
      open_.push_back(r);
    else
      push(route(r), sim_item{false, r, 0, {}});
  }
}

sim_channel& sim_task::route(const sim_record& r) const {
  assert(!outputs_.empty());
  // Sources spread by sequence, the middle stage by a different hash, so every sink sees
  // records of every source through several channels.
  const std::uint64_t h = role_ == sim_role::source ? r.seq + r.source : r.seq * 7 + r.source * 3;
  return *outputs_[h % outputs_.size()];
}

void sim_task::push(sim_channel& channel, sim_item item) {
  channel.items.push_back(std::move(item));
  if (channel.consumer != nullptr && channel.consumer->alive()) host_.wake(*channel.consumer);
}

sim_item sim_task::pop(sim_channel& channel) {
  assert(!channel.items.empty());
  const bool was_full = channel.full();
  sim_item item = std::move(channel.items.front());
  channel.items.pop_front();
  // A middle stage waiting on this channel's room can go on.
  if (was_full && channel.producer != nullptr && channel.producer->alive() &&
      channel.producer->role() != sim_role::source)
    host_.wake(*channel.producer);
  return item;
}

std::uint32_t sim_task::emit(std::uint32_t max_records) {
  assert(role_ == sim_role::source);
  std::uint32_t n = 0;
  while (alive_ && n < max_records) {
    sim_record r{attempt_.subtask.index, next_seq_};
    sim_channel& out = route(r);
    if (out.full()) break;  // backpressure
    push(out, sim_item{false, r, 0, {}});
    ++next_seq_;
    ++n;
  }
  return n;
}

void sim_task::trigger(checkpoint_id id, const std::string& location) {
  assert(role_ == sim_role::source);
  if (!alive_) return;
  if (id <= last_done_) {
    // A duplicate, a trigger overtaken by a newer one, or one older than the restored
    // checkpoint: injecting it would cut the stream at a point no checkpoint covers.
    ++stale_barriers_;
    return;
  }
  last_done_ = id;
  snapshot(id, location);
  // Unaligned from the start: the barrier jumps the queues of the channels (the consumers
  // persist what it overtook).
  const bool priority = unaligned_mode_ && aligned_timeout_us_ == 0;
  if (priority) host_.took_unaligned(false);
  forward_barrier(id, location, priority);
}

bool sim_task::has_work() const {
  if (!alive_) return false;
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    if (blocked_[i] || inputs_[i]->items.empty()) continue;
    const sim_item& item = inputs_[i]->items.front();
    if (item.barrier || role_ == sim_role::sink || !route(item.record).full()) return true;
  }
  return false;
}

bool sim_task::process(std::uint32_t max_items) {
  assert(role_ != sim_role::source);
  std::uint32_t done = 0;
  check_alignment_timeout();
  while (alive_ && done < max_items) {
    bool progressed = false;
    for (std::size_t k = 0; k < inputs_.size() && !progressed; ++k) {
      const std::size_t i = (next_input_ + k) % inputs_.size();
      sim_channel& in = *inputs_[i];
      if (blocked_[i] || in.items.empty()) continue;
      if (!in.items.front().barrier) {
        const sim_record r = in.items.front().record;
        if (role_ == sim_role::middle) {
          sim_channel& out = route(r);
          if (out.full()) continue;  // backpressure: try another input
          pop(in);
          push(out, sim_item{false, r, 0, {}});
        } else {
          pop(in);
          open_.push_back(r);
        }
        ++processed_;
        // Processed after an unaligned snapshot, before this input's barrier: in flight.
        if (unaligned_active_ && owed_[i]) unaligned_state_.channel_records.push_back(r);
      } else {
        sim_item barrier = pop(in);
        if (barrier.priority)
          on_priority_barrier(i, barrier);
        else
          on_barrier(i, barrier.id, barrier.location);
      }
      next_input_ = (i + 1) % inputs_.size();
      progressed = true;
    }
    if (!progressed) break;
    ++done;
  }
  return has_work();
}

void sim_task::on_barrier(std::size_t input, checkpoint_id id, const std::string& location) {
  if (unaligned_active_ && id == unaligned_id_) {
    if (!owed_[input]) return;  // a duplicate
    owed_[input] = false;
    maybe_finish_unaligned();
    return;
  }
  if (id <= last_done_) {
    ++stale_barriers_;
    return;
  }
  if (unaligned_active_ && id > unaligned_id_) {
    host_.decline(*this, unaligned_id_, checkpoint_failure_reason::checkpoint_declined_subsumed);
    drop_unaligned();
  }
  if (unaligned_mode_ && aligned_timeout_us_ == 0) {
    on_priority_barrier(input, sim_item{true, {}, id, location, true, 0});
    return;
  }
  if (aligning_ && id > aligning_id_) {
    // A newer barrier overtook the one being aligned: that checkpoint cannot complete here.
    host_.decline(*this, aligning_id_, checkpoint_failure_reason::checkpoint_declined_subsumed);
    cancel_alignment();
  }
  if (!aligning_) {
    aligning_ = true;
    aligning_id_ = id;
    aligning_location_ = location;
    barriers_seen_ = 0;
    alignment_start_us_ = host_.now_us();
    if (unaligned_mode_) host_.wake_at(*this, alignment_start_us_ + aligned_timeout_us_);
  }
  if (id < aligning_id_) {
    ++stale_barriers_;
    return;
  }
  assert(!blocked_[input] && "a channel delivered the same barrier twice");
  blocked_[input] = true;
  ++barriers_seen_;
  if (barriers_seen_ < inputs_.size()) return;
  aligning_ = false;
  last_done_ = id;
  std::fill(blocked_.begin(), blocked_.end(), false);
  snapshot(id, aligning_location_);
  if (role_ != sim_role::sink) forward_barrier(id, aligning_location_);
}

void sim_task::cancel_alignment() {
  assert(aligning_);
  last_done_ = std::max(last_done_, aligning_id_);
  aligning_ = false;
  barriers_seen_ = 0;
  std::fill(blocked_.begin(), blocked_.end(), false);
}

void sim_task::snapshot(checkpoint_id id, const std::string& location) {
  write_and_ack(make_state(id), location);
}

sim_task_state sim_task::make_state(checkpoint_id id) {
  sim_task_state state;
  state.checkpoint = id;
  state.attempt = attempt_;
  state.instance = instance_;
  state.next_seq = next_seq_;
  state.processed = processed_;
  if (role_ == sim_role::sink) {
    // Pre-commit: the open transaction is closed under this barrier's id.
    pending_.push_back(sim_transaction{host_.next_transaction_uid(), id, std::move(open_)});
    open_.clear();
    state.pending = pending_;
  }
  return state;
}

void sim_task::write_and_ack(const sim_task_state& state, const std::string& location) {
  const std::string path = host_.write_state(state, location);
  host_.acknowledge(*this, state.checkpoint, path);
}

void sim_task::forward_barrier(checkpoint_id id, const std::string& location, bool priority) {
  // Barriers are not held back by a full channel: at most one per checkpoint per channel.
  for (sim_channel* out : outputs_) {
    if (!priority) {
      push(*out, sim_item{true, {}, id, location});
      continue;
    }
    // Ahead of everything the consumer has not taken yet.
    out->items.push_front(sim_item{true, {}, id, location, true, out->items.size()});
    if (out->consumer != nullptr && out->consumer->alive()) host_.wake(*out->consumer);
  }
}

void sim_task::on_priority_barrier(std::size_t input, const sim_item& barrier) {
  const checkpoint_id id = barrier.id;
  // What it overtook: the items behind it now, sent before it.
  std::vector<sim_record> overtaken;
  const sim_channel& in = *inputs_[input];
  for (std::size_t k = 0; k < barrier.overtaken && k < in.items.size(); ++k)
    if (!in.items[k].barrier) overtaken.push_back(in.items[k].record);
  const auto keep = [&] {
    auto& to = unaligned_state_.channel_records;
    to.insert(to.end(), overtaken.begin(), overtaken.end());
  };
  if (unaligned_active_ && id == unaligned_id_) {
    if (!owed_[input]) return;
    owed_[input] = false;
    keep();
    maybe_finish_unaligned();
    return;
  }
  if (id <= last_done_ || (aligning_ && id < aligning_id_) ||
      (unaligned_active_ && id < unaligned_id_)) {
    ++stale_barriers_;
    return;
  }
  if (unaligned_active_) {
    host_.decline(*this, unaligned_id_, checkpoint_failure_reason::checkpoint_declined_subsumed);
    drop_unaligned();
  }
  std::vector<bool> delivered(inputs_.size(), false);
  std::string location = barrier.location;
  bool switched = false;
  if (aligning_ && id > aligning_id_) {
    host_.decline(*this, aligning_id_, checkpoint_failure_reason::checkpoint_declined_subsumed);
    cancel_alignment();
  } else if (aligning_) {
    // The checkpoint being aligned: it cannot stay aligned past a barrier that overtook records.
    delivered = blocked_;
    location = aligning_location_;
    aligning_ = false;
    barriers_seen_ = 0;
    std::fill(blocked_.begin(), blocked_.end(), false);
    switched = true;
  }
  delivered[input] = true;
  start_unaligned(id, location, delivered, switched);
  keep();
  maybe_finish_unaligned();
}

void sim_task::start_unaligned(checkpoint_id id, const std::string& location,
                               const std::vector<bool>& delivered, bool switched) {
  assert(!unaligned_active_);
  unaligned_active_ = true;
  unaligned_id_ = id;
  unaligned_location_ = location;
  for (std::size_t k = 0; k < owed_.size(); ++k) owed_[k] = !delivered[k];
  unaligned_state_ = make_state(id);
  host_.took_unaligned(switched);
  if (role_ != sim_role::sink) forward_barrier(id, location, true);
}

void sim_task::maybe_finish_unaligned() {
  if (!unaligned_active_) return;
  for (bool owed : owed_)
    if (owed) return;
  unaligned_active_ = false;
  last_done_ = std::max(last_done_, unaligned_id_);
  write_and_ack(unaligned_state_, unaligned_location_);
}

void sim_task::drop_unaligned() {
  assert(unaligned_active_);
  unaligned_active_ = false;
  std::fill(owed_.begin(), owed_.end(), false);
  last_done_ = std::max(last_done_, unaligned_id_);
}

void sim_task::check_alignment_timeout() {
  if (!aligning_ || !unaligned_mode_ || aligned_timeout_us_ == 0) return;
  if (host_.now_us() < alignment_start_us_ + aligned_timeout_us_) return;
  // Alignment took too long: snapshot now; the inputs that delivered the barrier are released
  // (what waits on them came after it), the others owe it.
  std::vector<bool> delivered = blocked_;
  const checkpoint_id id = aligning_id_;
  const std::string location = aligning_location_;
  aligning_ = false;
  barriers_seen_ = 0;
  std::fill(blocked_.begin(), blocked_.end(), false);
  start_unaligned(id, location, delivered, true);
  maybe_finish_unaligned();
}

void sim_task::notify_complete(checkpoint_id id) {
  if (!alive_) return;
  last_notified_ = std::max(last_notified_, id);
  if (role_ != sim_role::sink) return;
  // A lost notification is harmless: a later one commits the older transactions too.
  auto committed = std::stable_partition(pending_.begin(), pending_.end(),
                                         [id](const sim_transaction& t) { return t.id <= id; });
  for (auto it = pending_.begin(); it != committed; ++it) host_.commit(*this, *it);
  pending_.erase(pending_.begin(), committed);
}

void sim_task::notify_aborted(checkpoint_id id) {
  if (!alive_) return;
  // The checkpoint is dead: stop holding inputs back for it. A sink drops nothing: its records
  // arrived before the next barrier too, so the next completed checkpoint covers them.
  if (aligning_ && aligning_id_ == id) {
    cancel_alignment();
    host_.wake(*this);
  }
  if (unaligned_active_ && unaligned_id_ == id) drop_unaligned();
}

}  // namespace snapflow::sim
