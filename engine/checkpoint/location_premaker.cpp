#include "engine/checkpoint/location_premaker.hpp"

#include <unistd.h>

#include <cassert>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace snapflow {

location_premaker::location_premaker(std::shared_ptr<const checkpoint_storage> storage,
                                     std::size_t batch)
    : storage_(std::move(storage)), batch_(batch) {
  assert(storage_);
  assert(batch_ >= 1);
}

result<prepared_metadata> location_premaker::prepare(checkpoint_id id) {
  const auto dir = storage_->checkpoint_dir(id);
  std::lock_guard lock(mutex_);
  // Periodic checkpoints in the job's folder: the job's metadata log makes them durable.
  checkpoint_storage::prepare_options options{.folder_premade = false, .logged = true};
  if (closed_) return checkpoint_storage::prepare_location(dir, options);
  premade_.erase(premade_.begin(), premade_.lower_bound(id));
  bool entry_durable = premade_.erase(id) > 0;
  if (!entry_durable && batch_ > 1) {
    std::vector<std::filesystem::path> dirs;
    for (std::size_t i = 0; i < batch_; ++i) dirs.push_back(storage_->checkpoint_dir(id + i));
    if (auto made = checkpoint_storage::premake_locations(dirs); made) {
      for (std::size_t i = 1; i < batch_; ++i) premade_.insert(id + i);
      entry_durable = true;
    } else {
      // The preparation below makes this one folder the usual way, and reports what fails.
      spdlog::debug("making the folders of checkpoints {}-{}: {}", id, id + batch_ - 1,
                    made.err().message);
    }
  }
  options.folder_premade = entry_durable;
  // The log's segment too, ahead of the append (a failure there is the append's to report).
  if (auto ready = storage_->prepare_log(); !ready)
    spdlog::debug("preparing the checkpoint metadata log: {}", ready.err().message);
  return checkpoint_storage::prepare_location(dir, options);
}

void location_premaker::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  // rmdir, not a recursive removal: a premade folder holds nothing (no trigger named it).
  for (checkpoint_id id : premade_) (void)::rmdir(storage_->checkpoint_dir(id).c_str());
  premade_.clear();
}

std::size_t location_premaker::premade() const {
  std::lock_guard lock(mutex_);
  return premade_.size();
}

}  // namespace snapflow
