#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/api/codec.hpp"
#include "engine/api/data_stream.hpp"
#include "graph/stream_environment.hpp"

namespace snapflow::api {

// The typed entry point over a stream_environment (which still holds the job's settings:
// parallelism, checkpointing, state backend, and builds the job graph). Typed sources are the
// runtime's sources of sequence numbers with a decoder after them, so they keep what those
// sources guarantee: splits, offsets in checkpoints, exactly-once replay.
class typed_environment {
 public:
  explicit typed_environment(stream_environment& env) : env_(&env) {}

  stream_environment& env() const { return *env_; }

  // gen: T(std::int64_t n), called for each sequence number `source` (a sequence_source, or a
  // kind that emits like one) produces. The generating operator takes the source's parallelism
  // (read forward, in order); given another one later, it reads the source round robin.
  template <typename F>
  auto from_sequence(snapflow::data_stream source, F gen, std::string name = "generate") {
    using T = std::decay_t<std::invoke_result_t<F&, std::int64_t>>;
    map_function make = [gen = std::move(gen)](const record& r) {
      return record{r.key, r.seq, r.value, encode(gen(r.seq))};
    };
    auto typed = source.map(std::move(make), std::move(name));
    follow_input(*env_, source.id(), typed.id());
    return data_stream<T>(*env_, typed);
  }

  // gen(0) .. gen(count - 1) from a sequence_source.
  template <typename F>
  auto generate(std::int64_t count, F gen, std::string name = "generate") {
    auto source = env_->add_source("sequence_source", {{"count", std::to_string(count)}});
    return from_sequence(source, std::move(gen), std::move(name));
  }

  // The elements of `items`, each once.
  template <typename T>
  data_stream<T> from_collection(std::vector<T> items, std::string name = "collection") {
    auto shared = std::make_shared<const std::vector<T>>(std::move(items));
    return generate(
        static_cast<std::int64_t>(shared->size()),
        [shared](std::int64_t n) { return shared->at(static_cast<std::size_t>(n)); },
        std::move(name));
  }

  // Records some other operator produced, read as T (their payloads must hold one).
  template <typename T>
  data_stream<T> from_records(snapflow::data_stream raw) const {
    return data_stream<T>(*env_, raw);
  }

 private:
  stream_environment* env_;
};

}  // namespace snapflow::api
