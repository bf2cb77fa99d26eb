#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "common/result.hpp"
#include "engine/runtime/channel_factory.hpp"
#include "transport/curve_keys.hpp"
#include "transport/data/data_zap_handler.hpp"
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
  // With a value, every data connection uses CURVE (docs/protocol.md, 7.4):
  // the data endpoint is a CURVE server proving this key pair; output channels connect as
  // CURVE clients with it and need the consumer's public key; a client gets in only while an
  // input channel deployed here names its key as the producer's (data_zap_handler), and each
  // frame must come from the key its channel names. Peers without a key are refused
  // (refuse_peer). Without a value, nothing is encrypted or authenticated.
  std::optional<transport::curve_key_pair> curve;
  // With CURVE: how long a connecting key that no channel here names yet may wait at the
  // handshake for this worker's deployment to arrive, before it is denied for good.
  int curve_unvouched_wait_ms = 10'000;
};

struct data_plane_counters {
  std::uint64_t frames_received = 0;
  std::uint64_t credits_sent = 0;      // credit frames handed to ZeroMQ
  std::uint64_t bad_frames = 0;
  std::uint64_t stale_batches = 0;     // from an earlier attempt of a channel, dropped
  std::uint64_t overflow_batches = 0;  // beyond a channel's credit, dropped
  // Priority batches (well-formed) beyond max_priority_batches waiting on a channel, refused.
  std::uint64_t priority_refused = 0;
  std::uint64_t sequence_gaps = 0;     // a batch went missing on a channel
  // Connections to this endpoint that closed, and channels that broke because the connection
  // feeding them closed before their end of input (the producer's worker stopped).
  std::uint64_t connections_closed = 0;
  std::uint64_t channels_lost = 0;
  // With CURVE: connections refused at the handshake (no CURVE, a key no channel here names,
  // a peer that hung up halfway), of those the keys the ZAP handler denied, and frames from a
  // key other than the one their channel names (dropped).
  std::uint64_t handshakes_refused = 0;
  std::uint64_t keys_denied = 0;
  std::uint64_t wrong_key_frames = 0;
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
// the one task thread that sends on it (a ZeroMQ socket belongs to one thread). try_send()
// never waits: without credit (or with ZeroMQ's queue full) it keeps the batch and leaves a
// room watch with the I/O thread, which polls the DEALER's and its monitor's descriptors (only
// the descriptors: the sockets stay the task thread's) and wakes the task once either hears
// anything, a credit, an activation or a closed connection; the task then tries again. send()
// waits for credit itself and gives up once cancelled.
//
// In-process: a channel whose producer and consumer both run on this worker (both endpoints
// are this plane's data_endpoint()) is a local_channel shared by the two ends, with the same
// capacity in batches: no encoding, no socket, no I/O thread, and the same backpressure.
//
// CURVE (data_plane_options::curve): see there; data_zap_handler decides who may connect.
//
// Priority batches (output_channel::send_priority, for unaligned checkpoints): a barrier the
// producer sends without credit, which the I/O thread queues behind what already arrived on its
// channel (the connection keeps the order) beyond the channel's capacity, at most
// max_priority_batches of them per channel, returning no credit for them. They take no
// sequence number (data_frame::priority), and the same attempt and key checks as any batch.
//
// Attempts: a frame names the consumer's attempt; a frame for an earlier attempt than the
// channel's current one is dropped, so a failed-over deployment never sees the old one's data.
//
// Lost peers: a connection that closes breaks the channels it carried, at both ends, as soon
// as the kernel reports it (a crashed worker's sockets are closed at once), so tasks fail over
// within milliseconds even before the coordinator notices. The consumer's input is broken once
// it took every batch that arrived before the close, unless its end of input came first; a
// producer waiting for credit from a consumer whose connection closed throws channel_failure.
class network_data_plane final : public channel_factory {
 public:
  // Binds `bind_address` (tcp://127.0.0.1:* picks a port) and starts the I/O thread.
  static result<std::shared_ptr<network_data_plane>> create(const std::string& bind_address,
                                                            data_plane_options options = {});
  ~network_data_plane() override;
  network_data_plane(const network_data_plane&) = delete;
  network_data_plane& operator=(const network_data_plane&) = delete;

  std::optional<std::string> refuse_peer(const channel_peer& peer) const override;
  std::shared_ptr<output_channel> open_output(const channel_key& key,
                                              const channel_peer& consumer) override;
  std::shared_ptr<input_channel> open_input(const channel_key& key,
                                            const channel_peer& producer) override;
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
  void run(zmq::socket_t router, zmq::socket_t monitor);

  data_plane_options options_;
  std::shared_ptr<zmq::context_t> context_;
  std::shared_ptr<core> core_;
  std::shared_ptr<data_zap_handler> zap_;  // with CURVE only
  std::string endpoint_;
  std::atomic<bool> stopping_{false};
  std::thread io_thread_;
};

}  // namespace snapflow::data
