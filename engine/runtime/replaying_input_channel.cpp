#include "engine/runtime/replaying_input_channel.hpp"

#include <cassert>

namespace snapflow {

replaying_input_channel::replaying_input_channel(std::shared_ptr<input_channel> live,
                                                 std::deque<element_batch> replay)
    : live_(std::move(live)), replay_(std::move(replay)) {
  assert(live_);
}

std::optional<element_batch> replaying_input_channel::try_take() {
  if (!replay_.empty()) {
    element_batch batch = std::move(replay_.front());
    replay_.pop_front();
    return batch;
  }
  return live_->try_take();
}

void replaying_input_channel::set_wakeup(std::shared_ptr<task_wakeup> wakeup) {
  live_->set_wakeup(std::move(wakeup));
}

void replaying_input_channel::cancel() { live_->cancel(); }

std::optional<std::string> replaying_input_channel::broken() const {
  // A loss on the live channel shows once the replay, which comes before it, is taken.
  if (!replay_.empty()) return std::nullopt;
  return live_->broken();
}

std::optional<queued_barrier> replaying_input_channel::take_first_barrier() {
  auto found = live_->take_first_barrier();
  if (!found || replay_.empty()) return found;
  // The replayed batches are ahead of everything live: they stay queued, as the live ones do.
  std::vector<element_batch> ahead(replay_.begin(), replay_.end());
  ahead.insert(ahead.end(), std::make_move_iterator(found->ahead.begin()),
               std::make_move_iterator(found->ahead.end()));
  found->ahead = std::move(ahead);
  return found;
}

bool replaying_input_channel::has_priority_barrier() const {
  return live_->has_priority_barrier();
}

}  // namespace snapflow
