#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "engine/runtime/channel.hpp"

namespace snapflow {

// An input channel restored from an unaligned checkpoint: delivers the channel state persisted
// for it (the records in flight on it when the checkpoint was taken) before anything the live
// channel brings. The replayed batches count as queued ahead of whatever the live channel
// holds, so a barrier that overtakes them (take_first_barrier) finds them among what it
// overtook: a checkpoint taken during the replay persists what was not replayed yet, and so
// is complete even though the previous one's channel state is still being consumed.
class replaying_input_channel final : public input_channel {
 public:
  replaying_input_channel(std::shared_ptr<input_channel> live, std::deque<element_batch> replay);

  std::optional<element_batch> try_take() override;
  void set_wakeup(std::shared_ptr<task_wakeup> wakeup) override;
  void cancel() override;
  std::optional<std::string> broken() const override;
  std::optional<queued_barrier> take_first_barrier() override;
  bool has_priority_barrier() const override;

  // Batches of the restored state not delivered yet.
  std::size_t replay_left() const { return replay_.size(); }

 private:
  std::shared_ptr<input_channel> live_;
  std::deque<element_batch> replay_;
};

}  // namespace snapflow
