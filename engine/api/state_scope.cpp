#include "engine/api/state_scope.hpp"

#include <algorithm>
#include <cassert>
#include <limits>

#include "engine/api/codec.hpp"

namespace snapflow::api {

namespace {

constexpr char no_expiry = 0x00;
constexpr char with_expiry = 0x01;
constexpr std::size_t expiry_bytes = 8;

void append_big_endian(std::string& out, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = bytes; i-- > 0;) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t read_big_endian(std::string_view in) {
  std::uint64_t v = 0;
  for (unsigned char c : in) v = (v << 8) | c;
  return v;
}

}  // namespace

state_scope::state_scope(keyed_context& context, std::string encoded_key,
                         std::shared_ptr<const processing_clock> clock)
    : context_(context), encoded_key_(std::move(encoded_key)), clock_(std::move(clock)) {
  assert(clock_);
  if (encoded_key_.size() > 0xffffffffULL)
    throw decode_error("a key of more than 4 GiB cannot scope keyed state");
  append_big_endian(prefix_, encoded_key_.size(), 4);
  prefix_ += encoded_key_;
}

std::int64_t state_scope::expiry_after(std::chrono::milliseconds ttl) const {
  // Saturates: a ttl of years must not overflow into the past. A ttl of 0 or less expires the
  // value at once.
  const std::int64_t now = now_ms();
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  if (ttl.count() > 0 && now > 0 && ttl.count() > max - now) return max;
  return now + std::max<std::int64_t>(ttl.count(), 0);
}

std::optional<std::string> state_scope::unwrap(std::string_view state,
                                               std::string_view stored) const {
  if (!stored.empty() && stored[0] == no_expiry) return std::string(stored.substr(1));
  if (stored.size() < 1 + expiry_bytes || stored[0] != with_expiry)
    throw decode_error("keyed state '" + std::string(state) +
                       "' holds an entry that typed state did not write");
  const auto expiry = static_cast<std::int64_t>(read_big_endian(stored.substr(1, expiry_bytes)));
  if (now_ms() >= expiry) return std::nullopt;
  return std::string(stored.substr(1 + expiry_bytes));
}

std::optional<std::string> state_scope::get(std::string_view state,
                                            std::string_view suffix) const {
  const std::string key = map_key(suffix);
  auto stored = context_.map_get_bytes(state, key);
  if (!stored) return std::nullopt;
  auto live = unwrap(state, *stored);
  if (!live) context_.map_remove(state, key);
  return live;
}

void state_scope::put(std::string_view state, std::string_view suffix, std::string_view bytes,
                      std::optional<std::chrono::milliseconds> ttl) {
  std::string stored;
  stored.reserve(1 + expiry_bytes + bytes.size());
  if (ttl) {
    stored.push_back(with_expiry);
    append_big_endian(stored, static_cast<std::uint64_t>(expiry_after(*ttl)), expiry_bytes);
  } else {
    stored.push_back(no_expiry);
  }
  stored.append(bytes);
  context_.map_put_bytes(state, map_key(suffix), stored);
}

void state_scope::remove(std::string_view state, std::string_view suffix) {
  context_.map_remove(state, map_key(suffix));
}

std::vector<std::pair<std::string, std::string>> state_scope::entries(
    std::string_view state) const {
  std::vector<std::pair<std::string, std::string>> live;
  for (auto& [key, stored] : context_.map_entries_bytes(state)) {
    if (key.size() < prefix_.size() || key.compare(0, prefix_.size(), prefix_) != 0) continue;
    auto value = unwrap(state, stored);
    if (!value) {
      context_.map_remove(state, key);
      continue;
    }
    live.emplace_back(key.substr(prefix_.size()), std::move(*value));
  }
  return live;
}

void state_scope::clear(std::string_view state) {
  for (auto& [key, stored] : context_.map_entries_bytes(state))
    if (key.size() >= prefix_.size() && key.compare(0, prefix_.size(), prefix_) == 0)
      context_.map_remove(state, key);
}

}  // namespace snapflow::api
