#pragma once

#include <string>

#include "common/result.hpp"

namespace snapflow {

// One logger per process, on stderr (stdout is for machine-readable lines), naming the role and
// the pid on every line so interleaved logs of a local cluster stay readable. The level comes
// from `level` when given, else from SPDLOG_LEVEL (spdlog's syntax), else `fallback`. Becomes the
// default logger, so the engine's spdlog calls go through it too. `fallback` is the level when
// neither is set (the command line uses warn: its own output is what the user asked for).
result<void> setup_process_logging(const std::string& role, const std::string& level,
                                   const std::string& fallback = "info");

// Flushes the process logger at the end of main. The logger stays registered: objects destroyed
// after main's last statement (tasks, the data plane, state backends) may still log, and a
// dropped default logger would make those calls dereference null (spdlog::shutdown does that).
void flush_process_logging();

// The level names --log-level accepts, for --help.
const std::string& log_level_names();

}  // namespace snapflow
