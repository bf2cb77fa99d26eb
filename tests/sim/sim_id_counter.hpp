#pragma once

#include <functional>
#include <memory>

#include "engine/checkpoint/checkpoint_id_counter.hpp"

namespace snapflow::sim {

// file_checkpoint_id_counter's protocol over simulated storage: ids are reserved in blocks and
// a block's end is persisted before its first id is handed out, so a counter rebuilt after a
// coordinator crash (from the persisted limit alone) never hands out an id twice. Persisting
// may fail on demand (the simulator's disk fault).
class sim_id_counter final : public checkpoint_id_counter {
 public:
  // What survives a crash: the first id not yet reserved.
  struct durable_state {
    checkpoint_id limit = 1;
  };

  sim_id_counter(std::shared_ptr<durable_state> disk, std::int64_t reserve_block,
                 std::function<bool()> persist_fails);

  result<checkpoint_id> get_and_increment() override;
  bool next_is_cheap() const override { return next_ < limit_; }
  checkpoint_id peek_next() const override { return next_; }
  result<void> advance_to(checkpoint_id next) override;

 private:
  result<void> persist(checkpoint_id limit);

  std::shared_ptr<durable_state> disk_;
  std::int64_t reserve_block_;
  std::function<bool()> persist_fails_;
  checkpoint_id next_;
  checkpoint_id limit_;
};

}  // namespace snapflow::sim
