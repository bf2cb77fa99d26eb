#include "cmd/process_logging.hpp"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <optional>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace snapflow {

namespace {

struct level_name {
  const char* name;
  spdlog::level::level_enum level;
};

constexpr std::array<level_name, 9> levels{{{"trace", spdlog::level::trace},
                                            {"debug", spdlog::level::debug},
                                            {"info", spdlog::level::info},
                                            {"warn", spdlog::level::warn},
                                            {"warning", spdlog::level::warn},
                                            {"error", spdlog::level::err},
                                            {"err", spdlog::level::err},
                                            {"critical", spdlog::level::critical},
                                            {"off", spdlog::level::off}}};

}  // namespace

const std::string& log_level_names() {
  static const std::string names = "trace, debug, info, warn, error, critical, off";
  return names;
}

result<void> setup_process_logging(const std::string& role, const std::string& level,
                                   const std::string& fallback) {
  const auto parse = [](const std::string& name) -> std::optional<spdlog::level::level_enum> {
    for (const auto& l : levels)
      if (name == l.name) return l.level;
    return std::nullopt;
  };
  std::optional<spdlog::level::level_enum> chosen;
  if (!level.empty()) {
    chosen = parse(level);
    if (!chosen) return error{"unknown log level '" + level + "' (use " + log_level_names() + ")"};
  }
  const auto otherwise = parse(fallback);
  if (!otherwise)
    return error{"unknown log level '" + fallback + "' (use " + log_level_names() + ")"};
  auto logger = spdlog::stderr_color_mt(role);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ " + role + "[" + std::to_string(::getpid()) +
                      "] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(*otherwise);
  if (chosen)
    spdlog::set_level(*chosen);
  else if (std::getenv("SPDLOG_LEVEL") != nullptr)
    spdlog::cfg::load_env_levels();
  // Warnings and worse reach the terminal at once even when a process is killed right after.
  spdlog::flush_on(spdlog::level::warn);
  return success();
}

void flush_process_logging() {
  if (const auto logger = spdlog::default_logger()) logger->flush();
}

}  // namespace snapflow
