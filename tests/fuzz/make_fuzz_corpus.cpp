// Writes the committed seed corpus of the fuzz targets: small valid inputs made by the real
// encoders, and near-valid ones (truncated, a forged length, a wrong version, a broken
// checksum) that stop at different checks. Deterministic, so rerunning it after a format change
// shows the change as a diff.
//
//   fuzz_corpus_maker <corpus folder>     (normally tests/fuzz/corpus)
//
// Job file inputs are written by hand in job_files below; everything else is encoded here.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/crc32c.hpp"
#include "engine/runtime/state_file.hpp"
#include "graph/job_file.hpp"
#include "graph/job_graph_codec.hpp"
#include "transport/data/data_frame.hpp"
#include "transport/envelope.hpp"

namespace {

namespace fs = std::filesystem;
using namespace snapflow;

void write(const fs::path& folder, const std::string& name, const std::string& bytes) {
  fs::create_directories(folder);
  std::ofstream out(folder / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const std::string job_id_text = "0123456789abcdef0123456789abcdef";

const std::vector<std::pair<std::string, std::string>> job_files = {
    {"exactly_once_sum.toml", R"([job]
name = "exactly-once-sum"
parallelism = 4
max_parallelism = 128

[checkpointing]
interval_ms = 100
mode = "exactly_once"

[[operator]]
uid = "source"
kind = "sequence_source"
parallelism = 2
params = { count = 1000000, keys = 16 }

[[operator]]
uid = "sum"
kind = "keyed_sum"
input = "source"
partition = "hash"
parallelism = 4

[[operator]]
uid = "sink"
kind = "two_phase_commit_file_sink"
input = "sum"
parallelism = 4
params = { path = "out/exactly-once-sum" }
)"},
    {"every_setting.toml", R"([job]
name = "every setting"
parallelism = 2
max_parallelism = 64

[checkpointing]
interval_ms = 50
mode = "at_least_once"
timeout_ms = 20000
min_pause_ms = 10
max_concurrent = 2
tolerable_failures = 3
retained = 2
retention = "retain_on_cancellation"
checkpoint_dir = "state"
savepoint_dir = "savepoints"
stats_history_size = 20
state_backend = "hashmap"

[[operator]]
uid = "lines"
kind = "line_source"
name = "read lines"
params = { path = "in.txt" }

[[operator]]
uid = "numbers"
kind = "sequence_source"
parallelism = 1
[operator.params]
count = 100
keys = 4
rate = 10
start = 5

[[operator]]
uid = "words"
kind = "flat_map_split_words"
input = "lines"
partition = "rebalance"

[[operator]]
uid = "both"
kind = "map_identity"
inputs = ["words", "numbers"]
partition = "broadcast"

[[operator]]
uid = "out"
kind = "print_sink"
input = "both"
)"},
    {"minimal.toml",
     "[[operator]]\nuid = \"s\"\nkind = \"sequence_source\"\nparams = { count = 1 "
     "}\n\n[[operator]]\nuid = \"p\"\nkind = \"print_sink\"\ninput = \"s\"\n"},
    {"unknown_kind.toml", "[[operator]]\nuid = \"s\"\nkind = \"no_such_kind\"\n"},
    {"cycle.toml",
     "[[operator]]\nuid = \"a\"\nkind = \"map_identity\"\ninput = \"b\"\n\n"
     "[[operator]]\nuid = \"b\"\nkind = \"map_identity\"\ninput = \"a\"\n"},
    {"bad_values.toml",
     "[job]\nparallelism = 0\n[checkpointing]\ntimeout_ms = -1\nmode = \"twice\"\n"
     "[[operator]]\nuid = \"\"\nkind = 3\n"},
    {"syntax_error.toml", "[job\nname = \"unclosed\n[[operator]]\nuid = 's'\nkind = "},
    {"restart.toml",
     "[restart]\nstrategy = \"exponential_backoff\"\nmax_attempts = 5\n"
     "initial_backoff_ms = 10\nmax_backoff_ms = 1000\nbackoff_multiplier = 1.5\n"
     "reset_backoff_after_ms = 60000\n"
     "[[operator]]\nuid = \"s\"\nkind = \"sequence_source\"\nparams = { count = 5 }\n"},
    {"custom_kinds.toml",
     "[[operator]]\nuid = \"s\"\nkind = \"my_source\"\nrole = \"source\"\n"
     "params = { topic = \"t\", partitions = 3, compacted = true }\n\n"
     "[[operator]]\nuid = \"k\"\nkind = \"my_agg\"\nrole = \"keyed\"\ninput = \"s\"\n\n"
     "[[operator]]\nuid = \"p\"\nkind = \"print_sink\"\nrole = \"sink\"\ninput = \"k\"\n"},
};

job_graph sample_graph(bool checkpointing) {
  auto parsed = parse_job_file(job_files[0].second, "sample.toml");
  if (!parsed) {
    std::cerr << parsed.error().what() << "\n";
    std::exit(1);
  }
  job_graph g = std::move(parsed.value());
  g.id = job_id_text;  // the parser makes a random one: keep the corpus stable
  if (!checkpointing) g.checkpointing.reset();
  return g;
}

std::vector<std::pair<std::string, wire::message>> messages() {
  const execution_attempt_id attempt{{1, 2}, 3};
  wire::deploy_task deploy;
  deploy.job = job_id_text;
  deploy.attempt = attempt;
  deploy.job_graph = encode_job_graph(sample_graph(true));
  deploy.subtask_endpoints = {{{0, 0}, "tcp://127.0.0.1:5555"}, {{1, 2}, "ipc://data-1"}};
  deploy.restore_checkpoint_id = 7;
  deploy.restore_states = {{2, {{"chk-7/op-2", 120, 0xdeadbeef}}, 120}};
  deploy.checkpoint_dir = "state/job";
  wire::trigger_checkpoint trigger;
  trigger.job = job_id_text;
  trigger.attempt = attempt;
  trigger.checkpoint = 8;
  trigger.timestamp_ms = 1'700'000'000'000;
  trigger.is_savepoint = true;
  trigger.savepoint_dir = "savepoints";
  trigger.target_location = "savepoints/savepoint-012345-8";
  wire::acknowledge_checkpoint ack;
  ack.job = job_id_text;
  ack.attempt = attempt;
  ack.checkpoint = 8;
  // One handle carries its state inline (bin bytes), so mutations reach that field too.
  ack.state_handles = {{"chk-8/a", 10, 1}, {"chk-8/b", 20, 2, std::string("\x01\x02inline", 8)}};
  ack.state_size_bytes = 30;
  ack.sync_duration_us = 5;
  ack.async_duration_us = 70;
  ack.alignment_duration_us = 3;
  ack.bytes_processed_during_alignment = 4096;
  return {
      {"register_worker", wire::register_worker{"worker-1", 4, "tcp://127.0.0.1:6000", 1, 4242}},
      {"register_ack", wire::register_ack{true, "", 500, 5000}},
      {"not_registered", wire::not_registered{"the coordinator restarted"}},
      {"heartbeat", wire::heartbeat{"coordinator", 1'700'000'000'123}},
      {"heartbeat_tasks",
       wire::heartbeat{"worker-1", 1'700'000'000'123,
                       std::vector<wire::task_io>{
                           {job_id_text, attempt, 12, 34,
                            std::vector<wire::checkpoint_notified>{{7, 1'700'000'000'100'000},
                                                                   {8, 1'700'000'000'110'000}}},
                           {job_id_text, attempt, 56, 78, std::nullopt}}}},
      {"deploy_task", deploy},
      {"cancel_task", wire::cancel_task{job_id_text, attempt}},
      {"task_state_update",
       wire::task_state_update{job_id_text, attempt, wire::task_state::failed, "boom"}},
      {"trigger_checkpoint", trigger},
      {"acknowledge_checkpoint", ack},
      {"decline_checkpoint",
       wire::decline_checkpoint{job_id_text, attempt, 9, "checkpoint_declined_subsumed", "newer"}},
      {"notify_checkpoint_complete", wire::notify_checkpoint_complete{job_id_text, attempt, 8}},
      {"notify_checkpoint_aborted",
       wire::notify_checkpoint_aborted{job_id_text, attempt, 9, std::optional<checkpoint_id>(8)}},
      {"source_exhausted", wire::source_exhausted{job_id_text, attempt, 8}},
      {"finish_task", wire::finish_task{job_id_text, attempt}},
      {"trigger_checkpoint_batch",
       wire::trigger_checkpoint_batch{job_id_text, 8, 1'700'000'000'000, false, "",
                                      checkpointing_mode::exactly_once, false, "chk-8",
                                      {attempt, {{1, 3}, 3}, {{1, 4}, 0}}}},
      {"acknowledge_checkpoint_batch",
       wire::acknowledge_checkpoint_batch{
           {ack, wire::acknowledge_checkpoint{job_id_text, {{1, 3}, 3}, 8}}}},
      {"notify_checkpoint_complete_batch",
       wire::notify_checkpoint_complete_batch{job_id_text, 8, {attempt, {{1, 3}, 3}}}},
      {"notify_checkpoint_aborted_batch",
       wire::notify_checkpoint_aborted_batch{job_id_text, 9, std::optional<checkpoint_id>(8),
                                             {attempt, {{1, 3}, 3}}}},
  };
}

// A frame encode() would never write: map-keyed like the real ones, with a twist.
std::string hand_frame(int variant) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  switch (variant) {
    case 0:  // a newer protocol version
      pk.pack_map(3);
      pk.pack("v"), pk.pack(99);
      pk.pack("t"), pk.pack("heartbeat");
      pk.pack("sender"), pk.pack("w");
      break;
    case 1:  // an unknown message type plus an unknown key
      pk.pack_map(3);
      pk.pack("v"), pk.pack(1);
      pk.pack("t"), pk.pack("teleport");
      pk.pack("extra"), pk.pack_array(0);
      break;
    default:  // a string that declares far more bytes than follow
      pk.pack_map(2);
      pk.pack("v"), pk.pack(1);
      pk.pack("t");
      buffer.write("\xdb\x7f\xff\xff\xff", 5);
      break;
  }
  return std::string(buffer.data(), buffer.size());
}

completed_checkpoint sample_checkpoint(checkpoint_trigger_kind kind) {
  completed_checkpoint c;
  c.job = job_id_text;
  c.id = 12;
  c.kind = kind;
  c.trigger_timestamp_us = 1'700'000'000'000'000;
  c.completion_timestamp_us = 1'700'000'000'250'000;
  c.location = "state/" + job_id_text + "/chk-12";
  c.subtask_states[{0, 0}] = {{{"chk-12/source-0", 16, 0x1234}}, 16};
  c.subtask_states[{2, 1}] = {{{"chk-12/sink-1-a", 100, 7}, {"chk-12/sink-1-b", 28, 8}}, 128};
  c.master_states["offsets"] = std::string("\x00\x01\xff", 3);
  return c;
}

// A data-plane frame with every kind of element.
data::data_frame sample_data_frame() {
  data::data_frame f;
  f.key = {job_id_text, 1, 0, 2, 1, 3};
  f.seq = 77;
  f.elements.push_back(record{42, 1001, -5, "payload"});
  f.elements.push_back(record{7, 1002, 1'000'000'000'000, ""});
  checkpoint_barrier b;
  b.id = 12;
  b.timestamp_us = 1'700'000'000'000'000;
  b.options.unaligned = true;
  b.options.target_location = "state/chk-12";
  f.elements.push_back(b);
  f.elements.push_back(end_of_input{});
  return f;
}

// A subtask snapshot with operator state, value and map states over three key groups (empty
// values and NUL bytes among them) and, when `with_files`, a keyed state files section.
subtask_snapshot sample_subtask_snapshot(bool with_files) {
  subtask_snapshot s;
  s.operator_uid = "sum";
  s.subtask_index = 1;
  s.parallelism = 2;
  s.checkpoint = 7;
  s.operator_state.push_back({"splits", std::string("\0\1", 2)});
  s.keyed.max_parallelism = 128;
  for (std::uint32_t group : {64u, 65u, 127u}) {
    s.keyed.key_groups[group].values["sum"][group * 10] = std::string("\0\0\0\0\0\0\0\5", 8);
    s.keyed.key_groups[group].values["sum"][group * 10 + 1] = "";
    s.keyed.key_groups[group].maps["words"][group]["w"] = "x";
  }
  if (with_files)
    s.keyed_files = keyed_state_files{128, 64, 127, {{"000012.sst", "x-000012.sst", 10, 7, true}}};
  return s;
}

// A version 3 state file (a body length and a key group count up front), as written before
// version 4: one key group 3 with value state "v" {7 -> "val"}.
std::string version_3_state_file() {
  std::string body;
  const auto u32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  const auto str = [&](std::string_view t) {
    u32(static_cast<std::uint32_t>(t.size()));
    body.append(t);
  };
  str("h");
  u32(0);
  u32(1);
  u32(9);  // checkpoint id, an i64
  u32(0);
  u32(0);  // operator state
  u32(16);
  u32(1);  // key groups
  u32(3);
  u32(1);
  str("v");
  u32(1);
  u32(7);  // key, a u64
  u32(0);
  str("val");
  u32(0);  // map states
  u32(0);  // no keyed state files
  std::string out(state_file::magic);
  const std::string b = std::move(body);
  body.clear();
  u32(3);
  u32(static_cast<std::uint32_t>(b.size()));
  u32(0);
  out += body + b;
  const std::uint32_t crc = crc32c(out);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_corpus_maker <corpus folder>\n";
    return 2;
  }
  const fs::path root = argv[1];

  const fs::path wire_dir = root / "wire_decode";
  for (const auto& [name, m] : messages()) write(wire_dir, name + ".bin", wire::encode(m));
  // By name: an index went stale once before, when a message was added ahead of it.
  const auto all = messages();
  const auto trigger_entry = std::find_if(all.begin(), all.end(), [](const auto& entry) {
    return entry.first == "trigger_checkpoint";
  });
  if (trigger_entry == all.end()) return 1;
  const std::string trigger = wire::encode(trigger_entry->second);
  write(wire_dir, "truncated_trigger.bin", trigger.substr(0, trigger.size() - 5));
  write(wire_dir, "future_version.bin", hand_frame(0));
  write(wire_dir, "unknown_type.bin", hand_frame(1));
  write(wire_dir, "forged_length.bin", hand_frame(2));

  const fs::path data_dir = root / "data_frame";
  const data::data_frame records = sample_data_frame();
  const std::string records_bytes = data::encode(records);
  write(data_dir, "records_barrier_end.bin", records_bytes);
  write(data_dir, "credit.bin", data::encode(data::credit_frame{records.key, 4096}));
  write(data_dir, "credit_bound.bin", data::encode(data::credit_frame{records.key, 4096, 65536}));
  write(data_dir, "empty.bin", data::encode(data::data_frame{records.key, 3, {}}));
  write(data_dir, "truncated.bin", records_bytes.substr(0, records_bytes.size() - 7));

  for (const auto& [name, text] : job_files) write(root / "job_file", name, text);

  const fs::path graph_dir = root / "job_graph";
  const std::string with = encode_job_graph(sample_graph(true));
  write(graph_dir, "with_checkpointing.bin", with);
  write(graph_dir, "without_checkpointing.bin", encode_job_graph(sample_graph(false)));
  write(graph_dir, "truncated.bin", with.substr(0, with.size() / 2));
  job_graph dangling = sample_graph(false);
  dangling.edges.push_back({0, 77, partitioning::rebalance});
  write(graph_dir, "unknown_vertex_edge.bin", encode_job_graph(dangling));
  job_graph restarting = sample_graph(true);
  restarting.restart.emplace();
  restarting.restart->type = restart_strategy_config::kind::failure_rate;
  restarting.restart->backoff_multiplier = 1.5;
  write(graph_dir, "with_restart.bin", encode_job_graph(restarting));
  write(graph_dir, "checkpoint_config.bin",
        encode_checkpoint_config(sample_graph(true).checkpointing->config));

  const fs::path meta_dir = root / "checkpoint_metadata";
  const std::string meta =
      checkpoint_storage::encode_metadata(sample_checkpoint(checkpoint_trigger_kind::periodic));
  write(meta_dir, "checkpoint.bin", meta);
  write(meta_dir, "savepoint.bin",
        checkpoint_storage::encode_metadata(sample_checkpoint(checkpoint_trigger_kind::savepoint)));
  completed_checkpoint empty;
  empty.job = job_id_text;
  empty.id = 1;
  write(meta_dir, "empty.bin", checkpoint_storage::encode_metadata(empty));
  write(meta_dir, "torn.bin", meta.substr(0, meta.size() - 9));
  std::string bad_crc = meta;
  bad_crc.back() = static_cast<char>(bad_crc.back() ^ 0x5a);
  write(meta_dir, "bad_checksum.bin", bad_crc);

  const fs::path state_dir = root / "state_file";
  const std::string state = state_file::encode(sample_subtask_snapshot(false));
  write(state_dir, "keyed.bin", state);
  write(state_dir, "keyed_with_files.bin", state_file::encode(sample_subtask_snapshot(true)));
  subtask_snapshot operator_only;
  operator_only.operator_uid = "source";
  operator_only.parallelism = 1;
  operator_only.operator_state.push_back({"offset", "42"});
  write(state_dir, "operator_only.bin", state_file::encode(operator_only));
  write(state_dir, "version_3.bin", version_3_state_file());
  write(state_dir, "torn.bin", state.substr(0, state.size() - 9));
  std::string bad_state_crc = state;
  bad_state_crc.back() = static_cast<char>(bad_state_crc.back() ^ 0x5a);
  write(state_dir, "bad_checksum.bin", bad_state_crc);

  std::cout << "corpus written to " << root.string() << "\n";
  return 0;
}
