#include "engine/state/keyed_snapshot_part.hpp"

#include <utility>

namespace snapflow {

result<void> keyed_group_sink::walked_key_group(std::uint32_t group, const key_group_walk& walk) {
  key_group_state state = collect_key_group(walk);
  return key_group(group, state);
}

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
