#pragma once

// Helpers shared by the job-file tests: parse a text as "job.toml" and expect success, or expect
// an error that names its key and line.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "graph/job_file.hpp"
#include "graph/operator_registry.hpp"

namespace snapflow::testing {

inline job_graph load_ok(std::string_view text,
                         const operator_registry& registry = operator_registry::builtin()) {
  auto r = parse_job_file(text, "job.toml", registry);
  INFO(r);
  REQUIRE(r.ok());
  return r.value();
}

// Checks the error names `key` and `line`, contains `message_part`, and formats as
// "job.toml:LINE: key 'KEY': MESSAGE".
inline job_file_error check_error(std::string_view text, const std::string& key,
                                  std::uint32_t line, const std::string& message_part) {
  auto r = parse_job_file(text, "job.toml");
  INFO(r);
  REQUIRE_FALSE(r.ok());
  const job_file_error& e = r.error();
  INFO(e.what());
  CHECK(e.file == "job.toml");
  CHECK(e.key == key);
  CHECK(e.line == line);
  CHECK_THAT(e.message, Catch::Contains(message_part));
  CHECK(e.what() == "job.toml:" + std::to_string(line) + ": key '" + key + "': " + e.message);
  return e;
}

}  // namespace snapflow::testing
