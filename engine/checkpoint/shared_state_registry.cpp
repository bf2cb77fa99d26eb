#include "engine/checkpoint/shared_state_registry.hpp"

#include <algorithm>

namespace snapflow {

void shared_state_registry::register_checkpoint(const completed_checkpoint& checkpoint) {
  for (const auto& [_, state] : checkpoint.subtask_states)
    for (const state_handle& h : state.handles) {
      if (!h.is_shared()) continue;
      auto [it, fresh] = entries_.try_emplace(h.path);
      if (fresh) {
        it->second.handle = h;
        bytes_ += h.size;
      }
      it->second.last_used = std::max(it->second.last_used, checkpoint.id);
      it->second.released_pending_up_to.reset();  // in use again
    }
}

std::optional<std::string> shared_state_registry::check_reused(
    const completed_checkpoint& checkpoint) const {
  for (const auto& [_, state] : checkpoint.subtask_states)
    for (const state_handle& h : state.handles)
      if (h.sharing == handle_sharing::shared_reused && !holds(h.path))
        return "it reuses the shared state file " + h.path +
               ", which no retained checkpoint holds any more";
  return std::nullopt;
}

template <typename Predicate>
std::vector<state_handle> shared_state_registry::take_if(Predicate released) {
  std::vector<state_handle> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!released(it->second)) {
      ++it;
      continue;
    }
    bytes_ -= it->second.handle.size;
    out.push_back(std::move(it->second.handle));
    it = entries_.erase(it);
  }
  return out;
}

std::vector<state_handle> shared_state_registry::release_older_than(checkpoint_id lowest_retained,
                                                                    checkpoint_id newest_pending) {
  if (newest_pending == 0)
    return take_if([&](const entry& e) { return e.last_used < lowest_retained; });
  for (auto& [_, e] : entries_)
    if (e.last_used < lowest_retained)
      e.released_pending_up_to = std::max(e.released_pending_up_to.value_or(0), newest_pending);
  return {};
}

std::vector<state_handle> shared_state_registry::release_after_pending(
    checkpoint_id oldest_pending) {
  return take_if([&](const entry& e) {
    return e.released_pending_up_to &&
           (oldest_pending == 0 || *e.released_pending_up_to < oldest_pending);
  });
}

std::vector<state_handle> shared_state_registry::release_all() {
  return take_if([](const entry&) { return true; });
}

std::vector<state_handle> shared_state_registry::discardable(
    std::vector<state_handle> handles) const {
  std::erase_if(handles, [this](const state_handle& h) {
    if (h.sharing == handle_sharing::shared_reused) return true;
    // Named as new but held: a retained checkpoint uses that file (a worker may not claim it).
    return h.sharing == handle_sharing::shared_new && holds(h.path);
  });
  return handles;
}

void shared_state_registry::recover(const std::deque<completed_checkpoint>& retained) {
  entries_.clear();
  bytes_ = 0;
  for (const completed_checkpoint& c : retained) register_checkpoint(c);
}

std::vector<state_handle> exclusive_handles(const completed_checkpoint& checkpoint) {
  std::vector<state_handle> out = checkpoint.all_handles();
  std::erase_if(out, [](const state_handle& h) { return h.is_shared(); });
  return out;
}

std::uint64_t checkpointed_size(const subtask_state& state) {
  std::uint64_t written = 0;
  bool reused = false;
  for (const state_handle& h : state.handles) {
    if (h.sharing == handle_sharing::shared_reused)
      reused = true;
    else
      written += h.size;
  }
  return reused ? written : state.state_size;
}

}  // namespace snapflow
