#include "engine/state/keyed_snapshot_part.hpp"

#include <utility>

namespace snapflow {

result<keyed_state_snapshot> keyed_snapshot_part::materialize() && {
  if (deferred) return deferred->materialize();
  return std::move(ready);
}

}  // namespace snapflow
