#include "engine/runtime/backend_keyed_context.hpp"

#include <chrono>
#include <stdexcept>

namespace snapflow {

std::optional<std::int64_t> backend_keyed_context::value(std::string_view state) const {
  return backend_.value(state);
}
void backend_keyed_context::set_value(std::string_view state, std::int64_t v) {
  backend_.set_value(state, v);
}
void backend_keyed_context::clear(std::string_view state) { backend_.clear_value(state); }

std::optional<std::string> backend_keyed_context::value_bytes(std::string_view state) const {
  return backend_.value_bytes(state);
}
void backend_keyed_context::set_value_bytes(std::string_view state, std::string_view bytes) {
  backend_.set_value_bytes(state, bytes);
}
std::optional<std::string> backend_keyed_context::map_get_bytes(std::string_view state,
                                                                std::string_view map_key) const {
  return backend_.map_get_bytes(state, map_key);
}
void backend_keyed_context::map_put_bytes(std::string_view state, std::string_view map_key,
                                          std::string_view bytes) {
  backend_.map_put_bytes(state, map_key, bytes);
}
void backend_keyed_context::map_remove(std::string_view state, std::string_view map_key) {
  backend_.map_remove(state, map_key);
}
std::vector<std::pair<std::string, std::string>> backend_keyed_context::map_entries_bytes(
    std::string_view state) const {
  return backend_.map_entries_bytes(state);
}

}  // namespace snapflow

namespace snapflow {

timer_service& backend_keyed_context::timers() const {
  if (timers_ == nullptr)
    throw std::logic_error("timers need a keyed process function with an on_timer callback");
  return *timers_;
}

std::int64_t backend_keyed_context::current_watermark() const {
  return timers().current_watermark();
}

std::int64_t backend_keyed_context::processing_time_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void backend_keyed_context::register_event_time_timer(std::int64_t t, std::string_view ns) {
  timers().register_timer(time_domain::event_time, t, ns);
}

void backend_keyed_context::register_processing_time_timer(std::int64_t t, std::string_view ns) {
  timers().register_timer(time_domain::processing_time, t, ns);
}

void backend_keyed_context::delete_event_time_timer(std::int64_t t, std::string_view ns) {
  timers().delete_timer(time_domain::event_time, t, ns);
}

void backend_keyed_context::delete_processing_time_timer(std::int64_t t, std::string_view ns) {
  timers().delete_timer(time_domain::processing_time, t, ns);
}

}  // namespace snapflow
