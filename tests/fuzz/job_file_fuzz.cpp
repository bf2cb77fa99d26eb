// parse_job_file (graph/job_file.hpp): TOML a user wrote. It must never crash or throw; a job
// it accepts is a valid graph, and survives the job graph codec unchanged.
#include <sstream>

#include "graph/job_file.hpp"
#include "graph/job_graph_codec.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace snapflow;
  job_file_result parsed = parse_job_file(fuzz::as_text(data, size), "fuzz.toml");
  std::ostringstream printed;
  printed << parsed;
  if (!parsed) return 0;
  const job_graph& graph = parsed.value();
  fuzz::check(!graph.vertices.empty(), "an accepted job file has no operators");
  auto decoded = decode_job_graph(encode_job_graph(graph));
  fuzz::check(decoded.ok(), "the encoding of a parsed job graph does not decode");
  fuzz::check(*decoded == graph, "the job graph codec changed a parsed graph");
  return 0;
}
