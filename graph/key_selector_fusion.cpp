#include "graph/key_selector_fusion.hpp"

#include <tuple>
#include <type_traits>
#include <utility>

namespace snapflow {

namespace {

// Keys what a callable appended to `out` from `first` on.
void key_from(std::vector<record>& out, std::size_t first, const key_function& key) {
  for (std::size_t i = first; i < out.size(); ++i) out[i].key = key(out[i]);
}

// A callable that appends to its last argument, `out`, wrapped to key what it appended.
template <typename Fn>
Fn keying(Fn fn, key_function key) {
  if (!fn) return fn;
  return [fn = std::move(fn), key = std::move(key)](auto&&... args) {
    std::vector<record>& out = std::get<sizeof...(args) - 1>(std::tie(args...));
    const std::size_t first = out.size();
    fn(std::forward<decltype(args)>(args)...);
    key_from(out, first, key);
  };
}

}  // namespace

std::shared_ptr<const user_function> with_key_selector(const user_function& producer,
                                                       key_function key) {
  return std::visit(
      [&](const auto& fn) -> std::shared_ptr<const user_function> {
        using F = std::decay_t<decltype(fn)>;
        if constexpr (std::is_same_v<F, map_function>) {
          map_function keyed = [fn, key](const record& r) {
            record out = fn(r);
            out.key = key(out);
            return out;
          };
          return std::make_shared<const user_function>(std::move(keyed));
        } else if constexpr (std::is_same_v<F, flat_map_function> ||
                             std::is_same_v<F, process_function>) {
          return std::make_shared<const user_function>(F(keying(fn, key)));
        } else if constexpr (std::is_same_v<F, timed_process_function>) {
          return std::make_shared<const user_function>(
              F{keying(fn.process, key), keying(fn.on_timer, key)});
        } else if constexpr (std::is_same_v<F, stateful_process_function>) {
          return std::make_shared<const user_function>(
              F{keying(fn.process, key), keying(fn.end_input, key)});
        } else if constexpr (std::is_same_v<F, timestamp_assigner>) {
          if (fn.key) return nullptr;  // keyed already
          F keyed = fn;
          keyed.key = key;
          return std::make_shared<const user_function>(std::move(keyed));
        } else {
          return nullptr;  // a filter's records are its input's; a key selector's are keyed
        }
      },
      producer);
}

}  // namespace snapflow
