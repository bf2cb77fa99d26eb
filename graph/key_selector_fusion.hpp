#pragma once

#include <memory>

#include "graph/user_function.hpp"

namespace snapflow {

// Key selectors run in the operator that feeds them, as Flink runs a keyBy's selector in its
// input's partitioner: stream_graph::to_job_graph folds a user_key_by into its input's callable
// when that input is a user operator with no other output, at the same parallelism, so records
// leave it keyed and cross one task less. It does so in the submitting process and in a
// program's workers alike, so both see the same vertices and callables.

// `producer` with `key` applied to every record it emits (record.key = key(record)), or null if
// its kind has no records of its own to key (a filter passes its input through).
std::shared_ptr<const user_function> with_key_selector(const user_function& producer,
                                                       key_function key);

}  // namespace snapflow
