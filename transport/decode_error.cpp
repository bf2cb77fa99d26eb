#include "transport/decode_error.hpp"

namespace snapflow::wire {

namespace {

class decode_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "snapflow.wire.decode"; }
  std::string message(int value) const override {
    return std::string(to_string(static_cast<decode_errc>(value)));
  }
};

}  // namespace

std::string_view to_string(decode_errc code) {
  switch (code) {
    case decode_errc::not_msgpack:
      return "not_msgpack";
    case decode_errc::truncated:
      return "truncated";
    case decode_errc::too_large_declared_length:
      return "too_large_declared_length";
    case decode_errc::too_deep:
      return "too_deep";
    case decode_errc::not_a_map:
      return "not_a_map";
    case decode_errc::missing_field:
      return "missing_field";
    case decode_errc::wrong_type:
      return "wrong_type";
    case decode_errc::invalid_value:
      return "invalid_value";
    case decode_errc::unknown_type:
      return "unknown_type";
    case decode_errc::unsupported_version:
      return "unsupported_version";
    case decode_errc::frame_too_large:
      return "frame_too_large";
  }
  return "unknown_decode_error";
}

const std::error_category& decode_category() {
  static const decode_category_impl category;
  return category;
}

std::error_code make_error_code(decode_errc code) {
  return {static_cast<int>(code), decode_category()};
}

std::ostream& operator<<(std::ostream& os, decode_errc code) { return os << to_string(code); }

std::ostream& operator<<(std::ostream& os, const decode_error& e) {
  os << "decode_error{" << e.code;
  if (e.code == decode_errc::unsupported_version) os << ", v=" << e.version;
  if (!e.detail.empty()) os << ", " << e.detail;
  return os << "}";
}

}  // namespace snapflow::wire
