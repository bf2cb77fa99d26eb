#include "graph/job_status.hpp"

#include <array>

namespace snapflow {

namespace {
constexpr std::array<std::string_view, 9> names = {
    "CREATED", "RUNNING",  "FAILING",    "FAILED",    "CANCELLING",
    "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED"};
}

std::string_view to_string(job_status status) { return names[static_cast<std::size_t>(status)]; }

std::optional<job_status> parse_job_status(std::string_view text) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<job_status>(i);
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, job_status status) { return os << to_string(status); }

bool is_globally_terminal(job_status s) {
  return s == job_status::failed || s == job_status::canceled || s == job_status::finished;
}

bool is_terminal(job_status s) { return is_globally_terminal(s) || s == job_status::suspended; }

bool is_legal_transition(job_status from, job_status to) {
  using enum job_status;
  if (from == to) return false;
  switch (from) {
    case created:
      return to == running || to == failing || to == failed || to == cancelling ||
             to == suspended;
    case running:
      return to == failing || to == cancelling || to == finished || to == restarting ||
             to == suspended;
    case failing:
      return to == failed || to == restarting || to == cancelling || to == suspended;
    case restarting:
      return to == running || to == failing || to == failed || to == cancelling ||
             to == suspended;
    case cancelling:
      return to == canceled || to == suspended;
    case failed:
    case canceled:
    case finished:
    case suspended:
      return false;
  }
  return false;
}

bool job_status_machine::transition(job_status to, std::int64_t timestamp_ms) {
  return transition(status_, to, timestamp_ms);
}

bool job_status_machine::transition(job_status expected, job_status to,
                                    std::int64_t timestamp_ms) {
  if (status_ != expected || !is_legal_transition(status_, to)) return false;
  job_status from = status_;
  status_ = to;
  timestamps_ms_[static_cast<std::size_t>(to)] = timestamp_ms;
  // Index-based: a listener may register another listener; it runs from the next change on.
  const std::size_t n = listeners_.size();
  for (std::size_t i = 0; i < n; ++i) listeners_[i](from, to, timestamp_ms);
  return true;
}

void job_status_machine::add_listener(job_status_listener listener) {
  listeners_.push_back(std::move(listener));
}

std::int64_t job_status_machine::timestamp_of(job_status status) const {
  return timestamps_ms_[static_cast<std::size_t>(status)];
}

}  // namespace snapflow
