#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "engine/deployment/task_deployment.hpp"

namespace snapflow {

struct worker_info {
  worker_id id;
  std::uint32_t slots = 0;
  std::string data_endpoint;
  // With CURVE: the public key (Z85) the worker registered with, which its data endpoint also
  // serves with; deployments hand it to the worker's neighbours. Empty without CURVE.
  std::string public_key;
  // The folders the worker lets tasks' file paths name (its --data-root), the first one the
  // folder relative paths resolve against. Empty: it did not say (an older worker), and the
  // dispatcher leaves the check to the worker's deployment.
  std::vector<std::string> data_roots;
  // The fingerprints of the user programs it was started from (their callables are in it),
  // with each program's name for messages. Empty: it runs only jobs that name no program.
  std::map<std::string, std::string> programs;
  std::int64_t registered_us = 0;
  std::int64_t last_heartbeat_us = 0;
  std::uint32_t used_slots = 0;
  std::uint64_t incarnation = 0;  // grows when the same id registers again (a restarted worker)

  std::uint32_t free_slots() const { return slots - used_slots; }
};

// The workers the coordinator knows and their slots (Flink's ResourceManager, reduced to what a
// static cluster needs). Liveness is decided here from heartbeat times the caller feeds in.
class worker_registry {
 public:
  static constexpr std::uint32_t max_slots_per_worker = 4096;

  struct registration {
    bool replaced = false;  // an earlier incarnation of this id was still registered
  };
  // A worker id registering again replaces the old incarnation (its slots are freed: whatever
  // ran there is gone). Refuses 0 or absurd slot counts and blank ids. `public_key`: the CURVE
  // key the worker proved at the handshake (empty without CURVE).
  result<registration> register_worker(worker_id id, std::uint32_t slots, std::string data_endpoint,
                                       std::int64_t now_us, std::string public_key = {},
                                       std::vector<std::string> data_roots = {},
                                       std::map<std::string, std::string> programs = {});
  // False when the id is unknown (a worker must register first).
  bool heartbeat(const worker_id& id, std::int64_t now_us);
  // Removes and returns the workers not heard from for longer than timeout_us.
  std::vector<worker_id> expire(std::int64_t now_us, std::int64_t timeout_us);
  bool remove(const worker_id& id);

  const worker_info* find(const worker_id& id) const;
  const std::map<worker_id, worker_info>& workers() const { return workers_; }
  std::uint32_t total_free_slots() const;

  // Takes `n` slots, spreading them over workers with the most free slots first. Nothing is
  // taken when fewer than n are free.
  std::optional<std::vector<worker_id>> allocate(std::uint32_t n);
  // The same among the workers that carry program `fingerprint` only (a job of a user
  // program runs only where its callables are); empty means every worker.
  std::optional<std::vector<worker_id>> allocate(std::uint32_t n, const std::string& fingerprint);
  // Free slots among the workers `allocate(n, fingerprint)` would pick from.
  std::uint32_t free_slots_for(const std::string& fingerprint) const;
  void release(const worker_id& id, std::uint32_t n);

 private:
  std::map<worker_id, worker_info> workers_;
  std::uint64_t next_incarnation_ = 1;
};

}  // namespace snapflow
