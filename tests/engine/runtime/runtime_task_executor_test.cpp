// runtime_task_executor as a custom worker uses it: operator kinds of its own beside the
// built-in ones. A custom keyed kind must get keyed state, snapshot it and restore it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/runtime_task_executor.hpp"
#include "engine/runtime/state_file.hpp"
#include "engine/state/int64_state_value.hpp"
#include "graph/job_file.hpp"
#include "graph/job_graph_codec.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

using namespace snapflow;
using runtime_test::temp_folder;

namespace {

constexpr std::int64_t record_count = 1000;
constexpr std::int64_t key_count = 8;
const std::string endpoint = "mem://this-worker";

// Every channel in memory: both ends of a key share one local_channel, whichever is opened
// first (what the network data plane does for subtasks of one worker).
class memory_channels final : public channel_factory {
 public:
  std::shared_ptr<output_channel> open_output(const channel_key& key,
                                              const channel_peer&) override {
    return get(key);
  }
  std::shared_ptr<input_channel> open_input(const channel_key& key, const channel_peer&) override {
    return get(key);
  }
  std::string data_endpoint() const override { return endpoint; }

 private:
  std::shared_ptr<local_channel> get(const channel_key& key) {
    std::lock_guard lock(mutex_);
    auto& c = channels_[key];
    if (!c) c = std::make_shared<local_channel>(4);
    return c;
  }
  std::mutex mutex_;
  std::map<channel_key, std::shared_ptr<local_channel>> channels_;
};

// Everything tasks report, with bounded waits (condition variable, no sleeps).
class recording_executor_listener final : public task_executor_listener {
 public:
  void task_state_changed(const job_id&, const execution_attempt_id& attempt,
                          execution_state state, const std::string& message) override {
    std::lock_guard lock(mutex_);
    states_[attempt] = state;
    if (state == execution_state::failed) failures_ += message + "\n";
    cv_.notify_all();
  }
  void acknowledge_checkpoint(const checkpoint_ack& ack) override {
    std::lock_guard lock(mutex_);
    acks_.push_back(ack);
    cv_.notify_all();
  }
  void decline_checkpoint(const checkpoint_decline& d) override {
    std::lock_guard lock(mutex_);
    failures_ += "declined: " + d.message + "\n";
    cv_.notify_all();
  }
  void source_exhausted(const job_id&, const execution_attempt_id&, checkpoint_id) override {
    std::lock_guard lock(mutex_);
    ++exhausted_;
    cv_.notify_all();
  }

  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return pred(); });
  }
  bool wait_exhausted(std::size_t n) {
    return wait([&] { return exhausted_ >= n; });
  }
  bool wait_acks(checkpoint_id id, std::size_t n) {
    return wait([&] { return acks_of_locked(id).size() >= n; });
  }
  bool wait_all(std::size_t n, execution_state s) {
    return wait([&] {
      std::size_t k = 0;
      for (const auto& [_, st] : states_)
        if (st == s) ++k;
      return k >= n;
    });
  }
  std::vector<checkpoint_ack> acks_of(checkpoint_id id) {
    std::lock_guard lock(mutex_);
    return acks_of_locked(id);
  }
  std::string failures() {
    std::lock_guard lock(mutex_);
    return failures_;
  }

 private:
  std::vector<checkpoint_ack> acks_of_locked(checkpoint_id id) const {
    std::vector<checkpoint_ack> out;
    for (const auto& a : acks_)
      if (a.id == id) out.push_back(a);
    return out;
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<execution_attempt_id, execution_state> states_;
  std::vector<checkpoint_ack> acks_;
  std::size_t exhausted_ = 0;
  std::string failures_;
};

// A custom keyed kind: counts records per key in keyed value state "tally". Refuses to run
// without keyed state (what happened when the executor knew only the built-in kinds' roles).
class tally_operator final : public stream_operator {
 public:
  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>&) override {
    if (context.keyed_state == nullptr) return error{"test_tally needs keyed state"};
    state_ = context.keyed_state;
    return success();
  }
  result<void> process(const record& r, record_output& out) override {
    const std::int64_t n = state_->value("tally").value_or(0) + 1;
    state_->set_value("tally", n);
    record copy = r;
    copy.value = n;
    out.emit(std::move(copy));
    return success();
  }

 private:
  keyed_state_backend* state_ = nullptr;
};

std::shared_ptr<operator_factory> custom_factory() {
  auto f = std::make_shared<operator_factory>(operator_factory::builtin());
  f->add("test_tally", [](const job_vertex&) -> result<std::unique_ptr<stream_operator>> {
    return std::unique_ptr<stream_operator>(std::make_unique<tally_operator>());
  });
  return f;
}

std::shared_ptr<operator_registry> custom_registry() {
  auto r = std::make_shared<operator_registry>(operator_registry::builtin());
  r->add({"test_tally", operator_role::keyed, {}, "counts records per key"});
  return r;
}

const std::string job_text =
    "[job]\nname = \"custom keyed\"\nparallelism = 2\nmax_parallelism = 128\n\n"
    "[checkpointing]\ninterval_ms = 60000\nmode = \"exactly_once\"\n\n"
    "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\nparallelism = 1\n"
    "params = { count = 1000, keys = 8 }\n\n"
    "[[operator]]\nuid = \"tally\"\nkind = \"test_tally\"\ninput = \"source\"\n"
    "partition = \"hash\"\nparallelism = 2\n\n"
    "[[operator]]\nuid = \"sink\"\nkind = \"discard_sink\"\ninput = \"tally\"\n"
    "partition = \"forward\"\nparallelism = 2\n";

// The same job as a coordinator that knows only the built-in kinds sees it: test_tally named
// with its role, which reaches the executor as job_vertex::custom_role.
std::string job_text_with_role() {
  std::string text = job_text;
  const std::string kind = "kind = \"test_tally\"\n";
  text.insert(text.find(kind) + kind.size(), "role = \"keyed\"\n");
  return text;
}

struct deployment {
  job_graph graph;
  std::vector<execution_attempt_id> attempts;
  execution_attempt_id source;
  vertex_id tally = 0;
};

deployment plan(const operator_registry& registry, std::uint32_t attempt,
                const std::string& text = job_text) {
  auto parsed = parse_job_file(text, "custom.toml", registry);
  INFO((parsed ? std::string() : parsed.error().what()));
  REQUIRE(parsed);
  deployment d;
  d.graph = std::move(parsed).value();
  for (const auto& v : d.graph.vertices) {
    if (v.uid == "tally") d.tally = v.id;
    for (std::uint32_t i = 0; i < v.parallelism; ++i) {
      execution_attempt_id a{subtask_id{v.id, i}, attempt};
      d.attempts.push_back(a);
      if (v.uid == "source") d.source = a;
    }
  }
  return d;
}

task_deployment_descriptor descriptor(const deployment& d, const execution_attempt_id& a) {
  task_deployment_descriptor t;
  t.job = d.graph.id;
  t.attempt = a;
  t.job_graph_bytes = encode_job_graph(d.graph);
  for (const auto& other : d.attempts) t.subtask_endpoints[other.subtask] = endpoint;
  return t;
}

// keyed state "tally" of every key in the state files of `acks` (tally subtasks only).
std::map<std::uint64_t, std::int64_t> tallies(const std::vector<checkpoint_ack>& acks,
                                              vertex_id tally) {
  std::map<std::uint64_t, std::int64_t> out;
  for (const auto& ack : acks) {
    if (ack.attempt.subtask.vertex != tally) continue;
    for (const auto& handle : ack.state.handles) {
      auto snapshot = state_file::read(handle);
      REQUIRE(snapshot);
      for (const auto& [group, state] : snapshot->keyed.key_groups) {
        auto it = state.values.find("tally");
        if (it == state.values.end()) continue;
        for (const auto& [key, n] : it->second) out[key] += *decode_int64_state(n);
      }
    }
  }
  return out;
}

// `declared_role`: the job names test_tally with role = "keyed" and is parsed against the
// built-in registry, as a stock coordinator does.
// `state_backend`: the job's checkpoint_config::state_backend.
void run_custom_keyed_kind(std::shared_ptr<const operator_registry> executor_registry,
                           bool declared_role = false,
                           const std::string& state_backend = "hashmap") {
  temp_folder dir;
  const auto custom = custom_registry();
  const operator_registry& registry = declared_role ? operator_registry::builtin() : *custom;
  std::string text = declared_role ? job_text_with_role() : job_text;
  const std::string mode = "mode = \"exactly_once\"\n";
  text.insert(text.find(mode) + mode.size(), "state_backend = \"" + state_backend + "\"\n");
  const auto local = dir.path() / "local";
  // The working folders of the rocksdb backend's instances open now.
  const auto open_instances = [&] {
    const auto root = local / "rocksdb";
    if (!std::filesystem::exists(root)) return std::size_t{0};
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(root),
                                                  std::filesystem::directory_iterator()));
  };
  deployment first = plan(registry, 0, text);
  if (declared_role) {
    const job_vertex* tally = first.graph.find_vertex(first.tally);
    REQUIRE(tally != nullptr);
    CHECK(tally->custom_role == operator_role::keyed);
  }
  const job_id job = first.graph.id;

  // First deployment: every record counted, then checkpoint 1 after the last one.
  // Per vertex, per old subtask index.
  std::map<vertex_id, std::map<std::uint32_t, subtask_state>> restore_states;
  std::map<std::uint64_t, std::int64_t> counted;
  {
    auto listener = std::make_shared<recording_executor_listener>();
    runtime_task_executor_options options;
    options.operators = custom_factory();
    options.registry = executor_registry;
    options.local_state_dir = local;
    runtime_task_executor executor(listener, std::make_shared<memory_channels>(), options);
    for (const auto& a : first.attempts) executor.deploy(descriptor(first, a));
    REQUIRE(listener->wait_exhausted(1));
    INFO(listener->failures());
    CHECK(listener->failures().empty());
    // One per tally subtask, while they run (made before a task reports RUNNING).
    REQUIRE(listener->wait_all(first.attempts.size(), execution_state::running));
    CHECK(open_instances() == (state_backend == "rocksdb" ? 2u : 0u));
    checkpoint_options cp;
    cp.target_location = (dir.path() / "chk-1").string();
    std::filesystem::create_directories(cp.target_location);
    executor.trigger_checkpoint(job, first.source, 1, 1, cp);
    REQUIRE(listener->wait_acks(1, first.attempts.size()));
    const auto acks = listener->acks_of(1);
    counted = tallies(acks, first.tally);
    for (const auto& ack : acks)
      restore_states[ack.attempt.subtask.vertex][ack.attempt.subtask.index] = ack.state;

    executor.notify_checkpoint_complete(job, first.source, 1);
    executor.finish(job, first.source);
    REQUIRE(listener->wait_all(first.attempts.size(), execution_state::finished));
    // The source handled the notification before it finished: the next heartbeat reports it.
    std::vector<checkpoint_notified> notified;
    for (const auto& c : executor.take_io_counters())
      if (c.attempt == first.source) notified = c.notified;
    REQUIRE(notified.size() == 1);
    CHECK(notified[0].id == 1);
    // Ended tasks leave no working folder behind.
    CHECK(open_instances() == 0);
  }
  // Every key's count is in checkpoint 1's keyed state.
  REQUIRE(counted.size() == static_cast<std::size_t>(key_count));
  for (const auto& [key, n] : counted) {
    INFO("key " << key);
    CHECK(n == record_count / key_count);
  }

  // Restart from checkpoint 1: the keyed state comes back and the next checkpoint has it.
  deployment second = plan(registry, 1, text);
  second.graph.id = job;
  auto listener = std::make_shared<recording_executor_listener>();
  runtime_task_executor_options options;
  options.operators = custom_factory();
  options.registry = executor_registry;
  options.local_state_dir = local;
  runtime_task_executor executor(listener, std::make_shared<memory_channels>(), options);
  for (const auto& a : second.attempts) {
    auto t = descriptor(second, a);
    t.restore_checkpoint_id = 1;
    t.restore_states = restore_states[a.subtask.vertex];
    executor.deploy(t);
  }
  REQUIRE(listener->wait_exhausted(1));
  checkpoint_options cp;
  cp.target_location = (dir.path() / "chk-2").string();
  std::filesystem::create_directories(cp.target_location);
  executor.trigger_checkpoint(job, second.source, 2, 2, cp);
  REQUIRE(listener->wait_acks(2, second.attempts.size()));
  INFO(listener->failures());
  CHECK(tallies(listener->acks_of(2), second.tally) == counted);
  executor.finish(job, second.source);
  REQUIRE(listener->wait_all(second.attempts.size(), execution_state::finished));
  CHECK(open_instances() == 0);
}

}  // namespace

TEST_CASE("a custom keyed kind in the executor's registry gets keyed state, snapshotted and "
          "restored") {
  run_custom_keyed_kind(custom_registry());
}

TEST_CASE("a custom keyed kind keeps its state in rocksdb when the job asks for it, snapshotted "
          "and restored") {
  run_custom_keyed_kind(custom_registry(), false, "rocksdb");
}

TEST_CASE("a worker's default local folder for working files is its own and goes with it") {
  std::filesystem::path root;
  {
    auto listener = std::make_shared<recording_executor_listener>();
    runtime_task_executor_options options;
    options.operators = custom_factory();
    options.registry = custom_registry();
    runtime_task_executor executor(listener, std::make_shared<memory_channels>(), options);
    std::string text = job_text;
    const std::string mode = "mode = \"exactly_once\"\n";
    text.insert(text.find(mode) + mode.size(), "state_backend = \"rocksdb\"\n");
    deployment d = plan(*custom_registry(), 0, text);
    for (const auto& a : d.attempts) executor.deploy(descriptor(d, a));
    REQUIRE(listener->wait_all(d.attempts.size(), execution_state::running));
    INFO(listener->failures());
    CHECK(listener->failures().empty());
    // <temp>/snapflow-worker-<pid>-<n>/rocksdb/<job>-<vertex>-<subtask>-<attempt>
    const std::string prefix = "snapflow-worker-" + std::to_string(::getpid()) + "-";
    for (const auto& e :
         std::filesystem::directory_iterator(std::filesystem::temp_directory_path())) {
      if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
      if (std::filesystem::exists(e.path() / "rocksdb")) root = e.path();
    }
    REQUIRE_FALSE(root.empty());
    CHECK(std::distance(std::filesystem::directory_iterator(root / "rocksdb"),
                        std::filesystem::directory_iterator()) == 2);
    executor.cancel_all();
  }
  CHECK_FALSE(std::filesystem::exists(root));
}

TEST_CASE("a custom kind missing from the registry but fed only by hash edges gets keyed state") {
  // Only the built-in registry: the role is inferred from the job's edges.
  run_custom_keyed_kind(nullptr);
}

TEST_CASE("a custom kind the registry lacks takes its role from the job graph's custom_role") {
  // Parsed by a coordinator that knows only the built-in kinds, run by an executor that does
  // not know test_tally's shape either: role = "keyed" in the job file is what gives it state.
  run_custom_keyed_kind(nullptr, true);
}

TEST_CASE("a worker refuses a deployment whose file path lies outside its data roots") {
  temp_folder dir;
  const auto root = dir.path() / "data";
  std::filesystem::create_directories(root);
  const auto outside = dir.path() / "elsewhere";
  std::filesystem::create_directories(outside);
  std::filesystem::create_symlink(outside, root / "link-out");
  const std::vector<std::string> refused_paths = {
      (outside / "out").string(),              // absolute, elsewhere
      (root / ".." / "elsewhere").string(),    // `..` out
      "../elsewhere",                          // relative, climbing out of the first root
      (root / "link-out" / "out").string(),    // through a symlink that leads out
  };
  for (const auto& path : refused_paths) {
    INFO("path " << path);
    const std::string text =
        "[job]\nname = \"confined\"\nparallelism = 1\n\n"
        "[[operator]]\nuid = \"source\"\nkind = \"sequence_source\"\n"
        "params = { count = 10 }\n\n"
        "[[operator]]\nuid = \"sink\"\nkind = \"file_sink\"\ninput = \"source\"\n"
        "params = { path = \"" + path + "\" }\n";
    auto parsed = parse_job_file(text, "confined.toml");
    REQUIRE(parsed);
    job_graph graph = std::move(parsed).value();
    const job_vertex* sink = nullptr;
    for (const auto& v : graph.vertices)
      if (v.uid == "sink") sink = &v;
    REQUIRE(sink != nullptr);
    auto listener = std::make_shared<recording_executor_listener>();
    runtime_task_executor_options options;
    options.data_roots = {root.string()};
    runtime_task_executor executor(listener, std::make_shared<memory_channels>(), options);
    task_deployment_descriptor d;
    d.job = graph.id;
    d.attempt = execution_attempt_id{subtask_id{sink->id, 0}, 0};
    d.job_graph_bytes = encode_job_graph(graph);
    executor.deploy(d);
    REQUIRE(listener->wait_all(1, execution_state::failed));
    CHECK_THAT(listener->failures(), Catch::Contains("refused by this worker") &&
                                         Catch::Contains("outside the allowed roots") &&
                                         Catch::Contains(root.string()));
  }
}
