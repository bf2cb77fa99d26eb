#pragma once

#include <cstdint>
#include <msgpack.hpp>
#include <string>
#include <string_view>

namespace snapflow::wire::testing {

// Writes msgpack by hand, for frames encode() would never produce: wrong types, missing
// fields, lying lengths.
class frame_builder {
 public:
  frame_builder() : pk_(*this) {}
  frame_builder(const frame_builder&) = delete;
  frame_builder& operator=(const frame_builder&) = delete;

  // A map header plus "v" and "t": the start of an envelope with `fields` more keys.
  frame_builder& envelope(std::string_view type, std::uint32_t fields, std::uint64_t v = 1) {
    map(fields + 2);
    str("v").uint(v);
    return str("t").str(type);
  }
  frame_builder& map(std::uint32_t n) {
    pk_.pack_map(n);
    return *this;
  }
  frame_builder& array(std::uint32_t n) {
    pk_.pack_array(n);
    return *this;
  }
  frame_builder& str(std::string_view s) {
    pk_.pack_str(static_cast<std::uint32_t>(s.size()));
    pk_.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
    return *this;
  }
  frame_builder& uint(std::uint64_t u) {
    pk_.pack_uint64(u);
    return *this;
  }
  frame_builder& sint(std::int64_t i) {
    pk_.pack_int64(i);
    return *this;
  }
  frame_builder& boolean(bool b) {
    b ? pk_.pack_true() : pk_.pack_false();
    return *this;
  }
  frame_builder& nil() {
    pk_.pack_nil();
    return *this;
  }
  // An attempt id map {vertex, subtask, attempt}.
  frame_builder& attempt(std::uint64_t vertex, std::uint64_t subtask, std::uint64_t n) {
    map(3);
    str("vertex").uint(vertex);
    str("subtask").uint(subtask);
    return str("attempt").uint(n);
  }
  // Bytes as they are, e.g. a header that declares a length nothing follows.
  frame_builder& raw(std::string_view bytes) {
    bytes_.append(bytes);
    return *this;
  }

  const std::string& bytes() const { return bytes_; }

  // For msgpack::packer.
  void write(const char* data, std::size_t size) { bytes_.append(data, size); }

 private:
  std::string bytes_;
  msgpack::packer<frame_builder> pk_;
};

}  // namespace snapflow::wire::testing
