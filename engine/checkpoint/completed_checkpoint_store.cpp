#include "engine/checkpoint/completed_checkpoint_store.hpp"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace snapflow {

completed_checkpoint_store::completed_checkpoint_store(int retained) : retained_(retained) {
  assert(retained >= 1);
}

result<std::vector<completed_checkpoint>> completed_checkpoint_store::add(
    completed_checkpoint checkpoint) {
  assert(checkpoint.id >= 1);
  std::vector<completed_checkpoint> subsumed;
  if (checkpoint.is_savepoint()) {
    if (!savepoints_.empty() && checkpoint.id <= savepoints_.back().id)
      return error{"savepoint " + std::to_string(checkpoint.id) +
                   " is not newer than the latest savepoint " +
                   std::to_string(savepoints_.back().id)};
    savepoints_.push_back(std::move(checkpoint));
    if (savepoints_.size() > max_savepoints) savepoints_.erase(savepoints_.begin());
    return subsumed;
  }
  if (!checkpoints_.empty() && checkpoint.id <= checkpoints_.back().id)
    return error{"checkpoint " + std::to_string(checkpoint.id) +
                 " is not newer than the latest retained checkpoint " +
                 std::to_string(checkpoints_.back().id)};
  checkpoints_.push_back(std::move(checkpoint));
  while (checkpoints_.size() > static_cast<std::size_t>(retained_)) {
    subsumed.push_back(std::move(checkpoints_.front()));
    checkpoints_.pop_front();
  }
  assert(checkpoints_.size() <= static_cast<std::size_t>(retained_));
  return subsumed;
}

const completed_checkpoint* completed_checkpoint_store::latest() const {
  return checkpoints_.empty() ? nullptr : &checkpoints_.back();
}

const completed_checkpoint* completed_checkpoint_store::latest_savepoint() const {
  return savepoints_.empty() ? nullptr : &savepoints_.back();
}

void completed_checkpoint_store::recover(std::vector<completed_checkpoint> from_disk) {
  checkpoints_.clear();
  savepoints_.clear();
  std::sort(from_disk.begin(), from_disk.end(),
            [](const completed_checkpoint& a, const completed_checkpoint& b) {
              return a.id < b.id;
            });
  // The same id twice (a checkpoint found in two places) keeps the first.
  from_disk.erase(std::unique(from_disk.begin(), from_disk.end(),
                              [](const completed_checkpoint& a, const completed_checkpoint& b) {
                                return a.id == b.id;
                              }),
                  from_disk.end());
  for (auto& c : from_disk) {
    if (c.is_savepoint())
      savepoints_.push_back(std::move(c));
    else
      checkpoints_.push_back(std::move(c));
  }
  while (checkpoints_.size() > static_cast<std::size_t>(retained_)) checkpoints_.pop_front();
  while (savepoints_.size() > max_savepoints) savepoints_.erase(savepoints_.begin());
}

std::vector<completed_checkpoint> completed_checkpoint_store::shutdown(
    job_status status, externalized_retention retention) {
  bool discard = false;
  switch (status) {
    case job_status::finished:
      discard = true;
      break;
    case job_status::canceled:
      discard = retention == externalized_retention::delete_on_cancellation;
      break;
    default:
      discard = false;  // failed, suspended (and any non-terminal status: never delete then)
      break;
  }
  std::vector<completed_checkpoint> out;
  if (discard) {
    out.reserve(checkpoints_.size());
    for (auto& c : checkpoints_) out.push_back(std::move(c));
  }
  checkpoints_.clear();
  savepoints_.clear();
  return out;
}

}  // namespace snapflow
