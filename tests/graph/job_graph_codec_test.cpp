#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "graph/job_graph_codec.hpp"
#include "graph/stream_environment.hpp"

using namespace snapflow;
using namespace std::chrono_literals;

namespace {

using packer = msgpack::packer<msgpack::sbuffer>;

// Every checkpoint_config field set away from its default, so a field the codec forgot to
// carry shows up as a difference.
checkpoint_config unusual_config() {
  checkpoint_config c;
  c.interval = 250ms;
  c.timeout = 7s;
  c.min_pause = 30ms;
  c.max_concurrent = 3;
  c.tolerable_failures = 5;
  c.mode = checkpointing_mode::at_least_once;
  c.unaligned = true;  // not a valid combination with at_least_once, but the codec must not care
  c.retained = 4;
  c.retention = externalized_retention::retain_on_cancellation;
  c.checkpoint_dir = "state/checkpoints";
  c.savepoint_dir = "state/savepoints";
  c.stats_history_size = 42;
  c.state_backend = "hashmap";
  c.incremental = true;
  c.max_in_flight_bytes = 12'345;
  c.buffer_debloat = true;
  c.buffer_debloat_target = 321ms;
  return c;
}

job_graph full_graph() {
  job_graph g;
  g.id = "0123456789abcdef0123456789abcdef";
  g.name = "every field";
  g.vertices = {
      {0, "numbers", "source", "sequence_source", {{"count", "100"}, {"keys", "7"}}, 2, 64, {}},
      {1, "lines", "lines", "line_source", {{"path", "in ñ.txt"}}, 1, 128, {}},
      {2, "plus", "plus", "map_add", {{"value", "-3"}}, 2, 64, {}},
      {3, "sum", "sum", "keyed_sum", {}, 4, 32768, {}},
      {4, "sink", "sink", "two_phase_commit_file_sink", {{"path", "out"}}, 4, 256, {}},
  };
  g.edges = {
      {0, 2, partitioning::forward},
      {1, 2, partitioning::broadcast},
      {2, 3, partitioning::hash},
      {3, 4, partitioning::rebalance},
  };
  g.checkpointing = job_checkpointing_settings{{0, 1}, {0, 1, 2, 3, 4}, {4, 3, 2, 1, 0},
                                               unusual_config()};
  return g;
}

msgpack::object_handle unpack_all(const std::string& bytes) {
  return msgpack::unpack(bytes.data(), bytes.size());
}

// Re-packs `object`, replacing the value at `path` (map keys, or "[i]" for array elements) by
// what `replace` packs, or dropping that map entry when `replace` is empty. `extra`, when set,
// is packed as one more entry of the map at `path` instead. This makes one-field mutations of
// a valid encoding without hand-writing whole frames.
struct mutation {
  std::vector<std::string> path;
  std::function<void(packer&)> replace;
  bool add_entry = false;  // add "replace" as a new key path.back() to the map at path[..-1]
};

void repack(packer& pk, const msgpack::object& o, const mutation& m, std::size_t depth) {
  const bool on_path = depth < m.path.size();
  if (o.type == msgpack::type::MAP) {
    const bool adding_here = m.add_entry && depth + 1 == m.path.size();
    std::uint32_t size = o.via.map.size + (adding_here ? 1 : 0);
    bool dropping = false;
    if (on_path && !m.add_entry && depth + 1 == m.path.size() && !m.replace) {
      dropping = true;
      --size;
    }
    pk.pack_map(size);
    for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
      const auto& kv = o.via.map.ptr[i];
      const std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
      const bool match = on_path && !adding_here && key == m.path[depth];
      if (match && dropping) continue;
      pk.pack(kv.key);
      if (match && depth + 1 == m.path.size())
        m.replace(pk);
      else if (match)
        repack(pk, kv.val, m, depth + 1);
      else
        repack(pk, kv.val, mutation{}, 0);
    }
    if (adding_here) {
      pk.pack(m.path.back());
      m.replace(pk);
    }
  } else if (o.type == msgpack::type::ARRAY) {
    pk.pack_array(o.via.array.size);
    for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
      const bool match = on_path && m.path[depth] == "[" + std::to_string(i) + "]";
      if (match && depth + 1 == m.path.size())
        m.replace(pk);
      else if (match)
        repack(pk, o.via.array.ptr[i], m, depth + 1);
      else
        repack(pk, o.via.array.ptr[i], mutation{}, 0);
    }
  } else {
    pk.pack(o);
  }
}

std::string mutate(const std::string& bytes, const mutation& m) {
  auto handle = unpack_all(bytes);
  msgpack::sbuffer buffer;
  packer pk(buffer);
  repack(pk, handle.get(), m, 0);
  return std::string(buffer.data(), buffer.size());
}

std::string with(const std::string& bytes, std::vector<std::string> path,
                 std::function<void(packer&)> replace) {
  return mutate(bytes, mutation{std::move(path), std::move(replace)});
}

std::string without(const std::string& bytes, std::vector<std::string> path) {
  return mutate(bytes, mutation{std::move(path), {}});
}

std::string decode_error_of(const std::string& bytes) {
  auto r = decode_job_graph(bytes);
  REQUIRE_FALSE(r.ok());
  return r.err().message;
}

template <typename T>
std::string describe(const result<T>& r) {
  return r.ok() ? std::string("ok") : "error: " + r.err().message;
}

std::string bytes_of(std::initializer_list<unsigned char> raw) {
  return std::string(raw.begin(), raw.end());
}

}  // namespace

TEST_CASE("a job graph with every field round trips through msgpack") {
  const job_graph g = full_graph();
  auto decoded = decode_job_graph(encode_job_graph(g));
  INFO(describe(decoded));
  REQUIRE(decoded.ok());
  CHECK(decoded.value() == g);
  CHECK(decoded->checkpointing->config == unusual_config());
}

TEST_CASE("a job graph built through stream_environment round trips through msgpack") {
  stream_environment env;
  env.set_job_name("env job").set_parallelism(3).enable_checkpointing(100ms);
  auto source = env.add_source("sequence_source", {{"count", "10"}});
  source.uid("source");
  source.key_by().sum().uid("sum").add_sink("print_sink").uid("sink");
  const job_graph g = env.build_job_graph();
  auto decoded = decode_job_graph(encode_job_graph(g));
  REQUIRE(decoded.ok());
  CHECK(decoded.value() == g);
  CHECK_FALSE(validate(decoded.value(), operator_registry::builtin()));
}

TEST_CASE("a job graph without checkpointing round trips with checkpointing absent") {
  job_graph g = full_graph();
  g.checkpointing.reset();
  auto decoded = decode_job_graph(encode_job_graph(g));
  REQUIRE(decoded.ok());
  CHECK_FALSE(decoded->checkpointing.has_value());
  CHECK(decoded.value() == g);
}

TEST_CASE("a checkpoint config without an interval encodes the interval as nil") {
  checkpoint_config c = unusual_config();
  c.interval.reset();
  const std::string bytes = encode_checkpoint_config(c);
  auto handle = unpack_all(bytes);
  const msgpack::object& map = handle.get();
  REQUIRE(map.type == msgpack::type::MAP);
  bool found = false;
  for (std::uint32_t i = 0; i < map.via.map.size; ++i)
    if (map.via.map.ptr[i].key.as<std::string>() == "interval_ms") {
      found = true;
      CHECK(map.via.map.ptr[i].val.type == msgpack::type::NIL);
    }
  CHECK(found);
  auto decoded = decode_checkpoint_config(bytes);
  REQUIRE(decoded.ok());
  CHECK_FALSE(decoded->interval.has_value());
  CHECK(decoded.value() == c);
}

TEST_CASE("checkpoint config helpers round trip every field and the defaults") {
  for (const checkpoint_config& c : {checkpoint_config{}, unusual_config()}) {
    auto decoded = decode_checkpoint_config(encode_checkpoint_config(c));
    REQUIRE(decoded.ok());
    CHECK(decoded.value() == c);
  }
}

TEST_CASE("incremental is written only when set, so other configs encode as before") {
  checkpoint_config c;
  const std::string plain = encode_checkpoint_config(c);
  CHECK(plain.find("incremental") == std::string::npos);
  c.incremental = true;
  const std::string with = encode_checkpoint_config(c);
  CHECK(with.find("incremental") != std::string::npos);
  auto decoded = decode_checkpoint_config(with);
  REQUIRE(decoded.ok());
  CHECK(decoded->incremental);
  auto old = decode_checkpoint_config(plain);
  REQUIRE(old.ok());
  CHECK_FALSE(old->incremental);
}

TEST_CASE("a job graph packed inside a larger message is read back from its object") {
  const job_graph g = full_graph();
  msgpack::sbuffer buffer;
  packer pk(buffer);
  pk.pack_map(3);
  pk.pack(std::string("v"));
  pk.pack(1);
  pk.pack(std::string("job"));
  pack_job_graph(pk, g);
  pk.pack(std::string("config"));
  pack_checkpoint_config(pk, unusual_config());
  const std::string frame(buffer.data(), buffer.size());

  std::size_t offset = 0;
  auto handle = msgpack::unpack(frame.data(), frame.size(), offset, nullptr, nullptr,
                                unpack_limit_for(frame.size()));
  const msgpack::object& envelope = handle.get();
  REQUIRE(envelope.type == msgpack::type::MAP);
  REQUIRE(envelope.via.map.size == 3);
  auto graph = read_job_graph(envelope.via.map.ptr[1].val);
  REQUIRE(graph.ok());
  CHECK(graph.value() == g);
  auto config = read_checkpoint_config(envelope.via.map.ptr[2].val);
  REQUIRE(config.ok());
  CHECK(config.value() == unusual_config());
}

TEST_CASE("the user function of a vertex is never serialized") {
  stream_environment env;
  env.add_source("sequence_source", {{"count", "10"}})
      .map([](const record& r) { return r; })
      .add_sink("print_sink");
  const job_graph g = env.build_job_graph();
  REQUIRE(g.vertices[1].function != nullptr);
  auto decoded = decode_job_graph(encode_job_graph(g));
  REQUIRE(decoded.ok());
  CHECK(decoded->vertices[1].kind == "user_map");
  CHECK(decoded->vertices[1].function == nullptr);
}

TEST_CASE("unknown keys are ignored when decoding so fields can be added later") {
  const std::string bytes = encode_job_graph(full_graph());
  auto at_root = mutate(bytes, {{"future_field"}, [](packer& pk) { pk.pack(12); }, true});
  auto in_vertex = mutate(bytes, {{"vertices", "[2]", "future_field"},
                                  [](packer& pk) { pk.pack_array(0); }, true});
  auto in_config = mutate(bytes, {{"checkpointing", "config", "future_field"},
                                  [](packer& pk) { pk.pack_nil(); }, true});
  for (const auto& variant : {at_root, in_vertex, in_config}) {
    auto decoded = decode_job_graph(variant);
    INFO(describe(decoded));
    REQUIRE(decoded.ok());
    CHECK(decoded.value() == full_graph());
  }
}

TEST_CASE("garbage bytes decode to an error, not a crash") {
  for (const std::string& garbage :
       {std::string(), std::string("hello, world"), bytes_of({0xc1}), bytes_of({0xff, 0x00, 0x13}),
        std::string(64, '\xc1')}) {
    auto decoded = decode_job_graph(garbage);
    CHECK_FALSE(decoded.ok());
    CHECK_FALSE(decode_checkpoint_config(garbage).ok());
  }
}

TEST_CASE("random bytes never crash or throw the decoders (seeded, replayable)") {
  const std::uint64_t seed = 20240611;
  std::mt19937_64 rng(seed);
  const std::string valid = encode_job_graph(full_graph());
  INFO("seed " << seed);
  for (int round = 0; round < 3000; ++round) {
    std::string bytes;
    if (round % 2 == 0) {
      // Pure noise, biased towards msgpack container and string headers.
      bytes.resize(rng() % 64);
      for (auto& b : bytes) b = static_cast<char>(rng() % 3 == 0 ? 0xd9 + rng() % 7 : rng());
    } else {
      // A valid frame with a few bytes flipped: gets further into the field walk.
      bytes = valid;
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    CHECK_NOTHROW(decode_job_graph(bytes));
    CHECK_NOTHROW(decode_checkpoint_config(bytes));
  }
}

TEST_CASE("every truncation of a valid frame is an error") {
  const std::string bytes = encode_job_graph(full_graph());
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    auto decoded = decode_job_graph(std::string_view(bytes).substr(0, size));
    REQUIRE_FALSE(decoded.ok());
  }
  CHECK_THAT(decode_error_of(bytes.substr(0, bytes.size() / 2)), Catch::Contains("truncated"));
}

TEST_CASE("bytes after the value are an error") {
  const std::string bytes = encode_job_graph(full_graph()) + "xx";
  CHECK_THAT(decode_error_of(bytes), Catch::Contains("2 unexpected bytes"));
}

TEST_CASE("a frame declaring a huge array is refused without allocating it") {
  // array32 declaring 4 billion elements: unlimited, msgpack-c would reserve ~100 GB first.
  const std::string frame = bytes_of({0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0});
  CHECK_THAT(decode_error_of(frame), Catch::Contains("more elements than its 6 bytes"));
}

TEST_CASE("a frame declaring a huge map is refused without allocating it") {
  const std::string frame = bytes_of({0xdf, 0x7f, 0xff, 0xff, 0xff, 0xc0, 0xc0});
  CHECK_THAT(decode_error_of(frame), Catch::Contains("more elements than"));
}

TEST_CASE("a frame declaring a huge string or binary is an error") {
  // The unpacker waits for the body before the limit applies, so these read as truncated.
  for (const std::string& frame : {bytes_of({0xdb, 0xff, 0xff, 0xff, 0xff, 'a', 'b'}),
                                   bytes_of({0xc6, 0xff, 0xff, 0xff, 0xff, 'a', 'b'}),
                                   bytes_of({0xc9, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'})}) {
    CHECK_FALSE(decode_job_graph(frame).ok());
    CHECK_FALSE(decode_checkpoint_config(frame).ok());
  }
}

TEST_CASE("a frame nested deeper than the limit is refused") {
  std::string frame(200, '\x91');  // fixarray of one element, 200 levels deep
  frame += '\xc0';
  CHECK_THAT(decode_error_of(frame), Catch::Contains("nested deeper than 8"));
}

TEST_CASE("unpack limits are sized to the frame") {
  const msgpack::unpack_limit limit = unpack_limit_for(1000);
  CHECK(limit.array() == 1000);
  CHECK(limit.map() == 500);
  CHECK(limit.str() == 1000);
  CHECK(limit.bin() == 1000);
  CHECK(limit.ext() == 1000);
  CHECK(limit.depth() == max_decode_depth);
}

TEST_CASE("a top level that is not a map is an error") {
  msgpack::sbuffer buffer;
  packer pk(buffer);
  pk.pack_array(0);
  const std::string frame(buffer.data(), buffer.size());
  CHECK(decode_error_of(frame) == "top-level value: expected a map, got an array");
}

TEST_CASE("a wrong field type is an error naming the field") {
  const std::string bytes = encode_job_graph(full_graph());
  auto text = [](packer& pk) { pk.pack(std::string("four")); };
  CHECK(decode_error_of(with(bytes, {"vertices", "[1]", "parallelism"}, text)) ==
        "field 'vertices[1].parallelism': expected a non-negative integer, got a string");
  CHECK(decode_error_of(with(bytes, {"name"}, [](packer& pk) { pk.pack(7); })) ==
        "field 'name': expected a string, got a non-negative integer");
  CHECK(decode_error_of(with(bytes, {"checkpointing", "config", "interval_ms"}, text)) ==
        "field 'checkpointing.config.interval_ms': expected an integer or nil, got a string");
  CHECK(decode_error_of(with(bytes, {"checkpointing", "config", "unaligned"},
                             [](packer& pk) { pk.pack(1); })) ==
        "field 'checkpointing.config.unaligned': expected a boolean, got a non-negative integer");
  CHECK(decode_error_of(with(bytes, {"vertices", "[0]", "params"},
                             [](packer& pk) { pk.pack_array(0); })) ==
        "field 'vertices[0].params': expected a map, got an array");
  CHECK_THAT(decode_error_of(with(bytes, {"vertices", "[0]", "params", "count"},
                                  [](packer& pk) { pk.pack(100); })),
             Catch::Contains("vertices[0].params.count") && Catch::Contains("expected a string"));
  CHECK(decode_error_of(with(bytes, {"checkpointing", "to_trigger", "[1]"}, text)) ==
        "field 'checkpointing.to_trigger[1]': expected a non-negative integer, got a string");
  CHECK(decode_error_of(with(bytes, {"edges"}, [](packer& pk) { pk.pack_nil(); })) ==
        "field 'edges': expected an array, got nil");
  CHECK(decode_error_of(with(bytes, {"vertices", "[3]"}, [](packer& pk) { pk.pack(3); })) ==
        "field 'vertices[3]': expected a map, got a non-negative integer");
}

TEST_CASE("numbers outside their field's range are errors naming the field") {
  const std::string bytes = encode_job_graph(full_graph());
  CHECK(decode_error_of(with(bytes, {"vertices", "[0]", "id"}, [](packer& pk) { pk.pack(-1); })) ==
        "field 'vertices[0].id': out of range for an unsigned 32-bit integer (got -1)");
  CHECK(decode_error_of(with(bytes, {"vertices", "[0]", "parallelism"},
                             [](packer& pk) { pk.pack(std::uint64_t{1} << 40); })) ==
        "field 'vertices[0].parallelism': out of range for an unsigned 32-bit integer (got "
        "1099511627776)");
  CHECK(decode_error_of(with(bytes, {"checkpointing", "config", "max_concurrent"},
                             [](packer& pk) { pk.pack(std::int64_t{-1} << 40); })) ==
        "field 'checkpointing.config.max_concurrent': out of range for a 32-bit integer (got "
        "-1099511627776)");
  CHECK(decode_error_of(with(bytes, {"checkpointing", "config", "timeout_ms"},
                             [](packer& pk) { pk.pack(~std::uint64_t{0}); })) ==
        "field 'checkpointing.config.timeout_ms': out of range for a 64-bit integer (got "
        "18446744073709551615)");
}

TEST_CASE("enum values out of range are errors naming the field") {
  const std::string bytes = encode_job_graph(full_graph());
  CHECK(decode_error_of(with(bytes, {"edges", "[0]", "partitioning"},
                             [](packer& pk) { pk.pack(9); })) ==
        "field 'edges[0].partitioning': unknown value 9 (expected 0 to 3)");
  CHECK(decode_error_of(with(bytes, {"checkpointing", "config", "mode"},
                             [](packer& pk) { pk.pack(2); })) ==
        "field 'checkpointing.config.mode': unknown value 2 (expected 0 to 1)");
  CHECK(decode_error_of(with(bytes, {"checkpointing", "config", "retention"},
                             [](packer& pk) { pk.pack(-1); })) ==
        "field 'checkpointing.config.retention': out of range for an unsigned 32-bit integer "
        "(got -1)");
}

TEST_CASE("a missing field is an error naming it") {
  const std::string bytes = encode_job_graph(full_graph());
  CHECK(decode_error_of(without(bytes, {"name"})) == "field 'name': missing");
  CHECK(decode_error_of(without(bytes, {"vertices", "[4]", "kind"})) ==
        "field 'vertices[4].kind': missing");
  CHECK(decode_error_of(without(bytes, {"checkpointing", "config", "state_backend"})) ==
        "field 'checkpointing.config.state_backend': missing");
  CHECK(decode_error_of(without(bytes, {"checkpointing"})) == "field 'checkpointing': missing");
}

TEST_CASE("references to unknown or duplicate vertex ids are errors") {
  const std::string bytes = encode_job_graph(full_graph());
  CHECK(decode_error_of(with(bytes, {"edges", "[2]", "target"}, [](packer& pk) { pk.pack(77); })) ==
        "field 'edges[2].target': no vertex has id 77");
  CHECK(decode_error_of(with(bytes, {"vertices", "[3]", "id"}, [](packer& pk) { pk.pack(1); })) ==
        "field 'vertices[3].id': duplicate vertex id 1");
  CHECK(decode_error_of(with(bytes, {"checkpointing", "to_confirm", "[0]"},
                             [](packer& pk) { pk.pack(12); })) ==
        "field 'checkpointing.to_confirm[0]': no vertex has id 12");
}

TEST_CASE("a checkpoint config with a wrong field type is an error naming the field") {
  const std::string bytes = encode_checkpoint_config(unusual_config());
  auto r = decode_checkpoint_config(
      with(bytes, {"stats_history_size"}, [](packer& pk) { pk.pack(std::string("ten")); }));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().message == "field 'stats_history_size': expected an integer, got a string");
  auto top = decode_checkpoint_config(bytes_of({0x90}));
  REQUIRE_FALSE(top.ok());
  CHECK(top.err().message == "top-level value: expected a map, got an array");
}

TEST_CASE("a parameter map with a repeated key is an error naming the map") {
  const std::string bytes = encode_job_graph(full_graph());
  const std::string repeated = mutate(
      bytes, {{"vertices", "[0]", "params", "count"},
              [](packer& pk) { pk.pack(std::string("5")); }, true});
  CHECK(decode_error_of(repeated) == "field 'vertices[0].params': duplicate key 'count'");
}
