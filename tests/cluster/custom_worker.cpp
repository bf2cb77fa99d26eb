// A custom worker binary, as a user would build one: snapflow's worker plus operator kinds and
// an executor of its own.
#include <memory>

#include <spdlog/spdlog.h>

#include "cmd/worker_main.hpp"
#include "engine/runtime/stream_operator.hpp"
#include "transport/stub_task_executor.hpp"

namespace {

// value * 10. Deliberately left out of register_kinds: its role reaches the worker only through
// the job file's role = "transform", as for a kind the coordinator has never heard of.
class times_ten final : public snapflow::stream_operator {
 public:
  snapflow::result<void> process(const snapflow::record& r,
                                 snapflow::record_output& out) override {
    snapflow::record copy = r;
    copy.value *= 10;
    out.emit(std::move(copy));
    return snapflow::success();
  }
};

}  // namespace

int main(int argc, char** argv) {
  snapflow::worker_extensions extensions;
  extensions.program_name = "snapflow-test-custom-worker";
  extensions.description =
      "a worker with test_double_source, times_ten and the announcing-stub executor";
  extensions.register_operators = [](snapflow::operator_factory& operators) {
    operators.add("test_double_source", [](const snapflow::job_vertex&) {
      return snapflow::result<std::unique_ptr<snapflow::stream_operator>>(
          snapflow::error{"test_double_source only exists to be registered"});
    });
    operators.add("times_ten", [](const snapflow::job_vertex& vertex) {
      // The coordinator passes a custom kind's params unchecked; checking them is ours.
      if (!vertex.params.empty())
        return snapflow::result<std::unique_ptr<snapflow::stream_operator>>(
            snapflow::error{"times_ten takes no parameters"});
      return snapflow::result<std::unique_ptr<snapflow::stream_operator>>(
          std::unique_ptr<snapflow::stream_operator>(std::make_unique<times_ten>()));
    });
  };
  extensions.executors["announcing-stub"] = [](const snapflow::worker_context& context) {
    std::string kinds;
    for (const auto& kind : context.operators->kinds()) kinds += " " + kind;
    spdlog::info("announcing-stub executor for worker {}; operator kinds:{}", context.worker_id,
                 kinds);
    return snapflow::result<std::shared_ptr<snapflow::task_executor>>(
        std::make_shared<snapflow::transport::stub_task_executor>(context.listener,
                                                                   context.data_bind_address));
  };
  return snapflow::worker_main(argc, argv, std::move(extensions));
}
