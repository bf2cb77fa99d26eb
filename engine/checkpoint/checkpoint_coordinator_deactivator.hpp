#pragma once

#include <memory>

#include "engine/checkpoint/checkpoint_coordinator.hpp"
#include "graph/job_status.hpp"

namespace snapflow {

// The job status listener that ties periodic checkpoints to the job's life (Flink's
// CheckpointCoordinatorDeActivator): RUNNING starts the periodic trigger, every other status
// stops it (and aborts what is pending). Holds the coordinator weakly: the listener must not
// keep a shut-down coordinator alive.
class checkpoint_coordinator_deactivator {
 public:
  explicit checkpoint_coordinator_deactivator(std::weak_ptr<checkpoint_coordinator> coordinator)
      : coordinator_(std::move(coordinator)) {}

  void operator()(job_status /*from*/, job_status to, std::int64_t /*timestamp_ms*/) const {
    auto coordinator = coordinator_.lock();
    if (!coordinator) return;
    if (to == job_status::running)
      coordinator->start_checkpoint_scheduler();
    else
      coordinator->stop_checkpoint_scheduler();
  }

 private:
  std::weak_ptr<checkpoint_coordinator> coordinator_;
};

}  // namespace snapflow
