#include "engine/state/key_group_walk.hpp"

#include <string>

namespace snapflow {

void neutral_key_group_walk::walk(key_group_visitor& visitor) const {
  visitor.value_states(state_.values.size());
  for (const auto& [name, keys] : state_.values) {
    visitor.value_state(name, keys.size());
    for (const auto& [key, bytes] : keys) visitor.value(key, bytes);
  }
  visitor.map_states(state_.maps.size());
  for (const auto& [name, keys] : state_.maps) {
    visitor.map_state(name, keys.size());
    for (const auto& [key, entries] : keys) {
      visitor.map_key(key, entries.size());
      for (const auto& [map_key, bytes] : entries) visitor.map_entry(map_key, bytes);
    }
  }
}

namespace {

class collecting_visitor final : public key_group_visitor {
 public:
  explicit collecting_visitor(key_group_state& out) : out_(out) {}
  void value_states(std::size_t) override {}
  void value_state(std::string_view name, std::size_t keys) override {
    values_ = &out_.values[std::string(name)];
    values_->reserve(keys);
  }
  void value(std::uint64_t key, std::string_view bytes) override {
    values_->emplace(key, std::string(bytes));
  }
  void map_states(std::size_t) override {}
  void map_state(std::string_view name, std::size_t keys) override {
    maps_ = &out_.maps[std::string(name)];
    maps_->reserve(keys);
  }
  void map_key(std::uint64_t key, std::size_t) override { entries_ = &(*maps_)[key]; }
  void map_entry(std::string_view map_key, std::string_view bytes) override {
    entries_->emplace(std::string(map_key), std::string(bytes));
  }

 private:
  key_group_state& out_;
  std::unordered_map<std::uint64_t, std::string>* values_ = nullptr;
  std::unordered_map<std::uint64_t, std::map<std::string, std::string>>* maps_ = nullptr;
  std::map<std::string, std::string>* entries_ = nullptr;
};

}  // namespace

key_group_state collect_key_group(const key_group_walk& walk) {
  key_group_state out;
  collecting_visitor visitor(out);
  walk.walk(visitor);
  return out;
}

}  // namespace snapflow
