#pragma once

#include <cassert>
#include <ostream>
#include <string>
#include <utility>
#include <variant>

namespace snapflow {

// An operational error: something the world did (a disk, a peer, a file), never a bug.
struct error {
  std::string message;

  bool operator==(const error&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const error& e) {
  return os << "error{" << e.message << "}";
}

// A value or an operational error (C++20 has no std::expected). Bugs assert instead.
template <typename T>
class [[nodiscard]] result {
 public:
  result(T value) : data_(std::move(value)) {}
  result(error e) : data_(std::move(e)) {}

  bool ok() const { return data_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(data_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(data_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(data_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const error& err() const {
    assert(!ok());
    return std::get<1>(data_);
  }

 private:
  std::variant<T, error> data_;
};

template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(error e) : error_(std::move(e)), ok_(false) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const error& err() const {
    assert(!ok_);
    return error_;
  }

 private:
  error error_;
  bool ok_ = true;
};

inline result<void> success() { return {}; }

}  // namespace snapflow
