// The state file format (version 4) and its streaming writer: what the writer streams through
// its buffer is byte for byte what state_file::encode makes, whatever the buffer's size; small
// states go inline; the older versions 1-3 still read; and a cut or damaged version 4 file is
// refused with an error, never a crash.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/runtime/state_file_writer.hpp"
#include "tests/engine/runtime/hand_state_file.hpp"
#include "tests/support/temp_folder.hpp"

using namespace snapflow;
using snapflow::testing::temp_folder;

namespace {

std::string read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Operator state, 100 key groups with value and map states, empty values, NUL bytes, and
// (when `big`) a few 1 MiB values.
subtask_snapshot rich_snapshot(bool big) {
  subtask_snapshot s;
  s.operator_uid = std::string("op\0uid", 6);
  s.subtask_index = 2;
  s.parallelism = 4;
  s.checkpoint = 77;
  s.operator_state.push_back({"offsets", std::string("\0\1\2", 3)});
  s.operator_state.push_back({"empty", ""});
  s.keyed.max_parallelism = 256;
  for (std::uint32_t g = 3; g < 203; g += 2) {
    key_group_state& state = s.keyed.key_groups[g];
    for (std::uint64_t k = 0; k < 5; ++k) {
      state.values["sum"][g * 1000 + k] = std::string(k, static_cast<char>('a' + k));
      state.values[std::string("n\0ul", 4)][g * 1000 + k] = std::string("\0x\0", 3);
    }
    state.maps["words"][g * 1000][""] = "";
    state.maps["words"][g * 1000][std::string("\0", 1)] = "zero";
    state.maps["words"][g * 1000 + 1]["w"] = std::string(300, 'w');
  }
  if (big) {
    s.keyed.key_groups[5].values["big"][1] = std::string(1 << 20, 'B');
    s.keyed.key_groups[150].maps["big"][2]["k"] = std::string(1 << 20, '\0');
    s.operator_state.push_back({"big", std::string(1 << 20, 'o')});
  }
  return s;
}

result<state_file_writer::written> stream(state_file_writer& w, const subtask_snapshot& s) {
  if (auto r = w.head(s); !r) return r.err();
  for (const auto& [group, state] : s.keyed.key_groups)
    if (auto r = w.key_group(group, state); !r) return r.err();
  return w.finish(s.keyed_files, s.channels);
}

}  // namespace

TEST_CASE("state file writer: streams byte for byte what encode makes, with any buffer size") {
  temp_folder dir;
  for (const bool big : {false, true}) {
    subtask_snapshot s = rich_snapshot(big);
    if (big) {
      s.keyed_files = keyed_state_files{
          256, 0, 63, {{"000012.sst", "x-000012.sst", 4096, 0xdeadbeef, true}}};
      s.channels.push_back({channel_side::output, 0, 1, std::vector<record>(300, {5, 6, 7, "p"})});
    }
    const std::string encoded = state_file::encode(s);
    CHECK(encoded.substr(state_file::magic.size(), 4) == std::string("\x06\0\0\0", 4));
    auto decoded = state_file::decode(encoded);
    REQUIRE(decoded);
    CHECK(*decoded == s);
    for (const std::size_t buffer : {std::size_t{1}, std::size_t{100}, std::size_t{4096},
                                     state_file_writer::default_buffer_bytes}) {
      const auto file = dir.path() / ("s-" + std::to_string(buffer) + ".state");
      state_file_writer w(file, buffer);
      auto written = stream(w, s);
      REQUIRE(written);
      CHECK(written->key_groups == s.keyed.key_groups.size());
      CHECK_FALSE(written->handle.is_inline());
      CHECK(written->handle.path == file.string());
      const std::string bytes = read_all(file);
      CHECK(bytes == encoded);
      CHECK(written->handle.size == encoded.size());
      CHECK(written->handle.checksum == crc32c(encoded));
      CHECK_FALSE(std::filesystem::exists(file.string() + ".tmp"));
      auto back = state_file::read(written->handle);
      REQUIRE(back);
      CHECK(*back == s);
      // The buffer, plus at most the one entry that overflowed it (a 1 MiB value at most).
      CHECK(w.peak_buffered_bytes() <= buffer + (1 << 20) + 64);
    }
    // state_file::write streams the same way.
    auto handle = state_file::write(dir.path() / "w.state", s);
    REQUIRE(handle);
    CHECK(handle->checksum == crc32c(encoded));
    CHECK(read_all(dir.path() / "w.state") == encoded);
  }
}

TEST_CASE("state file writer: a state within the inline limit stays in memory, a larger one "
          "goes to the file") {
  temp_folder dir;
  const subtask_snapshot s = rich_snapshot(false);
  const std::string encoded = state_file::encode(s);
  const auto file = dir.path() / "a.state";
  {
    // Exactly at the limit, with a buffer far smaller: inline, no file made.
    state_file_writer w(file, 64, encoded.size());
    auto written = stream(w, s);
    REQUIRE(written);
    REQUIRE(written->handle.is_inline());
    CHECK(*written->handle.inline_bytes == encoded);
    CHECK(written->handle == state_file::make_inline(encoded));
    CHECK_FALSE(std::filesystem::exists(file));
    CHECK_FALSE(std::filesystem::exists(file.string() + ".tmp"));
  }
  {
    // One byte over: the file, the same bytes.
    state_file_writer w(file, 64, encoded.size() - 1);
    auto written = stream(w, s);
    REQUIRE(written);
    CHECK_FALSE(written->handle.is_inline());
    CHECK(read_all(file) == encoded);
  }
  {
    // Over the limit and no file to go to: refused, saying so.
    state_file_writer w({}, 64, encoded.size() - 1);
    auto written = stream(w, s);
    REQUIRE_FALSE(written);
    CHECK(w.needs_location());
  }
}

TEST_CASE("state file writer: a writer dropped before finish leaves no file") {
  temp_folder dir;
  const subtask_snapshot s = rich_snapshot(false);
  const auto file = dir.path() / "sub" / "d.state";
  {
    state_file_writer w(file, 16);
    REQUIRE(w.head(s));
    for (const auto& [group, state] : s.keyed.key_groups) REQUIRE(w.key_group(group, state));
    CHECK(std::filesystem::exists(file.string() + ".tmp"));
  }
  CHECK_FALSE(std::filesystem::exists(file.string() + ".tmp"));
  CHECK_FALSE(std::filesystem::exists(file));
}

TEST_CASE("state file writer: key groups out of order are refused") {
  temp_folder dir;
  state_file_writer w(dir.path() / "o.state");
  subtask_snapshot s = rich_snapshot(false);
  REQUIRE(w.head(s));
  key_group_state g;
  g.values["v"][1] = "x";
  REQUIRE(w.key_group(7, g));
  CHECK_FALSE(w.key_group(7, g));
  CHECK_FALSE(w.key_group(3, g));
  CHECK_FALSE(w.key_group(state_file::end_of_key_groups, g));
}

TEST_CASE("state file v4: every cut and every flipped byte of a small file is refused") {
  subtask_snapshot s;
  s.operator_uid = "u";
  s.parallelism = 1;
  s.checkpoint = 1;
  s.operator_state.push_back({"o", "12"});
  s.keyed.max_parallelism = 8;
  s.keyed.key_groups[1].values["v"][5] = "ab";
  s.keyed.key_groups[4].maps["m"][6]["k"] = "";
  s.keyed_files = keyed_state_files{8, 0, 7, {{"l", "h", 3, 9, false}}};
  const std::string bytes = state_file::encode(s);
  REQUIRE(state_file::decode(bytes));
  REQUIRE(bytes.size() < 512);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    CHECK_FALSE(state_file::decode(bytes.substr(0, cut)));
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x41);
    CHECK_FALSE(state_file::decode(flipped));
  }
  // The same with the trailer made to match, so the body's own checks are what stands between
  // the bytes and a crash: a cut is refused, a flipped byte refused or decoded into something
  // that encodes and decodes again.
  const auto with_trailer = [](std::string body) {
    const std::uint32_t crc = crc32c(body);
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
    return body;
  };
  const std::string content = bytes.substr(0, bytes.size() - 4);
  for (std::size_t cut = 0; cut < content.size(); ++cut)
    CHECK_FALSE(state_file::decode(with_trailer(content.substr(0, cut))));
  for (std::size_t at = 0; at < content.size(); ++at) {
    for (const unsigned char x : {0x01, 0x80, 0xFF}) {
      std::string flipped = content;
      flipped[at] = static_cast<char>(flipped[at] ^ x);
      auto decoded = state_file::decode(with_trailer(flipped));
      if (decoded) CHECK(state_file::decode(state_file::encode(*decoded)).value() == *decoded);
    }
  }
}

namespace {

using hand_file = runtime_test::hand_state_file;

// Key group 3: value state "v" {7 -> "val"}.
void add_group3(hand_file& f) {
  f.u32(3);
  f.u32(1);
  f.str("v");
  f.u32(1);
  f.u64(7);
  f.str("val");
  f.u32(0);
}

}  // namespace

TEST_CASE("state file: version 3 (counted key groups, body length) still reads") {
  hand_file f;
  f.head();
  f.u32(1);  // key groups
  add_group3(f);
  f.u32(0);  // no keyed state files
  auto decoded = state_file::decode(f.file(state_file::version_bytes_counted, true));
  REQUIRE(decoded);
  CHECK(decoded->operator_uid == "h");
  CHECK(decoded->operator_state == std::vector<operator_state_entry>{{"o", "p"}});
  CHECK(decoded->keyed.key_groups.at(3).values.at("v").at(7) == "val");
  // The same content as version 4 is the same snapshot.
  CHECK(state_file::decode(state_file::encode(*decoded)).value() == *decoded);
  // Version 3 with the version 4 layout (no body length) is refused.
  CHECK_FALSE(state_file::decode(f.file(state_file::version_bytes_counted, false)));
  // A key group 0xFFFFFFFF, which version 4 could not write again, is refused.
  hand_file forged;
  forged.head();
  forged.u32(1);
  forged.u32(state_file::end_of_key_groups);
  forged.u32(0);
  forged.u32(0);
  forged.u32(0);
  CHECK_FALSE(state_file::decode(forged.file(state_file::version_bytes_counted, true)));
}

TEST_CASE("state file v4: a hand-made file reads; a missing terminator, groups out of order "
          "or a group twice are refused") {
  {
    hand_file f;
    f.head();
    add_group3(f);
    f.u32(state_file::end_of_key_groups);
    f.u32(0);
    auto decoded = state_file::decode(f.file(state_file::version_without_channels, false));
    REQUIRE(decoded);
    CHECK(decoded->keyed.key_groups.at(3).values.at("v").at(7) == "val");
    // A body length, as version 3 had, is not part of versions 4 and 5.
    CHECK_FALSE(state_file::decode(f.file(state_file::version_without_channels, true)));
  }
  {
    hand_file f;
    f.head();
    add_group3(f);
    f.u32(0);  // no terminator
    CHECK_FALSE(state_file::decode(f.file(state_file::version_without_channels, false)));
  }
  {
    hand_file f;
    f.head();
    add_group3(f);
    add_group3(f);
    f.u32(state_file::end_of_key_groups);
    f.u32(0);
    auto twice = state_file::decode(f.file(state_file::version_without_channels, false));
    REQUIRE_FALSE(twice);
    CHECK_THAT(twice.err().message, Catch::Contains("not ascending"));
  }
  {
    hand_file f;
    f.head();
    f.u32(state_file::end_of_key_groups);
    f.u32(2);  // keyed state files flag
    CHECK_FALSE(state_file::decode(f.file(state_file::version_without_channels, false)));
  }
}

TEST_CASE("state file v5: channel state round-trips, streamed through a small buffer too; a bad "
          "side or a count beyond the file is refused") {
  subtask_snapshot s;
  s.operator_uid = "u";
  s.checkpoint = 4;
  s.channels.push_back({channel_side::input, 0, 2, {{1, 10, 100, "a"}, {2, 20, 200, ""}}});
  s.channels.push_back({channel_side::output, 1, 0, {}});
  s.channels.push_back(
      {channel_side::output, 1, 3, {{3, 30, -300, std::string(5'000, 'x')}}});
  CHECK_FALSE(s.empty());
  const std::string bytes = state_file::encode(s);
  auto decoded = state_file::decode(bytes);
  REQUIRE(decoded);
  CHECK(*decoded == s);
  CHECK(state_file::may_fit(s, bytes.size()));
  CHECK_FALSE(state_file::may_fit(s, 5'000));
  temp_folder dir;
  state_file_writer w(dir.path() / "c.state", 64);
  REQUIRE(w.head(s));
  auto written = w.finish(std::nullopt, s.channels);
  REQUIRE(written);
  auto read = state_file::read(written->handle);
  REQUIRE(read);
  CHECK(read->channels == s.channels);

  for (std::uint32_t side : {2u, 0xFFFFFFFFu}) {
    hand_file f;
    f.head();
    f.u32(state_file::end_of_key_groups);
    f.u32(0);
    f.u32(1);
    f.u32(side);
    f.u32(0);
    f.u32(0);
    f.u32(0);
    auto r = state_file::decode(f.file(state_file::version, false));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("side"));
  }
  hand_file many;
  many.head();
  many.u32(state_file::end_of_key_groups);
  many.u32(0);
  many.u32(1);
  many.u32(0);
  many.u32(0);
  many.u32(0);
  many.u32(1'000'000);  // records that are not there
  CHECK_FALSE(state_file::decode(many.file(state_file::version, false)));
}
