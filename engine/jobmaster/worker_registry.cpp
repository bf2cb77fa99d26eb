#include "engine/jobmaster/worker_registry.hpp"

#include <algorithm>
#include <cassert>

namespace snapflow {

result<worker_registry::registration> worker_registry::register_worker(worker_id id,
                                                                       std::uint32_t slots,
                                                                       std::string data_endpoint,
                                                                       std::int64_t now_us,
                                                                       std::string public_key,
                                                                       std::vector<std::string> data_roots,
                                                                       std::map<std::string, std::string> programs) {
  if (id.empty()) return error{"worker id must not be blank"};
  if (slots < 1 || slots > max_slots_per_worker)
    return error{"worker '" + id + "' offers " + std::to_string(slots) +
                 " slots; it must be between 1 and 4096"};
  registration r;
  r.replaced = workers_.erase(id) > 0;
  worker_info w;
  w.id = id;
  w.slots = slots;
  w.data_endpoint = std::move(data_endpoint);
  w.public_key = std::move(public_key);
  w.data_roots = std::move(data_roots);
  w.programs = std::move(programs);
  w.registered_us = now_us;
  w.last_heartbeat_us = now_us;
  w.incarnation = next_incarnation_++;
  workers_.emplace(std::move(id), std::move(w));
  return r;
}

bool worker_registry::heartbeat(const worker_id& id, std::int64_t now_us) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return false;
  it->second.last_heartbeat_us = std::max(it->second.last_heartbeat_us, now_us);
  return true;
}

std::vector<worker_id> worker_registry::expire(std::int64_t now_us, std::int64_t timeout_us) {
  std::vector<worker_id> lost;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now_us - it->second.last_heartbeat_us > timeout_us) {
      lost.push_back(it->first);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  return lost;
}

bool worker_registry::remove(const worker_id& id) { return workers_.erase(id) > 0; }

const worker_info* worker_registry::find(const worker_id& id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

std::uint32_t worker_registry::total_free_slots() const {
  std::uint32_t n = 0;
  for (const auto& [_, w] : workers_) n += w.free_slots();
  return n;
}

std::optional<std::vector<worker_id>> worker_registry::allocate(std::uint32_t n) {
  return allocate(n, std::string());
}

namespace {

bool carries(const worker_info& w, const std::string& fingerprint) {
  return fingerprint.empty() || w.programs.contains(fingerprint);
}

}  // namespace

std::uint32_t worker_registry::free_slots_for(const std::string& fingerprint) const {
  std::uint32_t n = 0;
  for (const auto& [_, w] : workers_)
    if (carries(w, fingerprint)) n += w.free_slots();
  return n;
}

std::optional<std::vector<worker_id>> worker_registry::allocate(std::uint32_t n,
                                                                const std::string& fingerprint) {
  if (free_slots_for(fingerprint) < n) return std::nullopt;
  std::vector<worker_id> out;
  out.reserve(n);
  while (out.size() < n) {
    // The worker with the most free slots (ties: by id, so placement is deterministic).
    worker_info* best = nullptr;
    for (auto& [_, w] : workers_)
      if (carries(w, fingerprint) && w.free_slots() > 0 &&
          (best == nullptr || w.free_slots() > best->free_slots()))
        best = &w;
    assert(best != nullptr);
    ++best->used_slots;
    out.push_back(best->id);
  }
  return out;
}

void worker_registry::release(const worker_id& id, std::uint32_t n) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;  // the worker is gone, and its slots with it
  assert(it->second.used_slots >= n);
  it->second.used_slots -= std::min(n, it->second.used_slots);
}

}  // namespace snapflow
