#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <vector>

#include "engine/checkpoint/checkpoint_messages.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Records one subtask attempt has read from its inputs and written to its outputs since it
// started (Flink's numRecordsIn / numRecordsOut). Workers report them with their heartbeats.
// The same report carries the checkpoint-complete notifications the attempt handled since the
// previous one, oldest first.
struct task_io_counters {
  job_id job;
  execution_attempt_id attempt;
  std::uint64_t records_in = 0;
  std::uint64_t records_out = 0;
  std::vector<checkpoint_notified> notified;
  // The byte bound of each of its input channels now (checkpoint_config::max_in_flight_bytes,
  // or what buffer debloating set; 0: none), and the bytes of records queued on them.
  std::uint64_t in_flight_bytes_bound = 0;
  std::uint64_t buffered_in_bytes = 0;

  bool operator==(const task_io_counters&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const task_io_counters& c) {
  return os << "task_io_counters{job=" << c.job << ", attempt=" << c.attempt
            << ", in=" << c.records_in << ", out=" << c.records_out
            << ", notified=" << c.notified.size() << "}";
}

// The latest counters of every subtask the coordinator heard about, for the REST API (vertex
// metrics read-records / write-records) and so for the CLI's records/s. Keeps one entry per
// subtask, the newest attempt's: a report from an older attempt than the one stored is stale
// and ignored, so the store stays bounded by the number of subtasks. Coordinator thread only.
class task_io_metrics {
 public:
  struct entry {
    std::uint32_t attempt = 0;
    std::uint64_t records_in = 0;
    std::uint64_t records_out = 0;
    std::int64_t updated_us = 0;  // coordinator_clock time of the report
    std::uint64_t in_flight_bytes_bound = 0;
    std::uint64_t buffered_in_bytes = 0;
  };

  void report(const task_io_counters& counters, std::int64_t now_us);
  // The counters of exactly this attempt, if it reported any.
  std::optional<entry> find(const job_id& job, const execution_attempt_id& attempt) const;
  // When any subtask of the job last reported; 0 when none did.
  std::int64_t last_update_us(const job_id& job) const;
  void forget(const job_id& job) { jobs_.erase(job); }

 private:
  struct job_entries {
    std::map<subtask_id, entry> subtasks;
    std::int64_t updated_us = 0;
  };
  std::map<job_id, job_entries> jobs_;
};

}  // namespace snapflow
