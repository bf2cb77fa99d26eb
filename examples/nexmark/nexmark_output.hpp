#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "engine/api/typed_api.hpp"
#include "graph/record.hpp"

namespace snapflow::nexmark {

// Query rows through the runtime's record sinks and back. A row travels as the hex of its
// msgpack bytes in the record's payload: the file sinks write `key,seq,value,payload` lines,
// and hex keeps a row (whatever its strings hold) on one line.
std::string to_hex(std::string_view bytes);
// The bytes `hex` spells, or an error for an odd length or a character that is not a hex digit.
result<std::string> from_hex(std::string_view hex);

// A row as a record: key = the hash of its bytes, seq and value 0, payload = hex of its bytes.
template <typename Row>
record row_record(const Row& row) {
  const std::string bytes = api::encode(row);
  return record{api::key_hash(bytes), 0, 0, to_hex(bytes)};
}

// The payloads (the text after the third comma) of every line of the regular files directly
// in `folder` whose names do not start with '.' (the committed files of a file sink). An error
// names the file and line that is not `key,seq,value,payload`.
result<std::vector<std::string>> read_output_payloads(const std::filesystem::path& folder);

// Rows back from read_output_payloads' payloads; an error for one that is not a Row.
template <typename Row>
result<std::vector<Row>> decode_rows(const std::vector<std::string>& payloads) {
  std::vector<Row> rows;
  rows.reserve(payloads.size());
  for (const auto& p : payloads) {
    auto bytes = from_hex(p);
    if (!bytes) return bytes.err();
    auto row = api::decode<Row>(*bytes);
    if (!row) return row.err();
    rows.push_back(std::move(row).value());
  }
  return rows;
}

}  // namespace snapflow::nexmark
