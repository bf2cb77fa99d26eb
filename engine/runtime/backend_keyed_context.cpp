#include "engine/runtime/backend_keyed_context.hpp"

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
