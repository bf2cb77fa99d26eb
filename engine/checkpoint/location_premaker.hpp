#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <set>

#include "common/result.hpp"
#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/prepared_metadata.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Makes the folders of periodic checkpoints in batches. A checkpoint's folder costs two fsyncs
// before its metadata can be written: its parent's, for the folder's own entry, and its own,
// for the `_metadata` entry (checkpoint_storage::prepare_location). On a virtual disk each
// fsync is a journal commit and several device requests, and each request stops the vCPU that
// makes it: with the metadata's own fsync, three per checkpoint were most of what a 100 ms
// checkpoint cost a small machine (docs/benchmarks.md, "What checkpoints cost a running job").
// Making the folders of the next `batch` ids together takes one parent fsync for all of them, so
// a checkpoint costs 2 + 1/batch fsyncs instead of 3.
//
// Thread safe: used from the coordinator thread (inline preparations) and the I/O pool.
// Savepoints do not come here (their folders are elsewhere, one at a time).
class location_premaker {
 public:
  location_premaker(std::shared_ptr<const checkpoint_storage> storage, std::size_t batch);

  // Checkpoint `id`'s folder, prepared as checkpoint_storage::prepare_location does. When
  // `id`'s folder was not premade, the folders of the next batch - 1 ids are made with it.
  // Ids below `id` that were premade and not used (a savepoint took the id) are forgotten: the
  // coordinator's orphan sweep removes their empty folders.
  result<prepared_metadata> prepare(checkpoint_id id);
  // Removes the premade folders not used yet (empty, never handed out) and premakes no more:
  // a job started next on the same folder may take those ids.
  void close();
  // Premade folders not used yet (tests).
  std::size_t premade() const;

 private:
  std::shared_ptr<const checkpoint_storage> storage_;
  const std::size_t batch_;
  mutable std::mutex mutex_;
  std::set<checkpoint_id> premade_;
  bool closed_ = false;
};

}  // namespace snapflow
