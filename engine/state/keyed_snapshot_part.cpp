#include "engine/state/keyed_snapshot_part.hpp"

#include <utility>

namespace snapflow {

result<keyed_state_snapshot> deferred_keyed_snapshot::materialize() {
  keyed_state_snapshot out;
  out.max_parallelism = max_parallelism();
  keyed_snapshot_collector sink(out);
  if (auto r = write_to(sink); !r) return r.err();
  return out;
}

result<keyed_state_snapshot> keyed_snapshot_part::materialize() && {
  if (deferred) return deferred->materialize();
  return std::move(ready);
}

}  // namespace snapflow
