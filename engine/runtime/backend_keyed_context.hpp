#pragma once

#include "engine/state/keyed_state_backend.hpp"
#include "engine/time/timer_service.hpp"
#include "graph/user_function.hpp"

namespace snapflow {

// A user's keyed_context over the task's keyed_state_backend: every access is for the
// backend's current key (the task sets it from record.key before each record), and so is
// stored, checkpointed and redistributed by key group with all other keyed state.
class backend_keyed_context final : public keyed_context {
 public:
  // `timers`: the operator's timer service, for a function with timers (null: none).
  explicit backend_keyed_context(keyed_state_backend& backend, timer_service* timers = nullptr)
      : backend_(backend), timers_(timers) {}

  std::optional<std::int64_t> value(std::string_view state) const override;
  void set_value(std::string_view state, std::int64_t v) override;
  void clear(std::string_view state) override;

  std::optional<std::string> value_bytes(std::string_view state) const override;
  void set_value_bytes(std::string_view state, std::string_view bytes) override;
  std::optional<std::string> map_get_bytes(std::string_view state,
                                           std::string_view map_key) const override;
  void map_put_bytes(std::string_view state, std::string_view map_key,
                     std::string_view bytes) override;
  void map_remove(std::string_view state, std::string_view map_key) override;
  std::vector<std::pair<std::string, std::string>> map_entries_bytes(
      std::string_view state) const override;

  std::int64_t current_watermark() const override;
  std::int64_t processing_time_ms() const override;
  void register_event_time_timer(std::int64_t t, std::string_view ns) override;
  void register_processing_time_timer(std::int64_t t, std::string_view ns) override;
  void delete_event_time_timer(std::int64_t t, std::string_view ns) override;
  void delete_processing_time_timer(std::int64_t t, std::string_view ns) override;

 private:
  timer_service& timers() const;

  keyed_state_backend& backend_;
  timer_service* timers_;
};

}  // namespace snapflow
