#include "tests/cluster/committed_output.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace snapflow::testing {

std::int64_t expected_running_sum(std::int64_t seq, std::int64_t keys) {
  const std::int64_t key = seq % keys;
  const std::int64_t n = (seq - key) / keys;  // records of this key before seq
  return (n + 1) * key + keys * n * (n + 1) / 2;
}

committed_output read_committed_output(const std::filesystem::path& folder,
                                       std::int64_t record_count, std::int64_t keys) {
  committed_output out;
  out.seen.assign(static_cast<std::size_t>(record_count), 0);
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    out.missing = static_cast<std::size_t>(record_count);
    return out;
  }
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name.starts_with(".")) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      ++out.lines;
      std::istringstream fields(line);
      std::int64_t key = -1, seq = -1, sum = 0;
      char c1 = 0, c2 = 0;
      fields >> key >> c1 >> seq >> c2 >> sum;
      if (!fields || c1 != ',' || c2 != ',' || seq < 0 || seq >= record_count ||
          key != seq % keys) {
        ++out.bad_lines;
        continue;
      }
      ++out.seen[static_cast<std::size_t>(seq)];
      const std::int64_t expected = expected_running_sum(seq, keys);
      if (sum != expected) ++out.wrong_sums;
      if (sum < expected) ++out.sums_too_low;
    }
  }
  for (int count : out.seen) {
    if (count == 0) ++out.missing;
    if (count > 1) ++out.duplicated;
  }
  return out;
}

}  // namespace snapflow::testing
