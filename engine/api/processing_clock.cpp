#include "engine/api/processing_clock.hpp"

#include <chrono>

namespace snapflow::api {

namespace {

class system_clock final : public processing_clock {
 public:
  std::int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

std::shared_ptr<const processing_clock> processing_clock::system() {
  static const auto clock = std::make_shared<const system_clock>();
  return clock;
}

}  // namespace snapflow::api
