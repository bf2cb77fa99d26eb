// The pieces of a user program (cmd/program.hpp) that need no cluster: the fingerprint, the job
// the program builds, and the worker's own refusal of another program's tasks.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cmd/program.hpp"
#include "cmd/program_fingerprint.hpp"
#include "cmd/program_guard_executor.hpp"
#include "engine/api/typed_api.hpp"
#include "graph/job_file.hpp"
#include "graph/job_file_writer.hpp"
#include "graph/job_graph_codec.hpp"

using namespace snapflow;
using namespace std::chrono_literals;

namespace {

struct item {
  std::int64_t n = 0;
  MSGPACK_DEFINE_MAP(n);
};

// A small typed job; `count` and `interval` shape it as a program's --arg would.
void small_job(api::typed_environment& typed, const program_args& args) {
  typed.env().set_job_name(args.get("name", "small"));
  typed.env().enable_checkpointing(std::chrono::milliseconds(args.get_int("interval", 100)));
  typed.generate(args.get_int("count", 10), [](std::int64_t n) { return item{n}; })
      .uid("items")
      .key_by([](const item& i) { return i.n % 3; })
      .process<item>([](const item& i, api::keyed_process_context<std::int64_t>&,
                        api::collector<item>& out) { out.collect(i); })
      .uid("keyed")
      .to_records([](const item& i) { return record{0, i.n, i.n, {}}; })
      .uid("records")
      .add_sink("print_sink")
      .uid("sink");
}

program_args args_of(std::map<std::string, std::string> values) {
  return program_args(std::move(values));
}

job_graph build(const program_args& args, const std::string& name = "small 1") {
  auto job = build_program_job(small_job, program_info{name, ""}, args);
  INFO((job ? std::string("ok") : job.err().message));
  REQUIRE(job.ok());
  return *job;
}

class recording_listener final : public task_executor_listener {
 public:
  void task_state_changed(const job_id&, const execution_attempt_id&, execution_state state,
                          const std::string& message) override {
    states.push_back(state);
    messages.push_back(message);
  }
  void acknowledge_checkpoint(const checkpoint_ack&) override {}
  void decline_checkpoint(const checkpoint_decline&) override {}
  std::vector<execution_state> states;
  std::vector<std::string> messages;
};

class recording_executor final : public task_executor {
 public:
  void deploy(const task_deployment_descriptor&) override { ++deployed; }
  void cancel(const job_id&, const execution_attempt_id&) override {}
  void trigger_checkpoint(const job_id&, const execution_attempt_id&, checkpoint_id,
                          std::int64_t, const checkpoint_options&) override {}
  void notify_checkpoint_complete(const job_id&, const execution_attempt_id&,
                                  checkpoint_id) override {}
  void notify_checkpoint_aborted(const job_id&, const execution_attempt_id&, checkpoint_id,
                                 checkpoint_id) override {}
  void cancel_all() override {}
  std::string data_endpoint() const override { return "tcp://127.0.0.1:1"; }
  int deployed = 0;
};

task_deployment_descriptor deployment_of(const job_graph& g) {
  task_deployment_descriptor d;
  d.job = "0123456789abcdef0123456789abcdef";
  d.job_graph_bytes = encode_job_graph(g);
  return d;
}

}  // namespace

TEST_CASE("a program's job names the program and its fingerprint and validates") {
  const job_graph g = build(program_args{});
  REQUIRE(g.program.has_value());
  CHECK(g.program->name == "small 1");
  CHECK(g.program->fingerprint == program_fingerprint(g, "small 1"));
  CHECK(g.program->fingerprint.size() == 64);
  CHECK_FALSE(validate(g, operator_registry::builtin()));
  CHECK(g.find_vertex_by_uid("keyed")->function);
}

TEST_CASE("the fingerprint follows the graph and the program, not the run's settings") {
  const std::string base = build(program_args{}).program->fingerprint;
  // Built again (another process would do the same): the same.
  CHECK(build(program_args{}).program->fingerprint == base);
  // Another job name or checkpoint interval: the same callables, the same fingerprint.
  CHECK(build(args_of({{"name", "renamed"}, {"interval", "7"}})).program->fingerprint ==
        base);
  // Another parameter, another program name or version: another fingerprint.
  CHECK(build(args_of({{"count", "11"}})).program->fingerprint != base);
  CHECK(build(program_args{}, "small 2").program->fingerprint != base);
  // Read back from the job file it submits (vertices numbered afresh): the same.
  const job_graph g = build(program_args{});
  auto text = write_job_file(g);
  REQUIRE(text.ok());
  auto parsed = parse_job_file(*text, "program.toml");
  REQUIRE(parsed.ok());
  CHECK(program_fingerprint(parsed.value(), "small 1") == base);
  CHECK(parsed.value().program->fingerprint == base);
}

TEST_CASE("a program that throws while building its job is an error, not a crash") {
  auto job = build_program_job(
      [](api::typed_environment&, const program_args& args) { (void)args.get_int("count", 1); },
      program_info{"p", ""}, args_of({{"count", "ten"}}));
  REQUIRE_FALSE(job.ok());
  CHECK(job.err().message.find("--arg count=ten") != std::string::npos);
  CHECK_FALSE(build_program_job(small_job, program_info{"", ""}, program_args{}).ok());
}

TEST_CASE("a worker refuses a task of a program it does not hold, naming both") {
  const job_graph mine = build(program_args{});
  const job_graph theirs = build(args_of({{"count", "99"}}));
  auto listener = std::make_shared<recording_listener>();
  auto inner = std::make_shared<recording_executor>();
  program_guard_executor guard(inner, listener,
                               {{mine.program->fingerprint, mine.program->name}});

  guard.deploy(deployment_of(theirs));
  CHECK(inner->deployed == 0);
  REQUIRE(listener->states.size() == 1);
  CHECK(listener->states[0] == execution_state::failed);
  CHECK(listener->messages[0].find(theirs.program->fingerprint) != std::string::npos);
  CHECK(listener->messages[0].find(mine.program->fingerprint) != std::string::npos);

  guard.deploy(deployment_of(mine));
  CHECK(inner->deployed == 1);
  // A job that names no program (built-in kinds only) runs here as anywhere.
  job_graph plain = theirs;
  plain.program.reset();
  guard.deploy(deployment_of(plain));
  CHECK(inner->deployed == 2);
  CHECK(listener->states.size() == 1);
}
