#include "engine/checkpoint/master_hook.hpp"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <utility>

namespace snapflow {

namespace {
bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}
}  // namespace

result<void> master_hook_registry::add(std::shared_ptr<master_hook> hook) {
  assert(hook != nullptr);
  std::string name = hook->name();
  if (blank(name)) return error{"master hook name must not be blank ('" + name + "')"};
  if (find(name) != nullptr)
    return error{"a master hook named '" + name + "' is already registered"};
  hooks_.push_back(std::move(hook));
  return success();
}

master_hook* master_hook_registry::find(std::string_view name) const {
  for (const auto& hook : hooks_)
    if (hook->name() == name) return hook.get();
  return nullptr;
}

result<void> master_hook_registry::restore(checkpoint_id id,
                                           const std::map<std::string, std::string>& states,
                                           bool allow_unknown) {
  if (!allow_unknown) {
    for (const auto& [name, _] : states)
      if (find(name) == nullptr)
        return error{"checkpoint " + std::to_string(id) + " has state for master hook '" + name +
                     "', which this job does not have"};
  }
  for (const auto& hook : hooks_) {
    const std::string name = hook->name();
    auto it = states.find(name);
    if (it == states.end()) continue;
    if (auto r = hook->restore(id, it->second); !r)
      return error{"master hook '" + name + "' failed to restore checkpoint " +
                   std::to_string(id) + ": " + r.err().message};
  }
  return success();
}

}  // namespace snapflow
