// Typed job graphs build: the example of docs/api.md (kept compiling and valid), and a typed
// source given a parallelism of its own.
#include <catch2/catch.hpp>

#include "engine/api/typed_api.hpp"

namespace {

struct click {
  std::string user;
  std::int64_t seq = 0;
  MSGPACK_DEFINE_MAP(user, seq);
};
struct user_count {
  std::string user;
  std::int64_t count = 0;
  MSGPACK_DEFINE_MAP(user, count);
};

}  // namespace

TEST_CASE("docs example: the typed job of docs/api.md builds a valid job graph") {
  namespace api = snapflow::api;

  snapflow::stream_environment env;
  env.enable_checkpointing(std::chrono::seconds(1));
  api::typed_environment typed(env);

  typed.generate(1'000'000,
                 [](std::int64_t n) { return click{"user-" + std::to_string(n % 100), n}; })
      .filter([](const click& c) { return c.seq % 10 != 0; })
      .key_by([](const click& c) { return c.user; })
      .process<user_count>([](const click& c, api::keyed_process_context<std::string>& ctx,
                              api::collector<user_count>& out) {
        auto count = ctx.get_state<std::int64_t>("count");
        count.update(count.value_or(0) + 1);
        out.collect(user_count{c.user, *count.value()});
      })
      .to_records([](const user_count& u) {
        return snapflow::record{api::hash_of_key(u.user), 0, u.count, {}};
      })
      .add_sink("two_phase_commit_file_sink", {{"path", "out/counts"}});

  snapflow::job_graph job = env.build_job_graph();
  CHECK(job.vertices.size() == 7);  // source, generate, filter, key_by, process, to_records, sink
}

TEST_CASE("typed graph: a generated stream may take a parallelism of its own") {
  snapflow::stream_environment env;
  snapflow::api::typed_environment typed(env);
  auto numbers = typed.generate(10, [](std::int64_t n) { return n; });
  numbers.set_parallelism(3);
  numbers.sink([](std::int64_t) {});
  CHECK_NOTHROW(env.build_job_graph());
}
