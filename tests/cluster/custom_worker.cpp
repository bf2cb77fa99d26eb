// A custom worker binary, as a user would build one: snapflow's worker plus an operator kind and
// an executor of its own.
#include <spdlog/spdlog.h>

#include "cmd/worker_main.hpp"
#include "transport/stub_task_executor.hpp"

int main(int argc, char** argv) {
  snapflow::worker_extensions extensions;
  extensions.program_name = "snapflow-test-custom-worker";
  extensions.description = "a worker with test_double_source and the announcing-stub executor";
  extensions.register_operators = [](snapflow::operator_factory& operators) {
    operators.add("test_double_source", [](const snapflow::job_vertex&) {
      return snapflow::result<std::unique_ptr<snapflow::stream_operator>>(
          snapflow::error{"test_double_source only exists to be registered"});
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
