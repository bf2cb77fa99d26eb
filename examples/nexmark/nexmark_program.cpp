// Nexmark's queries as a user program (cmd/program.hpp): the one binary submits a query's job
// (`nexmark_program submit --coordinator HOST:PORT --arg query=q3`) and runs its workers
// (`nexmark_program worker ...` with the same --arg values). Each query's rows go to the
// exactly-once two-phase-commit file sink, so a worker killed mid-run costs nothing: the job
// restarts from its last checkpoint and the committed output is still the reference's.
#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "cmd/program.hpp"
#include "examples/nexmark/nexmark_output.hpp"
#include "examples/nexmark/nexmark_queries.hpp"

namespace api = snapflow::api;
namespace nexmark = snapflow::nexmark;

namespace {

// Declares a query over the event stream, its rows committed into the sink folder `out`.
using query_builder =
    void (*)(api::data_stream<nexmark::nexmark_event> events, const std::string& out);

// The rows of `job` through row_record (hex of their msgpack bytes) into the exactly-once sink.
template <typename Row, api::data_stream<Row> (*job)(api::data_stream<nexmark::nexmark_event>)>
void sink_query(api::data_stream<nexmark::nexmark_event> events, const std::string& out) {
  job(events)
      .to_records([](const Row& row) { return nexmark::row_record(row); })
      .uid("to-records")
      .add_sink("two_phase_commit_file_sink", {{"path", out}})
      .uid("sink");
}

// The queries by name: one line per query.
const std::map<std::string, query_builder>& queries() {
  static const std::map<std::string, query_builder> table = {
      {"q0", &sink_query<nexmark::bid, nexmark::q0_job>},
      {"q1", &sink_query<nexmark::bid, nexmark::q1_job>},
      {"q2", &sink_query<nexmark::q2_row, nexmark::q2_job>},
      {"q3", &sink_query<nexmark::q3_row, nexmark::q3_job>},
      {"q4", &sink_query<nexmark::q4_update, nexmark::q4_job>},
      {"q5", &sink_query<nexmark::q5_row, nexmark::q5_job>},
      {"q7", &sink_query<nexmark::q7_row, nexmark::q7_job>},
      {"q8", &sink_query<nexmark::q8_row, nexmark::q8_job>},
  };
  return table;
}

std::string query_names() {
  std::string names;
  for (const auto& [name, _] : queries()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

// The integer setting `key`, or `fallback`; throws std::invalid_argument outside [1, most].
std::int64_t bounded(const snapflow::program_args& args, const std::string& key,
                     std::int64_t fallback, std::int64_t most) {
  const std::int64_t v = args.get_int(key, fallback);
  if (v < 1 || v > most)
    throw std::invalid_argument("--arg " + key + "=" + std::to_string(v) + ": not in 1.." +
                                std::to_string(most));
  return v;
}

// --arg query=NAME (a row of queries()), events=N (generated events), rate=N (events per second per
// source subtask, 0 = as fast as the job takes them), seed=N and events_per_second=N (the
// generator's seed and event-time rate), parallelism=N, interval_ms=N (checkpoint interval),
// out=FOLDER (the sink's folder, under the workers' first --data-root when relative).
void build(api::typed_environment& typed, const snapflow::program_args& args) {
  const std::string query = args.get("query", "q0");
  const auto it = queries().find(query);
  if (it == queries().end())
    throw std::invalid_argument("--arg query=" + query + ": not one of " + query_names());
  snapflow::stream_environment& env = typed.env();
  env.set_job_name("nexmark-" + query);
  env.set_parallelism(static_cast<std::uint32_t>(
      bounded(args, "parallelism", 2, snapflow::job_graph::max_parallelism_limit)));
  env.enable_checkpointing(std::chrono::milliseconds(
      bounded(args, "interval_ms", 100, std::chrono::milliseconds(std::chrono::hours(24)).count())));

  nexmark::source_options source;
  source.events = args.get_int("events", 100'000);
  source.rate_per_subtask = args.get_int("rate", 0);
  const std::int64_t seed = args.get_int("seed", 1);
  if (seed < 0) throw std::invalid_argument("--arg seed must be >= 0");
  source.config.seed = static_cast<std::uint64_t>(seed);
  source.config.events_per_second = args.get_int(
      "events_per_second", source.config.events_per_second);  // the generator checks it
  it->second(nexmark::nexmark_source(typed, source), args.get("out", "out/nexmark-" + query));
}

}  // namespace

int main(int argc, char** argv) {
  return snapflow::run_program(argc, argv,
                               {"snapflow-nexmark 1.0",
                                "a Nexmark query (--arg query=NAME) into an exactly-once file "
                                "sink"},
                               build);
}
