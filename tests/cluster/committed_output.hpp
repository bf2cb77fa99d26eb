#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

// Reads what the example job (sequence_source -> keyed_sum -> file sink) committed and checks it
// against the output contract of scripts/check_output.py: each line is `key,seq,sum`, with
// key = seq % keys and value = seq, so the running sum of key k after seq s is
// k + (k + keys) + ... + s.
namespace snapflow::testing {

struct committed_output {
  std::size_t lines = 0;
  std::size_t bad_lines = 0;     // not `key,seq,sum`, seq out of range or key != seq % keys
  std::size_t missing = 0;       // sequence numbers never seen
  std::size_t duplicated = 0;    // sequence numbers seen more than once
  std::size_t wrong_sums = 0;    // sum differs from the exactly-once running sum
  std::size_t sums_too_low = 0;  // sum below it: a record was lost or double-counted backwards
  std::vector<int> seen;         // by sequence number
};

// The exactly-once running sum of key `seq % keys` after `seq`.
std::int64_t expected_running_sum(std::int64_t seq, std::int64_t keys);

// Every regular file in `folder` not starting with '.' (the sinks' in-progress files are
// hidden), line by line.
committed_output read_committed_output(const std::filesystem::path& folder,
                                       std::int64_t record_count, std::int64_t keys);

}  // namespace snapflow::testing
