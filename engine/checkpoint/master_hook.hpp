#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Coordinator-side state snapshotted with every checkpoint (after Flink's
// MasterTriggerRestoreHook), e.g. the offsets an external source coordinator hands out. Its
// bytes are stored in the checkpoint's metadata under the hook's name.
class master_hook {
 public:
  virtual ~master_hook() = default;

  // Unique among a job's hooks; the key of its state in the metadata.
  virtual std::string name() const = 0;
  // Snapshot for checkpoint `id`; call `done` exactly once, from any thread, with the state
  // bytes or an error (which fails the checkpoint with trigger_checkpoint_failure).
  virtual void snapshot(checkpoint_id id, std::int64_t timestamp_us,
                        std::function<void(result<std::string>)> done) = 0;
  virtual result<void> restore(checkpoint_id id, std::string_view state) = 0;
};

// A job's master hooks, in registration order. Built before the job runs; coordinator thread.
class master_hook_registry {
 public:
  // Blank or duplicate names are refused with a message naming the hook.
  result<void> add(std::shared_ptr<master_hook> hook);
  const std::vector<std::shared_ptr<master_hook>>& hooks() const { return hooks_; }
  master_hook* find(std::string_view name) const;
  std::size_t size() const { return hooks_.size(); }

  // Restores every hook whose name is in `states`, in registration order; hooks without a state
  // are left alone. A state for an unknown hook is an error unless allow_unknown (the job
  // changed since the checkpoint); that check runs before any hook is restored. Stops at the
  // first hook that fails, naming it.
  result<void> restore(checkpoint_id id, const std::map<std::string, std::string>& states,
                       bool allow_unknown = false);

 private:
  std::vector<std::shared_ptr<master_hook>> hooks_;
};

}  // namespace snapflow
