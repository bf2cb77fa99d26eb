#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "engine/runtime/channel.hpp"
#include "graph/ids.hpp"

namespace snapflow {

// Names one data channel of one deployment: the edge (source vertex -> target vertex), the
// producing and the consuming subtask, and the consumer's attempt number. Jobs restart as a
// whole, so every subtask of a deployment has the same attempt number; a channel of an earlier
// deployment differs in `attempt`, which is how a transport tells its stale data apart.
struct channel_key {
  job_id job;
  vertex_id source = 0;
  std::uint32_t producer = 0;
  vertex_id target = 0;
  std::uint32_t consumer = 0;
  std::uint32_t attempt = 0;

  bool operator==(const channel_key&) const = default;
  auto operator<=>(const channel_key&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const channel_key& k) {
  return os << "channel{job=" << k.job << ", " << k.source << "[" << k.producer << "] -> "
            << k.target << "[" << k.consumer << "], attempt=" << k.attempt << "}";
}

// The worker at the other end of a channel: its data endpoint and, when the data plane runs
// CURVE, its public key (Z85), which the coordinator vouches for in the deployment descriptor.
// A peer named by its endpoint alone is one for a data plane without CURVE.
struct channel_peer {
  channel_peer() = default;
  channel_peer(std::string endpoint_in)  // NOLINT(google-explicit-constructor): endpoint only
      : endpoint(std::move(endpoint_in)) {}
  channel_peer(std::string endpoint_in, std::string public_key_in)
      : endpoint(std::move(endpoint_in)), public_key(std::move(public_key_in)) {}

  std::string endpoint;
  std::string public_key;  // empty: none was given

  bool operator==(const channel_peer&) const = default;
};

// Makes the data channels of subtasks that run in this process, whoever hosts their peers: the
// worker's data plane implements it (transport/data), so engine/runtime needs no socket.
// Called on the worker's control thread.
class channel_factory {
 public:
  virtual ~channel_factory() = default;

  // Why this factory cannot open a channel with `peer`, or nothing when it can: a data plane
  // that requires CURVE refuses a peer without a public key (it would be a plaintext
  // connection), and one without CURVE refuses a peer with a key (its peer expects CURVE and
  // the handshake would fail). Callers check every peer before they open a channel with it.
  virtual std::optional<std::string> refuse_peer(const channel_peer& /*peer*/) const {
    return std::nullopt;
  }
  // The producing end of `key`, sending to the worker `consumer` (its data endpoint). Used by
  // one task thread (send); cancel from any thread.
  virtual std::shared_ptr<output_channel> open_output(const channel_key& key,
                                                      const channel_peer& consumer) = 0;
  // The consuming end of `key`, whose producer runs on the worker `producer`: data for it from
  // now on goes there, and data naming another attempt of the same channel is dropped. With
  // CURVE, the producer's key may connect to this worker while the channel is open. Releasing
  // the last reference closes it. When both ends are in this process (both endpoints are
  // data_endpoint()), a factory may join them in memory, whichever end is opened first,
  // keeping the same bound and backpressure.
  virtual std::shared_ptr<input_channel> open_input(const channel_key& key,
                                                    const channel_peer& producer) = 0;
  // Where producers on other workers reach this process's input channels.
  virtual std::string data_endpoint() const = 0;
};

}  // namespace snapflow
