#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace snapflow {

enum class job_status : std::uint8_t {
  created,
  running,
  failing,
  failed,
  cancelling,
  canceled,
  finished,
  restarting,
  suspended,
};

std::string_view to_string(job_status status);
std::optional<job_status> parse_job_status(std::string_view text);
std::ostream& operator<<(std::ostream& os, job_status status);

// FAILED, CANCELED and FINISHED end a job for good; SUSPENDED ends it in this process only (a
// coordinator that takes over resumes it).
bool is_globally_terminal(job_status status);
bool is_terminal(job_status status);
bool is_legal_transition(job_status from, job_status to);

using job_status_listener = std::function<void(job_status from, job_status to, std::int64_t timestamp_ms)>;

// The job's status with only the legal transitions. Listeners run synchronously, in registration
// order, on the caller's thread; the owner (the execution graph) is only ever touched from the
// job master's executor, so that is where listeners run.
class job_status_machine {
 public:
  job_status current() const { return status_; }

  // Returns false and changes nothing when `to` is not reachable from the current status.
  bool transition(job_status to, std::int64_t timestamp_ms);
  // Moves only when the status is still `expected`; false otherwise.
  bool transition(job_status expected, job_status to, std::int64_t timestamp_ms);

  void add_listener(job_status_listener listener);
  std::size_t listener_count() const { return listeners_.size(); }
  // Time of the last entry into `status`, 0 if it was never entered.
  std::int64_t timestamp_of(job_status status) const;

 private:
  job_status status_ = job_status::created;
  std::vector<job_status_listener> listeners_;
  std::int64_t timestamps_ms_[9] = {};
};

}  // namespace snapflow
