#pragma once

#include <exception>
#include <string>

namespace snapflow::transport {

// What an exception says, for a log line: what() of a std::exception, a fixed text otherwise.
// For the endpoints, which log and carry on where an unexpected exception must not take the
// whole control plane down.
inline std::string exception_text(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// The same for the exception being handled (call it inside a catch block).
inline std::string current_exception_text() { return exception_text(std::current_exception()); }

}  // namespace snapflow::transport
