#pragma once

#include <functional>
#include <vector>

#include "engine/checkpoint/checkpoint_task_gateway.hpp"

namespace snapflow::test {

// Records what the coordinator sends to tasks; an optional hook answers triggers (a stub task
// runtime that acks at once).
class recording_gateway : public checkpoint_task_gateway {
 public:
  struct trigger {
    execution_attempt_id attempt;
    checkpoint_id id;
    std::int64_t timestamp_us;
    checkpoint_options options;
  };
  std::vector<trigger> triggers;
  std::vector<std::pair<execution_attempt_id, checkpoint_id>> completes;
  std::vector<std::pair<execution_attempt_id, checkpoint_id>> aborts;
  std::function<void(const trigger&)> on_trigger;
  // Runs at every flush(): the end of one run of the coordinator's calls.
  std::function<void()> on_flush;

  void trigger_checkpoint(const execution_attempt_id& attempt, checkpoint_id id,
                          std::int64_t timestamp_us, const checkpoint_options& options) override {
    triggers.push_back({attempt, id, timestamp_us, options});
    if (on_trigger) on_trigger(triggers.back());
  }
  void notify_checkpoint_complete(const execution_attempt_id& attempt, checkpoint_id id,
                                  std::int64_t) override {
    completes.emplace_back(attempt, id);
  }
  void notify_checkpoint_aborted(const execution_attempt_id& attempt, checkpoint_id id,
                                 checkpoint_id) override {
    aborts.emplace_back(attempt, id);
  }
  void flush() override {
    if (on_flush) on_flush();
  }
};

}  // namespace snapflow::test
