#include "engine/api/codec.hpp"

namespace snapflow::api {

namespace {

// Every array element and string byte takes at least one byte of the input and every map entry
// two, so these bounds never refuse a well-formed value.
msgpack::unpack_limit limits_for(std::size_t bytes) {
  return msgpack::unpack_limit(bytes, bytes / 2, bytes, bytes, bytes, max_value_depth);
}

}  // namespace

result<msgpack::object> unpack_bounded(msgpack::zone& zone, std::string_view bytes) {
  if (bytes.empty()) return error{"empty payload: no msgpack value"};
  try {
    std::size_t offset = 0;
    msgpack::object object = msgpack::unpack(zone, bytes.data(), bytes.size(), offset, nullptr,
                                             nullptr, limits_for(bytes.size()));
    if (offset != bytes.size())
      return error{std::to_string(bytes.size() - offset) +
                   " unexpected bytes after the msgpack value"};
    return object;
  } catch (const msgpack::insufficient_bytes&) {
    return error{"truncated msgpack value"};
  } catch (const msgpack::depth_size_overflow&) {
    return error{"msgpack value nested deeper than " + std::to_string(max_value_depth) +
                 " levels"};
  } catch (const msgpack::size_overflow&) {
    return error{"msgpack value declares more elements than its bytes can hold"};
  } catch (const std::exception& e) {
    return error{std::string("malformed msgpack: ") + e.what()};
  }
}

}  // namespace snapflow::api
