#include "tests/cluster/program_support.hpp"

#include <catch2/catch.hpp>

namespace snapflow::testing {

namespace {

std::string without_trailing_newlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

std::unique_ptr<child_process> start_program_worker(const std::string& program,
                                                    const std::string& control,
                                                    const std::string& id,
                                                    const std::vector<std::string>& args,
                                                    int heartbeat_timeout, int slots) {
  std::vector<std::string> argv{program,
                                "worker",
                                "--coordinator",
                                control,
                                "--id",
                                id,
                                "--slots",
                                std::to_string(slots),
                                "--heartbeat-interval-ms",
                                std::to_string(heartbeat_interval_ms),
                                "--heartbeat-timeout-ms",
                                std::to_string(heartbeat_timeout),
                                "--data-root",
                                test_data_root()};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<child_process>(argv);
}

std::string submit_program(const std::string& program, const coordinator_process& coordinator,
                           const std::vector<std::string>& args) {
  std::vector<std::string> argv{program, "submit", "--coordinator", coordinator.rest().address()};
  argv.insert(argv.end(), args.begin(), args.end());
  child_process submit(argv);
  const auto code = submit.wait_exit(patience);
  INFO(program << " submit: exit " << (code ? std::to_string(*code) : "none in time")
               << "\nstdout: " << submit.stdout_text() << "\nstderr: " << submit.stderr_text());
  REQUIRE(code == 0);
  const std::string id = without_trailing_newlines(submit.stdout_text());
  REQUIRE(id.size() == 32);
  return id;
}

std::string program_fingerprint_of(const std::string& program,
                                   const std::vector<std::string>& args) {
  std::vector<std::string> argv{program, "fingerprint"};
  argv.insert(argv.end(), args.begin(), args.end());
  child_process p(argv);
  const auto code = p.wait_exit(patience);
  INFO(program << " fingerprint: stderr " << p.stderr_text());
  REQUIRE(code == 0);
  return without_trailing_newlines(p.stdout_text());
}

}  // namespace snapflow::testing
