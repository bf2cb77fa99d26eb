#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/api/processing_clock.hpp"
#include "graph/user_function.hpp"

namespace snapflow::api {

// The bytes level under typed keyed state: the entries one user key owns, with an optional
// time-to-live. Scoped to the current user key by its msgpack bytes, not only by record.key:
// two user keys whose 64-bit hashes collide share record.key (and so the backend's current
// key), and must still never share state.
//
// Layout. Every typed state lives in the backend's *map* state of one name (the state's kind
// tag and its name, so a value state and a map state of the same name stay apart). An entry's
// map key is
//   4-byte big-endian length of the encoded user key | encoded user key | suffix
// (suffix empty for value, list and reducing state; the encoded map key for map state). The
// length prefix makes one user key's entries never a prefix match of another's. An entry's
// value is an envelope:
//   0x00 | value bytes                                  no expiry
//   0x01 | 8-byte big-endian expiry (ms, processing time) | value bytes
// Reading an entry past its expiry removes it and returns nothing (Flink's "never return
// expired", cleaned on access). Being backend map state, it is checkpointed, restored and
// redistributed by key group with all other keyed state, by either backend.
class state_scope {
 public:
  state_scope(keyed_context& context, std::string encoded_key,
              std::shared_ptr<const processing_clock> clock);

  const std::string& encoded_key() const { return encoded_key_; }
  // The runtime's context under the scope (timers go to it directly, under the encoded key).
  keyed_context& context() const { return context_; }
  std::int64_t now_ms() const { return clock_->now_ms(); }

  // The live value bytes of entry `suffix` of backend state `state`.
  std::optional<std::string> get(std::string_view state, std::string_view suffix) const;
  // Writes the entry; with `ttl` it expires that long after now.
  void put(std::string_view state, std::string_view suffix, std::string_view bytes,
           std::optional<std::chrono::milliseconds> ttl);
  void remove(std::string_view state, std::string_view suffix);
  // The live entries of this user key in `state`, as (suffix, value bytes), ordered by suffix.
  // Expired ones are removed on the way.
  std::vector<std::pair<std::string, std::string>> entries(std::string_view state) const;
  // Removes every entry of this user key in `state`.
  void clear(std::string_view state);

 private:
  std::string map_key(std::string_view suffix) const { return prefix_ + std::string(suffix); }
  std::int64_t expiry_after(std::chrono::milliseconds ttl) const;
  // The value bytes of envelope `stored`, or nothing when it expired; decode_error when it is
  // no envelope at all (a state written by something else under the same name).
  std::optional<std::string> unwrap(std::string_view state, std::string_view stored) const;

  keyed_context& context_;
  std::string encoded_key_;
  std::string prefix_;
  std::shared_ptr<const processing_clock> clock_;
};

}  // namespace snapflow::api
