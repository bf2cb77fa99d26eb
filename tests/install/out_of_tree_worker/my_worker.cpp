// A worker with an operator kind of its own, built outside the snapflow tree against the
// installed package. It runs every built-in kind too, through the default runtime executor.
#include <memory>

#include <spdlog/spdlog.h>

#include "cmd/worker_main.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/stream_operator.hpp"

namespace {

// value * 10: the smallest useful custom operator.
class times_ten final : public snapflow::stream_operator {
 public:
  snapflow::result<void> process(const snapflow::record& r, snapflow::record_output& out) override {
    snapflow::record copy = r;
    copy.value *= 10;
    out.emit(std::move(copy));
    return snapflow::success();
  }
};

}  // namespace

int main(int argc, char** argv) {
  snapflow::worker_extensions extensions;
  extensions.program_name = "my_worker";
  extensions.description = "a snapflow worker with the times_ten operator";
  extensions.register_operators = [](snapflow::operator_factory& operators) {
    operators.add("times_ten", [](const snapflow::job_vertex&) {
      return snapflow::result<std::unique_ptr<snapflow::stream_operator>>(
          std::unique_ptr<snapflow::stream_operator>(std::make_unique<times_ten>()));
    });
    spdlog::info("my_worker: registered operator kinds: times_ten and the built-in ones");
  };
  return snapflow::worker_main(argc, argv, std::move(extensions));
}
