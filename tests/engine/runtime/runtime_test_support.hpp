#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/runtime/checkpoint_responder.hpp"
#include "engine/runtime/stream_operator.hpp"
#include "engine/runtime/task_status_listener.hpp"
#include "tests/support/temp_folder.hpp"

namespace snapflow::runtime_test {

using temp_folder = snapflow::testing::temp_folder;

// Collects what an operator emits.
class collecting_output : public record_output {
 public:
  void emit(record r) override { records.push_back(std::move(r)); }
  std::vector<record> records;
};

// Collects acks and declines; waits for them without sleeping (condition variable, bounded).
class recording_responder : public checkpoint_responder {
 public:
  void acknowledge(checkpoint_ack ack) override {
    {
      std::lock_guard lock(mutex_);
      acks_.push_back(std::move(ack));
    }
    cv_.notify_all();
  }
  void decline(checkpoint_decline decline) override {
    {
      std::lock_guard lock(mutex_);
      declines_.push_back(std::move(decline));
    }
    cv_.notify_all();
  }
  bool wait_for(std::size_t acks, std::size_t declines = 0,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout,
                        [&] { return acks_.size() >= acks && declines_.size() >= declines; });
  }
  std::vector<checkpoint_ack> acks() const {
    std::lock_guard lock(mutex_);
    return acks_;
  }
  std::vector<checkpoint_decline> declines() const {
    std::lock_guard lock(mutex_);
    return declines_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<checkpoint_ack> acks_;
  std::vector<checkpoint_decline> declines_;
};

class recording_listener : public task_status_listener {
 public:
  void on_task_state(const execution_attempt_id&, execution_state state,
                     const std::string& message) override {
    {
      std::lock_guard lock(mutex_);
      states_.push_back(state);
      if (state == execution_state::failed) failure_ = message;
    }
    cv_.notify_all();
  }
  void on_source_exhausted(const execution_attempt_id&, checkpoint_id last_barrier) override {
    {
      std::lock_guard lock(mutex_);
      exhausted_ = last_barrier;
    }
    cv_.notify_all();
  }
  bool wait_for_state(execution_state s,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] {
      return std::find(states_.begin(), states_.end(), s) != states_.end();
    });
  }
  bool wait_for_exhausted(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return exhausted_.has_value(); });
  }
  std::vector<execution_state> states() const {
    std::lock_guard lock(mutex_);
    return states_;
  }
  std::string failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }
  std::optional<checkpoint_id> exhausted() const {
    std::lock_guard lock(mutex_);
    return exhausted_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<execution_state> states_;
  std::string failure_;
  std::optional<checkpoint_id> exhausted_;
};

// One line of sink output: "key,seq,value".
struct output_line {
  std::uint64_t key = 0;
  std::int64_t seq = 0;
  std::int64_t value = 0;
};

// Every line of every visible (not dot-named) regular file directly in `folder`.
inline std::vector<output_line> read_committed_output(const std::filesystem::path& folder) {
  std::vector<output_line> out;
  if (!std::filesystem::exists(folder)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      output_line l;
      char comma1 = 0;
      char comma2 = 0;
      std::istringstream fields(line);
      fields >> l.key >> comma1 >> l.seq >> comma2 >> l.value;
      if (!fields || comma1 != ',' || comma2 != ',') throw std::runtime_error("bad line: " + line);
      out.push_back(l);
    }
  }
  return out;
}

// Names of the entries directly in `folder`, sorted.
inline std::vector<std::string> list_names(const std::filesystem::path& folder) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    out.push_back(entry.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline job_vertex make_vertex(std::string kind, std::map<std::string, std::string> params = {},
                              std::uint32_t parallelism = 1, std::uint32_t max_parallelism = 128,
                              std::string uid = "") {
  job_vertex v;
  v.id = 7;
  v.kind = kind;
  v.uid = uid.empty() ? kind : uid;
  v.name = kind;
  v.params = std::move(params);
  v.parallelism = parallelism;
  v.max_parallelism = max_parallelism;
  return v;
}

}  // namespace snapflow::runtime_test
