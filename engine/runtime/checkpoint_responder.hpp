#pragma once

#include "engine/checkpoint/checkpoint_messages.hpp"

namespace snapflow {

// How a subtask answers the checkpoint coordinator (Flink's CheckpointResponder). The worker's
// transport implements it over the control plane; local_cluster posts onto the coordinator's
// executor. Called from snapshot writer threads and task threads: implementations must be
// thread-safe and must not block (queue the message and return).
class checkpoint_responder {
 public:
  virtual ~checkpoint_responder() = default;
  virtual void acknowledge(checkpoint_ack ack) = 0;
  virtual void decline(checkpoint_decline decline) = 0;
};

}  // namespace snapflow
