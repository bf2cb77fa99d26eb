// Where the coordinator writes _metadata: inline only after a run of fast writes, never for a
// savepoint or a large checkpoint, and back to the pool after one slow write.
#include <catch2/catch.hpp>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/metadata_write_placement.hpp"

using namespace snapflow;
using namespace std::chrono_literals;

namespace {

completed_checkpoint small_checkpoint(std::size_t subtasks = 4, std::size_t inline_bytes = 16) {
  completed_checkpoint c;
  c.job = "0123456789abcdef0123456789abcdef";
  c.id = 7;
  c.location = "/state/job/chk-7";
  for (std::uint32_t i = 0; i < subtasks; ++i) {
    subtask_state s;
    s.handles.push_back({"", inline_bytes, 0, std::string(inline_bytes, 'x')});
    s.state_size = inline_bytes;
    c.subtask_states[{0, i}] = s;
  }
  return c;
}

metadata_write_placement::options settings(std::chrono::microseconds inline_max,
                                           std::size_t window) {
  metadata_write_placement::options o;
  o.inline_max = inline_max;
  o.window = window;
  return o;
}

}  // namespace

TEST_CASE("metadata placement: the pool until `window` fast writes in a row, then inline") {
  metadata_write_placement p(settings(500us, 3));
  const auto c = small_checkpoint();
  CHECK_FALSE(p.write_inline(c));  // nothing measured yet
  p.record(100us);
  p.record(499us);
  CHECK_FALSE(p.write_inline(c));
  p.record(20us);
  CHECK(p.write_inline(c));
  p.record(30us);  // more fast writes keep it inline
  CHECK(p.write_inline(c));
}

TEST_CASE("metadata placement: one slow write sends the next `window` writes to the pool") {
  metadata_write_placement p(settings(500us, 2));
  const auto c = small_checkpoint();
  p.record(10us);
  p.record(10us);
  REQUIRE(p.write_inline(c));
  p.record(500us);  // at the limit counts as slow
  CHECK_FALSE(p.write_inline(c));
  p.record(10us);
  CHECK_FALSE(p.write_inline(c));
  p.record(10us);
  CHECK(p.write_inline(c));
  p.record(25ms);  // an fsync stall
  CHECK_FALSE(p.write_inline(c));
}

TEST_CASE("metadata placement: savepoints and large metadata always go to the pool") {
  metadata_write_placement p(settings(500us, 1));
  p.record(1us);
  auto savepoint = small_checkpoint();
  savepoint.kind = checkpoint_trigger_kind::savepoint;
  CHECK_FALSE(p.write_inline(savepoint));

  const auto many_subtasks = small_checkpoint(2000);
  CHECK(estimated_metadata_bytes(many_subtasks) > p.settings().inline_max_bytes);
  CHECK_FALSE(p.write_inline(many_subtasks));

  const auto big_inline_states = small_checkpoint(4, 32 * 1024);
  CHECK_FALSE(p.write_inline(big_inline_states));
  CHECK(p.write_inline(small_checkpoint()));
}

TEST_CASE("metadata placement: inline_max 0 keeps every write on the pool") {
  metadata_write_placement p(settings(0us, 1));
  for (int i = 0; i < 10; ++i) p.record(0us);
  CHECK_FALSE(p.write_inline(small_checkpoint()));
}

TEST_CASE("metadata placement: the estimate covers the encoded metadata") {
  // The estimate must not undercount, or a large checkpoint could be encoded on the event
  // thread: compare with the real encoding's size for a few shapes.
  for (std::size_t subtasks : {1u, 10u, 100u})
    for (std::size_t bytes : {0u, 100u, 4000u}) {
      const auto c = small_checkpoint(subtasks, bytes);
      CHECK(estimated_metadata_bytes(c) >= checkpoint_storage::encode_metadata(c).size());
    }
}
