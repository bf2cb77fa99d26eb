#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "engine/runtime/channel_factory.hpp"
#include "graph/result.hpp"
#include "transport/frame_limits.hpp"

namespace snapflow::data {

struct data_plane_options {
  // Batches a consumer buffers per channel: also the producer's credit, so no more than this
  // many batches of one channel are ever in flight or queued.
  std::size_t channel_capacity_batches = 8;
  std::size_t max_frame_bytes = transport::default_max_frame_bytes;
  // How long a producer's socket may keep delivering its last batches (end-of-input) after its
  // task ended normally. A cancelled channel drops what is unsent at once.
  int finished_linger_ms = 2000;
};

struct data_plane_counters {
  std::uint64_t frames_received = 0;
  std::uint64_t bad_frames = 0;
  std::uint64_t stale_batches = 0;     // from an earlier attempt of a channel, dropped
  std::uint64_t overflow_batches = 0;  // beyond a channel's credit, dropped
  std::uint64_t sequence_gaps = 0;     // a batch went missing on a channel
};

// The worker's data plane over ZeroMQ (docs/protocol.md, "Data plane"), engine's
// channel_factory for subtasks whose peers run anywhere, this worker included.
//
// Receiving: one ROUTER bound to the data endpoint, served by one I/O thread that decodes each
// frame and appends the batch to its channel's bounded input buffer, or to a bounded pending
// list while the consuming subtask is not deployed here yet. The I/O thread never waits on a
// consumer: a full buffer cannot hold up the other channels (which barrier alignment needs to
// make progress). Bounds come from credits: a consumer that takes a batch returns a cumulative
// credit to the producer's socket, and a producer sends only while it has credit.
//
// Sending: each output channel owns a DEALER connected to the consumer's worker, used only by
// the one task thread that sends on it (a ZeroMQ socket belongs to one thread), which waits
// for credit in send() and gives up once cancelled.
//
// In-process: a channel whose producer and consumer both run on this worker (both endpoints
// are this plane's data_endpoint()) is a local_channel shared by the two ends, with the same
// capacity in batches: no encoding, no socket, no I/O thread, and the same backpressure.
//
// Attempts: a frame names the consumer's attempt; a frame for an earlier attempt than the
// channel's current one is dropped, so a failed-over deployment never sees the old one's data.
class network_data_plane final : public channel_factory {
 public:
  // Binds `bind_address` (tcp://127.0.0.1:* picks a port) and starts the I/O thread.
  static result<std::shared_ptr<network_data_plane>> create(const std::string& bind_address,
                                                            data_plane_options options = {});
  ~network_data_plane() override;
  network_data_plane(const network_data_plane&) = delete;
  network_data_plane& operator=(const network_data_plane&) = delete;

  std::shared_ptr<output_channel> open_output(const channel_key& key,
                                              const std::string& consumer_endpoint) override;
  std::shared_ptr<input_channel> open_input(const channel_key& key,
                                            const std::string& producer_endpoint) override;
  std::string data_endpoint() const override { return endpoint_; }

  data_plane_counters counters() const;
  // Bytes of batches waiting in this worker's input buffers (network and in-process channels;
  // byte_gauge.hpp says how they are counted), now and the most at any time: at most the
  // worker's input channels x channel_capacity_batches x a full batch.
  std::uint64_t buffered_bytes() const;
  std::uint64_t buffered_bytes_high_water() const;
  // Channels between two subtasks of this process with only one end opened so far (tests).
  std::size_t local_routes_waiting() const;

  class core;

 private:
  network_data_plane(data_plane_options options, std::shared_ptr<zmq::context_t> context,
                     std::shared_ptr<core> shared);
  void run(zmq::socket_t router);

  data_plane_options options_;
  std::shared_ptr<zmq::context_t> context_;
  std::shared_ptr<core> core_;
  std::string endpoint_;
  std::atomic<bool> stopping_{false};
  std::thread io_thread_;
};

}  // namespace snapflow::data
