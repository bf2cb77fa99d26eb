#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "graph/record.hpp"

namespace snapflow {

// Keyed state as a user's process function sees it: scoped to the current record's key.
// Two levels: int64 values (what the built-in aggregations use) and the bytes the state backend
// stores, on which typed state (engine/api) serialises its own values. Value state and map state
// of one name are separate; clear() removes the value state only.
class keyed_context {
 public:
  virtual ~keyed_context() = default;
  virtual std::optional<std::int64_t> value(std::string_view state) const = 0;
  virtual void set_value(std::string_view state, std::int64_t v) = 0;
  virtual void clear(std::string_view state) = 0;

  virtual std::optional<std::string> value_bytes(std::string_view state) const = 0;
  virtual void set_value_bytes(std::string_view state, std::string_view bytes) = 0;
  virtual std::optional<std::string> map_get_bytes(std::string_view state,
                                                   std::string_view map_key) const = 0;
  virtual void map_put_bytes(std::string_view state, std::string_view map_key,
                             std::string_view bytes) = 0;
  virtual void map_remove(std::string_view state, std::string_view map_key) = 0;
  // The current key's entries of map state `state`, ordered by map key (bytewise).
  virtual std::vector<std::pair<std::string, std::string>> map_entries_bytes(
      std::string_view state) const = 0;

  // Timers of the current key (engine/time/timer_service.hpp), for a function that has an
  // on_timer callback (timed_process_function). `ns` tells the timers of one key apart (the
  // typed API puts the encoded user key there). Event time and the clock are in milliseconds.
  // A context without timers throws std::logic_error: a user function asked for what its
  // operator does not offer.
  virtual std::int64_t current_watermark() const { return no_timers(); }
  virtual std::int64_t processing_time_ms() const { return no_timers(); }
  virtual void register_event_time_timer(std::int64_t t, std::string_view ns) {
    (void)t, (void)ns, no_timers();
  }
  virtual void register_processing_time_timer(std::int64_t t, std::string_view ns) {
    (void)t, (void)ns, no_timers();
  }
  virtual void delete_event_time_timer(std::int64_t t, std::string_view ns) {
    (void)t, (void)ns, no_timers();
  }
  virtual void delete_processing_time_timer(std::int64_t t, std::string_view ns) {
    (void)t, (void)ns, no_timers();
  }

 private:
  [[noreturn]] static std::int64_t no_timers() {
    throw std::logic_error("timers need a keyed process function with an on_timer callback");
  }
};

enum class time_domain : std::uint8_t { event_time, processing_time };

// A timer that fired: its time, its domain, the namespace it was registered under and its key. The
// keyed context is scoped to the timer's key when on_timer runs.
struct fired_timer {
  std::int64_t timestamp = 0;
  time_domain domain = time_domain::event_time;
  std::string ns;
  std::uint64_t key = 0;  // record.key of the timer's key
};

using map_function = std::function<record(const record&)>;
using filter_function = std::function<bool(const record&)>;
using flat_map_function = std::function<void(const record&, std::vector<record>& out)>;
using key_function = std::function<std::uint64_t(const record&)>;
using process_function =
    std::function<void(const record&, keyed_context& state, std::vector<record>& out)>;
using timer_function =
    std::function<void(const fired_timer&, keyed_context& state, std::vector<record>& out)>;
// A keyed process function with timers (Flink's KeyedProcessFunction with onTimer). The output
// of on_timer carries the timer's time as its event timestamp unless it sets one.
struct timed_process_function {
  process_function process;
  timer_function on_timer;
};
// Event time from a record, and the watermarks that follow (engine/time/watermark_generator):
// bounded out-of-orderness per split of the source, idle splits left out after `idle_ms` of
// processing time without a record (0: never idle). `split` says which split a record came
// from (null: one split per subtask).
struct timestamp_assigner {
  std::function<std::int64_t(const record&)> timestamp;
  std::int64_t max_out_of_orderness_ms = 0;
  std::int64_t idle_ms = 0;
  std::function<std::uint32_t(const record&)> split;
  // A key selector fused into the assigner (graph/key_selector_fusion.hpp): the key of every
  // record it emits. Null: records keep their key.
  key_function key;
};

// How a list of operator (non-keyed) state is redistributed when a job restores (Flink's
// OperatorStateStore modes). The job's state is every old subtask's lists, old subtask by old
// subtask, each in its own order.
enum class list_redistribution : std::uint8_t {
  // getListState: the elements of all old subtasks, concatenated, are split into contiguous
  // parts of nearly equal size, one per new subtask. At unchanged parallelism each subtask
  // keeps its own list.
  even_split = 0,
  // getUnionListState: every new subtask receives every old subtask's elements.
  union_all = 1,
};

// Operator (non-keyed) list state as a user's non-keyed process function sees it: named lists
// of this subtask, their elements as bytes (the typed API's msgpack). A list's mode is fixed by
// its first use or by the checkpoint it was restored from; asking for it under the other mode
// throws std::logic_error.
class operator_state_context {
 public:
  virtual ~operator_state_context() = default;
  // The list `name`, created empty on first use. The reference stays valid until the operator
  // closes.
  virtual std::vector<std::string>& list_bytes(std::string_view name,
                                               list_redistribution mode) = 0;
  virtual std::uint32_t subtask_index() const = 0;
  virtual std::uint32_t parallelism() const = 0;
};

// A non-keyed process function with operator list state (Flink's ProcessFunction with
// CheckpointedFunction): `process` for each record, `end_input` (may be empty) once every input
// ended, to emit what the state still holds.
struct stateful_process_function {
  std::function<void(const record&, operator_state_context& state, std::vector<record>& out)>
      process;
  std::function<void(operator_state_context& state, std::vector<record>& out)> end_input;
};

// A C++ callable attached to a vertex. It lives only in the process that declared it (or in a
// custom worker binary that registers the same code under the vertex's uid): job files and the
// msgpack form of a job graph name operators by registered kind instead.
using user_function =
    std::variant<map_function, filter_function, flat_map_function, key_function, process_function,
                 timed_process_function, timestamp_assigner, stateful_process_function>;

}  // namespace snapflow
