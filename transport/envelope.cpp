#include "transport/envelope.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <type_traits>

#include "transport/message_fields.hpp"
#include "transport/msgpack_writer.hpp"

namespace snapflow::wire {

namespace detail {
namespace {

// How many keys a description writes: optional fields at their zero are left out.
struct field_counter {
  std::uint32_t count = 0;

  template <typename T>
  void required(std::string_view, const T&) {
    ++count;
  }
  template <typename T>
  void optional(std::string_view, const T& value) {
    if (!is_zero(value)) ++count;
  }
  template <typename T>
  void entries(std::string_view, const std::vector<T>&) {
    ++count;
  }
  void bytes(std::string_view, const std::string&) { ++count; }
  void optional_bytes(std::string_view, const std::optional<std::string>& value) {
    if (value) ++count;
  }
};

class field_writer {
 public:
  explicit field_writer(msgpack_writer& out) : out_(out) {}

  template <typename T>
  void required(std::string_view key, const T& value) {
    str(key);
    write(value);
  }
  template <typename T>
  void optional(std::string_view key, const T& value) {
    if (is_zero(value)) return;
    if constexpr (is_optional<T>::value) {
      required(key, *value);
    } else {
      required(key, value);
    }
  }
  template <typename T>
  void entries(std::string_view key, const std::vector<T>& value) {
    // A batch is never empty: a sender with nothing to say sends nothing.
    assert(!value.empty());
    required(key, value);
  }
  void bytes(std::string_view key, const std::string& value) {
    out_.str(key);
    out_.bin(value);
  }
  void optional_bytes(std::string_view key, const std::optional<std::string>& value) {
    if (value) bytes(key, *value);
  }

  template <typename M>
  void map(const M& m) {
    field_counter counter;
    describe(counter, m);
    out_.map(counter.count);
    describe(*this, m);
  }

 private:
  void str(std::string_view s) { out_.str(s); }
  void write(const std::string& s) { str(s); }
  void write(bool b) { out_.boolean(b); }
  void write(std::uint32_t u) { out_.uint(u); }
  void write(std::uint64_t u) { out_.uint(u); }
  void write(std::int64_t i) { out_.sint(i); }
  void write(task_state s) { str(to_string(s)); }
  void write(checkpointing_mode mode) { str(to_string(mode)); }
  template <record T>
  void write(const T& r) {
    map(r);
  }
  template <record T>
  void write(const std::vector<T>& records) {
    out_.array(static_cast<std::uint32_t>(records.size()));
    for (const auto& r : records) map(r);
  }

  msgpack_writer& out_;
};

constexpr std::size_t initial_frame_capacity = 512;

#ifndef NDEBUG
// Leaving an optional field out at its zero (is_zero) loses nothing only while the struct's
// default for that field is that zero: a field added with another default would decode to
// something other than what was sent. Debug builds (the test suite) check every message and
// record once per process, on the first encode.
struct optional_default_check {
  std::string_view type;

  template <typename T>
  void required(std::string_view, const T&) {}
  template <typename T>
  void optional(std::string_view key, const T& value) {
    if (is_zero(value)) return;
    std::fprintf(stderr, "wire: the optional field '%.*s' of %.*s does not default to zero\n",
                 static_cast<int>(key.size()), key.data(), static_cast<int>(type.size()),
                 type.data());
    std::abort();
  }
  template <typename T>
  void entries(std::string_view, const std::vector<T>&) {}
  void bytes(std::string_view, const std::string&) {}
  void optional_bytes(std::string_view key, const std::optional<std::string>& value) {
    optional(key, value);
  }
};

template <typename T>
void check_defaults(std::string_view type) {
  const T defaults{};
  optional_default_check check{type};
  describe(check, defaults);
}

template <typename... M>
void check_message_defaults(const std::variant<M...>*) {
  (check_defaults<M>(M::wire_type), ...);
}

bool check_optional_defaults() {
  check_message_defaults(static_cast<const message*>(nullptr));
  check_defaults<execution_attempt_id>("execution_attempt_id");
  check_defaults<state_handle>("state_handle");
  check_defaults<subtask_endpoint>("subtask_endpoint");
  check_defaults<data_root>("data_root");
  check_defaults<worker_program>("worker_program");
  check_defaults<subtask_restore_state>("subtask_restore_state");
  check_defaults<task_io>("task_io");
  check_defaults<checkpoint_notified>("checkpoint_notified");
  return true;
}
#endif

template <typename M>
void encode_message(const M& body, std::string& frame) {
#ifndef NDEBUG
  [[maybe_unused]] static const bool defaults_checked = check_optional_defaults();
#endif
  // Room for any control message without state (a trigger or an ack is 100-400 bytes), so the
  // string is sized once; a caller that keeps `frame` between messages does not allocate.
  msgpack_writer out(frame, initial_frame_capacity);
  field_writer writer(out);
  field_counter counter;
  describe(counter, body);
  out.map(counter.count + 2);
  out.str("v");
  out.uint(current_protocol_version);
  out.str("t");
  out.str(M::wire_type);
  describe(writer, body);
  out.finish();
}

}  // namespace
}  // namespace detail

void encode(const message& m, std::string& frame) {
  std::visit([&](const auto& body) { detail::encode_message(body, frame); }, m);
}

void encode(const trigger_checkpoint& m, std::string& frame) { detail::encode_message(m, frame); }

void encode(const acknowledge_checkpoint& m, std::string& frame) {
  detail::encode_message(m, frame);
}

std::string encode(const message& m) {
  std::string frame;
  encode(m, frame);
  return frame;
}

decode_result decode(std::string_view frame, std::size_t max_frame_bytes) noexcept {
  try {
    if (frame.size() <= max_frame_bytes) {
      if (std::optional<message> m = detail::decode_canonical(frame)) return std::move(*m);
    }
    return detail::decode_general(frame, max_frame_bytes);
  } catch (const std::exception& e) {
    // Only an allocation for a field's copy can throw here; the frame is refused, not fatal.
    return decode_error{decode_errc::not_msgpack, e.what(), 0};
  }
}

}  // namespace snapflow::wire
