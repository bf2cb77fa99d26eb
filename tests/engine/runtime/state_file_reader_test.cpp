// The streaming state file reader: every version reads as state_file::decode reads it, from
// memory and from a file through a small buffer; torn, corrupt and out-of-order files are
// refused; and a state of many key groups is read holding one key group and the buffer.
#include <catch2/catch.hpp>

#include <fstream>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_reader.hpp"
#include "tests/engine/runtime/hand_state_file.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using namespace snapflow::runtime_test;

namespace {

using hand_file = hand_state_file;

// Key group `g`: value state "v" {7 -> value}, map state "m" {7 -> {"a": value}}; values are
// int64s (versions 1 and 2) or bytes.
void add_group(hand_file& f, std::uint32_t g, bool int64_values) {
  f.u32(g);
  f.u32(1);
  f.str("v");
  f.u32(1);
  f.u64(7);
  if (int64_values) f.u64(40 + g); else f.str("val" + std::to_string(g));
  f.u32(1);
  f.str("m");
  f.u32(1);
  f.u64(7);
  f.u32(1);
  f.str("a");
  if (int64_values) f.u64(50 + g); else f.str("m" + std::to_string(g));
}

void add_files_section(hand_file& f) {
  f.u32(16);
  f.u32(8);
  f.u32(15);
  f.u32(1);
  f.str("000001.sst");
  f.str("x-000001.sst");
  f.u64(123);
  f.u32(0xABCDu);
  f.u32(1);
}

// A file of `version` holding key groups 3, 5 and 9 (ascending unless `groups` says otherwise).
std::string versioned_file(std::uint32_t version, std::vector<std::uint32_t> groups = {3, 5, 9}) {
  const bool int64_values =
      version == state_file::version_int64 || version == state_file::version_int64_with_files;
  const bool terminated = version >= state_file::version_without_channels;
  hand_file f;
  f.head(1, 2);
  if (!terminated) f.u32(static_cast<std::uint32_t>(groups.size()));
  for (auto g : groups) add_group(f, g, int64_values);
  if (terminated) f.u32(state_file::end_of_key_groups);
  const bool files = version != state_file::version_int64;
  if (version >= state_file::version_bytes_counted) f.u32(files ? 1 : 0);
  if (files) add_files_section(f);
  if (version >= state_file::version_untimed_channels) {
    // One input channel holding two records (timed from version 6 on).
    f.u32(1);
    f.u32(0);
    f.u32(1);
    f.u32(3);
    f.u32(2);
    for (std::uint64_t key : {11u, 12u}) {
      f.u64(key);
      f.u64(key + 100);
      f.u64(7);
      f.str("r");
      if (version >= state_file::version) f.u64(key + 1000);
    }
  }
  return f.file(version, !terminated);
}

state_handle write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return state_handle{path.string(), bytes.size(), crc32c(bytes), std::nullopt};
}

// Everything the reader streams, put back together.
result<subtask_snapshot> stream(const state_handle& handle, std::size_t buffer_bytes = 64) {
  keyed_state_snapshot groups;
  keyed_snapshot_collector sink(groups);
  auto s = state_file_reader::read(handle, sink, {}, buffer_bytes);
  if (!s) return s;
  s->keyed.key_groups = std::move(groups.key_groups);
  return s;
}

result<subtask_snapshot> stream_bytes(std::string_view bytes) {
  keyed_state_snapshot groups;
  keyed_snapshot_collector sink(groups);
  state_file_reader reader(bytes);
  auto s = reader.read(sink);
  if (!s) return s;
  s->keyed.key_groups = std::move(groups.key_groups);
  return s;
}

}  // namespace

TEST_CASE("state file reader: every version streams to what decode reads, from memory, from a "
          "file through a small buffer and inline") {
  temp_folder dir;
  for (std::uint32_t version : {state_file::version_int64, state_file::version_int64_with_files,
                                state_file::version_bytes_counted,
                                state_file::version_without_channels,
                                state_file::version_untimed_channels, state_file::version}) {
    INFO("version " << version);
    const std::string bytes = versioned_file(version);
    auto decoded = state_file::decode(bytes);
    REQUIRE(decoded);
    CHECK(decoded->keyed.key_groups.size() == 3);
    CHECK(decoded->subtask_index == 1);
    CHECK(decoded->keyed_files.has_value() == (version != state_file::version_int64));
    if (version >= state_file::version_untimed_channels) {
      REQUIRE(decoded->channels.size() == 1);
      CHECK(decoded->channels[0].side == channel_side::input);
      CHECK(decoded->channels[0].gate == 1);
      CHECK(decoded->channels[0].channel == 3);
      // Version 5 kept no event timestamp: its records come back without one.
      const bool timed = version == state_file::version;
      CHECK(decoded->channels[0].records ==
            std::vector<record>{{11, 111, 7, "r", timed ? 1011 : no_timestamp},
                                {12, 112, 7, "r", timed ? 1012 : no_timestamp}});
    } else {
      CHECK(decoded->channels.empty());
    }
    auto from_memory = stream_bytes(bytes);
    REQUIRE(from_memory);
    CHECK(*from_memory == *decoded);
    for (std::size_t buffer : {1, 7, 64, 4096}) {
      INFO("buffer " << buffer);
      auto from_file =
          stream(write_file(dir.path() / ("v" + std::to_string(version)), bytes), buffer);
      if (!from_file) FAIL(from_file.err().message);
      CHECK(*from_file == *decoded);
    }
    auto inline_read = stream(state_file::make_inline(bytes));
    REQUIRE(inline_read);
    CHECK(*inline_read == *decoded);
  }
}

TEST_CASE("state file reader: a torn or corrupt file is refused with its name, never a crash") {
  temp_folder dir;
  const std::string bytes = versioned_file(state_file::version);
  const auto path = dir.path() / "s.state";
  auto good = stream(write_file(path, bytes));
  REQUIRE(good);
  // Cut anywhere, with a handle that matches the cut file: the decoder itself refuses it.
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    INFO("cut at " << cut);
    auto r = stream(write_file(path, bytes.substr(0, cut)), 16);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains(path.string()));
    CHECK_FALSE(stream_bytes(bytes.substr(0, cut)));
  }
  // A flipped byte: refused by the handle's checksum, and by the trailer when the handle is made
  // to match; with the trailer repaired too, whatever is accepted is what decode accepts.
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    INFO("byte " << at);
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5A);
    const state_handle original{path.string(), bytes.size(), crc32c(bytes), std::nullopt};
    write_file(path, flipped);
    auto refused = stream(original);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.err().message, Catch::Contains(path.string()));
    CHECK_FALSE(stream(write_file(path, flipped)));
    std::string repaired = flipped.substr(0, flipped.size() - 4);
    hand_file trailer;
    trailer.u32(crc32c(repaired));
    repaired += trailer.body;
    auto streamed = stream(write_file(path, repaired), 16);
    auto decoded = state_file::decode(repaired);
    CHECK(streamed.ok() == decoded.ok());
    if (streamed && decoded) CHECK(*streamed == *decoded);
  }
  // A missing file.
  auto missing = stream(state_handle{(dir.path() / "none.state").string(), 10, 0, std::nullopt});
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.err().message, Catch::Contains("none.state"));
}

TEST_CASE("state file reader: key groups out of order or twice are refused in every version") {
  temp_folder dir;
  for (std::uint32_t version : {state_file::version_int64, state_file::version_int64_with_files,
                                state_file::version_bytes_counted,
                                state_file::version_without_channels,
                                state_file::version_untimed_channels, state_file::version}) {
    for (const auto& groups :
         {std::vector<std::uint32_t>{5, 3}, std::vector<std::uint32_t>{3, 3}}) {
      INFO("version " << version << ", groups " << groups[0] << ", " << groups[1]);
      const std::string bytes = versioned_file(version, groups);
      auto r = stream(write_file(dir.path() / "o.state", bytes));
      REQUIRE_FALSE(r);
      CHECK_THAT(r.err().message, Catch::Contains("not ascending"));
      CHECK_FALSE(state_file::decode(bytes));
    }
  }
}

namespace {

// Counts what it is handed and keeps nothing: a restore's view of a file.
class counting_sink final : public keyed_group_sink {
 public:
  result<void> key_group(std::uint32_t group, key_group_state& state) override {
    ++groups;
    std::size_t entries = 0;
    for (const auto& [name, keys] : state.values) entries += keys.size();
    for (const auto& [name, keys] : state.maps) entries += keys.size();
    // Only this group's keys: the reader handed a fresh state, not one accumulating them.
    for (const auto& [name, keys] : state.values)
      for (const auto& [key, value] : keys)
        if (key_groups::key_group_for_key(key, 128) != group) ++foreign;
    most_entries = std::max(most_entries, entries);
    total_entries += entries;
    state = key_group_state{};
    return success();
  }
  std::uint64_t groups = 0;
  std::size_t most_entries = 0;
  std::size_t total_entries = 0;
  std::size_t foreign = 0;
};

}  // namespace

TEST_CASE("state file reader: a state of many key groups is read holding one group and the "
          "buffer") {
  temp_folder dir;
  subtask_snapshot s;
  s.operator_uid = "big";
  s.keyed.max_parallelism = 128;
  constexpr std::uint64_t keys = 128 * 40;
  for (std::uint64_t key = 0; key < keys; ++key) {
    auto& g = s.keyed.key_groups[key_groups::key_group_for_key(key, 128)];
    g.values["v"][key] = std::string(200, static_cast<char>('a' + key % 26));
    g.maps["m"][key]["k"] = std::to_string(key);
  }
  auto written = state_file::write(dir.path() / "big.state", s);
  REQUIRE(written);
  counting_sink sink;
  state_file_reader::stats stats;
  constexpr std::size_t buffer = 4096;
  auto head = state_file_reader::read(*written, sink, {}, buffer, &stats);
  if (!head) FAIL(head.err().message);
  CHECK(head->keyed.key_groups.empty());
  CHECK(head->operator_uid == "big");
  CHECK(sink.groups == 128);
  CHECK(stats.key_groups == 128);
  CHECK(sink.total_entries == 2 * keys);
  CHECK(sink.foreign == 0);
  // One group at a time: the most handed at once is one group's entries, and what the reader
  // held besides (its buffer and the group's encoded bytes) is a small part of the file.
  const std::size_t largest_group_entries = [&] {
    std::size_t most = 0;
    for (const auto& [g, state] : s.keyed.key_groups)
      most = std::max(most, state.values.at("v").size() + state.maps.at("m").size());
    return most;
  }();
  CHECK(sink.most_entries == largest_group_entries);
  CHECK(stats.buffer_bytes == buffer);
  CHECK(stats.largest_group_bytes > 0);
  CHECK(stats.buffer_bytes + stats.largest_group_bytes < written->size / 32);
}
