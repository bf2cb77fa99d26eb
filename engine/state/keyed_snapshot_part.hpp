#pragma once

#include <memory>

#include "engine/state/keyed_state_snapshot.hpp"
#include "graph/result.hpp"

namespace snapflow {

// A consistent view of a backend's keyed state, taken in a checkpoint's synchronous part and
// turned into the neutral form in its asynchronous part, off the task thread, while the task
// goes on changing the state. Holds what the view needs (the store, its snapshot) until it is
// destroyed, whatever happened to the backend meanwhile.
class deferred_keyed_snapshot {
 public:
  virtual ~deferred_keyed_snapshot() = default;
  // Any thread; at most once.
  virtual result<keyed_state_snapshot> materialize() = 0;
};

// What a backend's synchronous snapshot yields: the state itself, already copied (the heap
// backend: a copy costs less than a hand-off), or a deferred view (rocksdb: a copy of a state
// larger than memory cannot be made on the task thread).
struct keyed_snapshot_part {
  keyed_state_snapshot ready;  // the state, when `deferred` is null
  // Shared: the hand-off to the snapshot writer is a copyable std::function.
  std::shared_ptr<deferred_keyed_snapshot> deferred;

  // The neutral form, whichever way it was taken (tests, and anything that needs it at once).
  result<keyed_state_snapshot> materialize() &&;
};

}  // namespace snapflow
