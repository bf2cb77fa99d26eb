#include <algorithm>
#include <cassert>
#include <deque>
#include <utility>

#include "engine/runtime/byte_gauge.hpp"
#include "engine/runtime/replaying_input_channel.hpp"
#include "engine/runtime/stream_task.hpp"
#include "engine/state/key_groups.hpp"

// stream_task's part in unaligned checkpoints (docs/unaligned-checkpoints.md): the barrier
// overtakes what the channels hold, the snapshot is taken at once, and what was overtaken is
// persisted with it as channel state; a restore replays that state before anything new.

namespace snapflow {

bool stream_task::forward_unaligned(const checkpoint_barrier& barrier,
                                    std::vector<persisted_channel>& out) {
  for (std::size_t g = 0; g < gates_.size(); ++g) {
    std::vector<output_gate::overtaken> held;
    if (!gates_[g].overtake(barrier, held)) {
      outputs_cancelled_ = true;
      return false;
    }
    for (auto& h : held)
      out.push_back({channel_side::output, static_cast<std::uint32_t>(g),
                     consumer_of(g, h.channel), std::move(h.records)});
  }
  return true;
}

void stream_task::hold_or_finish(prepared_snapshot p, bool unaligned,
                                 std::vector<persisted_channel> outputs) {
  const checkpoint_id id = p.barrier.id;
  const auto* aligner = handler_ ? std::get_if<barrier_aligner>(&*handler_) : nullptr;
  // Inputs still owe the barrier: the aligner is unaligned on this checkpoint.
  const bool inputs_pending =
      unaligned && aligner != nullptr && aligner->is_unaligned() && aligner->aligning_id() == id;
  // Aligned, but it may go unaligned: a barrier still waiting in a backlog is switched to a
  // priority one when the timeout passes, and what it overtakes is this checkpoint's state.
  bool outputs_pending = false;
  if (!unaligned && p.barrier.options.unaligned)
    for (const auto& gate : gates_) outputs_pending = outputs_pending || gate.holds_barrier(id);
  if (!unaligned && !outputs_pending) {
    finish_snapshot(std::move(p));
    return;
  }
  in_flight_.emplace();
  in_flight_->prepared = std::move(p);
  in_flight_->inputs_pending = inputs_pending;
  in_flight_->outputs_pending = outputs_pending;
  in_flight_->forwarded_us = now_us();
  for (auto& o : outputs) {
    for (const auto& r : o.records) in_flight_->persisted_bytes += approximate_bytes(r);
    in_flight_->outputs.push_back(std::move(o));
  }
  if (overtaken_ && overtaken_->id == id) {
    add_input_state(overtaken_->input, std::move(overtaken_->records));
    overtaken_.reset();
  }
  recording_ = inputs_pending;
  scan_owed_ = inputs_pending;
  if (!inputs_pending && !outputs_pending) complete_in_flight();
}

result<void> stream_task::take_overtaking_barriers() {
  if (!handler_ || !std::holds_alternative<barrier_aligner>(*handler_)) return success();
  const bool scan = scan_owed_;
  scan_owed_ = false;
  for (std::size_t i = 0; i < inputs_.size() && !should_stop(); ++i) {
    const auto& aligner = std::get<barrier_aligner>(*handler_);
    if (aligner.has_ended(i)) continue;
    if (!inputs_[i]->has_priority_barrier() && !(scan && aligner.owes_barrier(i))) continue;
    if (auto r = take_overtaking_barrier(i); !r) return r;
  }
  return success();
}

result<void> stream_task::take_overtaking_barrier(std::size_t i) {
  auto& aligner = std::get<barrier_aligner>(*handler_);
  // Stale barriers found first are dropped (their checkpoints are done here); what they
  // overtook is ahead of the next one too. Bounded: a queue holds few barriers.
  for (int k = 0; k < 64; ++k) {
    auto found = inputs_[i]->take_first_barrier();
    if (!found) return success();
    const checkpoint_id id = found->barrier.id;
    if (id <= aligner.last_handled_id() ||
        (aligner.aligning_id() && id < *aligner.aligning_id()))
      continue;
    // What it overtook: the rest of the batch the task is in, then the batches queued ahead.
    std::vector<record> ahead;
    const input_cursor& cursor = cursors_[i];
    for (std::size_t e = cursor.next; e < cursor.batch.size(); ++e)
      if (const auto* r = std::get_if<record>(&cursor.batch[e])) ahead.push_back(*r);
    for (const auto& batch : found->ahead)
      for (const auto& e : batch)
        if (const auto* r = std::get_if<record>(&e)) ahead.push_back(*r);
    // Added before the aligner can complete the checkpoint; a barrier that starts one leaves
    // it for the snapshot (hold_or_finish).
    if (in_flight_ && in_flight_->prepared.barrier.id == id && aligner.owes_barrier(i))
      add_input_state(i, std::move(ahead));
    else
      overtaken_ = overtaken_input{i, id, std::move(ahead)};
    auto actions = aligner.on_barrier(i, found->barrier, now_us(), true);
    auto performed = perform(actions);
    overtaken_.reset();
    if (!performed) return performed;
    return success();
  }
  return success();
}

void stream_task::add_input_state(std::size_t input, std::vector<record> records) {
  assert(in_flight_);
  if (records.empty()) return;
  auto& to = in_flight_->inputs[input];
  for (auto& r : records) {
    in_flight_->persisted_bytes += approximate_bytes(r);
    to.push_back(std::move(r));
  }
}

void stream_task::record_in_flight(std::size_t input, const record& r) {
  assert(in_flight_);
  in_flight_->persisted_bytes += approximate_bytes(r);
  in_flight_->inputs[input].push_back(r);
}

result<void> stream_task::check_unaligned_timeouts() {
  const std::int64_t now = now_us();
  if (handler_) {
    if (auto* aligner = std::get_if<barrier_aligner>(&*handler_)) {
      if (auto due = aligner->switch_deadline_us(); due && now >= *due) {
        if (auto r = perform(aligner->on_alignment_timeout(now)); !r) return r;
      }
    }
  }
  if (!in_flight_ || !in_flight_->outputs_pending) return success();
  const checkpoint_barrier& barrier = in_flight_->prepared.barrier;
  bool held = false;
  for (const auto& gate : gates_) held = held || gate.holds_barrier(barrier.id);
  if (held && now < in_flight_->forwarded_us + barrier.options.aligned_timeout_ms * 1000)
    return success();
  if (held) {
    for (std::size_t g = 0; g < gates_.size(); ++g) {
      std::vector<output_gate::overtaken> overtaken;
      if (!gates_[g].overtake_backlogged(barrier.id, overtaken)) {
        outputs_cancelled_ = true;
        return success();
      }
      for (auto& o : overtaken) {
        for (const auto& r : o.records) in_flight_->persisted_bytes += approximate_bytes(r);
        in_flight_->outputs.push_back({channel_side::output, static_cast<std::uint32_t>(g),
                                       consumer_of(g, o.channel), std::move(o.records)});
      }
    }
  }
  in_flight_->outputs_pending = false;
  if (!in_flight_->inputs_pending) complete_in_flight();
  return success();
}

std::optional<std::int64_t> stream_task::next_unaligned_deadline_us() const {
  std::optional<std::int64_t> due;
  if (handler_)
    if (const auto* aligner = std::get_if<barrier_aligner>(&*handler_))
      due = aligner->switch_deadline_us();
  if (in_flight_ && in_flight_->outputs_pending) {
    const std::int64_t out_due =
        in_flight_->forwarded_us + in_flight_->prepared.barrier.options.aligned_timeout_ms * 1000;
    due = due ? std::min(*due, out_due) : out_due;
  }
  return due;
}

void stream_task::on_channel_state_complete(checkpoint_id id) {
  if (!in_flight_ || in_flight_->prepared.barrier.id != id) return;
  in_flight_->inputs_pending = false;
  recording_ = false;
  if (!in_flight_->outputs_pending) complete_in_flight();
}

void stream_task::complete_in_flight() {
  assert(in_flight_);
  in_flight_checkpoint f = std::move(*in_flight_);
  in_flight_.reset();
  recording_ = false;
  subtask_snapshot& s = *f.prepared.snapshot;
  for (auto& [input, records] : f.inputs) {
    if (records.empty()) continue;
    const channel_address from = input_address(input);
    s.channels.push_back({channel_side::input, from.gate, from.channel, std::move(records)});
  }
  for (auto& o : f.outputs) s.channels.push_back(std::move(o));
  f.prepared.ack.metrics.unaligned = true;
  f.prepared.ack.metrics.persisted_data_bytes = f.persisted_bytes;
  finish_snapshot(std::move(f.prepared));
}

void stream_task::drop_in_flight(checkpoint_id id) {
  if (!in_flight_ || in_flight_->prepared.barrier.id != id) return;
  in_flight_.reset();
  recording_ = false;
}

channel_address stream_task::input_address(std::size_t input) const {
  if (input < config_.input_addresses.size()) return config_.input_addresses[input];
  return {0, static_cast<std::uint32_t>(input)};
}

std::uint32_t stream_task::consumer_of(std::size_t gate, std::size_t channel) const {
  // A forward edge has one channel, to the subtask with this one's index.
  if (config_.outputs.at(gate).part == partitioning::forward) return config_.attempt.subtask.index;
  return static_cast<std::uint32_t>(channel);
}

void stream_task::begin_recovery_alignment() {
  if (!config_.restore_checkpoint || !config_.unaligned_checkpoints) return;
  // After what this subtask replayed on its outputs (broadcast sends what is pending first).
  for (auto& gate : gates_)
    if (!gate.broadcast(checkpoint_barrier{})) {
      outputs_cancelled_ = true;
      return;
    }
  recovered_.assign(inputs_.size(), false);
  recovering_left_ = inputs_.size();
}

void stream_task::on_recovery_marker(std::size_t input) {
  if (recovering_left_ == 0 || recovered_[input]) return;
  recovered_[input] = true;
  --recovering_left_;
}

result<void> stream_task::keep_channel_state(std::uint32_t old_index, subtask_snapshot& snapshot) {
  if (snapshot.channels.empty()) return success();
  const std::uint32_t index = config_.attempt.subtask.index;
  const std::uint32_t p_new = config_.vertex.parallelism;
  const std::uint32_t p_old = snapshot.parallelism;
  if (p_old == 0 || old_index >= p_old)
    return error{"the state of old subtask " + std::to_string(old_index) + " of '" +
                 config_.vertex.uid + "' names parallelism " + std::to_string(p_old)};
  // Each persisted record is replayed by exactly one new subtask (docs/unaligned-checkpoints.md,
  // "Rescaling"): at the same parallelism each subtask replays its own.
  for (auto& c : snapshot.channels) {
    if (p_old == p_new) {
      if (old_index == index) restored_channels_.push_back(std::move(c));
      continue;
    }
    if (c.side == channel_side::output) {
      if (output_state_owner(old_index, p_old) == index)
        restored_channels_.push_back(std::move(c));
      continue;
    }
    switch (input_gate_kind(c.gate)) {
      case partitioning::hash:
        if (keyed_) {
          // Every new subtask whose key groups overlap the old one's received its state: each
          // keeps the records of its own key groups.
          const key_group_range own = keyed_->range();
          std::erase_if(c.records, [&](const record& r) {
            const std::uint32_t group =
                key_groups::key_group_for_key(r.key, config_.vertex.max_parallelism);
            return group < own.first || group > own.last;
          });
          if (!c.records.empty()) restored_channels_.push_back(std::move(c));
          continue;
        }
        [[fallthrough]];
      case partitioning::forward:
      case partitioning::rebalance:
        if (old_index % p_new == index) restored_channels_.push_back(std::move(c));
        continue;
      case partitioning::broadcast:
        // Broadcast records in flight to an old consumer belong to the new consumer that took
        // its place (its operator state too); a consumer gone takes them along.
        if (old_index == index) restored_channels_.push_back(std::move(c));
        continue;
    }
  }
  snapshot.channels.clear();
  return success();
}

std::uint32_t stream_task::output_state_owner(std::uint32_t old_index,
                                              std::uint32_t old_parallelism) const {
  const std::uint32_t p_new = config_.vertex.parallelism;
  if (!keyed_) return old_index % p_new;  // as round-robin operator state moves
  // The new subtask that owns the old one's first key group received its state.
  const key_group_range old_range =
      key_groups::range_for_subtask(old_index, old_parallelism, config_.vertex.max_parallelism);
  return key_groups::subtask_for_key_group(old_range.first, p_new,
                                           config_.vertex.max_parallelism);
}

partitioning stream_task::input_gate_kind(std::uint32_t gate) const {
  if (gate < config_.input_gates.size()) return config_.input_gates[gate];
  return keyed_ ? partitioning::hash : partitioning::rebalance;
}

result<void> stream_task::replay_channel_state(std::vector<persisted_channel> channels) {
  std::map<std::size_t, std::deque<element_batch>> replays;
  for (auto& c : channels) {
    if (c.side == channel_side::output) {
      if (auto r = replay_output(c); !r) return r;
      continue;
    }
    auto input = replay_input_of(c);
    if (!input) return input.err();
    auto& batches = replays[*input];
    for (auto& r : c.records) {
      if (batches.empty() || batches.back().size() >= config_.batch_size) {
        batches.emplace_back();
        batches.back().reserve(config_.batch_size);
      }
      batches.back().push_back(std::move(r));
    }
  }
  for (auto& [input, batches] : replays)
    inputs_[input] = std::make_shared<replaying_input_channel>(inputs_[input], std::move(batches));
  return success();
}

result<void> stream_task::replay_output(persisted_channel& c) {
  if (c.gate >= gates_.size())
    return error{"channel state names output " + std::to_string(c.gate) + ", and '" +
                 config_.vertex.uid + "' has " + std::to_string(gates_.size())};
  output_gate& gate = gates_[c.gate];
  const std::size_t n = gate.num_channels();
  switch (config_.outputs[c.gate].part) {
    case partitioning::hash:
      // By key, as they were sent: the same channel, or the one that owns the key now.
      for (auto& r : c.records)
        if (!gate.emit(std::move(r))) return success();  // torn down
      return success();
    case partitioning::forward:
      // Its one channel: to the consumer with this subtask's index, which took the place of
      // the old consumer (the old producer's own, or, rescaled, one of those this subtask
      // replays for).
      break;
    case partitioning::rebalance:
      // A consumer gone (fewer of them now) hands its records to another one.
      break;
    case partitioning::broadcast:
      // A consumer gone took its broadcast records along (its place is nobody's now).
      if (c.channel >= n) return success();
      break;
  }
  const std::size_t position = config_.outputs[c.gate].part == partitioning::forward
                                   ? 0
                                   : static_cast<std::size_t>(c.channel) % n;
  for (auto& r : c.records)
    if (!gate.emit_to(position, std::move(r))) return success();  // torn down
  return success();
}

result<std::size_t> stream_task::replay_input_of(const persisted_channel& c) const {
  // The channel it was persisted for, or, when its producer is gone (fewer producers now),
  // another channel of the same edge: the records still come before anything new.
  std::vector<std::size_t> same_gate;
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    const channel_address a = input_address(i);
    if (a == channel_address{c.gate, c.channel}) return i;
    if (a.gate == c.gate) same_gate.push_back(i);
  }
  if (same_gate.empty())
    return error{"channel state names input edge " + std::to_string(c.gate) + ", which '" +
                 config_.vertex.uid + "' subtask " +
                 std::to_string(config_.attempt.subtask.index) + " lacks"};
  return same_gate[c.channel % same_gate.size()];
}

}  // namespace snapflow
