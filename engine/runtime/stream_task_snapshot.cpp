#include <cassert>
#include <chrono>
#include <filesystem>
#include <utility>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/clock.hpp"
#include "engine/hop_trace.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_writer.hpp"
#include "engine/runtime/stream_task.hpp"

// stream_task's snapshots: the synchronous part on the task thread, and the hand-off of the
// write (or the inline acknowledgement).

namespace snapflow {

namespace {

// Removes files a snapshot stored for a checkpoint it could not acknowledge (those it wrote:
// shared_new and exclusive ones). Best effort: the coordinator's sweep of the shared folder
// catches what is left.
void remove_stored_files(const std::filesystem::path& checkpoint_folder,
                         const std::vector<state_handle>& handles) {
  std::error_code ec;
  for (const auto& h : handles) {
    if (h.sharing == handle_sharing::exclusive)
      std::filesystem::remove(checkpoint_folder / h.path, ec);
    else if (h.sharing == handle_sharing::shared_new)
      std::filesystem::remove(
          checkpoint_folder.parent_path() / checkpoint_storage::shared_folder_name / h.path, ec);
  }
}

}  // namespace

result<void> stream_task::take_snapshot(const trigger_snapshot& t) {
  const checkpoint_barrier& barrier = t.barrier;
  assert(barrier.id > 0);
  if (barrier.id > last_barrier_) last_barrier_ = barrier.id;
  // The first barrier arrived when alignment began (a source: now, it has no alignment),
  // read before forwarding.
  const std::int64_t barrier_received_us = coordinator_clock::now_us() - t.alignment_duration_us;
  hop_trace::record("t.snapshot", config_.vertex.id);
  // A checkpoint still in flight here is older: this barrier subsumes it.
  if (in_flight_) {
    const checkpoint_id older = in_flight_->prepared.barrier.id;
    drop_in_flight(older);
    decline(older, checkpoint_failure_reason::checkpoint_declined_subsumed,
            "barrier " + std::to_string(barrier.id) + " arrived before checkpoint " +
                std::to_string(older) + " had its channel state");
  }
  // A source goes unaligned from its trigger when the checkpoint is unaligned from the start.
  const bool unaligned = t.unaligned || (source_ != nullptr && barrier.options.unaligned &&
                                         barrier.options.aligned_timeout_ms == 0);
  // Forward first: downstream aligns while this subtask copies its state. Unaligned, the
  // barrier goes ahead of what the outputs hold, which is persisted instead.
  std::vector<persisted_channel> outputs;
  if (unaligned) {
    if (!forward_unaligned(barrier, outputs)) return success();  // torn down meanwhile
  } else {
    for (auto& gate : gates_)
      if (!gate.broadcast(barrier)) return success();  // torn down meanwhile
  }
  auto prepared = prepare_snapshot(t, barrier_received_us);
  if (!prepared) return success();
  hold_or_finish(std::move(*prepared), unaligned, std::move(outputs));
  return success();
}

std::optional<stream_task::prepared_snapshot> stream_task::prepare_snapshot(
    const trigger_snapshot& t, std::int64_t barrier_received_us) {
  const checkpoint_barrier& barrier = t.barrier;
  const auto sync_start = std::chrono::steady_clock::now();
  auto op_snapshot = operator_->snapshot(barrier.id);
  if (!op_snapshot) {
    decline(barrier.id, checkpoint_failure_reason::checkpoint_declined,
            "snapshot failed: " + op_snapshot.err().message);
    return std::nullopt;
  }
  auto snapshot = std::make_shared<subtask_snapshot>();
  snapshot->operator_uid = config_.vertex.uid;
  snapshot->subtask_index = config_.attempt.subtask.index;
  snapshot->parallelism = config_.vertex.parallelism;
  snapshot->checkpoint = barrier.id;
  snapshot->operator_state = std::move(op_snapshot->state);
  // The heap backend's copy goes in now; a deferred view (a large heap state, rocksdb) is
  // streamed to the state file by the writer, off this thread.
  std::shared_ptr<deferred_keyed_snapshot> keyed_later;
  std::shared_ptr<incremental_keyed_snapshot> files_later;
  // Savepoints own every file they name: always full.
  if (keyed_ && barrier.options.kind != checkpoint_trigger_kind::savepoint) {
    // A completion that arrived but still waits in the mailbox moves the base: naming files of an
    // older checkpoint, which the completed one may have released, would fail this one.
    if (auto completed = mailbox_.newest_queued_completion())
      keyed_->notify_checkpoint_complete(*completed);
    auto files = keyed_->snapshot_incremental(barrier.id);
    if (!files) {
      decline(barrier.id, checkpoint_failure_reason::checkpoint_declined,
              "snapshot failed: " + files.err().message);
      return std::nullopt;
    }
    files_later = std::move(files).value();
  }
  if (keyed_ && !files_later) {
    keyed_snapshot_part part = keyed_->snapshot();
    if (part.deferred)
      keyed_later = std::move(part.deferred);
    else
      snapshot->keyed = std::move(part.ready);
  }
  const auto sync_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - sync_start)
                           .count();

  checkpoint_ack ack;
  ack.job = config_.job;
  ack.attempt = config_.attempt;
  ack.id = barrier.id;
  ack.metrics.sync_duration_us = sync_us;
  if (keyed_)
    ack.state.keyed = keyed_state_scope{keyed_->max_parallelism(), keyed_->range().first,
                                        keyed_->range().last};
  ack.metrics.alignment_duration_us = t.alignment_duration_us;
  ack.metrics.bytes_processed_during_alignment = t.bytes_processed_during_alignment;
  ack.metrics.records_held_during_alignment = t.records_held_during_alignment;
  ack.metrics.records_after_barrier = t.records_after_barrier;
  ack.metrics.barrier_received_timestamp_us = barrier_received_us;
  return prepared_snapshot{barrier,
                           std::move(ack),
                           std::move(snapshot),
                           std::move(op_snapshot->async_part),
                           std::move(keyed_later),
                           std::move(files_later)};
}

void stream_task::finish_snapshot(prepared_snapshot p) {
  const checkpoint_barrier& barrier = p.barrier;
  checkpoint_ack& ack = p.ack;
  auto& snapshot = p.snapshot;
  auto& keyed_later = p.keyed_later;
  auto& files_later = p.files_later;
  std::function<result<void>()>& async_part = p.async_part;
  // Nothing asynchronous to run and no state, or a small one: acknowledge here, the state's
  // bytes inline, with no file and no hand-off to the writer.
  std::string encoded;
  if (!async_part && !keyed_later && !files_later && snapshot->empty()) {
    ack.metrics.async_duration_us = 0;
    hop_trace::record("t.ack", config_.vertex.id);
    config_.responder->acknowledge(std::move(ack));
    return;
  }
  // A small state goes inline whether or not the operator has asynchronous work: a sink that
  // fsyncs its pre-committed file still acknowledges its few bytes of state without a state
  // file (and that file's own fsync) of its own.
  bool state_inline = false;
  if (!keyed_later && !files_later && !snapshot->empty() && config_.inline_state_max_bytes > 0 &&
      state_file::may_fit(*snapshot, config_.inline_state_max_bytes)) {
    const auto encode_start = std::chrono::steady_clock::now();
    encoded = state_file::encode(*snapshot);
    state_inline = encoded.size() <= config_.inline_state_max_bytes;
    if (state_inline && !async_part) {
      ack.state.state_size = encoded.size();
      ack.state.handles.push_back(state_file::make_inline(std::move(encoded)));
      ack.metrics.async_duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now() - encode_start)
                                          .count();
      hop_trace::record("t.ack", config_.vertex.id);
      config_.responder->acknowledge(std::move(ack));
      return;
    }
  }
  std::filesystem::path file;
  if ((keyed_later || files_later) && !barrier.options.target_location.empty()) {
    // Whether there is anything to write is known once it is streamed.
    file = std::filesystem::path(barrier.options.target_location) /
           state_file::file_name(config_.vertex.uid, config_.attempt.subtask.index,
                                 config_.attempt.attempt);
  } else if (!keyed_later && !snapshot->empty() && !state_inline) {
    if (barrier.options.target_location.empty()) {
      decline(barrier.id, checkpoint_failure_reason::checkpoint_declined,
              "the barrier names no location for state files");
      return;
    }
    file = std::filesystem::path(barrier.options.target_location) /
           state_file::file_name(config_.vertex.uid, config_.attempt.subtask.index,
                                 config_.attempt.attempt);
  }
  // Off the task thread: everything it needs is captured by value (the task may be gone when
  // it runs). A state encoded above but too large to go inline is written as it is.
  std::function<void()> write = [responder = config_.responder, ack = std::move(ack), snapshot,
                                 vertex = config_.vertex.id, file = std::move(file),
                                 encoded = std::move(encoded), state_inline,
                                 keyed_later = std::move(keyed_later),
                                 files_later = std::move(files_later),
                                 name_prefix = file_safe_uid(config_.vertex.uid) + "-" +
                                               std::to_string(config_.attempt.subtask.index) +
                                               "-" + std::to_string(config_.attempt.attempt),
                                 inline_max = config_.inline_state_max_bytes,
                                 async_part = std::move(async_part)]() mutable {
    const auto async_start = std::chrono::steady_clock::now();
    checkpoint_decline decline{
        ack.job, ack.attempt, ack.id, checkpoint_failure_reason::checkpoint_async_exception, {}};
    // A deferred keyed state streams into its state file (or, while it stays within the inline
    // limit, into memory): it is never held whole.
    std::unique_ptr<state_file_writer> keyed_writer;
    const auto decline_write = [&](const state_file_writer& w, const error& e) {
      if (w.needs_location()) {
        decline.reason = checkpoint_failure_reason::checkpoint_declined;
        decline.message = "the barrier names no location for state files";
      } else {
        decline.message = e.message;
      }
      responder->decline(std::move(decline));
    };
    if (keyed_later) {
      snapshot->keyed.max_parallelism = keyed_later->max_parallelism();
      keyed_writer = std::make_unique<state_file_writer>(
          file, state_file_writer::default_buffer_bytes, inline_max);
      auto streamed = keyed_writer->head(*snapshot);
      if (streamed) streamed = keyed_later->write_to(*keyed_writer);
      keyed_later.reset();  // releases the backend's snapshot
      if (!streamed) {
        decline_write(*keyed_writer, streamed.err());
        return;
      }
      // Nothing at all: no file.
      if (snapshot->operator_state.empty() && keyed_writer->key_groups() == 0) {
        keyed_writer.reset();
        file.clear();
      }
    }
    if (async_part) {
      if (auto r = async_part(); !r) {
        decline.message = r.err().message;
        responder->decline(std::move(decline));
        return;
      }
    }
    // Keyed state as files: stored beside the state file (shared ones in the job's shared
    // folder, the parent of this checkpoint's), which then carries their manifest.
    std::vector<state_handle> file_handles;
    std::uint64_t files_size = 0;
    if (files_later) {
      if (file.empty()) {
        decline.reason = checkpoint_failure_reason::checkpoint_declined;
        decline.message = "the barrier names no location for state files";
        responder->decline(std::move(decline));
        return;
      }
      const std::filesystem::path folder = file.parent_path();
      auto stored = files_later->store(
          folder.parent_path() / checkpoint_storage::shared_folder_name, folder, name_prefix);
      files_later.reset();  // the local checkpoint goes
      if (!stored) {
        decline.message = stored.err().message;
        responder->decline(std::move(decline));
        return;
      }
      snapshot->keyed_files = std::move(stored->manifest);
      file_handles = std::move(stored->handles);
      files_size = stored->full_size;
      if (inline_max > 0 && state_file::may_fit(*snapshot, inline_max)) {
        encoded = state_file::encode(*snapshot);
        state_inline = encoded.size() <= inline_max;
      }
    }
    if (keyed_writer) {
      auto written = keyed_writer->finish(std::nullopt);
      if (!written) {
        decline_write(*keyed_writer, written.err());
        return;
      }
      keyed_writer.reset();
      state_handle handle = std::move(written->handle);
      ack.state.state_size = handle.size;
      // Named relative to the checkpoint's folder, which is all the coordinator accepts.
      if (!handle.is_inline()) handle.path = file.filename().string();
      ack.state.handles.push_back(std::move(handle));
    } else if (state_inline) {
      ack.state.state_size = encoded.size();
      ack.state.handles.push_back(state_file::make_inline(std::move(encoded)));
    } else if (!file.empty()) {
      auto handle = encoded.empty() ? state_file::write(file, *snapshot)
                                    : state_file::write_encoded(file, std::move(encoded));
      if (!handle) {
        // The files stored for this checkpoint are nobody's: no acknowledgement names them.
        remove_stored_files(file.parent_path(), file_handles);
        decline.message = handle.err().message;
        responder->decline(std::move(decline));
        return;
      }
      ack.state.state_size = handle->size;
      // Named relative to the checkpoint's folder, which is all the coordinator accepts.
      handle->path = file.filename().string();
      ack.state.handles.push_back(std::move(handle).value());
    }
    // The state's full size; the files this checkpoint did not store again included.
    ack.state.state_size += files_size;
    for (auto& h : file_handles) ack.state.handles.push_back(std::move(h));
    ack.metrics.async_duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now() - async_start)
                                        .count();
    hop_trace::record("t.ack", vertex);
    responder->acknowledge(std::move(ack));
  };
  // Counted until it has ended, so that FINISHED follows this checkpoint's ack or decline.
  write = writes_->track(std::move(write));
  // On a trigger's thread (run_mailbox_on_caller) never wait for room in the writer's queue:
  // the task thread submits what does not fit, first thing when it runs again.
  if (on_caller_) {
    if (!config_.writer->try_submit(write)) deferred_writes_.push_back(std::move(write));
    return;
  }
  config_.writer->submit(std::move(write));
}

}  // namespace snapflow
