#include "tests/sim/sim_id_counter.hpp"

#include <cassert>

namespace snapflow::sim {

sim_id_counter::sim_id_counter(std::shared_ptr<durable_state> disk, std::int64_t reserve_block,
                               std::function<bool()> persist_fails)
    : disk_(std::move(disk)),
      reserve_block_(reserve_block),
      persist_fails_(std::move(persist_fails)),
      next_(disk_->limit),
      limit_(disk_->limit) {
  assert(reserve_block_ >= 1);
  assert(next_ >= 1);
}

result<void> sim_id_counter::persist(checkpoint_id limit) {
  assert(limit >= limit_);
  if (persist_fails_ && persist_fails_()) return error{"simulated disk failure (id counter)"};
  disk_->limit = limit;
  limit_ = limit;
  return success();
}

result<checkpoint_id> sim_id_counter::get_and_increment() {
  assert(next_ <= limit_);
  if (next_ == limit_)
    if (auto r = persist(next_ + reserve_block_); !r) return r.err();
  assert(next_ < limit_);
  return next_++;
}

result<void> sim_id_counter::advance_to(checkpoint_id next) {
  if (next <= next_) return success();
  if (next > limit_)
    if (auto r = persist(next + reserve_block_); !r) return r;
  next_ = next;
  return success();
}

}  // namespace snapflow::sim
